// Every model and test data file of the ONNX backend node tests (Debian's libonnx-testdata)
// loads, or fails with an UnsupportedError (string tensors, sequences); nothing crashes or
// throws anything else.
#include <gtest/gtest.h>

#include <filesystem>

#include "kiln/onnx/Import.h"
#include "kiln/onnx/TensorFile.h"
#include "kiln/support/Error.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
const char* const kNodeTests = "/usr/share/libonnx-testdata/data/node";

TEST(NodeSuite, EveryModelLoadsOrGetsAClearUserError) {
  if (!fs::is_directory(kNodeTests)) GTEST_SKIP() << kNodeTests << " is missing (libonnx-testdata not installed)";
  int loaded = 0, total = 0;
  std::string skipped;
  for (const auto& entry : fs::directory_iterator(kNodeTests)) {
    const fs::path model = entry.path() / "model.onnx";
    if (!fs::exists(model)) continue;
    ++total;
    try {
      const Graph g = load_onnx(model.string());
      EXPECT_FALSE(g.nodes.empty()) << model;
      ++loaded;
    } catch (const UnsupportedError& e) {
      const std::string msg = e.what();
      EXPECT_EQ(msg.rfind(model.string() + ": ", 0), 0u) << "the message should start with the path: " << msg;
      skipped += "  " + msg + "\n";
    } catch (const std::exception& e) {
      ADD_FAILURE() << model << ": not an UnsupportedError: " << e.what();
    }
  }
  std::cout << loaded << " of " << total << " node test models loaded; unsupported:\n" << skipped;
  EXPECT_GE(loaded, total * 95 / 100);
}

TEST(NodeSuite, TestDataTensorsLoad) {
  if (!fs::is_directory(kNodeTests)) GTEST_SKIP() << kNodeTests << " is missing (libonnx-testdata not installed)";
  int loaded = 0, failed = 0;
  for (const auto& entry : fs::recursive_directory_iterator(kNodeTests)) {
    if (entry.path().extension() != ".pb") continue;
    try {
      const NamedTensor t = load_tensor_pb(entry.path().string());
      EXPECT_GE(t.tensor.num_elements(), 0);
      ++loaded;
    } catch (const UserError&) {
      ++failed;  // sequences, optionals, strings
    } catch (const std::exception& e) {
      ADD_FAILURE() << entry.path() << ": not a UserError: " << e.what();
    }
  }
  std::cout << loaded << " test data tensors loaded, " << failed << " rejected\n";
  EXPECT_GT(loaded, 1500);
}

TEST(NodeSuite, TestDataMatchesTheModelsDeclaredInputs) {
  const fs::path dir = fs::path(kNodeTests) / "test_add_bcast";
  if (!fs::is_directory(dir)) GTEST_SKIP() << dir << " is missing";
  const Graph g = load_onnx((dir / "model.onnx").string());
  const NamedTensor x = load_tensor_pb((dir / "test_data_set_0" / "input_0.pb").string());
  EXPECT_EQ(x.name, g.values[g.inputs[0]].name);
  EXPECT_EQ(x.tensor.describe(), "float32[3, 4, 5]");
  EXPECT_EQ(to_string(*g.values[g.inputs[0]].type), "float32[3, 4, 5]");
}

}  // namespace
}  // namespace kiln
