// Generated code that instantiates the contraction templates (kernels/gemm/) compiles without
// warnings for sm_80, sm_90 (built as sm_90a) and sm_110, in every configuration the default
// schedule picks: the small-M kernel (4, 8 and 16 warps), the tensor-core kernel with its mid-M
// tiles, the Hopper kernel (with its mma.sync fallback and its SWAP_AB tiles) above, one and two B operands, float16 and
// bfloat16, and float32 under --tf32. (Running them needs a GPU: bench/gemm/ and the CUDA conformance run.)
#include <gtest/gtest.h>


#include "../ops/TestGraph.h"
#include "CompileCuda.h"
#include "kiln/codegen/Build.h"
#include "kiln/codegen/Codegen.h"
#include "kiln/codegen/GraphFunctions.h"
#include "kiln/schedule/Defaults.h"

namespace kiln {
namespace {

using namespace ir;

// A gated MLP over symbolic tokens: gate/up (a dual product) and down, each with three paths
// chosen per call from M (small-M kernel, mid-M tiles with split-K, large-M tiles).
Graph gated_mlp(DType dtype) {
  test::TestGraph t(17, false);
  const int x = t.input("x", dtype, {var("tokens"), Expr(64)});
  const int wg = t.input("w_gate", dtype, {Expr(64), Expr(256)});
  const int wu = t.input("w_up", dtype, {Expr(64), Expr(256)});
  const int wd = t.input("w_down", dtype, {Expr(256), Expr(64)});
  const int gate = t.node("gate", OpKind::MatMul, {x, wg});
  const int up = t.node("up", OpKind::MatMul, {x, wu});
  const int prod = t.node("prod", OpKind::Mul, {t.node("act", OpKind::Tanh, {gate}), up});
  t.output(t.node("residual", OpKind::Add, {t.node("down", OpKind::MatMul, {prod, wd}), x}));
  return t.graph;
}

// Linear layers whose N picks the other small-M configurations: N > 4096 (4 warps per block)
// and a symbolic N (8 warps).
Graph wide_linears(DType dtype) {
  test::TestGraph t(17, false);
  const int x = t.input("x", dtype, {var("tokens"), Expr(64)});
  const int w_wide = t.input("w_wide", dtype, {Expr(64), Expr(8192)});
  const int w_any = t.input("w_any", dtype, {Expr(64), var("n")});
  t.output(t.node("wide", OpKind::MatMul, {x, w_wide}));
  t.output(t.node("any", OpKind::MatMul, {x, w_any}));
  return t.graph;
}

TEST(GemmTemplate, GeneratedCallsCompileForEveryArchitecture) {
  std::vector<LoweredFunc> funcs;
  for (auto& f : codegen::lower_graph(wide_linears(DType::Float16), codegen::Target::Cuda, "wide")) funcs.push_back(std::move(f.func));
  for (DType d : {DType::Float16, DType::BFloat16}) {
    for (auto& f : codegen::lower_graph(gated_mlp(d), codegen::Target::Cuda, "mlp_" + std::string(dtype_name(d)))) {
      funcs.push_back(std::move(f.func));
    }
  }
  {  // float32 with TF32 allowed (kiln compile --tf32)
    const auto kernels = codegen::kernel_definitions(gated_mlp(DType::Float32), "mlp_tf32");
    DefaultScheduleOptions options;
    options.allow_tf32 = true;
    const Schedule schedule = default_gpu_schedule(kernels.at(0).inputs, kernels.at(0).outputs, options);
    funcs.push_back(codegen::lower_kernel(kernels.at(0), codegen::Target::Cuda, &schedule).func);
  }
  const std::string source_text = codegen::generate_module(funcs, codegen::Target::Cuda);
  for (const char* call :
       {"kiln::gemm::gemv<__half, kiln::gemm::GemvConfig<16, 16>>", "kiln::gemm::gemv<__half, kiln::gemm::GemvConfig<16, 4>>",
        "kiln::gemm::gemv<__half, kiln::gemm::GemvConfig<16, 8>>", "kiln::gemm::gemm<__half, kiln::gemm::TileConfig<64, 128, 32, 2, 2, 4>>",
        "kiln::gemm::gemm_wgmma<__half, kiln::gemm::WgmmaConfig<128, 256, 4, 0>, kiln::gemm::TileConfig<256, 128, 64, 4, 2, 3>>",
        "kiln::gemm::gemm_wgmma<__nv_bfloat16, kiln::gemm::WgmmaConfig<128, 256, 4, 0>, kiln::gemm::TileConfig<256, 128, 64, 4, 2, 3>>",
        "kiln::gemm::gemm_wgmma<__half, kiln::gemm::WgmmaConfig<128, 128, 6, 0>, kiln::gemm::TileConfig<256, 128, 64, 4, 2, 3>>",
        "kiln::gemm::wgmma_prefers_wide(problem, 128, 256, 2048, 128, 128)",
        "kiln::gemm::gemm_wgmma<__half, kiln::gemm::WgmmaConfig<128, 272, 4, 0, 0, 1>, kiln::gemm::TileConfig<256, 128, 64, 4, 2, 3>>",
        "kiln::gemm::gemm_wgmma<__nv_bfloat16, kiln::gemm::WgmmaConfig<128, 208, 5, 0, 0, 1>, kiln::gemm::TileConfig<256, 128, 64, 4, 2, 3>>",
        "kiln::gemm::gemm_wgmma<__half, kiln::gemm::WgmmaConfig<64, 136, 6, 1, 0, 1>, kiln::gemm::TileConfig<128, 128, 32, 2, 4, 3>>",
        "kiln::gemm::wgmma_swap_choice(problem, epilogue, kiln::gemm::WgmmaTileShape{64, 128, true}, "
        "kiln::gemm::WgmmaTileShape{64, 136, true})",
        "kiln::gemm::gemm_wgmma<__half, kiln::gemm::WgmmaConfig<64, 128, 5, 1>, kiln::gemm::TileConfig<128, 128, 32, 2, 4, 3>>",
        "kiln::gemm::gemm_wgmma<__nv_bfloat16, kiln::gemm::WgmmaConfig<64, 128, 5, 1>, kiln::gemm::TileConfig<128, 128, 32, 2, 4, 3>>",
        "static constexpr int kNumB = 2;", "kiln::gemm::gemm<float, kiln::gemm::TileConfig<256, 128, 64, 4, 2, 3>>",
        "above: on sm_90 Hopper GEMM (wgmma + TMA), 128x256x64 tiles (4 TMA stages, cooperative consumer warpgroups) when K >= 2048 "
        "and their waves are no more work than the narrow tile's, else 128x128x64 tiles (6 TMA stages, cooperative consumer warpgroups)"}) {
    EXPECT_NE(source_text.find(call), std::string::npos) << "expected " << call << " in\n" << source_text;
  }
  test::expect_cuda_compiles_for_every_architecture("gemm_template", source_text);
}

// DefaultScheduleOptions::wgmma_swap = false (the tuner's knob) prints no SWAP_AB tile and no per-call
// choice of one: the calls are those of the tiles before session 20.
TEST(GemmTemplate, SwapTilesCanBeTurnedOff) {
  const auto kernels = codegen::kernel_definitions(gated_mlp(DType::Float16), "mlp_noswap");
  DefaultScheduleOptions options;
  options.wgmma_swap = false;
  std::vector<LoweredFunc> funcs;
  for (const auto& k : kernels) {
    const Schedule schedule = default_gpu_schedule(k.inputs, k.outputs, options);
    funcs.push_back(codegen::lower_kernel(k, codegen::Target::Cuda, &schedule).func);
  }
  const std::string text = codegen::generate_module(funcs, codegen::Target::Cuda);
  EXPECT_EQ(text.find("wgmma_swap_choice"), std::string::npos) << text;
  EXPECT_EQ(text.find(", 0, 1>"), std::string::npos) << "a SWAP_AB WgmmaConfig in\n" << text;
  EXPECT_NE(text.find("kiln::gemm::WgmmaConfig<64, 128, 5, 1>"), std::string::npos) << text;
  EXPECT_NE(text.find("kiln::gemm::WgmmaConfig<128, 128, 6, 0>"), std::string::npos) << text;
}

// The epilogue functor loads what it only reads through __ldg (so nvcc can keep those loads
// across the stores of the unrolled per-element calls) and stores its outputs plainly.
TEST(GemmTemplate, EpilogueReadsOnlyInputsThroughLdg) {
  std::vector<LoweredFunc> funcs;
  for (auto& f : codegen::lower_graph(gated_mlp(DType::Float16), codegen::Target::Cuda, "mlp")) funcs.push_back(std::move(f.func));
  const std::string text = codegen::generate_module(funcs, codegen::Target::Cuda);
  const size_t functor = text.find("kNumB = 1");  // the down projection's functor (+ the residual)
  ASSERT_NE(functor, std::string::npos) << text;
  const std::string down = text.substr(functor, text.find("};", functor) - functor);
  EXPECT_NE(down.find("__ldg(&x["), std::string::npos) << "the residual read of x:\n" << down;
  EXPECT_EQ(down.find("__ldg(&residual"), std::string::npos) << down;
  EXPECT_NE(down.find("residual_out0["), std::string::npos) << down;
}

// Each functor tells the Hopper kernel how to call it (gemm_problem.cuh): the down projection's,
// which reads the residual at its row, with a prefetch() of that load; the gate*up product's,
// with a tanh and no per-row read, through shared memory from a rolled loop; a bias-only one
// through shared memory, unrolled.
TEST(GemmTemplate, EpilogueSaysWhetherItReadsRowsAndIsLong) {
  test::TestGraph t(17, false);
  const int x = t.input("x", DType::Float16, {var("tokens"), Expr(64)});
  const int w = t.input("w", DType::Float16, {Expr(64), Expr(128)});
  const int bias = t.input("bias", DType::Float16, {Expr(128)});
  t.output(t.node("biased", OpKind::Add, {t.node("proj", OpKind::MatMul, {x, w}), bias}));
  std::vector<LoweredFunc> funcs;
  for (auto& f : codegen::lower_graph(gated_mlp(DType::Float16), codegen::Target::Cuda, "mlp")) funcs.push_back(std::move(f.func));
  for (auto& f : codegen::lower_graph(t.graph, codegen::Target::Cuda, "bias")) funcs.push_back(std::move(f.func));
  const std::string text = codegen::generate_module(funcs, codegen::Target::Cuda);
  auto functor = [&](const std::string& marker) {
    const size_t at = text.find(marker);
    EXPECT_NE(at, std::string::npos) << marker << " in\n" << text;
    return at == std::string::npos ? std::string() : text.substr(at, text.find("};", at) - at);
  };
  EXPECT_NE(functor("kNumB = 2").find("kReadsRows = false, kLong = true;"), std::string::npos) << functor("kNumB = 2");
  const std::string down = functor("kNumB = 1");  // the MLP's down projection comes first
  EXPECT_NE(down.find("kReadsRows = true, kLong = false;"), std::string::npos) << down;
  EXPECT_NE(down.find("void prefetch("), std::string::npos) << "the residual's loads, prefetched per chunk:\n" << down;
  EXPECT_NE(down.find("kiln::gemm::prefetch_l1(&x["), std::string::npos) << down;
  EXPECT_EQ(functor("kNumB = 2").find("prefetch"), std::string::npos) << "no per-row loads to prefetch";
  const std::string biased = functor("struct bias_");
  EXPECT_NE(biased.find("kReadsRows = false, kLong = false;"), std::string::npos) << biased;
}

// Problem::b_early (the small-M kernel prefetches B before the previous kernel has finished) only
// where that is safe: B is a function input and a generated kernel of the call was launched before
// the contraction. Not for a contraction that is the call's first kernel (the caller's last kernel
// may still be writing B), and not for a B that an earlier kernel of the call writes.
TEST(GemmTemplate, BIsReadEarlyOnlyWhenItIsAnInputAndNotTheFirstKernel) {
  test::TestGraph t(17, false);
  const int x = t.input("x", DType::Float16, {var("tokens"), Expr(64)});
  const int w = t.input("w", DType::Float16, {Expr(64), Expr(128)});
  const int v = t.input("v", DType::Float16, {Expr(64), Expr(128)});
  const int normed = t.node("normed", OpKind::Tanh, {x});
  const int proj = t.node("proj", OpKind::MatMul, {normed, w});
  const int b_temp = t.node("b_temp", OpKind::Sigmoid, {t.node("w_t", OpKind::Transpose, {v})});
  t.output(t.node("second", OpKind::MatMul, {proj, b_temp}));
  std::vector<LoweredFunc> funcs;
  for (auto& f : codegen::lower_graph(t.graph, codegen::Target::Cuda, "early")) funcs.push_back(std::move(f.func));
  test::TestGraph first(17, false);
  const int x1 = first.input("x", DType::Float16, {var("tokens"), Expr(64)});
  first.output(first.node("proj", OpKind::MatMul, {x1, first.input("w", DType::Float16, {Expr(64), Expr(128)})}));
  for (auto& f : codegen::lower_graph(first.graph, codegen::Target::Cuda, "first")) funcs.push_back(std::move(f.func));
  // 512 tokens: the contraction never takes the small-M kernel, so B is never read early.
  test::TestGraph large(17, false);
  const int x2 = large.input("x", DType::Float16, {Expr(512), Expr(64)});
  large.output(large.node("proj", OpKind::MatMul, {large.node("normed", OpKind::Tanh, {x2}),
                                                   large.input("w", DType::Float16, {Expr(64), Expr(128)})}));
  for (auto& f : codegen::lower_graph(large.graph, codegen::Target::Cuda, "large")) funcs.push_back(std::move(f.func));
  const std::string text = codegen::generate_module(funcs, codegen::Target::Cuda);
  std::vector<std::string> calls;  // each template call's problem setup, in order
  for (size_t at = text.find("kiln::gemm::Problem problem;"); at != std::string::npos;
       at = text.find("kiln::gemm::Problem problem;", at + 1)) {
    calls.push_back(text.substr(at, text.find("const cudaError_t launched", at) - at));
  }
  ASSERT_EQ(calls.size(), 4u) << text;
  EXPECT_NE(calls[0].find("problem.b_early = true;"), std::string::npos) << "w after the Tanh kernel:\n" << calls[0];
  EXPECT_EQ(calls[1].find("b_early"), std::string::npos) << "B written by this call:\n" << calls[1];
  EXPECT_EQ(calls[2].find("b_early"), std::string::npos) << "the call's first kernel:\n" << calls[2];
  EXPECT_NE(text.find("kiln::gemm::detail::pdl_trigger();"), std::string::npos) << "generated kernels let the next one start";
  // Generated kernels are launched programmatically, so each waits for the kernel before it
  // before it reads anything: the wait is its second statement, after the trigger. The first one
  // is launched in stream order where a later call reads B early (the first call here): from its
  // start on, no work of the caller is still running.
  EXPECT_NE(text.find("kiln::gemm::detail::launch_generated(false, early_k0_normed_out0, "), std::string::npos) << text;
  EXPECT_NE(text.find("kiln::gemm::detail::launch_generated(true, early_k2_b_temp_out0, "), std::string::npos) << text;
  EXPECT_EQ(calls[3].find("b_early"), std::string::npos) << "512 tokens:\n" << calls[3];
  EXPECT_NE(text.find("kiln::gemm::detail::launch_generated(true, large_k0_normed_out0, "), std::string::npos) << text;
  size_t kernels = 0;
  for (size_t at = text.find("__global__ void"); at != std::string::npos; at = text.find("__global__ void", at + 1)) {
    const size_t body = text.find('{', at);
    const std::string head = text.substr(body, text.find(';', text.find(';', body) + 1) - body);
    EXPECT_NE(head.find("pdl_trigger();"), std::string::npos) << head;
    EXPECT_NE(head.find("pdl_wait()"), std::string::npos) << head;
    ++kernels;
  }
  EXPECT_GE(kernels, 1u) << text;
}

// A contraction whose M is a constant calls the one template its M takes: the other paths'
// kernels would be compiled (and dominate the module's build) although no call can reach them.
TEST(GemmTemplate, ConstantMCallsOnlyItsPath) {
  auto module_for_tokens = [](int64_t tokens) {
    test::TestGraph t(17, false);
    const int x = t.input("x", DType::Float16, {Expr(tokens), Expr(64)});
    t.output(t.node("proj", OpKind::MatMul, {x, t.input("w", DType::Float16, {Expr(64), Expr(256)})}));
    std::vector<LoweredFunc> funcs;
    for (auto& f : codegen::lower_graph(t.graph, codegen::Target::Cuda, "m" + std::to_string(tokens))) funcs.push_back(std::move(f.func));
    return codegen::generate_module(funcs, codegen::Target::Cuda);
  };
  const struct {
    int64_t tokens;
    const char* call;
  } cases[] = {{16, "kiln::gemm::gemv<"}, {17, "kiln::gemm::gemm<"}, {256, "kiln::gemm::gemm<"}, {257, "kiln::gemm::gemm_wgmma<"}};
  for (const auto& c : cases) {
    const std::string text = module_for_tokens(c.tokens);
    EXPECT_EQ(text.find("problem.m <="), std::string::npos) << "M = " << c.tokens << ": no per-call choice of path\n" << text;
    EXPECT_NE(text.find(c.call), std::string::npos) << "M = " << c.tokens << "\n" << text;
    for (const char* other : {"kiln::gemm::gemv<", "kiln::gemm::gemm<", "kiln::gemm::gemm_wgmma<"}) {
      if (std::string(other) == c.call) continue;
      EXPECT_EQ(text.find(other), std::string::npos) << "M = " << c.tokens << ": " << other << "\n" << text;
    }
  }
}

// The functor says which operand layouts the call can have where the strides are constants, so
// that the kernels instantiate only those: A [tokens, K] is K-major; B [K, N] (MatMul) is not, B
// [N, K] (Gemm with transB) is; a symbolic M leaves A's stride known.
TEST(GemmTemplate, FunctorDeclaresTheOperandLayoutsItKnows) {
  auto text_of = [](int transb, bool symbolic) {
    test::TestGraph t(17, false);
    const int x = t.input("x", DType::Float16, {symbolic ? var("tokens") : Expr(300), Expr(64)});
    const int w = t.input("w", DType::Float16, {Expr(transb ? 256 : 64), Expr(transb ? 64 : 256)});
    t.output(transb ? t.node("proj", OpKind::Gemm, {x, w}, {{"transB", test::int_attr(1)}}) : t.node("proj", OpKind::MatMul, {x, w}));
    std::vector<LoweredFunc> funcs;
    for (auto& f : codegen::lower_graph(t.graph, codegen::Target::Cuda, "layouts")) funcs.push_back(std::move(f.func));
    return codegen::generate_module(funcs, codegen::Target::Cuda);
  };
  EXPECT_NE(text_of(0, false).find("static constexpr int kAKMajor = 1, kBKMajor = 0;"), std::string::npos) << text_of(0, false);
  EXPECT_NE(text_of(1, false).find("static constexpr int kAKMajor = 1, kBKMajor = 1;"), std::string::npos) << text_of(1, false);
  EXPECT_NE(text_of(0, true).find("static constexpr int kAKMajor = 1, kBKMajor = 0;"), std::string::npos) << text_of(0, true);
}

// kiln builds sm_90 as sm_90a, with the define that lets the host code call the Hopper kernel;
// other architectures as they are.
TEST(GemmTemplate, Sm90BuildsAsSm90aWithTheHopperKernel) {
  EXPECT_EQ(codegen::cuda_arch_flags({"sm_80", "sm_90", "sm_110"}),
            " -gencode=arch=compute_80,code=sm_80 -gencode=arch=compute_90a,code=sm_90a -gencode=arch=compute_110,code=sm_110"
            " -DKILN_GEMM_SM90A");
  EXPECT_EQ(codegen::cuda_arch_flags({"sm_90a"}), " -gencode=arch=compute_90a,code=sm_90a -DKILN_GEMM_SM90A");
  EXPECT_EQ(codegen::cuda_arch_flags({"sm_80", "sm_110"}), " -gencode=arch=compute_80,code=sm_80 -gencode=arch=compute_110,code=sm_110");
}

}  // namespace
}  // namespace kiln
