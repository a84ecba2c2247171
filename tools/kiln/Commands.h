#pragma once
// Registration of the kiln subcommands. Each command file defines one register_<name> function
// and sets the process exit code through set_exit_code.
#include <CLI/CLI.hpp>

namespace kiln::cli {

void register_commands(CLI::App& app);
void set_exit_code(int code);
int exit_code();

}  // namespace kiln::cli
