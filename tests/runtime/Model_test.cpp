// The model runtime (kiln/runtime/Model.h) on a CPU model library: examples/gemma_mlp.onnx
// compiled with `kiln compile --model --reference --target cpu` once for the suite (the kiln binary
// of this build), run against the CPU backend's outputs, its errors, memory plan, threads and
// weights-file checks.
#include "kiln/runtime/Model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <thread>

namespace kiln {
namespace {

namespace fs = std::filesystem;

std::vector<char> read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(in), {});
}

class ModelTest : public ::testing::Test {
 protected:
  static fs::path dir;
  static void SetUpTestSuite() {
    dir = fs::temp_directory_path() / ("kiln_model_test_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    const std::string command = std::string(KILN_BINARY_DIR) + "/tools/kiln compile " + KILN_SOURCE_DIR +
                                "/examples/gemma_mlp.onnx -o " + dir.string() +
                                " --target cpu --model --reference > " + (dir.string() + ".log") + " 2>&1";
    ASSERT_EQ(std::system(command.c_str()), 0) << command << "\n" << read_file(dir.string() + ".log").data();
  }
  static void TearDownTestSuite() {
    fs::remove_all(dir);
    fs::remove(dir.string() + ".log");
  }
  static std::string library() { return (dir / "libgemma_mlp.so").string(); }

  // The reference: x [2, 2, 64] and the CPU backend's y and probs for it.
  std::vector<char> x = read_file(dir / "reference" / "input_0.bin");
  std::vector<char> y_ref = read_file(dir / "reference" / "output_0.bin");
  std::vector<char> probs_ref = read_file(dir / "reference" / "output_1.bin");
  std::vector<int64_t> shape = {2, 2, 64};
  static constexpr DLDataType f32{kDLFloat, 32, 1};
};
fs::path ModelTest::dir;

void expect_close(const std::vector<float>& got, const std::vector<char>& want_bytes, const char* what) {
  const float* want = reinterpret_cast<const float*>(want_bytes.data());
  ASSERT_EQ(got.size() * 4, want_bytes.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 1e-4 + 1e-4 * std::fabs(want[i])) << what << "[" << i << "]";
  }
}

TEST_F(ModelTest, InspectsGraphInputsAndOutputsOnly) {
  Model m = Model::load(library());
  ASSERT_TRUE(m) << m.error();
  EXPECT_EQ(m.name(), "gemma_mlp");
  EXPECT_EQ(m.device_type(), kDLCPU);
  ASSERT_EQ(m.inputs().size(), 1u);
  EXPECT_EQ(m.inputs()[0].describe(), "x: float32[batch, seq, 64]");
  ASSERT_EQ(m.outputs().size(), 2u);
  EXPECT_EQ(m.outputs()[0].describe(), "y: float32[batch, seq, 64]");
  EXPECT_EQ(m.outputs()[1].describe(), "probs: float32[batch, seq, 64]");
  EXPECT_EQ(m.inputs()[0].dims, (std::vector<int64_t>{-1, -1, 64}));
}

TEST_F(ModelTest, RunMatchesTheCpuBackend) {
  Model m = Model::load(library());
  ASSERT_TRUE(m) << m.error();
  std::vector<float> y(256, NAN), probs(256, NAN);
  Status s = m.run({tensor_view(x.data(), shape, f32)},
                   {tensor_view(y.data(), shape, f32), tensor_view(probs.data(), shape, f32)});
  ASSERT_TRUE(s) << s.message();
  expect_close(y, y_ref, "y");
  expect_close(probs, probs_ref, "probs");

  // The same on an arena the caller hands in (exactly the size memory() reports).
  MemoryReport r;
  ASSERT_TRUE(m.memory({tensor_view(x.data(), shape, f32)}, {tensor_view(y.data(), shape, f32), tensor_view(probs.data(), shape, f32)}, &r));
  std::vector<char> arena(r.arena + 256);
  RunOptions options;
  options.workspace = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(arena.data()) + 255) / 256 * 256);
  options.workspace_bytes = r.arena;
  std::fill(y.begin(), y.end(), NAN);
  std::fill(probs.begin(), probs.end(), NAN);
  Session session = m.new_session();
  s = session.run({tensor_view(x.data(), shape, f32)},
                  {tensor_view(y.data(), shape, f32), tensor_view(probs.data(), shape, f32)}, nullptr, options);
  ASSERT_TRUE(s) << s.message();
  EXPECT_EQ(session.arena_bytes(), 0u) << "the session should not allocate when handed an arena";
  expect_close(y, y_ref, "y (caller's arena)");
  expect_close(probs, probs_ref, "probs (caller's arena)");
}

