// Reductions: Reduce* over a set of axes, ArgMax/ArgMin (a max stage, then the first or last
// index where the input equals it) and CumSum/CumProd (a conditional sum/product). float16/bfloat16
// accumulate in float32 and are stored back by a final injective stage.
#include <algorithm>

#include "Families.h"
#include "ReduceStages.h"

namespace kiln::ops {

using namespace ir;

te::Tensor reduce_stage(const OpContext& ctx, const std::string& name, const std::vector<Expr>& shape,
                        const std::vector<int>& axes, bool keepdims, ReduceKind kind, const SourceFn& source,
                        const SourceFn& condition) {
  std::vector<Expr> out_shape;
  for (int d = 0; d < static_cast<int>(shape.size()); ++d) {
    const bool reduced = std::find(axes.begin(), axes.end(), d) != axes.end();
    if (!reduced) out_shape.push_back(shape[d]);
    else if (keepdims) out_shape.push_back(Expr(1));
  }
  return te::compute(
      name, out_shape,
      [&](const std::vector<Expr>& out) {
        std::vector<IterVar> reduce_axes;
        std::vector<Expr> index;
        size_t next = 0;
        for (int d = 0; d < static_cast<int>(shape.size()); ++d) {
          const bool reduced = std::find(axes.begin(), axes.end(), d) != axes.end();
          if (reduced) {
            reduce_axes.push_back(te::reduce_axis(shape[d], name + "_r" + std::to_string(d)));
            index.push_back(reduce_axes.back().var);
            if (keepdims) ++next;
          } else {
            index.push_back(out[next++]);
          }
        }
        Expr cond = condition ? condition(index) : Expr();
        return Reduce::make(kind, source(index), reduce_axes, cond);
      },
      ctx.node().describe());
}

Expr read_reduced(const te::Tensor& stage, const std::vector<Expr>& input_index, const std::vector<int>& axes) {
  std::vector<Expr> index = input_index;
  for (int d : axes) index[d] = Expr(0);
  return stage(index);
}

std::vector<Expr> drop_axes(const std::vector<Expr>& index, const std::vector<int>& axes) {
  std::vector<Expr> out;
  for (int d = 0; d < static_cast<int>(index.size()); ++d) {
    if (std::find(axes.begin(), axes.end(), d) == axes.end()) out.push_back(index[d]);
  }
  return out;
}

Expr flat_position(const std::vector<Expr>& shape, const std::vector<Expr>& index, const std::vector<int>& axes) {
  Expr flat(0);
  for (int d : axes) flat = flat * shape[d] + index[d];
  return flat;
}

Expr reduced_count(const std::vector<Expr>& shape, const std::vector<int>& axes) {
  Expr n(1);
  for (int d : axes) n = n * shape[d];
  return n;
}

Type accumulate_type(DType dtype) {
  return (dtype == DType::Float16 || dtype == DType::BFloat16) ? Type(DType::Float32) : Type(dtype);
}

namespace {

inline constexpr std::initializer_list<DType> kNumericTypes = {
    DType::Int8,   DType::Int16,   DType::Int32,   DType::Int64,    DType::UInt8,   DType::UInt16,
    DType::UInt32, DType::UInt64,  DType::Float16, DType::BFloat16, DType::Float32, DType::Float64};
inline constexpr std::initializer_list<DType> kOrderedTypes = {
    DType::Bool,   DType::Int8,   DType::Int16,   DType::Int32,    DType::Int64,   DType::UInt8,   DType::UInt16,
    DType::UInt32, DType::UInt64, DType::Float16, DType::BFloat16, DType::Float32, DType::Float64};

// Normalized, sorted, distinct axes; UserError naming the duplicate or out-of-range axis.
std::vector<int> normalize_axes(const OpContext& ctx, const std::vector<int64_t>& axes, int rank) {
  std::vector<int> out;
  for (int64_t a : axes) {
    const int axis = normalize_axis(ctx, a, rank, "axis");
    if (std::find(out.begin(), out.end(), axis) != out.end()) ctx.fail("axis {} is listed twice in 'axes'", a);
    out.push_back(axis);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<int> all_axes(int rank) {
  std::vector<int> out(static_cast<size_t>(rank));
  for (int d = 0; d < rank; ++d) out[d] = d;
  return out;
}

enum class ReduceOp { Sum, Mean, Max, Min, Prod, L1, L2, LogSum, LogSumExp, SumSquare };

// Axes are an attribute before opset 13 (ReduceSum) or 18 (the others), an optional input after.
// No axes (or an empty list) reduces all of them, unless noop_with_empty_axes.
std::optional<std::vector<int>> reduction_axes(const OpContext& ctx, ReduceOp op, int rank) {
  const int64_t input_from = op == ReduceOp::Sum ? 13 : 18;
  std::vector<int64_t> axes;
  if (ctx.opset() >= input_from) {
    if (ctx.has_input(1)) axes = ctx.constant_ints(1, "axes");
  } else {
    axes = ctx.node().attr_ints("axes", {});
  }
  if (axes.empty()) {
    if (ctx.node().attr_int("noop_with_empty_axes", 0) != 0) return std::nullopt;
    return all_axes(rank);
  }
  return normalize_axes(ctx, axes, rank);
}

te::Tensor finish(const OpContext& ctx, const std::vector<Expr>& shape, const std::function<Expr(const std::vector<Expr>&)>& fn) {
  return te::compute(ctx.output_name(0), shape, fn, ctx.node().describe());
}

template <ReduceOp Op>
std::vector<te::Tensor> build_reduce(OpContext& ctx) {
  const te::Tensor& x = ctx.input(0);
  check_dtype(ctx, x, "input 0", Op == ReduceOp::Max || Op == ReduceOp::Min ? kOrderedTypes : kNumericTypes);
  const bool keepdims = ctx.node().attr_int("keepdims", 1) != 0;
  const std::optional<std::vector<int>> maybe_axes = reduction_axes(ctx, Op, x.ndim());
  const DType dtype = x.dtype();
  if (!maybe_axes) {  // noop_with_empty_axes: the input unchanged
    return {finish(ctx, x.shape(), [&](const std::vector<Expr>& i) { return x(i); })};
  }
  const std::vector<int>& axes = *maybe_axes;
  // Logarithms and roots of integers are computed in float64.
  const bool needs_float = Op == ReduceOp::L2 || Op == ReduceOp::LogSum || Op == ReduceOp::LogSumExp;
  const Type acc = needs_float && !is_float(dtype) ? Type(DType::Float64) : accumulate_type(dtype);
  auto value = [&](const std::vector<Expr>& i) { return cast(acc, x(i)); };

  te::Tensor row_max;  // LogSumExp subtracts the max before exponentiating
  if constexpr (Op == ReduceOp::LogSumExp) {
    row_max = reduce_stage(ctx, ctx.stage_name("max"), x.shape(), axes, true, ReduceKind::Max, value);
  }
  ReduceKind kind = ReduceKind::Sum;
  if constexpr (Op == ReduceOp::Max) kind = ReduceKind::Max;
  if constexpr (Op == ReduceOp::Min) kind = ReduceKind::Min;
  if constexpr (Op == ReduceOp::Prod) kind = ReduceKind::Prod;
  const te::Tensor reduced = reduce_stage(
      ctx, ctx.stage_name("reduce"), x.shape(), axes, true, kind, [&](const std::vector<Expr>& i) {
        const Expr v = value(i);
        if constexpr (Op == ReduceOp::L1) return call(Intrinsic::Abs, v);
        if constexpr (Op == ReduceOp::L2 || Op == ReduceOp::SumSquare) return v * v;
        if constexpr (Op == ReduceOp::LogSumExp) return call(Intrinsic::Exp, v - read_reduced(row_max, i, axes));
        return v;
      });

  std::vector<Expr> out_shape = x.shape();
  for (int d : axes) out_shape[d] = Expr(1);
  if (!keepdims) out_shape = drop_axes(out_shape, axes);
  return {finish(ctx, out_shape, [&](const std::vector<Expr>& out) {
    std::vector<Expr> index = out;
    if (!keepdims) {
      index.clear();
      size_t next = 0;
      for (int d = 0; d < x.ndim(); ++d) {
        index.push_back(std::find(axes.begin(), axes.end(), d) != axes.end() ? Expr(0) : out[next++]);
      }
    }
    Expr r = reduced(index);
    if constexpr (Op == ReduceOp::Mean) r = r / cast(acc, reduced_count(x.shape(), axes));
    if constexpr (Op == ReduceOp::L2) r = call(Intrinsic::Sqrt, r);
    if constexpr (Op == ReduceOp::LogSum) r = call(Intrinsic::Log, r);
    if constexpr (Op == ReduceOp::LogSumExp) r = call(Intrinsic::Log, r) + row_max(index);
    return cast(Type(dtype), r);
  })};
}

// ArgMax/ArgMin: the extreme value along `axis` (a max/min stage), then the first (or, with
// select_last_index, the last) position holding it. Results are int64.
template <bool IsMax>
std::vector<te::Tensor> build_arg(OpContext& ctx) {
  const te::Tensor& x = ctx.input(0);
  check_dtype(ctx, x, "input 0", kNumericTypes);
  const int axis = normalize_axis(ctx, ctx.node().attr_int("axis", 0), x.ndim(), "attribute 'axis'");
  const bool keepdims = ctx.node().attr_int("keepdims", 1) != 0;
  const bool last = ctx.node().attr_int("select_last_index", 0) != 0;
  const std::vector<int> axes = {axis};
  auto value = [&](const std::vector<Expr>& i) { return upcast(x(i)); };
  const te::Tensor extreme = reduce_stage(ctx, ctx.stage_name(IsMax ? "max" : "min"), x.shape(), axes, true,
                                          IsMax ? ReduceKind::Max : ReduceKind::Min, value);
  return {reduce_stage(
      ctx, ctx.output_name(0), x.shape(), axes, keepdims, last ? ReduceKind::Max : ReduceKind::Min,
      [&](const std::vector<Expr>& i) { return i[axis]; },
      [&](const std::vector<Expr>& i) { return value(i) == read_reduced(extreme, i, axes); })};
}

// CumSum / CumProd: out[.., j, ..] sums (multiplies) x[.., k, ..] over k <= j (k < j exclusive;
// k >= j / k > j reversed); an exclusive scan's first element is the identity (0 or 1).
template <bool kProduct>
std::vector<te::Tensor> build_cumulative(OpContext& ctx) {
  const te::Tensor& x = ctx.input(0);
  check_dtype(ctx, x, "input 0", kNumericTypes);
  const std::vector<int64_t> axis_value = ctx.constant_ints(1, "axis");
  if (axis_value.size() != 1) ctx.fail("input 1 ('axis') must hold one value, got {}", axis_value.size());
  const int axis = normalize_axis(ctx, axis_value[0], x.ndim(), "input 'axis'");
  const bool exclusive = ctx.node().attr_int("exclusive", 0) != 0;
  const bool reverse = ctx.node().attr_int("reverse", 0) != 0;
  const Type acc = accumulate_type(x.dtype());
  const IterVar k = te::reduce_axis(x.shape(axis), ctx.stage_name("k"));
  const te::Tensor sums = te::compute(
      ctx.stage_name(kProduct ? "cumprod" : "cumsum"), x.shape(),
      [&](const std::vector<Expr>& i) {
        std::vector<Expr> index = i;
        index[axis] = k.var;
        const Expr& j = i[axis];
        Expr cond = reverse ? (exclusive ? k.var > j : k.var >= j) : (exclusive ? k.var < j : k.var <= j);
        return kProduct ? te::prod(cast(acc, x(index)), {k}, cond)
                        : te::sum(cast(acc, x(index)), {k}, cond);
      },
      ctx.node().describe());
  return {finish(ctx, x.shape(), [&](const std::vector<Expr>& i) { return cast(Type(x.dtype()), sums(i)); })};
}

}  // namespace

void register_reduction(OpTable& table) {
  table.add(OpKind::ReduceSum, build_reduce<ReduceOp::Sum>);
  table.add(OpKind::ReduceMean, build_reduce<ReduceOp::Mean>);
  table.add(OpKind::ReduceMax, build_reduce<ReduceOp::Max>);
  table.add(OpKind::ReduceMin, build_reduce<ReduceOp::Min>);
  table.add(OpKind::ReduceProd, build_reduce<ReduceOp::Prod>);
  table.add(OpKind::ReduceL1, build_reduce<ReduceOp::L1>);
  table.add(OpKind::ReduceL2, build_reduce<ReduceOp::L2>);
  table.add(OpKind::ReduceLogSum, build_reduce<ReduceOp::LogSum>);
  table.add(OpKind::ReduceLogSumExp, build_reduce<ReduceOp::LogSumExp>);
  table.add(OpKind::ReduceSumSquare, build_reduce<ReduceOp::SumSquare>);
  table.add(OpKind::ArgMax, build_arg<true>);
  table.add(OpKind::ArgMin, build_arg<false>);
  table.add(OpKind::CumSum, build_cumulative<false>);
  table.add(OpKind::CumProd, build_cumulative<true>);
}

}  // namespace kiln::ops
