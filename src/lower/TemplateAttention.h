#pragma once
// Lowering of an unfused attention to the fused kernel of kernels/gemm/attention.cuh (a
// TemplateAttention node).
//
// Planning (plan_template_attention) sees the stages after inlining and matches the chain that
// both an exported attention subgraph (MatMul, Mul/Div, Add mask, Softmax, MatMul) and the
// opset 23 Attention op (ops/Attention.cpp) lower to:
//   scores[b.., i, j]  = sum_e Q[b.., i, e] * K[b.., j, e]   (a contraction)
//   max[b.., i]        = max_j L(b.., i, j)                   (keepdims or not)
//   sum[b.., i]        = sum_j exp(L(b.., i, j) - max[b.., i])
//   p[b.., i, j]       = exp(L - max) / sum                   (a stage, or inlined into context)
//   context[b.., i, d] = sum_j p[b.., i, j] * V[b.., j, d]
// where the logits L are scores times or divided by constants and at most one factor free of the
// axes (an exported scale read from an initializer or computed from a Shape: the epilogue functor
// evaluates it on the device), casts allowed around each, plus optionally a float16/bfloat16 mask
// read at an affine address; the same L in max, sum and p; and each of scores, max, sum and p read
// only by the stages of the chain (and no function output). Q, K, V must be
// float16/bfloat16 reads at affine addresses with one head dim D (a constant), and the scores'
// schedule must have a gemm_template (the GPU schedules; CPU schedules never fuse). Stages that
// only cast or permute the context (each the sole reader of the previous one, reading it once at
// a permutation of its own axes, not a function output) are folded into the epilogue, which then
// stores at the last one's layout: an exported block's Transpose after P V disappears.
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "TemplateContraction.h"
#include "kiln/ir/IR.h"
#include "kiln/schedule/Schedule.h"
#include "kiln/te/Tensor.h"

namespace kiln {

// One matched attention: its stages in order (the written one last).
struct AttentionGroup {
  std::vector<LoweringStage> stages;    // scores, max, sum, [p], context, folded consumers...
  size_t context = 0;                   // index of the context stage in `stages`
  std::optional<size_t> probabilities;  // index of p when it is a stage of its own
  // What the kernel reads (ir::TemplateAttention's fields).
  std::vector<ir::Expr> batch_extents;
  ir::Expr seq_q, seq_k;
  int64_t head_dim = 0;
  ir::ContractionOperand q, k, v;
  std::optional<ir::ContractionOperand> mask;
  double scale = 1.0;
  ir::Expr device_scale;  // float32, free of the axes: a factor of the scale only the device knows
  const LoweringStage& written() const { return stages.back(); }
};

std::vector<AttentionGroup> plan_template_attention(
    const std::vector<LoweringStage>& stages, const std::set<const te::TensorNode*>& outputs,
    const std::map<const te::TensorNode*, ir::Buffer>& buffers, const Schedule& schedule);

// The TemplateAttention of `group`; `reference` is the group's stages as plain loops, in order.
ir::Stmt template_attention(const AttentionGroup& group,
                            const std::map<const te::TensorNode*, ir::Buffer>& buffers,
                            ir::Stmt reference);

}  // namespace kiln