TEST_F(ModelTest, ErrorsNameTheArgumentAndTheRule) {
  Model m = Model::load(library());
  ASSERT_TRUE(m) << m.error();
  std::vector<float> y(256), probs(256);
  Status s = m.run({tensor_view(x.data(), shape, f32), tensor_view(x.data(), shape, f32)},
                   {tensor_view(y.data(), shape, f32), tensor_view(probs.data(), shape, f32)});
  EXPECT_EQ(s.code(), 1);  // KILN_ERR_ARGUMENT_COUNT
  EXPECT_NE(s.message().find("expected 1 input(s) (x), got 2"), std::string::npos) << s.message();

  const std::vector<int64_t> wrong = {2, 2, 32};
  s = m.run({tensor_view(x.data(), wrong, f32)}, {tensor_view(y.data(), shape, f32), tensor_view(probs.data(), shape, f32)});
  EXPECT_EQ(s.code(), 3);  // KILN_ERR_SHAPE
  EXPECT_NE(s.message().find("x"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("64"), std::string::npos) << s.message();

  const std::vector<int64_t> other = {2, 3, 64};
  s = m.run({tensor_view(x.data(), shape, f32)}, {tensor_view(y.data(), other, f32), tensor_view(probs.data(), shape, f32)});
  EXPECT_EQ(s.code(), 3);
  EXPECT_NE(s.message().find("y"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("seq"), std::string::npos) << s.message();

  s = m.run({tensor_view(x.data(), shape, DLDataType{kDLFloat, 16, 1})},
            {tensor_view(y.data(), shape, f32), tensor_view(probs.data(), shape, f32)});
  EXPECT_EQ(s.code(), 2);  // KILN_ERR_DTYPE
  EXPECT_NE(s.message().find("float16"), std::string::npos) << s.message();

  std::vector<char> small(64);
  RunOptions options;
  options.workspace = small.data();
  options.workspace_bytes = small.size();
  s = m.run({tensor_view(x.data(), shape, f32)}, {tensor_view(y.data(), shape, f32), tensor_view(probs.data(), shape, f32)},
            nullptr, options);
  EXPECT_EQ(s.code(), 7);  // KILN_ERR_WORKSPACE
  EXPECT_NE(s.message().find("the workspace has 64 bytes"), std::string::npos) << s.message();

  Session not_from_a_model;
  EXPECT_FALSE(not_from_a_model.run({}, {}));
  Model kernels_only = Model::load(KILN_TEST_LIBRARY_PATH);
  EXPECT_FALSE(kernels_only);
  EXPECT_NE(kernels_only.error().find("not a model library (no kiln_model_info"), std::string::npos) << kernels_only.error();
  Model missing = Model::load((dir / "libnothing.so").string());
  EXPECT_FALSE(missing);
  EXPECT_NE(missing.error().find("cannot open the library"), std::string::npos) << missing.error();
}

TEST_F(ModelTest, PeakMemoryIsWithinTenPercentOfWeightsPlusLargestLiveSet) {
  Model m = Model::load(library());
  ASSERT_TRUE(m) << m.error();
  for (int64_t rows : {1, 7, 64}) {
    const std::vector<int64_t> s = {1, rows, 64};
    MemoryReport r;
    Status status = m.memory({tensor_view(nullptr, s, f32)}, {tensor_view(nullptr, s, f32), tensor_view(nullptr, s, f32)}, &r);
    ASSERT_TRUE(status) << status.message();
    EXPECT_EQ(r.weights, 197120u) << "192 KiB in the file + ln_scale and ln_bias compiled in, each padded to 256 "
                                     "(the five scalar constants are literals in the generated code)";
    EXPECT_EQ(r.io, static_cast<uint64_t>(3 * rows * 64 * 4));
    EXPECT_GE(r.arena, r.live);
    EXPECT_LE(static_cast<double>(r.peak()), 1.1 * static_cast<double>(r.weights + r.live + r.io)) << "rows " << rows;
    // Without reuse the arena would hold every temporary: xn, gate, up, down and five row vectors.
    const uint64_t no_reuse = ((rows * 64 * 4 + 255) / 256 * 256) * 2 + ((rows * 256 * 4 + 255) / 256 * 256) * 2 +
                              5 * ((rows * 4 + 255) / 256 * 256);
    EXPECT_LT(r.arena, no_reuse) << "rows " << rows;
  }
}

TEST_F(ModelTest, SessionsRunConcurrentlyOnOneModel) {
  Model m = Model::load(library());
  ASSERT_TRUE(m) << m.error();
  std::vector<std::string> failures(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      Session session = m.new_session();
      std::vector<float> y(256, NAN), probs(256, NAN);
      for (int k = 0; k < 20; ++k) {
        Status s = session.run({tensor_view(x.data(), shape, f32)},
                               {tensor_view(y.data(), shape, f32), tensor_view(probs.data(), shape, f32)});
        if (!s) failures[t] = s.message();
      }
      const float* want = reinterpret_cast<const float*>(y_ref.data());
      for (int i = 0; i < 256; ++i) {
        if (!(std::fabs(y[i] - want[i]) <= 1e-4 + 1e-4 * std::fabs(want[i]))) failures[t] = "y differs at " + std::to_string(i);
      }
      if (session.arena_bytes() == 0) failures[t] = "the session has no arena";
    });
  }
  for (std::thread& t : threads) t.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(failures[t], "") << "thread " << t;
}

TEST_F(ModelTest, AWeightsFileThatDoesNotBelongIsRejectedAtLoad) {
  const fs::path copy = dir.string() + "_corrupt";
  fs::remove_all(copy);
  fs::create_directories(copy);
  fs::copy_file(dir / "libgemma_mlp.so", copy / "libgemma_mlp.so");
  std::vector<char> weights = read_file(dir / "gemma_mlp.weights");
  weights[weights.size() / 2] ^= 1;
  std::ofstream(copy / "gemma_mlp.weights", std::ios::binary).write(weights.data(), static_cast<std::streamsize>(weights.size()));
  Model m = Model::load((copy / "libgemma_mlp.so").string());
  EXPECT_FALSE(m);
  EXPECT_NE(m.error().find("is corrupt (its checksum does not match"), std::string::npos) << m.error();
  fs::remove_all(copy);

  LoadOptions options;
  options.weights_path = (dir / "missing.weights").string();
  fs::create_directories(copy);
  fs::copy_file(dir / "libgemma_mlp.so", copy / "libgemma_mlp.so");
  Model no_file = Model::load((copy / "libgemma_mlp.so").string(), options);
  EXPECT_FALSE(no_file);
  EXPECT_NE(no_file.error().find("cannot open the weights file"), std::string::npos) << no_file.error();
  fs::remove_all(copy);
}

}  // namespace
}  // namespace kiln
