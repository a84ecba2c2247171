// Losses: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (its log-softmax over the class
// axis 1, then the same loss). Element (n, d...) of the loss is -input[n, target, d...] times the
// target's weight (weight[target], or 1), and 0 where target == ignore_index; 'sum' adds them,
// 'mean' divides the sum by the sum of the weights (the count when unweighted), as the ONNX
// reference. Float16/bfloat16 accumulate in float32.
#include "Families.h"
#include "IndexMath.h"
#include "ReduceStages.h"
#include "kiln/ops/Helpers.h"

namespace kiln::ops {
namespace {

using namespace ir;

enum class LossReduction { None, Sum, Mean };

LossReduction parse_reduction(const OpContext& ctx) {
  const std::string r = ctx.node().attr_string("reduction", "mean");
  if (r == "none") return LossReduction::None;
  if (r == "sum") return LossReduction::Sum;
  if (r == "mean") return LossReduction::Mean;
  ctx.fail("attribute 'reduction' is '{}', expected none, sum or mean", r);
}

using Reader = std::function<Expr(const std::vector<Expr>& index)>;  // the (log-)probabilities, upcast

// The loss of `log_prob` (shape of `scores`, read through `read`) against `target`.
te::Tensor likelihood_loss(const OpContext& ctx, const te::Tensor& scores, const Reader& read) {
  const te::Tensor& target = ctx.input(1);
  check_dtype(ctx, scores, "input 0", kFloatTypes);
  check_dtype(ctx, target, "input 1 (target)", {DType::Int32, DType::Int64});
  const int rank = scores.ndim();
  if (rank < 2) ctx.fail("input 0 {} must have rank 2 or more ([N, C, d1, ...])", shape_text(scores.shape()));
  if (target.ndim() != rank - 1) {
    ctx.fail("target {} must have rank {} ([N, d1, ...]) for input {}", shape_text(target.shape()), rank - 1,
             shape_text(scores.shape()));
  }
  te::Tensor weight;
  if (ctx.has_input(2)) {
    weight = ctx.input(2);
    if (weight.ndim() != 1) ctx.fail("weight {} must have rank 1 ([C])", shape_text(weight.shape()));
    if (weight.dtype() != scores.dtype()) {
      ctx.fail("weight has dtype {} but input 0 has dtype {}", dtype_name(weight.dtype()), dtype_name(scores.dtype()));
    }
  }
  const bool has_ignore = ctx.node().has_attribute("ignore_index");
  const int64_t ignore = ctx.node().attr_int("ignore_index", 0);
  const LossReduction reduction = parse_reduction(ctx);
  const Type acc = accumulate_type(scores.dtype());
  const Expr classes = scores.shape(1);
  auto class_of = [&](const std::vector<Expr>& t) { return clamp(cast(kIndexType, target(t)), Expr(0), classes - 1); };
  auto weight_of = [&](const std::vector<Expr>& t) {
    Expr w = weight.defined() ? upcast(weight({class_of(t)})) : make_one(acc);
    w = cast(acc, w);
    if (has_ignore) w = select(cast(kIndexType, target(t)) == Expr(ignore), make_zero(acc), w);
    return w;
  };
  auto loss_of = [&](const std::vector<Expr>& t) {
    std::vector<Expr> in = {t[0], class_of(t)};
    in.insert(in.end(), t.begin() + 1, t.end());
    return -cast(acc, read(in)) * weight_of(t);
  };
  const DType dtype = scores.dtype();
  if (reduction == LossReduction::None) {
    return te::compute(
        ctx.output_name(0), target.shape(), [&](const std::vector<Expr>& t) { return cast(Type(dtype), loss_of(t)); },
        ctx.node().describe());
  }
  std::vector<int> axes;
  for (int d = 0; d < target.ndim(); ++d) axes.push_back(d);
  const te::Tensor total = reduce_stage(ctx, ctx.stage_name("sum"), target.shape(), axes, false, ReduceKind::Sum, loss_of);
  te::Tensor weights;
  if (reduction == LossReduction::Mean) {
    weights = reduce_stage(ctx, ctx.stage_name("weights"), target.shape(), axes, false, ReduceKind::Sum, weight_of);
  }
  return te::compute(
      ctx.output_name(0), {},
      [&](const std::vector<Expr>&) {
        Expr v = total({});
        if (weights.defined()) v = v / weights({});
        return cast(Type(dtype), v);
      },
      ctx.node().describe());
}

std::vector<te::Tensor> negative_log_likelihood(OpContext& ctx) {
  const te::Tensor& x = ctx.input(0);
  return {likelihood_loss(ctx, x, [&](const std::vector<Expr>& i) { return upcast(x(i)); })};
}

std::vector<te::Tensor> softmax_cross_entropy(OpContext& ctx) {
  const te::Tensor& x = ctx.input(0);
  check_dtype(ctx, x, "input 0", kFloatTypes);
  if (x.ndim() < 2) ctx.fail("input 0 {} must have rank 2 or more ([N, C, d1, ...])", shape_text(x.shape()));
  const std::vector<int> axes = {1};
  const Type acc = accumulate_type(x.dtype());
  auto value = [&](const std::vector<Expr>& i) { return cast(acc, x(i)); };
  const te::Tensor row_max = reduce_stage(ctx, ctx.stage_name("max"), x.shape(), axes, true, ReduceKind::Max, value);
  const te::Tensor row_sum = reduce_stage(ctx, ctx.stage_name("sum_exp"), x.shape(), axes, true, ReduceKind::Sum,
                                          [&](const std::vector<Expr>& i) {
                                            return call(Intrinsic::Exp, value(i) - read_reduced(row_max, i, axes));
                                          });
  const te::Tensor log_prob = te::compute(
      ctx.stage_name("log_prob"), x.shape(),
      [&](const std::vector<Expr>& i) {
        return value(i) - read_reduced(row_max, i, axes) - call(Intrinsic::Log, read_reduced(row_sum, i, axes));
      },
      ctx.node().describe());
  std::vector<te::Tensor> out = {likelihood_loss(ctx, x, [&](const std::vector<Expr>& i) { return log_prob(i); })};
  if (ctx.node().outputs.size() > 1 && ctx.node().outputs[1] >= 0) {
    out.push_back(te::compute(
        ctx.output_name(1), x.shape(), [&](const std::vector<Expr>& i) { return cast(Type(x.dtype()), log_prob(i)); },
        ctx.node().describe()));
  }
  return out;
}

}  // namespace

void register_losses(OpTable& table) {
  table.add(OpKind::NegativeLogLikelihoodLoss, negative_log_likelihood);
  table.add(OpKind::SoftmaxCrossEntropyLoss, softmax_cross_entropy);
}

}  // namespace kiln::ops
