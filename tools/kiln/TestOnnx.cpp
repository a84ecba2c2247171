// kiln test-onnx DIR... [--backend cpu|cuda]: the conformance runner.
#include <iostream>
#include <map>

#include "Commands.h"
#include "kiln/runtime/Conformance.h"
#include "kiln/support/Error.h"

namespace kiln::cli {

namespace {

struct TestOnnxOptions {
  std::vector<std::string> roots;
  std::string backend = "cpu";
  bool verbose = false;
};

int run_test_onnx(const TestOnnxOptions& options) {
  Backend backend;
  if (options.backend == "cpu") {
    backend = cpu_backend();
  } else {
    throw UserError("backend '" + options.backend + "' is not available in this build (expected: cpu)");
  }
  std::vector<std::string> cases = find_test_cases(options.roots);
  int passed = 0, failed = 0, skipped = 0;
  std::map<std::string, int> skip_reasons;
  for (const std::string& folder : cases) {
    CaseResult r = run_test_case(folder, backend);
    switch (r.status) {
      case CaseStatus::Passed:
        ++passed;
        if (options.verbose) std::cout << "PASS " << r.name << "\n";
        break;
      case CaseStatus::Failed:
        ++failed;
        std::cout << "FAIL " << r.name << ": " << r.message << "\n";
        break;
      case CaseStatus::Skipped:
        ++skipped;
        std::cout << "SKIP " << r.name << ": " << r.message << "\n";
        break;
    }
    std::cout.flush();
  }
  std::cout << passed << " passed, " << failed << " failed, " << skipped << " skipped\n";
  return failed == 0 ? 0 : 1;
}

}  // namespace

void register_test_onnx(CLI::App& app) {
  auto options = std::make_shared<TestOnnxOptions>();
  CLI::App* cmd = app.add_subcommand(
      "test-onnx",
      "Run ONNX backend test cases (folders with model.onnx and test_data_set_*/) and compare every\n"
      "output with the expected one. Ends with one line: N passed, N failed, N skipped.\n"
      "Example: kiln test-onnx /usr/share/libonnx-testdata/data/node");
  cmd->add_option("dirs", options->roots, "Folders to search for test cases")->required();
  cmd->add_option("--backend", options->backend, "cpu (the reference interpreter) or cuda")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  cmd->add_flag("-v,--verbose", options->verbose, "Print passing cases too");
  cmd->callback([options] { set_exit_code(run_test_onnx(*options)); });
}

}  // namespace kiln::cli
