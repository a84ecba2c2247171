#include "Commands.h"

namespace kiln::cli {

namespace {
int g_exit_code = 0;
}

void set_exit_code(int code) { g_exit_code = code; }
int exit_code() { return g_exit_code; }

void register_compile(CLI::App& app);
void register_inspect(CLI::App& app);
void register_plugins(CLI::App& app);
void register_quantize(CLI::App& app);
void register_test_onnx(CLI::App& app);
void register_tune(CLI::App& app);

void register_commands(CLI::App& app) {
  register_compile(app);
  register_inspect(app);
  register_plugins(app);
  register_quantize(app);
  register_test_onnx(app);
  register_tune(app);
}

}  // namespace kiln::cli
