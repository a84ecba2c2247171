// Generated code that instantiates the implicit-GEMM convolution template
// (kernels/gemm/conv_implicit_gemm.cuh) compiles without warnings for sm_80, sm_90 and sm_110, in
// every configuration the default schedule picks: 64- and 128-row tiles (output channels up to 64
// and above), weight rows copied by cp.async and gathered element-wise (both are compiled per
// call), float16 and bfloat16, 2-D and 1-D. (Running them needs a GPU: bench/contraction/edge_check.py.)
#include <gtest/gtest.h>

#include "../ops/TestGraph.h"
#include "CompileCuda.h"
#include "kiln/codegen/Codegen.h"
#include "kiln/codegen/GraphFunctions.h"

namespace kiln {
namespace {

using namespace ir;

// Conv3x3 (3 -> 32 channels) + Relu, Conv3x3 stride 2 (32 -> 96), and a 1-D Conv over a symbolic batch.
Graph conv_stack(DType dtype) {
  test::TestGraph t(17, false);
  const Expr batch = var("batch");
  const int x = t.input("x", dtype, {batch, Expr(3), Expr(20), Expr(20)});
  const int w0 = t.input("w0", dtype, {Expr(32), Expr(3), Expr(3), Expr(3)});
  const int w1 = t.input("w1", dtype, {Expr(96), Expr(32), Expr(3), Expr(3)});
  const int b1 = t.input("b1", dtype, {Expr(96)});
  const int c0 = t.node("c0", OpKind::Conv, {x, w0}, {{"pads", test::ints_attr({1, 1, 1, 1})}});
  const int r0 = t.node("r0", OpKind::Relu, {c0});
  t.output(t.node("c1", OpKind::Conv, {r0, w1, b1}, {{"pads", test::ints_attr({1, 1, 1, 1})}, {"strides", test::ints_attr({2, 2})}}));
  const int s = t.input("s", dtype, {batch, Expr(16), Expr(30)});
  const int ws = t.input("ws", dtype, {Expr(24), Expr(16), Expr(5)});
  t.output(t.node("c2", OpKind::Conv, {s, ws}, {{"pads", test::ints_attr({2, 2})}, {"dilations", test::ints_attr({2})}}));
  return t.graph;
}

TEST(ConvTemplate, GeneratedCallsCompileForEveryArchitecture) {
  std::vector<LoweredFunc> funcs;
  for (DType d : {DType::Float16, DType::BFloat16}) {
    for (auto& f : codegen::lower_graph(conv_stack(d), codegen::Target::Cuda, "convs_" + std::string(dtype_name(d)))) {
      funcs.push_back(std::move(f.func));
    }
  }
  const std::string source_text = codegen::generate_module(funcs, codegen::Target::Cuda);
  for (const char* call : {"kiln::gemm::conv<__half, kiln::gemm::TileConfig<64, 128, 32, 2, 2, 2>>",
                           "kiln::gemm::conv<__half, kiln::gemm::TileConfig<128, 128, 32, 2, 4, 2>>",
                           "kiln::gemm::conv<__nv_bfloat16, kiln::gemm::TileConfig<64, 128, 32, 2, 2, 2>>",
                           "shape.stride_h = 2;", "shape.dilation_w = 2;", "shape.height = 1L;"}) {
    EXPECT_NE(source_text.find(call), std::string::npos) << "expected " << call << " in\n" << source_text;
  }
  test::expect_cuda_compiles_for_every_architecture("conv_template", source_text);
}

}  // namespace
}  // namespace kiln
