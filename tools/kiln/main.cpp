// The kiln command line. Each subcommand lives in its own file (tools/kiln/<Command>.cpp) and
// registers itself through Commands.h.
#include <CLI/CLI.hpp>
#include <iostream>

#include "Commands.h"
#include "kiln/support/Error.h"

int main(int argc, char** argv) {
  CLI::App app{
      "kiln: an ahead-of-time kernel compiler for ONNX models.\n"
      "Turns chosen nodes of an ONNX model (or the whole model) into verified CUDA and C++ kernels."};
  app.require_subcommand(1);
  kiln::cli::register_commands(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const kiln::UserError& e) {
    std::cerr << "kiln: error: " << e.what() << "\n";
    return 1;
  } catch (const kiln::InternalError& e) {
    std::cerr << "kiln: " << e.what() << "\n(this is a bug in kiln; please report it)\n";
    return 3;
  }
  return kiln::cli::exit_code();
}
