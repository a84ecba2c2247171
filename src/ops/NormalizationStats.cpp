// Normalizations by statistics that Normalization.cpp does not hold: LRN (a window of squares
// across channels), MeanVarianceNormalization (mean and variance over chosen axes, the ONNX
// function's formula) and opset 23's RMSNormalization (x / sqrt(mean(x^2) + epsilon) * scale
// over the dims from `axis` on, computed in stash_type), LpNormalization and GroupNormalization.
// Float16/bfloat16 compute in float32.
#include "Families.h"
#include "IndexMath.h"
#include "ReduceStages.h"
#include "kiln/ops/Helpers.h"

namespace kiln::ops {
namespace {

using namespace ir;

te::Tensor output(const OpContext& ctx, const std::vector<Expr>& shape, const te::ComputeFn& fn) {
  return te::compute(ctx.output_name(0), shape, fn, ctx.node().describe());
}

// LRN: y = x / (bias + alpha / size * sum of x^2 over channels [c - floor((size-1)/2),
// c + ceil((size-1)/2)]) ^ beta.
std::vector<te::Tensor> build_lrn(OpContext& ctx) {
  const te::Tensor& x = ctx.input(0);
  check_dtype(ctx, x, "input 0", kFloatTypes);
  if (x.ndim() < 3) ctx.fail("input 0 {} must have rank 3 or more ([N, C, D1, ...])", shape_text(x.shape()));
  if (!ctx.node().has_attribute("size")) ctx.fail("attribute 'size' is required");
  const int64_t size = ctx.node().attr_int("size", 1);
  if (size < 1) ctx.fail("attribute 'size' is {}, expected a positive number", size);
  const double alpha = ctx.node().attr_float("alpha", 1e-4);
  const double beta = ctx.node().attr_float("beta", 0.75);
  const double bias = ctx.node().attr_float("bias", 1.0);
  const Type acc = accumulate_type(x.dtype());
  const int64_t before = (size - 1) / 2;
  const IterVar k = te::reduce_axis(Expr(size), ctx.stage_name("k"));
  const te::Tensor squares = te::compute(
      ctx.stage_name("square_sum"), x.shape(),
      [&](const std::vector<Expr>& i) {
        std::vector<Expr> in = i;
        const Expr c = i[1] - Expr(before) + k.var;
        in[1] = clamp(c, Expr(0), x.shape(1) - 1);
        const Expr v = cast(acc, x(in));
        return te::sum(v * v, {k}, c >= 0 && c < x.shape(1));
      },
      ctx.node().describe());
  return {output(ctx, x.shape(), [&](const std::vector<Expr>& i) {
    const Expr denom = call(Intrinsic::Pow, make_const(acc, bias) + make_const(acc, alpha / size) * squares(i),
                            make_const(acc, beta));
    return downcast(cast(acc, x(i)) / denom, x.dtype());
  })};
}

std::vector<int> distinct_axes(const OpContext& ctx, const std::vector<int64_t>& raw, int rank) {
  std::vector<int> axes;
  for (int64_t a : raw) {
    const int axis = normalize_axis(ctx, a, rank, "attribute 'axes'");
    if (std::find(axes.begin(), axes.end(), axis) != axes.end()) ctx.fail("axis {} is listed twice in 'axes'", a);
    axes.push_back(axis);
  }
  std::sort(axes.begin(), axes.end());
  return axes;
}

// MeanVarianceNormalization: (x - E[x]) / (sqrt(E[x^2] - E[x]^2) + 1e-9) over `axes`.
std::vector<te::Tensor> build_mvn(OpContext& ctx) {
  const te::Tensor& x = ctx.input(0);
  check_dtype(ctx, x, "input 0", kFloatTypes);
  const std::vector<int> axes = distinct_axes(ctx, ctx.node().attr_ints("axes", {0, 2, 3}), x.ndim());
  const Type acc = accumulate_type(x.dtype());
  auto value = [&](const std::vector<Expr>& i) { return cast(acc, x(i)); };
  const te::Tensor sum = reduce_stage(ctx, ctx.stage_name("sum"), x.shape(), axes, true, ReduceKind::Sum, value);
  const te::Tensor sum_sq = reduce_stage(ctx, ctx.stage_name("sum_sq"), x.shape(), axes, true, ReduceKind::Sum,
                                         [&](const std::vector<Expr>& i) { return value(i) * value(i); });
  const Expr count = cast(acc, reduced_count(x.shape(), axes));
  return {output(ctx, x.shape(), [&](const std::vector<Expr>& i) {
    const Expr mean = read_reduced(sum, i, axes) / count;
    const Expr variance = read_reduced(sum_sq, i, axes) / count - mean * mean;
    return downcast((value(i) - mean) / (call(Intrinsic::Sqrt, variance) + make_const(acc, 1e-9)), x.dtype());
  })};
}

// RMSNormalization (opset 23): normalized over every dim from `axis` on; scale broadcasts to them.
std::vector<te::Tensor> build_rms_norm(OpContext& ctx) {
  const te::Tensor& x = ctx.input(0);
  const te::Tensor& scale = ctx.input(1);
  check_dtype(ctx, x, "input 0", kFloatTypes);
  check_dtype(ctx, scale, "input 1 (scale)", kFloatTypes);
  const int rank = x.ndim();
  const int axis = normalize_axis(ctx, ctx.node().attr_int("axis", -1), rank, "attribute 'axis'");
  if (scale.ndim() > rank - axis) {
    ctx.fail("scale {} must broadcast to the normalized shape (the last {} dims of {})", shape_text(scale.shape()),
             rank - axis, shape_text(x.shape()));
  }
  const int64_t stash = ctx.node().attr_int("stash_type", 1);
  if (stash != 1 && stash != 11) ctx.unsupported("stash_type {} is not supported (1: float, 11: double)", stash);
  const Type acc(stash == 11 ? DType::Float64 : DType::Float32);
  const double epsilon = ctx.node().attr_float("epsilon", 1e-5);
  std::vector<int> axes;
  for (int d = axis; d < rank; ++d) axes.push_back(d);
  auto value = [&](const std::vector<Expr>& i) { return cast(acc, x(i)); };
  const te::Tensor sum_sq = reduce_stage(ctx, ctx.stage_name("sum_sq"), x.shape(), axes, true, ReduceKind::Sum,
                                         [&](const std::vector<Expr>& i) { return value(i) * value(i); });
  const Expr count = cast(acc, reduced_count(x.shape(), axes));
  return {output(ctx, x.shape(), [&](const std::vector<Expr>& i) {
    const Expr inv = make_one(acc) / call(Intrinsic::Sqrt, read_reduced(sum_sq, i, axes) / count + make_const(acc, epsilon));
    const Expr normalized = cast(x.dtype(), value(i) * inv);  // the reference stores it in x's type first
    return cast(Type(x.dtype()), upcast(normalized) * upcast(broadcast_read(scale, i)));
  })};
}

// LpNormalization: x / ||x||_p along `axis` (p = 1 or 2); 0 where the norm is 0.
std::vector<te::Tensor> build_lp_norm(OpContext& ctx) {
  const te::Tensor& x = ctx.input(0);
  check_dtype(ctx, x, "input 0", kFloatTypes);
  const int axis =
      normalize_axis(ctx, ctx.node().attr_int("axis", -1), x.ndim(), "attribute 'axis'");
  const int64_t p = ctx.node().attr_int("p", 2);
  if (p != 1 && p != 2) ctx.fail("attribute 'p' is {}; expected 1 or 2", p);
  const Type acc = accumulate_type(x.dtype());
  auto value = [&](const std::vector<Expr>& i) { return cast(acc, x(i)); };
  const std::vector<int> axes = {axis};
  const te::Tensor norm =
      reduce_stage(ctx, ctx.stage_name("norm"), x.shape(), axes, true, ReduceKind::Sum,
                   [&](const std::vector<Expr>& i) {
                     return p == 1 ? call(Intrinsic::Abs, value(i)) : value(i) * value(i);
                   });
  return {output(ctx, x.shape(), [&](const std::vector<Expr>& i) {
    const Expr sum = read_reduced(norm, i, axes);
    const Expr n = p == 1 ? sum : call(Intrinsic::Sqrt, sum);
    const Expr zero = make_zero(acc);
    return downcast(select(n == zero, zero, value(i) / n), x.dtype());
  })};
}

// GroupNormalization: mean and variance per (instance, group of C / num_groups channels), in
// stash_type; then scale and bias per channel (opset 21) or per group (opset 18).
std::vector<te::Tensor> build_group_norm(OpContext& ctx) {
  const te::Tensor& x = ctx.input(0);
  const te::Tensor& scale = ctx.input(1);
  const te::Tensor& bias = ctx.input(2);
  check_dtype(ctx, x, "input 0 (X)", kFloatTypes);
  if (x.ndim() < 3)
    ctx.fail("input X {} must have rank 3 or more (N, C, spatial...)", shape_text(x.shape()));
  if (!ctx.node().has_attribute("num_groups")) ctx.fail("attribute 'num_groups' is required");
  const int64_t groups = ctx.node().attr_int("num_groups", 1);
  auto channels = as_const_int(x.shape(1));
  if (!channels) ctx.unsupported("a symbolic channel count ({})", shape_text(x.shape()));
  if (groups < 1 || *channels % groups != 0) {
    ctx.fail("attribute 'num_groups' is {}; expected a divisor of the {} channels", groups,
             *channels);
  }
  const bool per_group = ctx.opset() < 21;
  const int64_t params = per_group ? groups : *channels;
  for (const auto& [t, what] : {std::pair{&scale, "scale"}, std::pair{&bias, "bias"}}) {
    auto n = t->ndim() == 1 ? as_const_int(t->shape(0)) : std::nullopt;
    if (!n || *n != params) {
      ctx.fail("{} {} must have shape [{}] (one value per {})", what, shape_text(t->shape()),
               params, per_group ? "group" : "channel");
    }
  }
  const int64_t stash = ctx.node().attr_int("stash_type", 1);
  if (stash != 1 && stash != 11)
    ctx.unsupported("stash_type {} is not supported (1: float, 11: double)", stash);
  const Type acc(x.dtype() == DType::Float64 || stash == 11 ? DType::Float64 : DType::Float32);
  const double epsilon = ctx.node().attr_float("epsilon", 1e-5);
  const int64_t group_size = *channels / groups;
  // [N, G, group_size, spatial...]: the channel axis split so that a group is a set of axes.
  std::vector<Expr> grouped = {x.shape(0), Expr(groups), Expr(group_size)};
  grouped.insert(grouped.end(), x.shape().begin() + 2, x.shape().end());
  auto value = [&](const std::vector<Expr>& g) {
    std::vector<Expr> i = {g[0], g[1] * Expr(group_size) + g[2]};
    i.insert(i.end(), g.begin() + 3, g.end());
    return cast(acc, x(i));
  };
  std::vector<int> axes;
  for (int d = 2; d < static_cast<int>(grouped.size()); ++d) axes.push_back(d);
  const Expr count = cast(acc, reduced_count(grouped, axes));
  const te::Tensor sum =
      reduce_stage(ctx, ctx.stage_name("sum"), grouped, axes, true, ReduceKind::Sum, value);
  auto centered = [&](const std::vector<Expr>& g) {
    return value(g) - read_reduced(sum, g, axes) / count;
  };
  const te::Tensor sum_sq =
      reduce_stage(ctx, ctx.stage_name("sum_sq"), grouped, axes, true, ReduceKind::Sum,
                   [&](const std::vector<Expr>& g) { return centered(g) * centered(g); });
  return {output(ctx, x.shape(), [&](const std::vector<Expr>& i) {
    std::vector<Expr> g = {i[0], floor_div(i[1], Expr(group_size)),
                           floor_mod(i[1], Expr(group_size))};
    g.insert(g.end(), i.begin() + 2, i.end());
    const Expr inv = make_one(acc) / call(Intrinsic::Sqrt, read_reduced(sum_sq, g, axes) / count +
                                                               make_const(acc, epsilon));
    const Expr normalized =
        upcast(cast(x.dtype(), centered(g) * inv));  // stored in X's type, as the reference
    const Expr p = per_group ? g[1] : i[1];
    return downcast(normalized * upcast(scale({p})) + upcast(bias({p})), x.dtype());
  })};
}

}  // namespace

void register_normalization_stats(OpTable& table) {
  table.add(OpKind::LRN, build_lrn);
  table.add(OpKind::MeanVarianceNormalization, build_mvn);
  table.add(OpKind::RMSNormalization, build_rms_norm);
  table.add(OpKind::LpNormalization, build_lp_norm);
  table.add(OpKind::GroupNormalization, build_group_norm);
}

}  // namespace kiln::ops
