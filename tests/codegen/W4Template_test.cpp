// Generated code that calls the 4-bit weight kernels (kernels/quant/, kiln.QuantLinear) compiles
// without warnings for sm_80, sm_90 and sm_110: NVFP4 and INT4 weights, float16 and bfloat16
// activations, each call with its GEMV (M <= 16) and GEMM paths (and split-K finish) and a
// generated epilogue, and in the sm_90a pass GEMM variant 4 (wgmma, w4_gemm_sm90_rs.cuh: its headers must
// be among the embedded support files). One nvcc run for all of them (CI has 2 cores). Running them
// needs a GPU: bench/contraction/ (the NVFP4 Gemma MLP block) checks them against torch.
#include <gtest/gtest.h>

#include "../ops/TestGraph.h"
#include "CompileCuda.h"
#include "kiln/codegen/Codegen.h"
#include "kiln/codegen/GraphFunctions.h"

namespace kiln {
namespace {

using namespace ir;

// x [tokens, 128] -> QuantLinear 128 -> 256 (+ bias) -> Tanh -> QuantLinear 256 -> 128, + x.
Graph quant_mlp(const std::string& format, DType act) {
  test::TestGraph t(17, false);
  const int64_t group = format == "nvfp4" ? 16 : 128;
  const int x = t.input("x", act, {var("tokens"), Expr(128)});
  auto layer = [&](const std::string& name, int input, int64_t n, int64_t k, int bias) {
    std::vector<int> inputs = {input, t.input(name + "_w", DType::UInt8, {Expr(n), Expr(k / 2)}),
                               t.input(name + "_s", format == "int4" ? act : DType::UInt8, {Expr(n), Expr(k / group)})};
    inputs.push_back(format == "nvfp4" ? t.input(name + "_ts", DType::Float32, {Expr(1)})
                                       : t.input(name + "_z", act, {Expr(n), Expr(k / group)}));
    if (bias >= 0) inputs.push_back(bias);
    return t.node(name, OpKind::QuantLinear, inputs,
                  {{"in_features", test::int_attr(k)},
                   {"out_features", test::int_attr(n)},
                   {"block_size", test::int_attr(group)},
                   {"format", test::string_attr(format)}});
  };
  const int up = layer("up", x, 256, 128, t.input("up_bias", act, {Expr(256)}));
  const int down = layer("down", t.node("act", OpKind::Tanh, {up}), 128, 256, -1);
  t.output(t.node("residual", OpKind::Add, {down, x}));
  return t.graph;
}

TEST(W4Template, GeneratedCallsCompileForEveryArchitecture) {
  std::vector<LoweredFunc> funcs;
  // NVFP4 with float16 and INT4 with bfloat16: each format's decode and each dtype's math once.
  for (const auto& [format, act] : {std::pair{"nvfp4", DType::Float16}, {"int4", DType::BFloat16}}) {
    for (auto& f : codegen::lower_graph(quant_mlp(format, act), codegen::Target::Cuda,
                                        std::string("qmlp_") + format + "_" + std::string(dtype_name(act)))) {
      funcs.push_back(std::move(f.func));
    }
  }
  const std::string source_text = codegen::generate_module(funcs, codegen::Target::Cuda);
  for (const char* call : {"launch_linear_epilogue<kiln::quant::gpu::Format::NvFp4, __half>",
                           "launch_linear_epilogue<kiln::quant::gpu::Format::Int4, __nv_bfloat16>",
                           "params.scale2 = nullptr", "params.zero = ", "// path: float16 activations, 4-bit weights"}) {
    EXPECT_NE(source_text.find(call), std::string::npos) << "expected " << call << " in\n" << source_text;
  }
  // The 4-bit kernels take the weight apart from the problem's B: no layout hint for their functors.
  EXPECT_EQ(source_text.find("kAKMajor"), std::string::npos) << source_text;
  test::expect_cuda_compiles_for_every_architecture("w4_template", source_text);
}

}  // namespace
}  // namespace kiln
