// kiln test-onnx DIR... [--backend cpu|cuda]: the conformance runner.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

#include "Commands.h"
#include "kiln/runtime/Conformance.h"
#include "kiln/runtime/CudaBackend.h"
#include "kiln/support/Error.h"

namespace kiln::cli {

namespace {

struct TestOnnxOptions {
  std::vector<std::string> roots;
  std::string backend = "cpu";
  std::string skip_list;
  bool verbose = false;
  CudaTestOptions cuda;
};

// "case-name reason..." lines; '#' starts a comment line.
std::map<std::string, std::string> read_skip_list(const std::string& path) {
  std::map<std::string, std::string> skips;
  if (path.empty()) return skips;
  std::ifstream in(path);
  if (!in) throw UserError("cannot read the skip list '" + path + "'");
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.find(' ');
    if (space == std::string::npos) throw UserError("skip list '" + path + "': line '" + line + "' has no reason");
    skips[line.substr(0, space)] = line.substr(space + 1);
  }
  return skips;
}

int run_test_onnx(const TestOnnxOptions& options) {
  const Backend backend = cpu_backend();
  const std::map<std::string, std::string> skips = read_skip_list(options.skip_list);
  std::vector<std::string> cases = find_test_cases(options.roots);
  // The CUDA backend generates and builds every case first (few large translation units), then runs.
  std::vector<CaseResult> cuda_results;
  if (options.backend == "cuda") cuda_results = run_test_cases_cuda(cases, options.cuda);
  int passed = 0, failed = 0, skipped = 0;
  std::map<std::string, int> skip_reasons;
  for (size_t k = 0; k < cases.size(); ++k) {
    const std::string& folder = cases[k];
    CaseResult r;
    if (auto it = skips.find(std::filesystem::path(folder).filename().string()); it != skips.end()) {
      r = CaseResult{it->first, CaseStatus::Skipped, "known-bad reference data: " + it->second};
    } else {
      r = options.backend == "cuda" ? cuda_results[k] : run_test_case(folder, backend);
    }
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
  cmd->add_option("--skip-list", options->skip_list,
                  "File of cases to skip, one 'name reason' per line (cases with known-bad reference data)");
  cmd->add_flag("-v,--verbose", options->verbose, "Print passing cases too");
  cmd->add_option("--cuda-work-dir", options->cuda.work_dir, "cuda: folder for generated sources and libraries");
  cmd->add_option("--cuda-arch", options->cuda.arch, "cuda: the GPU architecture to build for (sm_90)");
  cmd->add_option("--cuda-jobs", options->cuda.jobs, "cuda: parallel nvcc processes (and translation units)")
      ->each([options](const std::string&) { options->cuda.translation_units = options->cuda.jobs; });
  cmd->add_flag("--cuda-reuse-built", options->cuda.reuse_built,
                "cuda: keep a translation unit's library from an earlier run in the same --cuda-work-dir when its\n"
                "generated source, --cuda-arch and kiln's kernel templates are unchanged (e.g. a second pass under\n"
                "compute-sanitizer)");
  cmd->callback([options] { set_exit_code(run_test_onnx(*options)); });
}

}  // namespace kiln::cli
