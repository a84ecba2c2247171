// Attention chains lowered to the fused kernel of kernels/gemm/attention.cuh (TemplateAttention):
// the exported form (MatMul, Mul, Softmax, MatMul, Transpose) and the opset 23 Attention op become
// one node whose reference loops compute what the plain lowering computes; near misses do not.
#include <gtest/gtest.h>

#include "../ops/TestGraph.h"
#include "LoweringCheck.h"
#include "FindTemplates.h"
#include "kiln/codegen/GraphFunctions.h"
#include "kiln/ir/IRPrinter.h"
#include "kiln/runtime/Interpreter.h"

namespace kiln {
namespace {

using namespace ir;
using test::attentions_in;
using test::templates_in;
using test::TestGraph;
using test::random_tensor;
using test::expect_same_results;

// softmax(q k^T * scale) v, then .transpose(1, 2), as PyTorch exports a ViT's attention (the scale
// an fp16 scalar input here: a factor the device supplies). `probs_out`: the probabilities are
// also a graph output.
Graph exported_attention(int64_t d, bool probs_out) {
  TestGraph t(17, false);
  const int q = t.input("q", DType::Float16, {Expr(2), Expr(3), Expr(7), Expr(d)});
  const int k = t.input("k", DType::Float16, {Expr(2), Expr(3), Expr(9), Expr(d)});
  const int v = t.input("v", DType::Float16, {Expr(2), Expr(3), Expr(9), Expr(d)});
  const int kt = t.node("kt", OpKind::Transpose, {k}, {{"perm", test::ints_attr({0, 1, 3, 2})}});
  const int scores = t.node("scores", OpKind::MatMul, {q, kt});
  const int scaled = t.node("scaled", OpKind::Mul, {scores, t.input("scale", DType::Float16, {})});
  const int probs = t.node("softmax", OpKind::Softmax, {scaled}, {{"axis", test::int_attr(-1)}});
  const int context = t.node("context", OpKind::MatMul, {probs, v});
  t.output(
      t.node("moved", OpKind::Transpose, {context}, {{"perm", test::ints_attr({0, 2, 1, 3})}}));
  if (probs_out) t.output(probs);
  return t.graph;
}

std::vector<HostTensor> attention_inputs(int64_t d) {
  return {random_tensor(DType::Float16, {2, 3, 7, d}, 1),
          random_tensor(DType::Float16, {2, 3, 9, d}, 2),
          random_tensor(DType::Float16, {2, 3, 9, d}, 3), random_tensor(DType::Float16, {}, 4)};
}

TEST(TemplateAttention, ExportedAttentionIsOneFusedCallStoringTheTransposedLayout) {
  const Graph g = exported_attention(64, false);
  const auto gpu = codegen::lower_graph(g, codegen::Target::Cuda, "attention");
  const auto found = attentions_in(gpu[0].func);
  ASSERT_EQ(found.size(), 1u) << to_string(gpu[0].func.body);
  EXPECT_TRUE(templates_in(gpu[0].func).empty()) << "neither product is a GEMM call of its own";
  EXPECT_EQ(gpu[0].func.stage_notes.size(), 1u)
      << "the softmax and the transpose are no kernels of their own";
  const TemplateAttention* a = found[0];
  EXPECT_EQ(a->head_dim, 64);
  EXPECT_EQ(to_string(a->seq_q), "7");
  EXPECT_EQ(to_string(a->seq_k), "9");
  ASSERT_EQ(a->batch_extents.size(), 2u);
  EXPECT_EQ(to_string(a->q.stride_mn), "64");
  EXPECT_EQ(to_string(a->q.stride_k), "1");
  EXPECT_EQ(to_string(a->k.stride_mn), "64") << "k^T read in place";
  EXPECT_EQ(to_string(a->k.stride_k), "1");
  EXPECT_EQ(to_string(a->v.batch_strides[1]), "576");
  EXPECT_FALSE(a->mask.has_value());
  EXPECT_EQ(a->scale, 1.0);
  ASSERT_TRUE(a->scale_expr.defined()) << "the scale input is read on the device";
  EXPECT_NE(to_string(a->scale_expr).find("scale"), std::string::npos) << to_string(a->scale_expr);
  // A short device factor is printed in the description (kiln inspect, the generated comment).
  EXPECT_NE(a->description.find("scale = 1.000000 x "), std::string::npos) << a->description;
  EXPECT_NE(a->reason.find("tensor cores"), std::string::npos) << a->reason;
  // The epilogue stores the transpose's layout [2, 7, 3, 64]: (b, i, h, d).
  EXPECT_NE(to_string(a->epilogue).find("moved"), std::string::npos) << to_string(a->epilogue);
  expect_same_results(g, attention_inputs(64), 1e-3);
}

// As PyTorch exports a ViT block's attention input: qkv = x W + b, reshaped to [B, S, 3, H, D],
// permuted to [3, B, H, S, D] and split by Gather with constant indices 0, 1, 2. The fused call
// reads q, k and v in place in the qkv GEMM's output (no Transpose or Gather kernels): the
// Reshape's unflattening is affine over the axes' ranges, and the Gathers' indices are literals.
TEST(TemplateAttention, ExportedQkvSplitIsReadInPlace) {
  TestGraph t(17, false);
  const int64_t heads = 2, d = 64, seq = 5;
  const int x = t.input("x", DType::Float16, {Expr(3), Expr(seq), Expr(heads * d)});
  const int w = t.input("w", DType::Float16, {Expr(heads * d), Expr(3 * heads * d)});
  const int qkv = t.node("qkv", OpKind::MatMul, {x, w});
  const int shape = t.ints("shape", {3, seq, 3, heads, d});
  const int split = t.node("split", OpKind::Reshape, {qkv, shape});
  const int moved = t.node("moved", OpKind::Transpose, {split}, {{"perm", test::ints_attr({2, 0, 3, 1, 4})}});
  int qkv_parts[3];
  for (int p = 0; p < 3; ++p) {
    const int index = t.constant("index" + std::to_string(p), test::tensor(DType::Int64, {}, {double(p)}));
    qkv_parts[p] = t.node("part" + std::to_string(p), OpKind::Gather, {moved, index}, {{"axis", test::int_attr(0)}});
  }
  const int kt = t.node("kt", OpKind::Transpose, {qkv_parts[1]}, {{"perm", test::ints_attr({0, 1, 3, 2})}});
  const int scores = t.node("scores", OpKind::MatMul, {qkv_parts[0], kt});
  const int probs = t.node("softmax", OpKind::Softmax, {scores}, {{"axis", test::int_attr(-1)}});
  t.output(t.node("context", OpKind::MatMul, {probs, qkv_parts[2]}));
  const auto gpu = codegen::lower_graph(t.graph, codegen::Target::Cuda, "qkv_split");
  const auto found = attentions_in(gpu[0].func);
  ASSERT_EQ(found.size(), 1u) << to_string(gpu[0].func.body);
  EXPECT_EQ(templates_in(gpu[0].func).size(), 1u) << "the qkv GEMM";
  EXPECT_EQ(gpu[0].func.stage_notes.size(), 2u) << "the GEMM and the attention, no copies:\n" << to_string(gpu[0].func.body);
  const TemplateAttention* a = found[0];
  EXPECT_EQ(a->q.buffer->name, a->v.buffer->name) << "q and v read the qkv buffer";
  EXPECT_EQ(to_string(a->q.stride_mn), "384") << "a token's row of qkv";
  EXPECT_EQ(to_string(a->k.offset), "128");
  EXPECT_EQ(to_string(a->v.offset), "256");
  EXPECT_EQ(to_string(a->q.batch_strides[1]), "64") << "a head's 64 columns";
  expect_same_results(t.graph,
                      {random_tensor(DType::Float16, {3, seq, heads * d}, 5),
                       random_tensor(DType::Float16, {heads * d, 3 * heads * d}, 6)},
                      1e-3);
}

TEST(TemplateAttention, HeadDimOtherThan64Or128RunsTheExactFallback) {
  const Graph g = exported_attention(40, false);
  const auto gpu = codegen::lower_graph(g, codegen::Target::Cuda, "attention40");
  const auto found = attentions_in(gpu[0].func);
  ASSERT_EQ(found.size(), 1u) << to_string(gpu[0].func.body);
  EXPECT_EQ(found[0]->head_dim, 40);
  EXPECT_NE(found[0]->reason.find("fp32 fallback kernel"), std::string::npos) << found[0]->reason;
  EXPECT_NE(gpu[0].func.stage_notes[0].find("not 40"), std::string::npos)
      << gpu[0].func.stage_notes[0];
}

TEST(TemplateAttention, ProbabilitiesReadElsewhereKeepTheUnfusedStages) {
  const Graph g = exported_attention(64, true);
  const auto gpu = codegen::lower_graph(g, codegen::Target::Cuda, "attention_probs");
  EXPECT_TRUE(attentions_in(gpu[0].func).empty()) << to_string(gpu[0].func.body);
  EXPECT_EQ(templates_in(gpu[0].func).size(), 2u) << "both products stay GEMM calls";
}

TEST(TemplateAttention, SoftmaxOfSomethingElseIsNotAttention) {
  // softmax(q k^T + q k^T) v: the logits add two reads of the scores, not scores and a mask.
  TestGraph t(17, false);
  const int q = t.input("q", DType::Float16, {Expr(2), Expr(7), Expr(64)});
  const int k = t.input("k", DType::Float16, {Expr(2), Expr(64), Expr(9)});
  const int v = t.input("v", DType::Float16, {Expr(2), Expr(9), Expr(64)});
  const int scores = t.node("scores", OpKind::MatMul, {q, k});
  const int doubled = t.node("doubled", OpKind::Add, {scores, scores});
  const int probs = t.node("softmax", OpKind::Softmax, {doubled}, {{"axis", test::int_attr(-1)}});
  t.output(t.node("context", OpKind::MatMul, {probs, v}));
  const auto gpu = codegen::lower_graph(t.graph, codegen::Target::Cuda, "not_attention");
  EXPECT_TRUE(attentions_in(gpu[0].func).empty()) << to_string(gpu[0].func.body);
}

// The opset 23 Attention op (4-D, no mask, no cache) reaches the same node, its constant scale
// 1/sqrt(D) folded into the problem.
TEST(TemplateAttention, Opset23AttentionIsOneFusedCall) {
  TestGraph t(23, false);
  const int q = t.input("q", DType::Float16, {Expr(2), Expr(3), Expr(7), Expr(64)});
  const int k = t.input("k", DType::Float16, {Expr(2), Expr(3), Expr(9), Expr(64)});
  const int v = t.input("v", DType::Float16, {Expr(2), Expr(3), Expr(9), Expr(64)});
  t.output(t.node("attention", OpKind::Attention, {q, k, v}));
  const auto gpu = codegen::lower_graph(t.graph, codegen::Target::Cuda, "attention23");
  const auto found = attentions_in(gpu[0].func);
  ASSERT_EQ(found.size(), 1u) << to_string(gpu[0].func.body);
  EXPECT_DOUBLE_EQ(found[0]->scale, 0.125);
  EXPECT_FALSE(found[0]->scale_expr.defined());
  EXPECT_EQ(gpu[0].func.stage_notes.size(), 1u) << "the output cast is in the epilogue";
  expect_same_results(t.graph,
                      {random_tensor(DType::Float16, {2, 3, 7, 64}, 5),
                       random_tensor(DType::Float16, {2, 3, 9, 64}, 6),
                       random_tensor(DType::Float16, {2, 3, 9, 64}, 7)},
                      1e-3);
}

// A causal Attention keeps the unfused stages (the bias is a select, not an additive mask).
TEST(TemplateAttention, CausalOpset23AttentionIsNotFused) {
  TestGraph t(23, false);
  const int q = t.input("q", DType::Float16, {Expr(1), Expr(2), Expr(5), Expr(64)});
  const int k = t.input("k", DType::Float16, {Expr(1), Expr(2), Expr(5), Expr(64)});
  const int v = t.input("v", DType::Float16, {Expr(1), Expr(2), Expr(5), Expr(64)});
  t.output(t.node("attention", OpKind::Attention, {q, k, v}, {{"is_causal", test::int_attr(1)}}));
  const auto gpu = codegen::lower_graph(t.graph, codegen::Target::Cuda, "causal23");
  EXPECT_TRUE(attentions_in(gpu[0].func).empty()) << to_string(gpu[0].func.body);
}

}  // namespace
}  // namespace kiln
