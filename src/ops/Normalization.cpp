// Normalizations, each written as row stages (row max, row sums, then an elementwise normalize)
// so that a GPU schedule can fuse them into one row kernel. Statistics are computed in float32
// for float16/bfloat16 (in the stash type for LayerNormalization).
#include <cmath>
#include <optional>
#include <utility>

#include "Families.h"
#include "ReduceStages.h"

namespace kiln::ops {
namespace {

using namespace ir;

std::vector<int> axes_from(int first, int rank) {
  std::vector<int> out;
  for (int d = first; d < rank; ++d) out.push_back(d);
  return out;
}

// Softmax, LogSoftmax and Hardmax work on the rows of a 2-D view coerced at `axis` before opset 13
// (every dim from `axis` on), and along `axis` alone from 13 on.
std::vector<int> softmax_axes(const OpContext& ctx, int rank) {
  const bool coerced = ctx.opset() < 13;
  const int axis = normalize_axis(ctx, ctx.node().attr_int("axis", coerced ? 1 : -1), rank, "attribute 'axis'");
  return coerced ? axes_from(axis, rank) : std::vector<int>{axis};
}

te::Tensor output(const OpContext& ctx, int k, const std::vector<Expr>& shape, const te::ComputeFn& fn) {
  return te::compute(ctx.output_name(k), shape, fn, ctx.node().describe());
}

template <bool Log>
std::vector<te::Tensor> build_softmax(OpContext& ctx) {
  const te::Tensor& x = ctx.input(0);
  check_dtype(ctx, x, "input 0", kFloatTypes);
  const std::vector<int> axes = softmax_axes(ctx, x.ndim());
  auto value = [&](const std::vector<Expr>& i) { return upcast(x(i)); };
  const te::Tensor row_max = reduce_stage(ctx, ctx.stage_name("max"), x.shape(), axes, true, ReduceKind::Max, value);
  auto shifted = [&](const std::vector<Expr>& i) { return value(i) - read_reduced(row_max, i, axes); };
  const te::Tensor row_sum = reduce_stage(ctx, ctx.stage_name("sum_exp"), x.shape(), axes, true, ReduceKind::Sum,
                                          [&](const std::vector<Expr>& i) { return call(Intrinsic::Exp, shifted(i)); });
  return {output(ctx, 0, x.shape(), [&](const std::vector<Expr>& i) {
    const Expr sum = read_reduced(row_sum, i, axes);
    const Expr y = Log ? shifted(i) - call(Intrinsic::Log, sum) : call(Intrinsic::Exp, shifted(i)) / sum;
    return downcast(y, x.dtype());
  })};
}

// Hardmax: 1 at the first position of each row's max, 0 elsewhere.
std::vector<te::Tensor> build_hardmax(OpContext& ctx) {
  const te::Tensor& x = ctx.input(0);
  check_dtype(ctx, x, "input 0", kFloatTypes);
  const std::vector<int> axes = softmax_axes(ctx, x.ndim());
  auto value = [&](const std::vector<Expr>& i) { return upcast(x(i)); };
  const te::Tensor row_max = reduce_stage(ctx, ctx.stage_name("max"), x.shape(), axes, true, ReduceKind::Max, value);
  const te::Tensor first = reduce_stage(
      ctx, ctx.stage_name("argmax"), x.shape(), axes, true, ReduceKind::Min,
      [&](const std::vector<Expr>& i) { return flat_position(x.shape(), i, axes); },
      [&](const std::vector<Expr>& i) { return value(i) == read_reduced(row_max, i, axes); });
  return {output(ctx, 0, x.shape(), [&](const std::vector<Expr>& i) {
    const Type t(x.dtype());
    return select(flat_position(x.shape(), i, axes) == read_reduced(first, i, axes), make_one(t), make_zero(t));
  })};
}

// Mean and 1/sqrt(variance + epsilon) over `axes`, as keepdims stages in type `acc`.
struct Moments {
  te::Tensor mean, inv_std;
};

Moments moments(const OpContext& ctx, const te::Tensor& x, const std::vector<int>& axes, Type acc, double epsilon) {
  auto value = [&](const std::vector<Expr>& i) { return cast(acc, x(i)); };
  const Expr count = cast(acc, reduced_count(x.shape(), axes));
  const te::Tensor sum = reduce_stage(ctx, ctx.stage_name("sum"), x.shape(), axes, true, ReduceKind::Sum, value);
  const std::vector<Expr>& stat_shape = sum.shape();
  Moments m;
  m.mean = te::compute(
      ctx.stage_name("mean"), stat_shape, [&](const std::vector<Expr>& i) { return sum(i) / count; },
      ctx.node().describe());
  const te::Tensor sq = reduce_stage(ctx, ctx.stage_name("sum_sq_dev"), x.shape(), axes, true, ReduceKind::Sum,
                                     [&](const std::vector<Expr>& i) {
                                       const Expr d = value(i) - read_reduced(m.mean, i, axes);
                                       return d * d;
                                     });
  m.inv_std = te::compute(
      ctx.stage_name("inv_std"), stat_shape,
      [&](const std::vector<Expr>& i) {
        return make_one(acc) / call(Intrinsic::Sqrt, sq(i) / count + make_const(acc, epsilon));
      },
      ctx.node().describe());
  return m;
}

bool wants_output(const OpContext& ctx, int k) {
  const Node& node = ctx.node();
  return k < static_cast<int>(node.outputs.size()) && node.outputs[k] >= 0;
}

// LayerNormalization: normalizes over every dim from `axis` on; Scale and B broadcast to those
// dims. The optional Mean and InvStdDev outputs have the input's shape with those dims as 1.
std::vector<te::Tensor> build_layer_norm(OpContext& ctx) {
  const te::Tensor& x = ctx.input(0);
  const te::Tensor& scale = ctx.input(1);
  const te::Tensor bias = ctx.has_input(2) ? ctx.input(2) : te::Tensor();
  check_dtype(ctx, x, "input 0", kFloatTypes);
  check_same_dtype(ctx, {x, scale, bias});
  const int axis = normalize_axis(ctx, ctx.node().attr_int("axis", -1), x.ndim(), "attribute 'axis'");
  const std::vector<int> axes = axes_from(axis, x.ndim());
  for (const te::Tensor& p : {scale, bias}) {
    if (p.defined() && p.ndim() > x.ndim() - axis) {
      ctx.fail("Scale and B must broadcast to the normalized shape (the last {} dims), but one has rank {}",
               x.ndim() - axis, p.ndim());
    }
  }
  const int64_t stash = ctx.node().attr_int("stash_type", 1);
  if (stash != 1 && stash != 11) ctx.unsupported("stash_type {} is not supported (1: float, 11: double)", stash);
  const Type acc(stash == 11 ? DType::Float64 : DType::Float32);
  const Moments m = moments(ctx, x, axes, acc, ctx.node().attr_float("epsilon", 1e-5));
  std::vector<te::Tensor> out = {output(ctx, 0, x.shape(), [&](const std::vector<Expr>& i) {
    const Expr normalized = (cast(acc, x(i)) - read_reduced(m.mean, i, axes)) * read_reduced(m.inv_std, i, axes);
    Expr y = normalized * cast(acc, broadcast_read(scale, i));
    if (bias.defined()) y = y + cast(acc, broadcast_read(bias, i));
    return downcast(y, x.dtype());
  })};
  const std::vector<Expr>& stat_shape = m.mean.shape();
  auto copy_of = [&](const te::Tensor& t) { return [&t](const std::vector<Expr>& i) { return t(i); }; };
  out.push_back(wants_output(ctx, 1) ? output(ctx, 1, stat_shape, copy_of(m.mean)) : te::Tensor());
  out.push_back(wants_output(ctx, 2) ? output(ctx, 2, stat_shape, copy_of(m.inv_std)) : te::Tensor());
  return out;
}

// A per-channel parameter (shape [C]) read at channel `c`, in type `t`.
Expr channel_param(const OpContext& ctx, const te::Tensor& p, const char* what, const Expr& channels, const Expr& c,
                   Type t) {
  check_dtype(ctx, p, what, kFloatTypes);
  if (p.ndim() != 1) ctx.fail("{} must have shape [C] (rank 1), got rank {}", what, p.ndim());
  auto n = as_const_int(p.shape(0)), want = as_const_int(channels);
  if (n && want && *n != *want) ctx.fail("{} has {} elements but the input has {} channels", what, *n, *want);
  return cast(t, p({c}));
}

// Inference BatchNormalization with scale, B, mean and var known when compiling, as y = x * s' + b'
// with s' = scale / sqrt(var + epsilon) and b' = B - mean * s' (computed in double, stored as the
// float32 accumulation type: two constants of the node). Not folded: unknown parameters, another
// accumulation type, or a channel whose var + epsilon is not positive or whose s' or b' is not
// finite (the unfolded formula keeps its NaN/infinity behaviour there).
std::optional<std::pair<te::Tensor, te::Tensor>> fold_batch_norm(OpContext& ctx, const te::Tensor& x,
                                                                 double epsilon, const Type& acc) {
  if (acc.dtype != DType::Float32) return std::nullopt;
  for (int k = 1; k <= 4; ++k)
    if (!ctx.is_known(k)) return std::nullopt;
  const auto channels = as_const_int(x.shape(1));
  if (!channels) return std::nullopt;
  std::vector<std::vector<double>> v;
  for (int k = 1; k <= 4; ++k) {
    for (const Expr& e : ctx.known_values(k, "BatchNormalization parameter"))
      if (!as_const_float(e) && !as_const_int(e)) return std::nullopt;  // an expression of symbols
    v.push_back(ctx.constant_floats(k, "BatchNormalization parameter"));
    if (static_cast<int64_t>(v.back().size()) != *channels) return std::nullopt;
  }
  HostTensor scale(DType::Float32, {*channels}), shift(DType::Float32, {*channels});
  for (int64_t c = 0; c < *channels; ++c) {
    const double var = v[3][c] + epsilon;
    if (!(var > 0)) return std::nullopt;
    const double s = v[0][c] / std::sqrt(var), b = v[1][c] - v[2][c] * s;
    if (!std::isfinite(s) || !std::isfinite(b)) return std::nullopt;
    scale.set_double(c, s);
    shift.set_double(c, b);
  }
  const std::string name = ctx.output_name(0);
  te::Tensor s = te::placeholder(name + "_bn_scale", DType::Float32, {Expr(*channels)});
  te::Tensor b = te::placeholder(name + "_bn_shift", DType::Float32, {Expr(*channels)});
  ctx.add_constant(s, std::move(scale));
  ctx.add_constant(b, std::move(shift));
  return std::make_pair(s, b);
}

// BatchNormalization: y = (x - mean) / sqrt(var + epsilon) * scale + B, per channel (dim 1). At
// inference mean and var are inputs; in training mode (opset 14+, attribute training_mode) they
// are the batch's statistics over every dim but 1 (population variance), and the optional
// outputs 1 and 2 are the running statistics, input * momentum + batch * (1 - momentum).
std::vector<te::Tensor> build_batch_norm(OpContext& ctx) {
  const Node& node = ctx.node();
  const bool training = node.attr_int("training_mode", 0) != 0;
  if (training && ctx.opset() < 14) {
    ctx.fail("attribute 'training_mode' exists from opset 14; the model uses opset {}",
             ctx.opset());
  }
  for (int k = 1; k < static_cast<int>(node.outputs.size()); ++k) {
    if (wants_output(ctx, k) && !(training && k <= 2)) {
      ctx.unsupported("output {} (a training statistic of opset {}) is not supported", k,
                      ctx.opset());
    }
  }
  if (ctx.opset() < 9 && node.attr_int("spatial", 1) == 0) {
    ctx.unsupported("attribute 'spatial' = 0 (per-element statistics) is not supported");
  }
  const te::Tensor& x = ctx.input(0);
  check_dtype(ctx, x, "input 0", kFloatTypes);
  if (x.ndim() < 2) ctx.fail("input 0 must have rank >= 2 (N, C, ...), got rank {}", x.ndim());
  const double epsilon = node.attr_float("epsilon", 1e-5);
  const Type acc = accumulate_type(x.dtype());
  const char* names[] = {"", "input 1 (scale)", "input 2 (B)", "input 3 (mean)", "input 4 (var)"};
  for (int k = 1; k <= 4; ++k) channel_param(ctx, ctx.input(k), names[k], x.shape(1), Expr(0), acc);
  auto p = [&](int k, const Expr& c) {
    return channel_param(ctx, ctx.input(k), names[k], x.shape(1), c, acc);
  };
  if (!training) {
    // Parameters known when compiling (a model's initializers): one per-channel scale and shift,
    // so the per-element work is a multiply-add (a Conv's epilogue then loads two values per
    // channel instead of four and runs no sqrt and division per element).
    if (auto folded = fold_batch_norm(ctx, x, epsilon, acc)) {
      const auto& [scale, shift] = *folded;
      return {output(ctx, 0, x.shape(), [&](const std::vector<Expr>& i) {
        return downcast(cast(acc, x(i)) * scale({i[1]}) + shift({i[1]}), x.dtype());
      })};
    }
    return {output(ctx, 0, x.shape(), [&](const std::vector<Expr>& i) {
      const Expr inv = make_one(acc) / call(Intrinsic::Sqrt, p(4, i[1]) + make_const(acc, epsilon));
      return downcast((cast(acc, x(i)) - p(3, i[1])) * inv * p(1, i[1]) + p(2, i[1]), x.dtype());
    })};
  }
  std::vector<int> axes = {0};
  for (int d = 2; d < x.ndim(); ++d) axes.push_back(d);
  auto value = [&](const std::vector<Expr>& i) { return cast(acc, x(i)); };
  const Expr count = cast(acc, reduced_count(x.shape(), axes));
  const te::Tensor sum =
      reduce_stage(ctx, ctx.stage_name("sum"), x.shape(), axes, true, ReduceKind::Sum, value);
  const te::Tensor sq = reduce_stage(ctx, ctx.stage_name("sum_sq_dev"), x.shape(), axes, true,
                                     ReduceKind::Sum, [&](const std::vector<Expr>& i) {
                                       const Expr d = value(i) - read_reduced(sum, i, axes) / count;
                                       return d * d;
                                     });
  // The batch statistics of channel c, read from the keepdims stages at [0, c, 0, ...].
  auto stat = [&](const te::Tensor& t, const Expr& c) {
    std::vector<Expr> at(static_cast<size_t>(x.ndim()), Expr(0));
    at[1] = c;
    return t(at) / count;
  };
  std::vector<te::Tensor> out = {output(ctx, 0, x.shape(), [&](const std::vector<Expr>& i) {
    const Expr inv =
        make_one(acc) / call(Intrinsic::Sqrt, stat(sq, i[1]) + make_const(acc, epsilon));
    return downcast((value(i) - stat(sum, i[1])) * inv * p(1, i[1]) + p(2, i[1]), x.dtype());
  })};
  const double momentum = node.attr_float("momentum", 0.9);
  for (int k = 1; k <= 2; ++k) {
    if (!wants_output(ctx, k)) {
      out.emplace_back();
      continue;
    }
    const te::Tensor& batch = k == 1 ? sum : sq;
    const DType dtype = ctx.input(2 + k).dtype();
    out.push_back(output(ctx, k, {x.shape(1)}, [&](const std::vector<Expr>& c) {
      return downcast(p(2 + k, c[0]) * make_const(acc, momentum) +
                          stat(batch, c[0]) * make_const(acc, 1 - momentum),
                      dtype);
    }));
  }
  return out;
}

// InstanceNormalization: per (n, c), statistics over the spatial dims; scale and B per channel.
std::vector<te::Tensor> build_instance_norm(OpContext& ctx) {
  const te::Tensor& x = ctx.input(0);
  check_dtype(ctx, x, "input 0", kFloatTypes);
  if (x.ndim() < 3) ctx.fail("input 0 must have rank >= 3 (N, C, D1, ...), got rank {}", x.ndim());
  const Type acc = accumulate_type(x.dtype());
  channel_param(ctx, ctx.input(1), "input 1 (scale)", x.shape(1), Expr(0), acc);
  channel_param(ctx, ctx.input(2), "input 2 (B)", x.shape(1), Expr(0), acc);
  const std::vector<int> axes = axes_from(2, x.ndim());
  const Moments m = moments(ctx, x, axes, acc, ctx.node().attr_float("epsilon", 1e-5));
  return {output(ctx, 0, x.shape(), [&](const std::vector<Expr>& i) {
    const Expr scale = cast(acc, ctx.input(1)({i[1]})), bias = cast(acc, ctx.input(2)({i[1]}));
    const Expr normalized = (cast(acc, x(i)) - read_reduced(m.mean, i, axes)) * read_reduced(m.inv_std, i, axes);
    return downcast(normalized * scale + bias, x.dtype());
  })};
}

}  // namespace

void register_normalization(OpTable& table) {
  table.add(OpKind::Softmax, build_softmax<false>);
  table.add(OpKind::LogSoftmax, build_softmax<true>);
  table.add(OpKind::Hardmax, build_hardmax);
  table.add(OpKind::LayerNormalization, build_layer_norm);
  table.add(OpKind::BatchNormalization, build_batch_norm);
  table.add(OpKind::InstanceNormalization, build_instance_norm);
}

}  // namespace kiln::ops
