// Packed 4- and 2-bit tensors (int4, uint4, int2, uint2, float4 E2M1) in generated code
// (include/kiln/codegen/runtime/kiln_packed.h): the CPU printer's code, built and called through
// the kernel contract, agrees bit for bit with the interpreter on ops that read and write packed
// tensors (QuantizeLinear, DequantizeLinear, Cast, Transpose; odd element counts, so that rows
// share bytes and the last byte is half used) and on the IR's own casts and wrapping arithmetic;
// the CUDA printer reads them with load_packed,
// writes them with store_packed (atomic 32-bit word updates on the GPU), asks 4-byte alignment
// of packed outputs, and its code compiles for sm_90.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "../ops/TestGraph.h"
#include "CompileCuda.h"
#include "kiln/codegen/Build.h"
#include "kiln/codegen/Codegen.h"
#include "kiln/codegen/GraphFunctions.h"
#include "kiln/lower/Lower.h"
#include "kiln/runtime/Interpreter.h"
#include "kiln/runtime/kiln_abi.h"
#include "kiln/schedule/Schedule.h"
#include "kiln/te/Tensor.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

// ONNX TensorProto codes of Cast's `to`.
constexpr int64_t kOnnxUInt4 = 21, kOnnxInt4 = 22, kOnnxFloat4E2M1 = 23, kOnnxInt2 = 26;

// x [3, 5] float32 (15 elements: rows straddle bytes) through every packed path:
//   q  = QuantizeLinear(x, s, z: int4)  -> int4     (float to packed, saturating as ONNX asks)
//   dq = DequantizeLinear(q, s, z)      -> float32  (packed to float)
//   qt = Transpose(q)                   -> int4     (packed to packed)
//   c4 = Cast(x, to=uint4), c2 = Cast(x, to=int2), f4 = Cast(x, to=float4e2m1)
//   back = Cast(f4, to=float)           -> float32  (float4 decode)
Graph packed_graph() {
  test::OpsTestGraph b(25);
  const int x = b.input("x", DType::Float32, {3, 5});
  const int s = b.input("s", DType::Float32, {});
  const int z = b.input("z", DType::Int4, {});
  const int q = b.node("q", OpKind::QuantizeLinear, {x, s, z});
  b.output(q);
  b.output(b.node("dq", OpKind::DequantizeLinear, {q, s, z}));
  b.output(b.node("qt", OpKind::Transpose, {q}, {{"perm", test::ints_attr({1, 0})}}));
  b.output(b.node("c4", OpKind::Cast, {x}, {{"to", test::int_attr(kOnnxUInt4)}}));
  b.output(b.node("c2", OpKind::Cast, {x}, {{"to", test::int_attr(kOnnxInt2)}}));
  const int f4 = b.node("f4", OpKind::Cast, {x}, {{"to", test::int_attr(kOnnxFloat4E2M1)}});
  b.output(f4);
  b.output(b.node("back", OpKind::Cast, {f4}, {{"to", test::int_attr(1)}}));
  return b.graph;
}

const std::vector<double> kX = {0.0,   1.4, -2.6, 7.5, -8.5, 100.0, -100.0, 0.25,
                                -0.75, 3.0, -3.0, 5.9, -6.1, 1e30,  -0.5};

DLTensor host_dl(HostTensor& t) {
  DLTensor d{};
  d.data = t.data();
  d.device = DLDevice{kDLCPU, 0};
  d.ndim = t.ndim();
  const uint8_t code = is_float(t.dtype()) ? kDLFloat : is_int(t.dtype()) ? kDLInt : kDLUInt;
  d.dtype = DLDataType{code, static_cast<uint8_t>(dtype_bits(t.dtype())), 1};
  d.shape = const_cast<int64_t*>(t.shape().data());
  return d;
}

