#include "Commands.h"

namespace kiln::cli {

namespace {
int g_exit_code = 0;
}

void set_exit_code(int code) { g_exit_code = code; }
int exit_code() { return g_exit_code; }

void register_commands(CLI::App& app) {
  // Subcommands are added here as they land (inspect, compile, test-onnx, plugins, quantize).
  (void)app;
}

}  // namespace kiln::cli
