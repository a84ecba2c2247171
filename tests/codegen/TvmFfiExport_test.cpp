// Generated libraries export every function under TVM-FFI's C ABI (__tvm_ffi_<name>, through
// KILN_TVM_FFI_EXPORT of include/kiln/runtime/tvm_ffi_export.h): the printed modules carry the
// include and the macro for CPU and CUDA, and a built CPU library's export, called the way
// tvm_ffi calls it (DLTensor* arguments in TVMFFIAny), computes what the interpreter computes,
// with host workspace for a function that has temporaries, and fails with kiln's message.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <vector>

#include "kiln/codegen/Build.h"
#include "kiln/codegen/Codegen.h"
#include "kiln/ir/IROperator.h"
#include "kiln/lower/Lower.h"
#include "kiln/runtime/tvm_ffi_export.h"
#include "kiln/te/Tensor.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using namespace ir;

// Softmax over rows of 8 (temporaries: the row max and sum, so the function needs workspace).
LoweredFunc row_softmax() {
  Expr rows = var("rows");
  te::Tensor x = te::placeholder("x", DType::Float32, {rows, 8});
  IterVar r = te::reduce_axis(8, "r");
  te::Tensor m = te::compute("row_max", {rows, 1}, [&](const std::vector<Expr>& i) { return te::max_reduce(x({i[0], r.var}), {r}); });
  IterVar r2 = te::reduce_axis(8, "r2");
  te::Tensor s = te::compute("row_sum", {rows, 1}, [&](const std::vector<Expr>& i) {
    return te::sum(call(Intrinsic::Exp, x({i[0], r2.var}) - m({i[0], Expr(0)})), {r2});
  });
  te::Tensor y = te::compute("y", {rows, 8}, [&](const std::vector<Expr>& i) {
    return call(Intrinsic::Exp, x(i) - m({i[0], Expr(0)})) / s({i[0], Expr(0)});
  });
  return lower("softmax", {x}, {y}, Schedule());
}

TEST(TvmFfiExport, ModulesExportEveryFunction) {
  const LoweredFunc f = row_softmax();
  for (codegen::Target target : {codegen::Target::Cpu, codegen::Target::Cuda}) {
    const std::string text = codegen::generate_module({f}, target);
    EXPECT_NE(text.find("#include \"kiln/runtime/tvm_ffi_export.h\""), std::string::npos) << text;
    EXPECT_NE(text.find("\nKILN_TVM_FFI_EXPORT(softmax)\n"), std::string::npos) << text;
  }
  bool embedded = false;
  for (const auto& [path, text] : codegen::support_files()) embedded = embedded || path == "kiln/runtime/tvm_ffi_export.h";
  EXPECT_TRUE(embedded) << "tvm_ffi_export.h is not among the files written next to generated sources";
}

TEST(TvmFfiExport, CpuLibraryCallsThroughTheSafeCallAbi) {
  const fs::path dir = fs::temp_directory_path() / ("kiln_tvm_ffi_export_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  codegen::write_support_files((dir / "include").string());
  const fs::path source = dir / "softmax.cpp";
  std::ofstream(source) << codegen::generate_module({row_softmax()}, codegen::Target::Cpu);
  codegen::BuildOptions build;
  build.target = codegen::Target::Cpu;
  build.include_dir = (dir / "include").string();
  const std::string library = (dir / "libsoftmax.so").string();
  codegen::build_shared_library({source.string()}, library, build);
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << dlerror();
  using SafeCall = int (*)(void*, const tvm_ffi::Any*, int32_t, tvm_ffi::Any*);
  auto call = reinterpret_cast<SafeCall>(dlsym(handle, "__tvm_ffi_softmax"));
  ASSERT_NE(call, nullptr) << "no __tvm_ffi_softmax in " << library;

  std::vector<float> x(3 * 8), y(3 * 8, NAN);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.7f * static_cast<float>(i));
  int64_t shape[2] = {3, 8};
  DLTensor tx{x.data(), {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape, nullptr, 0};
  DLTensor ty{y.data(), {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape, nullptr, 0};
  tvm_ffi::Any args[2] = {};
  args[0].type_index = args[1].type_index = tvm_ffi::kTypeDLTensorPtr;
  args[0].v_ptr = &tx;
  args[1].v_ptr = &ty;
  tvm_ffi::Any result{};
  ASSERT_EQ(call(nullptr, args, 2, &result), 0) << abi::last_error_storage();
  EXPECT_EQ(result.type_index, tvm_ffi::kTypeNone);
  for (int r = 0; r < 3; ++r) {
    float mx = -INFINITY, sum = 0;
    for (int c = 0; c < 8; ++c) mx = std::max(mx, x[r * 8 + c]);
    for (int c = 0; c < 8; ++c) sum += std::exp(x[r * 8 + c] - mx);
    for (int c = 0; c < 8; ++c) {
      EXPECT_NEAR(y[r * 8 + c], std::exp(x[r * 8 + c] - mx) / sum, 1e-6) << "row " << r << " col " << c;
    }
  }

  // Without a TVM-FFI host the failure is kept for the library's kiln_last_error().
  int64_t bad_shape[2] = {3, 9};
  DLTensor tbad{x.data(), {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, bad_shape, nullptr, 0};
  args[0].v_ptr = &tbad;
  EXPECT_EQ(call(nullptr, args, 2, &result), -1);
  auto last_error = reinterpret_cast<const char* (*)()>(dlsym(handle, "kiln_last_error"));
  ASSERT_NE(last_error, nullptr);
  EXPECT_EQ(std::string(last_error()),
            "softmax(x: Tensor([rows, 8], float32)) -> (y: Tensor([rows, 8], float32)): x.shape[1] is 9, expected 8");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kiln