// The stored pattern of element i: its packed bits (ONNX's layout), or the float32 bits.
uint32_t element_bits(const HostTensor& t, int64_t i) {
  if (is_packed(t.dtype())) {
    const int bits = dtype_bits(t.dtype()), per_byte = 8 / bits;
    return (t.data()[i / per_byte] >> (bits * (i % per_byte))) & ((1u << bits) - 1);
  }
  float f = static_cast<float>(t.get_double(i));
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

double value_of(const HostTensor& t, int64_t i) {
  return is_float(t.dtype()) ? t.get_double(i) : static_cast<double>(t.get_int(i));
}

// Builds `func` as generated C++, calls it through the kernel contract on `inputs` (outputs
// poisoned first: every bit of a packed output must be written) and expects every output element
// to have the interpreter's bit pattern. Returns the outputs.
std::vector<HostTensor> expect_cpu_matches_interpreter(const LoweredFunc& func,
                                                       std::vector<HostTensor> inputs) {
  const fs::path dir = fs::temp_directory_path() /
                       ("kiln_packed_test_" + func.name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  codegen::write_support_files((dir / "include").string());
  const fs::path source = dir / "module.cpp";
  std::ofstream(source) << codegen::generate_module({func}, codegen::Target::Cpu);
  codegen::BuildOptions build;
  build.target = codegen::Target::Cpu;
  build.include_dir = (dir / "include").string();
  const std::string library = (dir / "libmodule.so").string();
  codegen::build_shared_library({source.string()}, library, build);
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  EXPECT_NE(handle, nullptr) << dlerror();
  if (!handle) return {};

  const std::vector<HostTensor> expected = interpret(func, inputs);
  std::vector<HostTensor> outputs;
  for (const HostTensor& e : expected) {
    HostTensor out(e.dtype(), e.shape());
    std::memset(out.data(), 0x5a, out.num_bytes());
    outputs.push_back(std::move(out));
  }
  std::vector<DLTensor> args;
  for (HostTensor& t : inputs) args.push_back(host_dl(t));
  for (HostTensor& t : outputs) args.push_back(host_dl(t));
  auto fn = reinterpret_cast<KilnKernelFn>(dlsym(handle, ("kiln_" + func.name).c_str()));
  auto last_error = reinterpret_cast<const char* (*)()>(dlsym(handle, "kiln_last_error"));
  EXPECT_NE(fn, nullptr);
  std::vector<char> workspace(1 << 16);
  EXPECT_EQ(fn(args.data(), static_cast<int32_t>(args.size()), workspace.data(), nullptr), KILN_OK)
      << last_error();
  for (size_t k = 0; k < expected.size(); ++k) {
    SCOPED_TRACE(func.outputs[k]->name + " (" + expected[k].describe() + ")");
    EXPECT_EQ(outputs[k].dtype(), expected[k].dtype());
    for (int64_t i = 0; i < expected[k].num_elements(); ++i) {
      EXPECT_EQ(element_bits(outputs[k], i), element_bits(expected[k], i))
          << "element " << i << ": generated " << value_of(outputs[k], i) << ", interpreter "
          << value_of(expected[k], i);
    }
  }
  dlclose(handle);
  fs::remove_all(dir);
  return outputs;
}

TEST(PackedCodegen, CppThroughContractMatchesInterpreter) {
  std::vector<codegen::GraphFunction> functions =
      codegen::lower_graph(packed_graph(), codegen::Target::Cpu, "packed");
  ASSERT_EQ(functions.size(), 1u);
  HostTensor z(DType::Int4, {});
  z.set_int(0, -3);
  const std::vector<HostTensor> outputs = expect_cpu_matches_interpreter(
      functions[0].func, {test::float_tensor({3, 5}, kX), test::float_tensor({}, {0.5}), z});
  ASSERT_EQ(outputs.size(), 7u);
  // The outputs' values are ONNX's: QuantizeLinear saturates to [-8, 7], the float4 cast to +-6.
  EXPECT_EQ(test::values_of(outputs[0]),
            (std::vector<double>{-3, 0, -8, 7, -8, 7, -8, -3, -5, 3, -8, 7, -8, 7, -4}));
  EXPECT_EQ(outputs[5].get_double(5), 6.0);    // f4 of 100
  EXPECT_EQ(outputs[6].get_double(12), -6.0);  // back of -6.1
}

// The contract of packed arguments: a packed output must be 4-byte aligned (the GPU writes its
// 32-bit words), a dtype of the wrong width is named in the error, and writing the elements of
// a tensor leaves the other bits of its last byte alone.
TEST(PackedCodegen, ContractChecksPackedAlignmentAndDtype) {
  te::Tensor x = te::placeholder("x", DType::Float32, {5});
  te::Tensor y = te::compute(
      "y", {5}, [&](const std::vector<ir::Expr>& i) { return ir::cast(Type(DType::Int4), x(i)); });
  const LoweredFunc func = lower("to_int4", {x}, {y}, Schedule());
  const fs::path dir =
      fs::temp_directory_path() / ("kiln_packed_contract_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  codegen::write_support_files((dir / "include").string());
  std::ofstream(dir / "module.cpp") << codegen::generate_module({func}, codegen::Target::Cpu);
  codegen::BuildOptions build;
  build.target = codegen::Target::Cpu;
  build.include_dir = (dir / "include").string();
  codegen::build_shared_library({(dir / "module.cpp").string()}, (dir / "libmodule.so").string(),
                                build);
  void* handle = dlopen((dir / "libmodule.so").c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << dlerror();
  auto fn = reinterpret_cast<KilnKernelFn>(dlsym(handle, "kiln_to_int4"));
  auto last_error = reinterpret_cast<const char* (*)()>(dlsym(handle, "kiln_last_error"));
  ASSERT_NE(fn, nullptr);
  HostTensor in = test::float_tensor({5}, {1, 2, 3, 4, 5}), out(DType::Int4, {8});
  for (int64_t i = 0; i < 8; ++i) out.set_int(i, -1);
  std::vector<DLTensor> args = {host_dl(in), host_dl(out)};
  args[1].shape = args[0].shape;
  args[1].byte_offset = 1;
  EXPECT_EQ(fn(args.data(), 2, nullptr, nullptr), KILN_ERR_LAYOUT);
  EXPECT_NE(std::string(last_error()).find("y.data is not 4-byte aligned"), std::string::npos)
      << last_error();
  args[1].byte_offset = 0;
  args[1].dtype.bits = 2;
  EXPECT_EQ(fn(args.data(), 2, nullptr, nullptr), KILN_ERR_DTYPE);
  EXPECT_NE(std::string(last_error()).find("y.dtype is int2, expected int4"), std::string::npos)
      << last_error();
  args[1].dtype.bits = 4;
  ASSERT_EQ(fn(args.data(), 2, nullptr, nullptr), KILN_OK) << last_error();
  // The elements past the 5 written, in the same bytes, keep their bits.
  EXPECT_EQ(test::values_of(out), (std::vector<double>{1, 2, 3, 4, 5, -1, -1, -1}));
  dlclose(handle);
  fs::remove_all(dir);
}

// The IR's own conversions and arithmetic (below the ops' clamps): a float sweep (NaN, infinities,
// beyond int64, halfway values) and int32 values cast to every packed type, and int4 + int4 over
// all 256 pairs, which wraps at 4 bits.
TEST(PackedCodegen, CppConversionsAndWrapMatchInterpreter) {
  std::vector<double> sweep = {NAN,    INFINITY, -INFINITY, 1e30, -1e30,
                               0x1p63, -0x1p63,  0x1p62,    0.0,  -0.0};
  for (int k = -80; k <= 80; ++k) sweep.push_back(k * 0.25);
  const int64_t n = static_cast<int64_t>(sweep.size());
  std::vector<double> ints;
  for (int k = -300; k <= 300; k += 7) ints.push_back(k);
  ints.push_back(2147483647.0);
  ints.push_back(-2147483648.0);
  const int64_t m = static_cast<int64_t>(ints.size());
  te::Tensor x = te::placeholder("x", DType::Float32, {n});
  te::Tensor i32 = te::placeholder("i32", DType::Int32, {m});
  te::Tensor a = te::placeholder("a", DType::Int4, {16, 1});
  te::Tensor b = te::placeholder("b", DType::Int4, {1, 16});
  std::vector<te::Tensor> outputs;
  for (DType d : {DType::Int4, DType::UInt4, DType::Int2, DType::UInt2, DType::Float4E2M1}) {
    const std::string name(dtype_name(d));
    outputs.push_back(te::compute(
        "x_" + name, {n}, [&](const std::vector<ir::Expr>& i) { return ir::cast(Type(d), x(i)); }));
    outputs.push_back(te::compute("i32_" + name, {m}, [&](const std::vector<ir::Expr>& i) {
      return ir::cast(Type(d), i32(i));
    }));
  }
  outputs.push_back(te::compute("sum", {16, 16}, [&](const std::vector<ir::Expr>& i) {
    return a({i[0], ir::Expr(0)}) + b({ir::Expr(0), i[1]});
  }));
  const LoweredFunc func = lower("conversions", {x, i32, a, b}, outputs, Schedule());
  HostTensor av(DType::Int4, {16, 1}), bv(DType::Int4, {1, 16});
  for (int k = 0; k < 16; ++k) av.set_int(k, k - 8), bv.set_int(k, k - 8);
  const std::vector<HostTensor> got = expect_cpu_matches_interpreter(
      func, {test::float_tensor({n}, sweep), test::tensor(DType::Int32, {m}, ints), av, bv});
  ASSERT_EQ(got.size(), outputs.size());
  EXPECT_EQ(got.back().get_int(15 * 16 + 15), -2);  // 7 + 7 wraps
  EXPECT_EQ(got.back().get_int(0), 0);              // -8 + -8 wraps
}

TEST(PackedCodegen, CudaReadsAndWritesPackedTensorsAndCompiles) {
  std::vector<codegen::GraphFunction> functions =
      codegen::lower_graph(packed_graph(), codegen::Target::Cuda, "packed");
  ASSERT_EQ(functions.size(), 1u);
  const std::string cuda = codegen::generate_module({functions[0].func}, codegen::Target::Cuda);
  // Packed tensors are bytes in kernel signatures; inputs are read, outputs written, by element.
  EXPECT_NE(cuda.find("const uint8_t* __restrict__ z, uint8_t* __restrict__ q_out0)"),
            std::string::npos)
      << cuda;
  EXPECT_NE(cuda.find("kiln::load_packed<kiln::packed_int4>(z, "), std::string::npos) << cuda;
  EXPECT_NE(cuda.find("kiln::store_packed<kiln::packed_int4>(q_out0, "), std::string::npos) << cuda;
  EXPECT_NE(cuda.find("kiln::store_packed<kiln::packed_int4>(qt_out0, "), std::string::npos)
      << cuda;
  EXPECT_NE(cuda.find("kiln::load_packed<kiln::packed_int4>(q_out0, "), std::string::npos) << cuda;
  EXPECT_NE(cuda.find("kiln::load_packed<kiln::packed_float4_e2m1>(f4_out0, "), std::string::npos)
      << cuda;
  EXPECT_NE(cuda.find("kiln::store_packed<kiln::packed_uint4>("), std::string::npos) << cuda;
  EXPECT_NE(cuda.find("kiln::store_packed<kiln::packed_int2>("), std::string::npos) << cuda;
  EXPECT_NE(cuda.find("kiln::store_packed<kiln::packed_float4_e2m1>("), std::string::npos) << cuda;
  EXPECT_NE(cuda.find("kiln::cast_packed<kiln::packed_int2, float>("), std::string::npos) << cuda;
  // The contract: a packed output is 4-byte aligned (the GPU updates its 32-bit words), with the
  // DLPack dtype of its bits; a packed input needs no alignment.
  EXPECT_NE(cuda.find("{\"q_out0\", {kDLInt, 4, 1}, 2, shape_3, 4, 1}"), std::string::npos) << cuda;
  EXPECT_NE(cuda.find("{\"z\", {kDLInt, 4, 1}, 0, shape_2, 1, 0}"), std::string::npos) << cuda;
  test::expect_cuda_compiles("packed", cuda, {"sm_90"});
}

}  // namespace
}  // namespace kiln
