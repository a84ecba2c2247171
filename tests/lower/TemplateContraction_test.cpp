// Contractions lowered to the templates of kernels/gemm/ (TemplateContraction): which stages are
// folded into the epilogue, when two contractions become one dual product, and that the node's
// reference loops (what the CPU backends run) compute what the plain lowering computes.
#include <gtest/gtest.h>

#include "../ops/TestGraph.h"
#include "LoweringCheck.h"
#include "kiln/codegen/GraphFunctions.h"
#include "kiln/ir/IRPrinter.h"
#include "FindTemplates.h"
#include "kiln/ir/IRVisitor.h"
#include "kiln/runtime/Interpreter.h"
#include "kiln/schedule/Defaults.h"

namespace kiln {
namespace {

using namespace ir;
using test::TestGraph;
using test::random_tensor;
using test::expect_same_results;

using test::templates_in;

// x [batch, seq, 24] @ w [24, 40] (+ bias, then tanh): the MatMul of a linear layer as PyTorch
// exports it, with its elementwise consumers.
TEST(TemplateContraction, MatMulWithBiasAndActivationIsOneTemplateCall) {
  TestGraph t(17, false);
  const int x = t.input("x", DType::Float16, {var("batch"), var("seq"), Expr(24)});
  const int w = t.input("w", DType::Float16, {Expr(24), Expr(40)});
  const int bias = t.input("bias", DType::Float16, {Expr(40)});
  const int mm = t.node("mm", OpKind::MatMul, {x, w});
  const int add = t.node("add", OpKind::Add, {mm, bias});
  t.output(t.node("act", OpKind::Tanh, {add}));
  const auto gpu = codegen::lower_graph(t.graph, codegen::Target::Cuda, "linear");
  const auto found = templates_in(gpu[0].func);
  ASSERT_EQ(found.size(), 1u) << to_string(gpu[0].func.body);
  const TemplateContraction* c = found[0];
  EXPECT_EQ(c->b.size(), 1u);
  EXPECT_EQ(to_string(c->m), "(batch * seq)") << to_string(gpu[0].func.body);
  EXPECT_EQ(to_string(c->n), "40");
  EXPECT_EQ(to_string(c->k), "24");
  EXPECT_EQ(to_string(c->a.stride_k), "1");
  EXPECT_EQ(to_string(c->a.stride_mn), "24");
  EXPECT_EQ(to_string(c->b[0].stride_k), "40");  // w is [K, N]: n contiguous
  EXPECT_EQ(to_string(c->b[0].stride_mn), "1");
  // One stage: the bias and tanh are in the epilogue, not kernels of their own.
  EXPECT_EQ(gpu[0].func.stage_notes.size(), 1u);
  expect_same_results(t.graph,
                      {random_tensor(DType::Float16, {2, 3, 24}, 1), random_tensor(DType::Float16, {24, 40}, 2),
                       random_tensor(DType::Float16, {40}, 3)},
                      0.0);
}

// A model exported with static shapes: x [1, 30, 24] (a batch axis of extent 1, which the op
// library reads at index 0 in the broadcast Adds), + bias, + the residual: still one call.
TEST(TemplateContraction, StaticBatchOfOneFoldsBiasAndResidual) {
  TestGraph t(17, false);
  const int x = t.input("x", DType::Float16, {Expr(1), Expr(30), Expr(24)});
  const int w = t.input("w", DType::Float16, {Expr(24), Expr(24)});
  const int bias = t.input("bias", DType::Float16, {Expr(24)});
  const int mm = t.node("mm", OpKind::MatMul, {x, w});
  const int add = t.node("add", OpKind::Add, {mm, bias});
  t.output(t.node("residual", OpKind::Add, {add, x}));
  const auto gpu = codegen::lower_graph(t.graph, codegen::Target::Cuda, "linear_static");
  ASSERT_EQ(templates_in(gpu[0].func).size(), 1u) << to_string(gpu[0].func.body);
  EXPECT_EQ(gpu[0].func.stage_notes.size(), 1u) << "bias and residual should be in the epilogue:\n"
                                                << to_string(gpu[0].func.body);
  expect_same_results(t.graph,
                      {random_tensor(DType::Float16, {1, 30, 24}, 11), random_tensor(DType::Float16, {24, 24}, 12),
                       random_tensor(DType::Float16, {24}, 13)},
                      0.0);
}

// The gated MLP of Gemma: gate and up read the same activation; act(gate) * up becomes one
// dual product, then the down projection and the residual add another call.
TEST(TemplateContraction, GateAndUpBecomeOneDualProduct) {
  TestGraph t(17, false);
  const int x = t.input("x", DType::BFloat16, {var("tokens"), Expr(32)});
  const int wg = t.input("w_gate", DType::BFloat16, {Expr(32), Expr(48)});
  const int wu = t.input("w_up", DType::BFloat16, {Expr(32), Expr(48)});
  const int wd = t.input("w_down", DType::BFloat16, {Expr(48), Expr(32)});
  const int gate = t.node("gate", OpKind::MatMul, {x, wg});
  const int up = t.node("up", OpKind::MatMul, {x, wu});
  // The tanh-GELU a PyTorch export writes reads the gate three times: x * 0.5 * (1 + tanh(...)).
  const int g3 = t.node("g3", OpKind::Mul, {gate, t.node("g2", OpKind::Mul, {gate, gate})});
  const int act = t.node("act", OpKind::Mul, {gate, t.node("th", OpKind::Tanh, {g3})});
  const int prod = t.node("prod", OpKind::Mul, {act, up});
  const int down = t.node("down", OpKind::MatMul, {prod, wd});
  t.output(t.node("residual", OpKind::Add, {down, x}));
  const auto gpu = codegen::lower_graph(t.graph, codegen::Target::Cuda, "mlp");
  const auto found = templates_in(gpu[0].func);
  ASSERT_EQ(found.size(), 2u) << to_string(gpu[0].func.body);
  EXPECT_EQ(found[0]->b.size(), 2u) << "gate and up should share one call:\n" << to_string(gpu[0].func.body);
  EXPECT_EQ(found[1]->b.size(), 1u);
  EXPECT_EQ(gpu[0].func.stage_notes.size(), 2u) << to_string(gpu[0].func.body);
  expect_same_results(t.graph,
                      {random_tensor(DType::BFloat16, {5, 32}, 4), random_tensor(DType::BFloat16, {32, 48}, 5),
                       random_tensor(DType::BFloat16, {32, 48}, 6), random_tensor(DType::BFloat16, {48, 32}, 7)},
                      0.0);
}

// Attention's products: batched over [batch, heads], the key transposed by a Transpose node
// (folded into B's strides: k contiguous), the scores scaled in the first one's epilogue. (No
// softmax between them here: the interpreter runs GPU-scheduled loops serially, which block
// all-reduces do not survive; conformance covers softmax.)
TEST(TemplateContraction, BatchedAttentionProductsReadTransposedOperandsInPlace) {
  TestGraph t(17, false);
  const int q = t.input("q", DType::Float16, {Expr(2), Expr(3), Expr(7), Expr(16)});
  const int k = t.input("k", DType::Float16, {Expr(2), Expr(3), Expr(9), Expr(16)});
  const int v = t.input("v", DType::Float16, {Expr(2), Expr(3), Expr(9), Expr(16)});
  const int kt = t.node("kt", OpKind::Transpose, {k}, {{"perm", test::ints_attr({0, 1, 3, 2})}});
  const int scores = t.node("scores", OpKind::MatMul, {q, kt});
  const int probs = t.node("scaled", OpKind::Mul, {scores, t.input("scale", DType::Float16, {})});
  t.output(t.node("context", OpKind::MatMul, {probs, v}));
  const auto gpu = codegen::lower_graph(t.graph, codegen::Target::Cuda, "attention");
  const auto found = templates_in(gpu[0].func);
  ASSERT_EQ(found.size(), 2u) << to_string(gpu[0].func.body);
  EXPECT_EQ(found[0]->batch_extents.size(), 2u);
  EXPECT_EQ(to_string(found[0]->b[0].stride_k), "1") << "k^T is read in place, k contiguous";
  EXPECT_EQ(to_string(found[0]->b[0].stride_mn), "16");
  expect_same_results(t.graph,
                      {random_tensor(DType::Float16, {2, 3, 7, 16}, 8), random_tensor(DType::Float16, {2, 3, 9, 16}, 9),
                       random_tensor(DType::Float16, {2, 3, 9, 16}, 10), random_tensor(DType::Float16, {}, 11)},
                      0.0);
}

// The attention output as a ViT exports it, (p @ v).transpose(1, 2).reshape(b, n, c), feeding the
// output projection: the reshape of a transpose is not an affine address, so it stays a stage
// (a copy) and the projection still runs the template on it.
TEST(TemplateContraction, ReshapeOfATransposeStaysAStageTheTemplateReads) {
  TestGraph t(17, false);
  const int p = t.input("p", DType::Float16, {Expr(2), Expr(3), Expr(5), Expr(7)});
  const int v = t.input("v", DType::Float16, {Expr(2), Expr(3), Expr(7), Expr(8)});
  const int w = t.input("w_proj", DType::Float16, {Expr(24), Expr(16)});
  const int context = t.node("context", OpKind::MatMul, {p, v});
  const int moved = t.node("moved", OpKind::Transpose, {context}, {{"perm", test::ints_attr({0, 2, 1, 3})}});
  const int merged = t.node("merged", OpKind::Reshape, {moved, t.ints("shape", {2, 5, 24})});
  t.output(t.node("proj", OpKind::MatMul, {merged, w}));
  const auto gpu = codegen::lower_graph(t.graph, codegen::Target::Cuda, "attention_out");
  const auto found = templates_in(gpu[0].func);
  ASSERT_EQ(found.size(), 2u) << to_string(gpu[0].func.body);
  EXPECT_EQ(to_string(found[1]->a.stride_k), "1") << to_string(gpu[0].func.body);
  EXPECT_EQ(to_string(found[1]->a.stride_mn), "24");
  // (The copy stage between them is vectorized, which the interpreter does not run: the values
  // are checked on the GPU, bench/contraction/edge_check.py.)
}

// q = qkv[which] with `which` a tensor (what an exporter writes for qkv[0]): a data-dependent
// address, which the host cannot compute, so the Gather stays a stage and the template reads it.
TEST(TemplateContraction, GatherByATensorValueStaysAStage) {
  TestGraph t(17, false);
  const int qkv = t.input("qkv", DType::Float16, {Expr(3), Expr(2), Expr(5), Expr(8)});
  const int which = t.input("which", DType::Int64, {});
  const int k = t.input("k", DType::Float16, {Expr(2), Expr(8), Expr(5)});
  const int q = t.node("q", OpKind::Gather, {qkv, which}, {{"axis", test::int_attr(0)}});
  t.output(t.node("scores", OpKind::MatMul, {q, k}));
  const auto gpu = codegen::lower_graph(t.graph, codegen::Target::Cuda, "gathered");
  const auto found = templates_in(gpu[0].func);
  ASSERT_EQ(found.size(), 1u) << to_string(gpu[0].func.body);
  EXPECT_EQ(found[0]->a.buffer->name, "q_out0") << to_string(gpu[0].func.body);
  EXPECT_EQ(to_string(found[0]->a.offset), "0");
}

// float32 MatMul stays exact: no template (those need float16/bfloat16 factors), the tiled path.
TEST(TemplateContraction, Float32MatMulKeepsTheTiledPath) {
  TestGraph t(17, false);
  const int x = t.input("x", DType::Float32, {Expr(8), Expr(16)});
  const int w = t.input("w", DType::Float32, {Expr(16), Expr(8)});
  t.output(t.node("mm", OpKind::MatMul, {x, w}));
  const auto gpu = codegen::lower_graph(t.graph, codegen::Target::Cuda, "f32");
  EXPECT_TRUE(templates_in(gpu[0].func).empty());
  EXPECT_NE(gpu[0].func.stage_notes.at(0).find("contraction tiled through shared memory"), std::string::npos)
      << gpu[0].func.stage_notes.at(0);
}

// With TF32 allowed (kiln compile --tf32), the same float32 MatMul runs the template (T = float).
TEST(TemplateContraction, Float32MatMulUsesTheTemplateWhenTf32IsAllowed) {
  TestGraph t(17, false);
  const int x = t.input("x", DType::Float32, {var("m"), Expr(16)});
  const int w = t.input("w", DType::Float32, {Expr(16), Expr(8)});
  t.output(t.node("mm", OpKind::MatMul, {x, w}));
  const auto kernels = codegen::kernel_definitions(t.graph, "tf32");
  ASSERT_EQ(kernels.size(), 1u);
  DefaultScheduleOptions options;
  options.allow_tf32 = true;
  const Schedule schedule = default_gpu_schedule(kernels[0].inputs, kernels[0].outputs, options);
  const codegen::GraphFunction f = codegen::lower_kernel(kernels[0], codegen::Target::Cuda, &schedule);
  const auto found = templates_in(f.func);
  ASSERT_EQ(found.size(), 1u) << to_string(f.func.body);
  EXPECT_TRUE(found[0]->config.tf32);
  EXPECT_EQ(found[0]->a.buffer->dtype, DType::Float32);
  EXPECT_NE(f.func.stage_notes.at(0).find("float32 factors in TF32 (allowed by the user)"), std::string::npos)
      << f.func.stage_notes.at(0);
}

}  // namespace
}  // namespace kiln
