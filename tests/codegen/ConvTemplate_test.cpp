// Generated code that instantiates the implicit-GEMM convolution template
// (kernels/gemm/conv_implicit_gemm.cuh) compiles without warnings for sm_80, sm_90 and sm_110, in
// every configuration the default schedule picks: 64- and 128-row tiles (output channels up to 64
// and above), weight rows copied by cp.async and gathered element-wise (both are compiled per
// call), float16 and bfloat16, 2-D and 1-D, calls given a workspace for the Hopper kernel
// (conv_wgmma.cuh, compiled into the sm_90a pass; the default) and calls without one
// (DefaultScheduleOptions::conv_wgmma = false).
// (Running them needs a GPU: bench/contraction/edge_check.py.)
#include <gtest/gtest.h>

#include "../ops/TestGraph.h"
#include "CompileCuda.h"
#include "kiln/codegen/Codegen.h"
#include "kiln/codegen/GraphFunctions.h"
#include "kiln/schedule/Defaults.h"

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
  // Stride 1, C = 16: the Hopper kernel may run where the schedule enables it, with a workspace.
  const int h = t.input("h", dtype, {batch, Expr(16), Expr(12), Expr(24)});
  const int wh = t.input("wh", dtype, {Expr(128), Expr(16), Expr(3), Expr(3)});
  t.output(t.node("c3", OpKind::Relu, {t.node("c3_conv", OpKind::Conv, {h, wh}, {{"pads", test::ints_attr({1, 1, 1, 1})}})}));
  return t.graph;
}

TEST(ConvTemplate, GeneratedCallsCompileForEveryArchitecture) {
  std::vector<LoweredFunc> funcs;
  for (DType d : {DType::Float16, DType::BFloat16}) {
    for (auto& f : codegen::lower_graph(conv_stack(d), codegen::Target::Cuda, "convs_" + std::string(dtype_name(d)))) {
      funcs.push_back(std::move(f.func));
    }
  }
  // The default schedule passes the Hopper kernel its workspace (on by default); without it
  // (DefaultScheduleOptions::conv_wgmma = false, kiln compile --no-conv-wgmma) no call has one.
  EXPECT_NE(codegen::generate_module(funcs, codegen::Target::Cuda).find("_conv_wgmma"), std::string::npos);
  std::vector<LoweredFunc> without;
  for (DType d : {DType::Float16, DType::BFloat16}) {
    const auto kernels = codegen::kernel_definitions(conv_stack(d), "plain_" + std::string(dtype_name(d)));
    DefaultScheduleOptions options;
    options.conv_wgmma = false;
    const Schedule schedule = default_gpu_schedule(kernels.at(0).inputs, kernels.at(0).outputs, options);
    without.push_back(codegen::lower_kernel(kernels.at(0), codegen::Target::Cuda, &schedule).func);
  }
  EXPECT_EQ(codegen::generate_module(without, codegen::Target::Cuda).find("_conv_wgmma"), std::string::npos);
  for (LoweredFunc& f : without) funcs.push_back(std::move(f));
  const std::string source_text = codegen::generate_module(funcs, codegen::Target::Cuda);
  for (const char* call : {"kiln::gemm::conv<__half, kiln::gemm::TileConfig<64, 128, 32, 2, 2, 2>>",
                           "kiln::gemm::conv<__half, kiln::gemm::TileConfig<128, 128, 32, 2, 4, 2>>",
                           "kiln::gemm::conv<__nv_bfloat16, kiln::gemm::TileConfig<64, 128, 32, 2, 2, 2>>",
                           "shape.stride_h = 2;", "shape.dilation_w = 2;", "shape.height = 1L;",
                           "(problem, shape, epilogue, c3_conv_acc_conv_wgmma, static_cast<int64_t>((18432L + (((batch * 16L) * 12L) * 24L))) * "
                           "sizeof(__half), static_cast<cudaStream_t>(stream))",
                           "(problem, shape, epilogue, c3_conv_acc_conv_wgmma, static_cast<int64_t>((18432L + (((batch * 16L) * 12L) * 24L))) * "
                           "sizeof(__nv_bfloat16), static_cast<cudaStream_t>(stream))",
                           "wgmma + TMA (conv_wgmma.cuh"}) {
    EXPECT_NE(source_text.find(call), std::string::npos) << "expected " << call << " in\n" << source_text;
  }
  // By default the other convolutions (C = 3, stride 2) get no workspace.
  size_t calls = 0;
  for (size_t at = source_text.find("kiln::gemm::conv<"); at != std::string::npos; at = source_text.find("kiln::gemm::conv<", at + 1)) {
    ++calls;
  }
  size_t with_workspace = 0;
  for (size_t at = source_text.find("_conv_wgmma, static_cast"); at != std::string::npos;
       at = source_text.find("_conv_wgmma, static_cast", at + 1)) {
    ++with_workspace;
  }
  EXPECT_EQ(calls, 16u) << source_text;
  EXPECT_EQ(with_workspace, 4u) << source_text;  // c3 and the 1-D c2 (C = 16), per dtype, by default
  test::expect_cuda_compiles_for_every_architecture("conv_template", source_text);
}

// With template units (kiln compile, kiln tune): each convolution's call is a unit of its own, the
// module passing the problem, its functor, the window shape and the Hopper kernel's workspace to the
// unit's launcher. The units compile on their own (sm_90, as kiln tune builds them).
TEST(ConvTemplate, CallsAreUnitsOfTheirOwn) {
  std::vector<LoweredFunc> funcs;
  for (auto& f : codegen::lower_graph(conv_stack(DType::Float16), codegen::Target::Cuda, "convs")) funcs.push_back(std::move(f.func));
  std::vector<std::string> units;
  codegen::ModuleOptions options;
  options.template_units = &units;
  const std::string module = codegen::generate_module(funcs, codegen::Target::Cuda, options);
  ASSERT_EQ(units.size(), 4u) << module;
  EXPECT_EQ(module.find("kiln::gemm::conv<"), std::string::npos) << "the calls are in the units\n" << module;
  int with_workspace = 0;
  std::string wgmma_unit;
  for (const std::string& u : units) {
    const size_t at = u.find("extern \"C\" cudaError_t kiln_gemm_unit_");
    ASSERT_NE(at, std::string::npos) << u;
    const std::string launcher = u.substr(at + 23, u.find('(', at) - at - 23);
    EXPECT_NE(module.find(launcher + "(&problem, &epilogue, &shape, "), std::string::npos) << launcher << "\n" << module;
    EXPECT_NE(u.find("const kiln::gemm::ConvShape& shape = *shape_in;"), std::string::npos) << u;
    if (u.find("(problem, shape, epilogue, workspace, workspace_bytes, stream)") != std::string::npos) {
      ++with_workspace;
      wgmma_unit = u;
    }
  }
  EXPECT_EQ(with_workspace, 2) << "c3 and the 1-D c2 (C = 16): the Hopper kernel's workspace";
  EXPECT_NE(module.find("(&problem, &epilogue, &shape, c3_conv_acc_conv_wgmma, static_cast<int64_t>("), std::string::npos) << module;
  test::expect_cuda_compiles("conv_unit", wgmma_unit, {"sm_90"});
}

}  // namespace
}  // namespace kiln
