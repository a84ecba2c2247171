// The printer hierarchy end to end: generated C++ is built, loaded and called through the kernel
// contract and must agree with the CPU interpreter; generated CUDA (default GPU schedules) must
// compile without warnings for sm_80, sm_90 and sm_110.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include "CompileCuda.h"
#include "kiln/codegen/Build.h"
#include "kiln/codegen/Codegen.h"
#include "kiln/ir/IROperator.h"
#include "kiln/lower/Lower.h"
#include "kiln/runtime/Interpreter.h"
#include "kiln/runtime/kiln_abi.h"
#include "kiln/schedule/Defaults.h"
#include "kiln/te/Tensor.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using namespace ir;

struct Functions {
  std::vector<te::Tensor> inputs, outputs;
};

// y = relu(x * b + 1) over [n, 64] with b broadcast along rows.
Functions elementwise_chain(DType dtype) {
  Expr n = var("n");
  te::Tensor x = te::placeholder("x", dtype, {n, 64});
  te::Tensor b = te::placeholder("b", dtype, {64});
  te::Tensor y = te::compute(
      "y", {n, 64},
      [&](const std::vector<Expr>& i) {
        Expr v = cast(Type(DType::Float32), x(i)) * cast(Type(DType::Float32), b({i[1]})) + make_const(Type(DType::Float32), 1.0);
        return cast(Type(dtype), max(v, make_zero(Type(DType::Float32))));
      },
      "node 'chain' (Mul, Add, Relu)");
  return {{x, b}, {y}};
}

// A Split into a part of size 0 (the ONNX case test_split_zero_size_splits): the empty part's
// kernel reads and writes nothing, so it has no parameters.
Functions empty_output() {
  te::Tensor x = te::placeholder("x", DType::Float16, {8, 64});
  te::Tensor y = te::compute("y", {8, 64}, [&](const std::vector<Expr>& i) { return x(i); }, "node 'part' (Split)");
  te::Tensor z = te::compute("z", {0, 64}, [&](const std::vector<Expr>& i) { return x(i); }, "node 'part' (Split)");
  return {{x}, {y, z}};
}

// Softmax over rows of `cols` (96 unless given): max, sum of exp, normalize.
Functions row_softmax(int64_t cols = 96) {
  Expr rows = var("rows");
  te::Tensor x = te::placeholder("x", DType::Float32, {rows, cols});
  IterVar r = te::reduce_axis(cols, "r");
  te::Tensor m = te::compute("row_max", {rows, 1}, [&](const std::vector<Expr>& i) { return te::max_reduce(x({i[0], r.var}), {r}); }, "node 'sm' (Softmax)");
  IterVar r2 = te::reduce_axis(cols, "r2");
  te::Tensor s = te::compute("row_sum", {rows, 1}, [&](const std::vector<Expr>& i) {
    return te::sum(call(Intrinsic::Exp, x({i[0], r2.var}) - m({i[0], Expr(0)})), {r2});
  }, "node 'sm' (Softmax)");
  te::Tensor y = te::compute("y", {rows, cols}, [&](const std::vector<Expr>& i) {
    return call(Intrinsic::Exp, x(i) - m({i[0], Expr(0)})) / s({i[0], Expr(0)});
  }, "node 'sm' (Softmax)");
  return {{x}, {y}};
}

// Sum over axis 0 of [40, cols].
Functions column_sum() {
  Expr cols = var("cols");
  te::Tensor x = te::placeholder("x", DType::Float32, {40, cols});
  IterVar r = te::reduce_axis(40, "r");
  te::Tensor y = te::compute("y", {cols}, [&](const std::vector<Expr>& i) { return te::sum(x({r.var, i[0]}), {r}); },
                             "node 'rs' (ReduceSum)");
  return {{x}, {y}};
}

// y[j] = sum_r x[r, j] over [200, 256] (constant shape: whole warps of 16-byte output vectors).
Functions column_sum_constant(DType dtype) {
  te::Tensor x = te::placeholder("x", dtype, {200, 256});
  IterVar r = te::reduce_axis(200, "r");
  te::Tensor y = te::compute(
      "y", {256}, [&](const std::vector<Expr>& i) { return te::sum(cast(Type(DType::Float32), x({r.var, i[0]})), {r}); },
      "node 'rs' (ReduceSum)");
  return {{x}, {y}};
}

// A pooling-like column reduction: the condition reads the output column, so the lane loop cannot
// move inside it (y[j] = max over r < 200 with r + j < 300 of x[r, j]).
Functions column_max_guarded() {
  te::Tensor x = te::placeholder("x", DType::Float32, {200, 256});
  IterVar r = te::reduce_axis(200, "r");
  te::Tensor y = te::compute(
      "y", {256},
      [&](const std::vector<Expr>& i) { return te::max_reduce(x({r.var, i[0]}), {r}, r.var + i[0] < Expr(300)); },
      "node 'mp' (MaxPool)");
  return {{x}, {y}};
}

