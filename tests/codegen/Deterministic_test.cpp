// The same model gives the same generated text whatever the heap looks like: a pass that orders
// its work by address (a std::map or std::set keyed by node pointer, iterated) makes the text
// differ between two runs of kiln, so a library built by one run is not recognised by the next
// (test-onnx --cuda-reuse-built rebuilt the node suite under compute-sanitizer, session 26), and
// where the order decides what fits a budget (CacheRowReads' bytes) the kernels differ too.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <random>

#include "kiln/codegen/Codegen.h"
#include "kiln/codegen/GraphFunctions.h"
#include "kiln/ops/GraphTensors.h"
#include "kiln/runtime/Conformance.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

// The module text for one test case folder, lowered for `target` at the case's input shapes ("" when
// kiln does not build the case).
std::string generated_text(const std::string& folder, codegen::Target target) {
  std::string text;
  auto generate = [&](const Graph& graph, const std::map<std::string, HostTensor>& inputs) {
    ops::BuildOptions build;
    build.specialize = inputs;
    auto functions = codegen::lower_graph(graph, target, "case", {}, build);
    text = codegen::generate_module({functions.at(0).func}, target);
    return std::vector<HostTensor>{};  // no outputs: the comparison with the case's data fails, unread
  };
  run_test_case(folder, generate);
  return text;
}

TEST(Deterministic, NodeSuiteTextDoesNotDependOnTheHeap) {
  const fs::path suite = "/usr/share/libonnx-testdata/data/node";
  if (!fs::is_directory(suite)) GTEST_SKIP() << suite << " is missing (Debian's libonnx-testdata; setup.sh installs it)";
  std::vector<std::string> folders;
  for (const auto& entry : fs::directory_iterator(suite)) folders.push_back(entry.path().string());
  std::sort(folders.begin(), folders.end());
  std::mt19937 rng(26);
  size_t compared = 0;
  for (codegen::Target target : {codegen::Target::Cuda, codegen::Target::Cpu}) {
    for (const std::string& folder : folders) {
      const std::string first = generated_text(folder, target);
      if (first.empty()) continue;
      // Blocks of random sizes held across the second run, so its nodes land at other addresses
      // and in another relative order than the first run's.
      std::vector<std::unique_ptr<char[]>> held;
      for (int k = 1 + rng() % 64; k > 0; --k) held.emplace_back(new char[8 + rng() % 512]);
      EXPECT_EQ(first, generated_text(folder, target)) << fs::path(folder).filename() << ", " << (target == codegen::Target::Cuda ? "CUDA" : "C++");
      ++compared;
    }
  }
  EXPECT_GT(compared, 1000u) << "too few cases were generated to compare";
}

}  // namespace
}  // namespace kiln
