#include "kiln/codegen/Codegen.h"

#include "CppPrinter.h"
#include "CudaPrinter.h"
#include "Embedded.h"
#include "kiln/support/Error.h"

namespace kiln::codegen {

const std::string& embedded_file(const std::string& name) {
  for (const auto& [n, text] : embedded_files()) {
    if (n == name) return text;
  }
  internal_error("no embedded file " + name);
}

std::string generate_module(const std::vector<LoweredFunc>& funcs, Target target, const ModuleOptions& options) {
  if (target == Target::Cuda) {
    CudaPrinter printer;
    printer.set_template_units(options.template_units);
    return printer.module(funcs, options);
  }
  return CppPrinter().module(funcs, options);
}

std::string generate_last_error_module(Target target) { return generate_library_module(target, {}); }

std::string generate_library_module(Target target, const std::vector<std::string>& functions) {
  ModuleOptions options;
  options.other_functions = functions;
  options.banner = "the library's entry points";
  return generate_module({}, target, options);
}

const std::string& embedded_template(const std::string& name) { return embedded_file(name); }

std::vector<std::pair<std::string, std::string>> support_files() {
  std::vector<std::pair<std::string, std::string>> files;
  for (const auto& [name, text] : embedded_files()) {
    if (name.rfind("include/", 0) == 0) files.emplace_back(name.substr(8), text);
  }
  return files;
}

}  // namespace kiln::codegen