// C[i, j] = sum_k A[i, k] * B[k, j] over [m, 64] x [64, 48], accumulated in float32; bfloat16
// stores through a second (epilogue) stage.
Functions matmul(DType dtype) {
  Expr m = var("m");
  te::Tensor a = te::placeholder("a", dtype, {m, 64}), b = te::placeholder("b", dtype, {64, 48});
  IterVar k = te::reduce_axis(64, "k");
  const Type acc(DType::Float32);
  te::Tensor c = te::compute(dtype == DType::Float32 ? "c" : "c_acc", {m, 48}, [&](const std::vector<Expr>& i) {
    return te::sum(cast(acc, a({i[0], k.var})) * cast(acc, b({k.var, i[1]})), {k});
  }, "node 'mm' (MatMul)");
  if (dtype == DType::Float32) return {{a, b}, {c}};
  te::Tensor y = te::compute("c", {m, 48}, [&](const std::vector<Expr>& i) { return cast(Type(dtype), c(i)); },
                             "node 'mm' (MatMul)");
  return {{a, b}, {y}};
}

LoweredFunc lower_functions(const std::string& name, const Functions& f, bool gpu,
                            const DefaultScheduleOptions& options = {}) {
  return lower(name, f.inputs, f.outputs, gpu ? default_gpu_schedule(f.inputs, f.outputs, options) : Schedule());
}

