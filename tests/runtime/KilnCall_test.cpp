// kiln_call.h: loads the hand-written CPU fixture library (tests/python/fixture) and calls its
// functions on caller-owned memory, checking results, the no-copy contract and error messages.
#include "kiln/runtime/kiln_call.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#ifndef KILN_TEST_LIBRARY_PATH
#error "KILN_TEST_LIBRARY_PATH (the fixture library) must be defined by the build"
#endif

namespace kiln::runtime {
namespace {

constexpr DLDevice kCpu{kDLCPU, 0};
const char* const kAddSig = "add(a: Tensor([n], float32), b: Tensor([n], float32), c: Tensor([n], float32))";

TEST(KilnCall, AddWritesCallerMemory) {
  const Library lib = Library::open(KILN_TEST_LIBRARY_PATH);
  const Function add = lib.function("add");
  EXPECT_STREQ(add.signature().text, kAddSig);
  std::vector<float> a = {1, 2, 3, 4, 5}, b = {10, 20, 30, 40, 50}, c(5, -1.0f);
  const TensorRef ta(a.data(), {5}, kFloat32, kCpu), tb(b.data(), {5}, kFloat32, kCpu),
      tc(c.data(), {5}, kFloat32, kCpu);
  add({ta.dl(), tb.dl(), tc.dl()});
  EXPECT_EQ(c, (std::vector<float>{11, 22, 33, 44, 55})) << "c = a + b written in place";
}

TEST(KilnCall, FunctionOutlivesLibraryObject) {
  const Function gemv = Library::open(KILN_TEST_LIBRARY_PATH).function("gemv");
  std::vector<float> w(2 * 4, 1.0f), x = {1, 2, 3, 4}, y(2, 0.0f);
  const TensorRef tw(w.data(), {2, 4}, kFloat32, kCpu), tx(x.data(), {4}, kFloat32, kCpu),
      ty(y.data(), {2}, kFloat32, kCpu);
  EXPECT_EQ(gemv.try_call(std::vector<DLTensor>{tw.dl(), tx.dl(), ty.dl()}), KILN_OK) << gemv.last_error();
  EXPECT_EQ(y, (std::vector<float>{10, 10}));
}

TEST(KilnCall, WrongShapeThrowsWithTheSignature) {
  const Function add = Library::open(KILN_TEST_LIBRARY_PATH).function("add");
  std::vector<float> a(4), c(5);
  const TensorRef ta(a.data(), {4}, kFloat32, kCpu), tc(c.data(), {5}, kFloat32, kCpu);
  try {
    add({ta.dl(), ta.dl(), tc.dl()});
    FAIL() << "expected a CallError";
  } catch (const CallError& e) {
    EXPECT_EQ(e.status(), KILN_ERR_SHAPE);
    EXPECT_STREQ(e.kind(), "ValueError");
    EXPECT_EQ(std::string(e.what()), std::string(kAddSig) + ": c.shape[0] is 5, expected n = 4 (from a.shape[0])");
  }
}

TEST(KilnCall, WrongDtypeAndDeviceAreTypeErrors) {
  const Function add = Library::open(KILN_TEST_LIBRARY_PATH).function("add");
  std::vector<float> a(4);
  std::vector<int32_t> i(4);
  const TensorRef ta(a.data(), {4}, kFloat32, kCpu), ti(i.data(), {4}, kInt32, kCpu),
      tgpu(a.data(), {4}, kFloat32, DLDevice{kDLCUDA, 0});
  EXPECT_EQ(add.try_call(std::vector<DLTensor>{ta.dl(), ti.dl(), ta.dl()}), KILN_ERR_DTYPE);
  EXPECT_EQ(add.last_error(), std::string(kAddSig) + ": b.dtype is int32, expected float32");
  EXPECT_EQ(add.try_call(std::vector<DLTensor>{ta.dl(), ta.dl(), tgpu.dl()}), KILN_ERR_DEVICE);
  EXPECT_EQ(add.last_error(), std::string(kAddSig) + ": c is on cuda, expected cpu");
}

TEST(KilnCall, WorkspaceSizeAndCall) {
  const Function fill = Library::open(KILN_TEST_LIBRARY_PATH).function("fill");
  std::vector<int64_t> y(6, -1);
  const TensorRef ty(y.data(), {6}, kInt64, kCpu);
  const std::vector<DLTensor> args = {ty.dl()};
  ASSERT_EQ(fill.workspace_bytes(args), 64u);
  std::vector<std::byte> workspace(fill.workspace_bytes(args));
  fill(args, nullptr, workspace.data());
  EXPECT_EQ(y, (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(fill.try_call(args, nullptr, nullptr), KILN_ERR_WORKSPACE);
}

TEST(KilnCall, LoadErrorsSayWhat) {
  EXPECT_THROW(Library::open("/nonexistent/libnothing.so"), CallError);
  const Library lib = Library::open(KILN_TEST_LIBRARY_PATH);
  try {
    lib.function("nope");
    FAIL() << "expected a CallError";
  } catch (const CallError& e) {
    EXPECT_NE(std::string(e.what()).find("has no function 'nope'; it has: add, gemv, fill, rowsum"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace kiln::runtime
