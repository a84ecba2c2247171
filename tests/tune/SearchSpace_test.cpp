#include "kiln/tune/SearchSpace.h"

#include <gtest/gtest.h>

#include "../ops/TestGraph.h"
#include "TuneTestModels.h"

namespace kiln::tune {
namespace {

TEST(SearchSpace, RowKernelHasRowKnobsAndLegalStartingPoints) {
  const SearchSpace s = search_space(test::only_kernel(test::softmax_graph(64, 4096, DType::Float16)), codegen::Target::Cuda);
  std::vector<std::string> names;
  for (const Knob& k : s.knobs) names.push_back(k.name);
  // float_intermediates: a float16 softmax's exp runs on the exp2 unit alone under it.
  EXPECT_EQ(names, (std::vector<std::string>{"vector_bytes", "row_threads", "row_cache_bytes", "float_intermediates"}));
  EXPECT_EQ(s.row_columns, 4096);
  EXPECT_EQ(s.illegal_reason(s.default_candidate()), "");
  ASSERT_FALSE(s.known_good().empty());
  for (const Candidate& c : s.known_good()) EXPECT_EQ(s.illegal_reason(c), "") << candidate_text(c);
  // The default candidate is the default schedule.
  const DefaultScheduleOptions o = schedule_options(s.default_candidate());
  EXPECT_EQ(o.row_threads, 0);
  EXPECT_EQ(o.vector_bytes, 16);
  EXPECT_EQ(o.row_cache_bytes, DefaultScheduleOptions().row_cache_bytes);
}

TEST(SearchSpace, RejectsPointsOutsideAndOverLimits) {
  const SearchSpace s = search_space(test::only_kernel(test::softmax_graph(64, 65536, DType::Float32)), codegen::Target::Cuda);
  Candidate c = s.default_candidate();
  c["row_threads"] = 96;
  EXPECT_EQ(s.illegal_reason(c), "not a point of the space");
  // 65536 floats over 1024 threads: 256 bytes (64 registers) of row per thread, cached under a
  // 512-byte limit, plus the kernel's own registers: more than 64 per thread at 1024 threads.
  c = s.default_candidate();
  c["row_threads"] = 1024;
  c["row_cache_bytes"] = 512;
  EXPECT_NE(s.illegal_reason(c).find("exceeds the registers of an SM"), std::string::npos) << s.illegal_reason(c);
}

TEST(SearchSpace, ColumnReductionSharedMemoryLimit) {
  const SearchSpace s = search_space(test::only_kernel(test::column_sum_graph(256, 1024, DType::Float32)), codegen::Target::Cuda);
  Candidate c = s.default_candidate();
  ASSERT_TRUE(c.count("column_row_threads")) << candidate_text(c);
  c["column_threads"] = 128;
  c["column_row_threads"] = 16;
  EXPECT_EQ(s.illegal_reason(c), "2048 threads per block (at most 1024)");
  c["column_threads"] = 32;
  EXPECT_EQ(s.illegal_reason(c), "");
}

TEST(SearchSpace, ContractionKernelHasTemplateKnobsThatReachItsSchedule) {
  test::TestGraph t(17, false);
  const int x = t.input("x", DType::Float16, {ir::var("tokens"), ir::Expr(2048)});
  const int w = t.input("w", DType::Float16, {ir::Expr(2048), ir::Expr(8192)});
  t.output(t.node("proj", OpKind::MatMul, {x, w}));
  const SearchSpace s = search_space(test::only_kernel(t.graph), codegen::Target::Cuda);
  ASSERT_TRUE(s.default_candidate().count("gemv_warps")) << candidate_text(s.default_candidate());
  ASSERT_TRUE(s.default_candidate().count("wgmma_wide_min_k")) << candidate_text(s.default_candidate());
  for (const Candidate& c : s.known_good()) EXPECT_EQ(s.illegal_reason(c), "") << candidate_text(c);
  auto template_of = [&](const Candidate& c) {
    const Schedule sched = default_gpu_schedule(s.kernel.inputs, s.kernel.outputs, schedule_options(c));
    for (const te::Tensor& tensor : te::topological_order(s.kernel.outputs, s.kernel.inputs)) {
      const StageSchedule* stage = sched.find(tensor.name());
      if (stage && stage->gemm_template) return *stage->gemm_template;
    }
    ADD_FAILURE() << "no contraction template in the schedule";
    return ir::GemmTemplate();
  };
  // The default point is the default schedule: 4 warps for N = 8192 > 4096, wide tile from K = 2048.
  EXPECT_EQ(template_of(s.default_candidate()).gemv_warps, 4);
  EXPECT_EQ(template_of(s.default_candidate()).wgmma_wide_min_k, 2048);
  Candidate c = s.default_candidate();
  c["gemv_warps"] = 16;
  c["wgmma_wide_min_k"] = 4096;
  EXPECT_EQ(template_of(c).gemv_warps, 16);
  EXPECT_EQ(template_of(c).wgmma_wide_min_k, 4096);
  // The SWAP_AB tiles (tokens on wgmma's N): on by default, off as a point of the space.
  ASSERT_TRUE(s.default_candidate().count("wgmma_swap")) << candidate_text(s.default_candidate());
  EXPECT_TRUE(template_of(s.default_candidate()).wgmma_swap);
  c["wgmma_swap"] = 0;
  EXPECT_FALSE(template_of(c).wgmma_swap);
  EXPECT_EQ(s.illegal_reason(c), "");
  c["gemv_warps"] = 12;
  EXPECT_EQ(s.illegal_reason(c), "not a point of the space");
}

// The dual tile knob exists where the kernel runs a dual product (a gated MLP's gate and up) and
// reaches the schedule's dual Hopper tile; a single contraction has no such knob.
TEST(SearchSpace, DualProductKernelHasTheDualTileKnob) {
  test::TestGraph t(17, false);
  const int x = t.input("x", DType::Float16, {ir::var("tokens"), ir::Expr(256)});
  const int wg = t.input("wg", DType::Float16, {ir::Expr(256), ir::Expr(512)});
  const int wu = t.input("wu", DType::Float16, {ir::Expr(256), ir::Expr(512)});
  const int gate = t.node("gate", OpKind::MatMul, {x, wg});
  const int up = t.node("up", OpKind::MatMul, {x, wu});
  t.output(t.node("prod", OpKind::Mul, {t.node("act", OpKind::Tanh, {gate}), up}));
  const SearchSpace dual = search_space(test::only_kernel(t.graph), codegen::Target::Cuda);
  ASSERT_TRUE(dual.default_candidate().count("wgmma_dual_tile"))
      << candidate_text(dual.default_candidate());
  auto dual_tile_of = [&](const Candidate& c) {
    const Schedule sched =
        default_gpu_schedule(dual.kernel.inputs, dual.kernel.outputs, schedule_options(c));
    for (const te::Tensor& tensor :
         te::topological_order(dual.kernel.outputs, dual.kernel.inputs)) {
      const StageSchedule* stage = sched.find(tensor.name());
      if (stage && stage->gemm_template) return stage->gemm_template->wgmma_dual_tile;
    }
    ADD_FAILURE() << "no contraction template in the schedule";
    return ir::GemmWgmmaTile();
  };
  Candidate c = dual.default_candidate();
  EXPECT_EQ(dual_tile_of(c).bm, 64);
  EXPECT_TRUE(dual_tile_of(c).pingpong);
  c["wgmma_dual_tile"] = 1;
  EXPECT_EQ(dual_tile_of(c).bm, 128);
  EXPECT_EQ(dual_tile_of(c).stages, 4);
  EXPECT_FALSE(dual_tile_of(c).dual_halves);
  c["wgmma_dual_tile"] = 2;
  EXPECT_TRUE(dual_tile_of(c).dual_halves);
  EXPECT_EQ(dual.illegal_reason(c), "");

  test::TestGraph single(17, false);
  const int xs = single.input("x", DType::Float16, {ir::var("tokens"), ir::Expr(256)});
  const int w = single.input("w", DType::Float16, {ir::Expr(256), ir::Expr(512)});
  single.output(single.node("proj", OpKind::MatMul, {xs, w}));
  const SearchSpace one = search_space(test::only_kernel(single.graph), codegen::Target::Cuda);
  EXPECT_FALSE(one.default_candidate().count("wgmma_dual_tile"))
      << candidate_text(one.default_candidate());
}

// A constant M takes one template path, so only that path's knobs are knobs of the space: at 16
// tokens the small-M kernel's warps and none of the Hopper tiles' (they would change no generated
// text); at 1000 tokens the Hopper knobs (and a dual product's tile) and not the small-M kernel's.
TEST(SearchSpace, ConstantTokensKeepOnlyTheirPathsKnobs) {
  auto space_for = [](int64_t tokens, bool dual) {
    test::TestGraph t(17, false);
    const int x = t.input("x", DType::Float16, {ir::Expr(tokens), ir::Expr(256)});
    const int wg = t.input("wg", DType::Float16, {ir::Expr(256), ir::Expr(512)});
    const int gate = t.node("gate", OpKind::MatMul, {x, wg});
    if (dual) {
      const int up = t.node("up", OpKind::MatMul, {x, t.input("wu", DType::Float16, {ir::Expr(256), ir::Expr(512)})});
      t.output(t.node("prod", OpKind::Mul, {t.node("act", OpKind::Tanh, {gate}), up}));
    } else {
      t.output(gate);
    }
    return search_space(test::only_kernel(t.graph), codegen::Target::Cuda).default_candidate();
  };
  const Candidate small = space_for(16, true);
  EXPECT_TRUE(small.count("gemv_warps")) << candidate_text(small);
  for (const char* k : {"wgmma_wide_min_k", "wgmma_swap", "wgmma_dual_tile"}) EXPECT_FALSE(small.count(k)) << k << ": " << candidate_text(small);
  const Candidate mid = space_for(100, false);  // the mma.sync tiles: no template knob
  for (const char* k : {"gemv_warps", "wgmma_wide_min_k", "wgmma_swap"}) EXPECT_FALSE(mid.count(k)) << k << ": " << candidate_text(mid);
  const Candidate large = space_for(1000, true);
  EXPECT_FALSE(large.count("gemv_warps")) << candidate_text(large);
  for (const char* k : {"wgmma_wide_min_k", "wgmma_swap", "wgmma_dual_tile"}) EXPECT_TRUE(large.count(k)) << k << ": " << candidate_text(large);
}

// A float16 elementwise chain fused into one kernel (erf(x * x) + x): each op rounds to float16
// and the next widens it again; float_intermediates is a knob there, and its value 1 reaches the
// schedule. A float32 chain has no such round trips: no knob.
TEST(SearchSpace, HalfChainHasTheFloatIntermediatesKnob) {
  for (DType d : {DType::Float16, DType::Float32}) {
    SCOPED_TRACE(dtype_name(d));
    test::TestGraph t(17, false);
    const int x = t.input("x", d, {ir::Expr(64), ir::Expr(256)});
    t.output(t.node("sum", OpKind::Add, {t.node("erf", OpKind::Erf, {t.node("sq", OpKind::Mul, {x, x})}), x}));
    const SearchSpace s = search_space(test::only_kernel(t.graph), codegen::Target::Cuda);
    const Candidate base = s.default_candidate();
    ASSERT_EQ(base.count("float_intermediates"), d == DType::Float16 ? 1u : 0u) << candidate_text(base);
    if (d != DType::Float16) continue;
    EXPECT_EQ(base.at("float_intermediates"), 0);
    EXPECT_FALSE(schedule_options(base).float_intermediates);
    Candidate relaxed = base;
    relaxed["float_intermediates"] = 1;
    EXPECT_EQ(s.illegal_reason(relaxed), "");
    EXPECT_TRUE(schedule_options(relaxed).float_intermediates);
    EXPECT_TRUE(default_gpu_schedule(s.kernel.inputs, s.kernel.outputs, schedule_options(relaxed)).float_intermediates);
    bool known = false;
    for (const Candidate& c : s.known_good()) known |= c.at("float_intermediates") == 1;
    EXPECT_TRUE(known);
  }
}

// Knobs that reach no code are dropped: a float16 Conv3x3 + BatchNormalization + Relu has its
// normalization and Relu in the convolution's epilogue, so kiln generates no kernel of its own and
// the elementwise knobs (vector width, threads per block) print the same module; float_intermediates
// (the epilogue's rounding) and conv_wgmma (16 channels, stride 1: the Hopper kernel may run) are
// left. A bare convolution of 3 channels (never the Hopper kernel) has nothing to tune.
TEST(SearchSpace, KnobsThatReachNoCodeAreDropped) {
  auto conv_model = [](bool epilogue, int64_t channels = 16) {
    test::TestGraph t(17, false);
    const DType h = DType::Float16;
    const int x = t.input("x", h, {ir::Expr(2), ir::Expr(channels), ir::Expr(12), ir::Expr(12)});
    const int w = t.input("w", h, {ir::Expr(32), ir::Expr(channels), ir::Expr(3), ir::Expr(3)});
    const int conv = t.node("conv", OpKind::Conv, {x, w}, {{"pads", test::ints_attr({1, 1, 1, 1})}});
    if (!epilogue) {
      t.output(conv);
      return t.graph;
    }
    const int bn = t.node("bn", OpKind::BatchNormalization,
                          {conv, t.input("scale", h, {ir::Expr(32)}), t.input("bias", h, {ir::Expr(32)}),
                           t.input("mean", h, {ir::Expr(32)}), t.input("var", h, {ir::Expr(32)})});
    t.output(t.node("relu", OpKind::Relu, {bn}));
    return t.graph;
  };
  const SearchSpace cnn = search_space(test::only_kernel(conv_model(true)), codegen::Target::Cuda, 2);
  std::vector<std::string> names;
  for (const Knob& k : cnn.knobs) names.push_back(k.name);
  EXPECT_EQ(names, (std::vector<std::string>{"conv_wgmma", "float_intermediates"}));
  for (const Candidate& c : cnn.known_good()) EXPECT_EQ(candidate_text(c), "conv_wgmma=1 float_intermediates=1");
  const SearchSpace bare = search_space(test::only_kernel(conv_model(false)), codegen::Target::Cuda, 2);
  ASSERT_EQ(bare.knobs.size(), 1u);
  EXPECT_EQ(bare.knobs[0].name, "conv_wgmma");
  EXPECT_TRUE(search_space(test::only_kernel(conv_model(false, 3)), codegen::Target::Cuda, 2).knobs.empty());
}

// conv_wgmma reaches the schedule: on, the convolution's call has the Hopper kernel's workspace
// (lowering sizes it); off, the patch, direct and gather kernels alone, no workspace.
TEST(SearchSpace, ConvWgmmaKnobReachesTheSchedule) {
  test::TestGraph t(17, false);
  const int x = t.input("x", DType::Float16, {ir::Expr(2), ir::Expr(16), ir::Expr(12), ir::Expr(12)});
  const int w = t.input("w", DType::Float16, {ir::Expr(32), ir::Expr(16), ir::Expr(3), ir::Expr(3)});
  t.output(t.node("conv", OpKind::Conv, {x, w}, {{"pads", test::ints_attr({1, 1, 1, 1})}}));
  const codegen::KernelDefinition kernel = test::only_kernel(t.graph);
  const SearchSpace s = search_space(kernel, codegen::Target::Cuda, 2);
  Candidate c = s.default_candidate();
  ASSERT_EQ(c.at("conv_wgmma"), 1);
  auto conv_template = [&](const Candidate& cand) {
    const Schedule sched = default_gpu_schedule(kernel.inputs, kernel.outputs, schedule_options(cand));
    for (const te::Tensor& out : te::topological_order(kernel.outputs, kernel.inputs)) {
      const StageSchedule* stage = sched.find(out.name());
      if (stage && stage->gemm_template) return *stage->gemm_template;
    }
    ADD_FAILURE() << "no template stage";
    return ir::GemmTemplate();
  };
  EXPECT_TRUE(conv_template(c).conv_wgmma);
  c["conv_wgmma"] = 0;
  EXPECT_FALSE(conv_template(c).conv_wgmma);
}

TEST(SearchSpace, CpuKnobsAreCompilerFlags) {
  const SearchSpace s = search_space(test::only_kernel(test::softmax_graph(4, 64, DType::Float32)), codegen::Target::Cpu);
  EXPECT_EQ(s.size(), 12);
  Candidate c = s.default_candidate();
  EXPECT_EQ(cpu_flags(c), (std::vector<std::string>{"-O2"}));
  c["opt_level"] = 3, c["native"] = 1, c["unroll"] = 1;
  EXPECT_EQ(cpu_flags(c), (std::vector<std::string>{"-O3", "-march=native", "-funroll-loops"}));
}

}  // namespace
}  // namespace kiln::tune