fs::path fresh_dir(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("kiln_codegen_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  codegen::write_support_files((dir / "include").string());
  return dir;
}

HostTensor random_tensor(DType dtype, std::vector<int64_t> shape, unsigned seed) {
  HostTensor t(dtype, std::move(shape));
  std::mt19937 rng(seed);
  std::normal_distribution<double> dist(0.0, 1.0);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.set_double(i, dist(rng));
  return t;
}

DLTensor host_dl(HostTensor& t) {
  DLTensor d{};
  d.data = t.data();
  d.device = DLDevice{kDLCPU, 0};
  d.ndim = t.ndim();
  d.dtype = DLDataType{static_cast<uint8_t>(t.dtype() == DType::BFloat16 ? kDLBfloat : kDLFloat),
                       static_cast<uint8_t>(dtype_bits(t.dtype())), 1};
  d.shape = const_cast<int64_t*>(t.shape().data());
  return d;
}

TEST(Codegen, CppThroughContractMatchesInterpreter) {
  const std::vector<std::pair<std::string, Functions>> cases = {
      {"chain_f32", elementwise_chain(DType::Float32)}, {"chain_bf16", elementwise_chain(DType::BFloat16)},
      {"softmax", row_softmax()}, {"colsum", column_sum()}};
  std::vector<LoweredFunc> funcs;
  for (const auto& [name, f] : cases) funcs.push_back(lower_functions(name, f, false));
  const fs::path dir = fresh_dir("cpu");
  const fs::path source = dir / "module.cpp";
  std::ofstream(source) << codegen::generate_module(funcs, codegen::Target::Cpu);
  codegen::BuildOptions build;
  build.target = codegen::Target::Cpu;
  build.include_dir = (dir / "include").string();
  const std::string library = (dir / "libmodule.so").string();
  codegen::build_shared_library({source.string()}, library, build);
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << dlerror();

  const std::vector<std::vector<std::vector<int64_t>>> shapes = {
      {{5, 64}, {64}}, {{3, 64}, {64}}, {{7, 96}}, {{40, 33}}};
  for (size_t k = 0; k < funcs.size(); ++k) {
    SCOPED_TRACE(funcs[k].name);
    std::vector<HostTensor> inputs;
    for (size_t i = 0; i < shapes[k].size(); ++i) inputs.push_back(random_tensor(funcs[k].inputs[i]->dtype, shapes[k][i], 7 + i));
    const std::vector<HostTensor> expected = interpret(funcs[k], inputs);
    HostTensor out(expected[0].dtype(), expected[0].shape());
    for (int64_t i = 0; i < out.num_elements(); ++i) out.set_double(i, 12345.0);  // poison
    std::vector<DLTensor> args;
    for (HostTensor& t : inputs) args.push_back(host_dl(t));
    args.push_back(host_dl(out));
    auto fn = reinterpret_cast<KilnKernelFn>(dlsym(handle, ("kiln_" + funcs[k].name).c_str()));
    ASSERT_NE(fn, nullptr);
    std::vector<char> workspace(1 << 16);
    ASSERT_EQ(fn(args.data(), static_cast<int32_t>(args.size()), workspace.data(), nullptr), KILN_OK);
    for (int64_t i = 0; i < out.num_elements(); ++i) {
      const double a = out.get_double(i), e = expected[0].get_double(i);
      ASSERT_LE(std::fabs(a - e), 1e-5 + 1e-5 * std::fabs(e)) << "element " << i << ": generated " << a << ", interpreter " << e;
    }
  }
  // The library's table lists every function.
  auto table = reinterpret_cast<KilnLibraryFunctionsFn>(dlsym(handle, "kiln_library_functions"));
  ASSERT_NE(table, nullptr);
  const KilnFunction* listed = nullptr;
  ASSERT_EQ(table(&listed), static_cast<int32_t>(funcs.size()));
  EXPECT_STREQ(listed[2].name, "softmax");
  EXPECT_STREQ(listed[2].signature()->name, "softmax");
  // A wrong shape is refused through the contract, with a message naming the argument.
  HostTensor x = random_tensor(DType::Float32, {5, 63}, 1), b = random_tensor(DType::Float32, {64}, 2);
  HostTensor y(DType::Float32, {5, 64});
  std::vector<DLTensor> args = {host_dl(x), host_dl(b), host_dl(y)};
  auto fn = reinterpret_cast<KilnKernelFn>(dlsym(handle, "kiln_chain_f32"));
  EXPECT_EQ(fn(args.data(), 3, nullptr, nullptr), KILN_ERR_SHAPE);
  auto last_error = reinterpret_cast<const char* (*)()>(dlsym(handle, "kiln_last_error"));
  EXPECT_NE(std::string(last_error()).find("x.shape[1] is 63, expected 64"), std::string::npos) << last_error();
  dlclose(handle);
  fs::remove_all(dir);
}

TEST(Codegen, GpuSchedulesAreNotNaive) {
  const LoweredFunc softmax = lower_functions("softmax", row_softmax(), true);
  const std::string cuda = codegen::generate_module({softmax}, codegen::Target::Cuda);
  // max, sum and normalize in ONE kernel per row, with block all-reduces and 16-byte accesses.
  EXPECT_EQ(softmax.stage_notes.size(), 1u) << cuda;
  EXPECT_NE(cuda.find("kiln::block_allreduce<3>"), std::string::npos) << cuda;
  EXPECT_NE(cuda.find("kiln::block_allreduce<0>"), std::string::npos) << cuda;
  EXPECT_NE(cuda.find("kiln::copy_vector<4>"), std::string::npos) << cuda;
  EXPECT_NE(cuda.find("node 'sm' (Softmax)"), std::string::npos) << cuda;
  // The row is read from memory once, into registers, for all three stages.
  EXPECT_NE(cuda.find("float x_row[4];"), std::string::npos) << cuda;
  size_t global_reads = 0;
  for (size_t at = cuda.find("&x["); at != std::string::npos; at = cuda.find("&x[", at + 1)) ++global_reads;
  EXPECT_EQ(global_reads, 1u) << cuda;
  EXPECT_NE(cuda.find("kiln::exp_via_exp2("), std::string::npos) << cuda;
  // Thread loops as wide as the launched block run once in every thread: printed as blocks that
  // bind the index, not as block-stride loops.
  EXPECT_NE(cuda.find("const int64_t tx = threadIdx.x;"), std::string::npos) << cuda;
  EXPECT_EQ(cuda.find("+= blockDim.x"), std::string::npos) << cuda;
  // An index the block does not read is not bound (nvcc would warn of an unused variable): in a
  // row as wide as a whole number of the block's 16-byte passes the reductions read only their
  // accumulators, with no bounds test on the thread index.
  const std::string even =
      codegen::generate_module({lower_functions("softmax", row_softmax(4096), true)}, codegen::Target::Cuda);
  EXPECT_NE(even.find("const int64_t t = threadIdx.x;"), std::string::npos) << even;
  EXPECT_EQ(even.find("const int64_t tx = threadIdx.x;"), std::string::npos) << even;
  EXPECT_EQ(even.find("+= blockDim.x"), std::string::npos) << even;
  // The row's max and sum stay in each thread (lower/RowResultsInRegisters): no global temporary,
  // no store by thread 0 to read back, no workspace.
  EXPECT_NE(cuda.find("row_max_value[0L] = row_max_acc[0L];"), std::string::npos) << cuda;
  EXPECT_NE(cuda.find("row_sum_value[0L] = row_sum_acc[0L];"), std::string::npos) << cuda;
  EXPECT_EQ(cuda.find("row_max["), std::string::npos) << cuda;
  EXPECT_EQ(cuda.find("if ((tx == 0L))"), std::string::npos) << cuda;
  EXPECT_EQ(cuda.find("plan_arena("), std::string::npos) << cuda;
  // Read once, so launched a block per row (not the grid capped for rows read again from L2).
  EXPECT_EQ(cuda.find("dim3(kiln_row_grid_size("), std::string::npos) << cuda;
  EXPECT_NE(cuda.find("launch_generated(true, softmax_k0_y, dim3(kiln_grid_size(rows, 8192)"), std::string::npos) << cuda;
  // Not in blocks of 1024 threads (rows over 16384 elements), where two blocks fit an SM only
  // within 32 registers a thread: there thread 0 still stores the results for the others.
  const std::string wide = codegen::generate_module({lower_functions("softmax", row_softmax(32768), true)}, codegen::Target::Cuda);
  EXPECT_NE(wide.find("__launch_bounds__(1024)"), std::string::npos) << wide;
  EXPECT_NE(wide.find("row_max["), std::string::npos) << wide;
  EXPECT_EQ(wide.find("row_max_value"), std::string::npos) << wide;
  // Without the row cache each stage reads the row again: the grid is capped so that the rows in
  // flight stay in L2 (kiln_row_grid_size of the row's 96 floats).
  DefaultScheduleOptions uncached;
  uncached.row_cache_bytes = 0;
  const std::string reread =
      codegen::generate_module({lower_functions("softmax", row_softmax(), true, uncached)}, codegen::Target::Cuda);
  EXPECT_EQ(reread.find("float x_row["), std::string::npos) << reread;
  EXPECT_NE(reread.find(", dim3(kiln_row_grid_size(rows, kiln::idiv<int64_t>(((rows * 96L) * 4L), rows))"), std::string::npos)
      << reread;
  const std::string chain = codegen::generate_module({lower_functions("chain", elementwise_chain(DType::BFloat16), true)},
                                                     codegen::Target::Cuda);
  EXPECT_NE(chain.find("kiln::copy_vector<8>"), std::string::npos) << chain;  // 8 bf16 = 16 bytes
  // Reduction over rows: 16-byte loads along the contiguous axis, an accumulator per lane, the
  // rows split over threadIdx.y and combined through shared memory.
  const std::string colsum = codegen::generate_module({lower_functions("colsum", column_sum_constant(DType::BFloat16), true)},
                                                      codegen::Target::Cuda);
  EXPECT_NE(colsum.find("kiln::copy_vector<8>(&x_v[0L], &x["), std::string::npos) << colsum;
  EXPECT_NE(colsum.find("float y_acc[8];"), std::string::npos) << colsum;
  EXPECT_NE(colsum.find("dim3(32, 32, 1)"), std::string::npos) << colsum;  // 32 rows of threads for bf16
  EXPECT_NE(colsum.find("__shared__ float y_acc_partial[1024];"), std::string::npos) << colsum;
  // MatMul: tiles through shared memory with barriers, register accumulators, not a thread per output.
  const LoweredFunc mm = lower_functions("matmul", matmul(DType::Float32), true);
  const std::string mm_cuda = codegen::generate_module({mm}, codegen::Target::Cuda);
  EXPECT_NE(mm.stage_notes.at(0).find("contraction tiled through shared memory"), std::string::npos) << mm_cuda;
  EXPECT_NE(mm_cuda.find("__shared__ float c_a_tile[512]"), std::string::npos) << mm_cuda;  // 16 x 32
  EXPECT_NE(mm_cuda.find("__shared__ float c_b_tile[512]"), std::string::npos) << mm_cuda;
  EXPECT_NE(mm_cuda.find("__syncthreads();"), std::string::npos) << mm_cuda;
  EXPECT_NE(mm_cuda.find("float c_acc[4]"), std::string::npos) << mm_cuda;  // 2 x 2 per thread
}

TEST(Codegen, CudaCompilesWithoutWarningsForEveryArchitecture) {
  std::vector<LoweredFunc> funcs = {lower_functions("chain_f32", elementwise_chain(DType::Float32), true),
                                    lower_functions("chain_bf16", elementwise_chain(DType::BFloat16), true),
                                    lower_functions("softmax", row_softmax(), true),
                                    lower_functions("colsum", column_sum(), true),
                                    lower_functions("colsum_f32", column_sum_constant(DType::Float32), true),
                                    lower_functions("colsum_bf16", column_sum_constant(DType::BFloat16), true),
                                    lower_functions("colmax_guarded", column_max_guarded(), true),
                                    lower_functions("matmul_f32", matmul(DType::Float32), true),
                                    lower_functions("matmul_bf16", matmul(DType::BFloat16), true),
                                    lower_functions("empty", empty_output(), true)};
  const std::string cuda = codegen::generate_module(funcs, codegen::Target::Cuda);
  // A kernel of no parameters is launched with none (the launch's argument list has no trailing comma).
  EXPECT_NE(cuda.find("launch_generated(true, empty_k1, dim3(1, 1, 1), dim3(1, 1, 1), static_cast<cudaStream_t>(stream));"),
            std::string::npos)
      << cuda;
  test::expect_cuda_compiles_for_every_architecture("cuda", cuda);
}

}  // namespace
}  // namespace kiln
