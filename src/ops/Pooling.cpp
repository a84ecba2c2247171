// Pooling windows: MaxPool (with the optional argmax Indices output), AveragePool, LpPool,
// GlobalAveragePool, GlobalMaxPool. Padding never contributes a value: windows reduce only over
// positions inside the input (max: as if padded with -inf).
#include <limits>

#include "Contraction.h"
#include "IndexMath.h"
#include "Windows.h"
#include "kiln/ir/Simplify.h"
#include "kiln/ops/Helpers.h"

namespace kiln::ops {
namespace {

using namespace ir;

// The window reduction over `x` for every output position: `source` gets the input position
// read and returns the reduced value; `condition` says which window positions count.
struct Window {
  std::vector<IterVar> axes;
  std::vector<Expr> position;  // input index [n, c, spatial...]
  Expr in_bounds;
};

Window window_at(OpContext& ctx, const te::Tensor& x, const WindowGeometry& g, const std::vector<Expr>& i) {
  Window w;
  w.position = {i[0], i[1]};
  w.in_bounds = make_bool(true);
  for (size_t d = 0; d < g.kernel.size(); ++d) {
    IterVar k = te::reduce_axis(Expr(g.kernel[d]), ctx.stage_name("k" + std::to_string(d)));
    w.axes.push_back(k);
    Expr pos = window_position(g, static_cast<int>(d), i[2 + d], k.var);
    w.position.push_back(pos);
    w.in_bounds = w.in_bounds && inside(pos, x.shape(2 + static_cast<int>(d)));
  }
  w.in_bounds = simplify(w.in_bounds);
  return w;
}

const te::Tensor& pool_input(OpContext& ctx, std::initializer_list<DType> types) {
  const te::Tensor& x = ctx.input(0);
  check_dtype(ctx, x, "input 0 (X)", types);
  if (x.ndim() < 3) ctx.fail("input X {} must have rank 3 or more (N, C, spatial...)", shape_text(x.shape()));
  return x;
}

WindowGeometry pool_geometry(OpContext& ctx, const te::Tensor& x) {
  std::vector<int64_t> kernel = ctx.node().attr_ints("kernel_shape", {});
  if (kernel.empty()) ctx.fail("attribute 'kernel_shape' is required");
  std::vector<Expr> spatial(x.shape().begin() + 2, x.shape().end());
  return window_geometry(ctx, spatial, kernel, ctx.node().attr_int("ceil_mode", 0) != 0);
}

std::vector<Expr> pooled_shape(const te::Tensor& x, const WindowGeometry& g) {
  std::vector<Expr> shape = {x.shape(0), x.shape(1)};
  shape.insert(shape.end(), g.out.begin(), g.out.end());
  return simplified(shape);
}

// The element offset of input position `p` as MaxPool's Indices reports it: row-major over the
// whole tensor, or with the spatial dims column-major when storage_order is 1.
Expr storage_offset(const te::Tensor& x, const std::vector<Expr>& p, bool column_major) {
  if (!column_major) return flatten_index(p, x.shape());
  std::vector<Expr> spatial(x.shape().begin() + 2, x.shape().end());
  Expr offset = Expr(0);
  for (size_t d = spatial.size(); d-- > 0;) offset = offset * spatial[d] + p[2 + d];
  return (p[0] * x.shape(1) + p[1]) * product(spatial) + offset;
}

std::vector<te::Tensor> max_pool(OpContext& ctx) {
  const te::Tensor& x = pool_input(ctx, {DType::Float16, DType::BFloat16, DType::Float32, DType::Float64,
                                         DType::Int8, DType::UInt8});
  const WindowGeometry g = pool_geometry(ctx, x);
  const std::vector<Expr> shape = pooled_shape(x, g);
  te::Tensor values = te::compute(ctx.output_name(0), shape, [&](const std::vector<Expr>& i) {
    Window w = window_at(ctx, x, g, i);
    return te::max_reduce(x(w.position), w.axes, w.in_bounds);
  }, ctx.node().describe());
  const bool want_indices = ctx.node().outputs.size() > 1 && ctx.node().outputs[1] >= 0;
  if (!want_indices) return {values};
  const int64_t storage_order = ctx.node().attr_int("storage_order", 0);
  if (storage_order != 0 && storage_order != 1) ctx.fail("attribute 'storage_order' is {}, expected 0 or 1", storage_order);
  // The first window position holding the maximum.
  te::Tensor indices = te::compute(ctx.output_name(1), shape, [&](const std::vector<Expr>& i) {
    Window w = window_at(ctx, x, g, i);
    Expr offset = storage_offset(x, w.position, storage_order == 1);
    return te::min_reduce(select(x(w.position) == values(i), offset, highest_value(kIndexType)), w.axes, w.in_bounds);
  }, ctx.node().describe());
  return {values, indices};
}

std::vector<te::Tensor> average_pool(OpContext& ctx) {
  const te::Tensor& x = pool_input(ctx, kFloatTypes);
  const WindowGeometry g = pool_geometry(ctx, x);
  const std::vector<Expr> shape = pooled_shape(x, g);
  const bool count_pad = ctx.node().attr_int("count_include_pad", 0) != 0;
  const Type acc = accumulator_type(x.dtype());
  te::Tensor sum = te::compute(ctx.stage_name("sum"), shape, [&](const std::vector<Expr>& i) {
    Window w = window_at(ctx, x, g, i);
    return te::sum(cast(acc, x(w.position)), w.axes, w.in_bounds);
  }, ctx.node().describe());
  // How many window positions each output averages: inside the input, or inside the padded input.
  const size_t ns = g.kernel.size();
  std::vector<Expr> out_spatial(shape.begin() + 2, shape.end());
  te::Tensor count = te::compute(ctx.stage_name("count"), out_spatial, [&](const std::vector<Expr>& o) {
    std::vector<IterVar> axes;
    Expr cond = make_bool(true);
    for (size_t d = 0; d < ns; ++d) {
      IterVar k = te::reduce_axis(Expr(g.kernel[d]), ctx.stage_name("k" + std::to_string(d)));
      axes.push_back(k);
      Expr pos = window_position(g, static_cast<int>(d), o[d], k.var);
      const Expr extent = x.shape(2 + static_cast<int>(d));
      cond = cond && (count_pad ? pos >= -g.pad_begin[d] && pos < extent + g.pad_end[d] : inside(pos, extent));
    }
    return te::sum(make_one(acc), axes, simplify(cond));
  }, ctx.node().describe());
  return {te::compute(ctx.output_name(0), shape, [&](const std::vector<Expr>& i) {
    return downcast(sum(i) / count({i.begin() + 2, i.end()}), x.dtype());
  }, ctx.node().describe())};
}

// LpPool: (sum of |x|^p over the window)^(1/p); padding adds nothing (a zero's power is 0).
std::vector<te::Tensor> lp_pool(OpContext& ctx) {
  const te::Tensor& x = pool_input(ctx, kFloatTypes);
  const WindowGeometry g = pool_geometry(ctx, x);
  const std::vector<Expr> shape = pooled_shape(x, g);
  const int64_t p = ctx.node().attr_int("p", 2);
  if (p < 1) ctx.fail("attribute 'p' is {}; expected a positive integer", p);
  const Type acc = accumulator_type(x.dtype());
  te::Tensor sum = te::compute(
      ctx.stage_name("power_sum"), shape,
      [&](const std::vector<Expr>& i) {
        Window w = window_at(ctx, x, g, i);
        const Expr v = call(Intrinsic::Abs, cast(acc, x(w.position)));
        Expr power = v;
        for (int64_t k = 1; k < p; ++k) power = power * v;
        return te::sum(power, w.axes, w.in_bounds);
      },
      ctx.node().describe());
  return {te::compute(
      ctx.output_name(0), shape,
      [&](const std::vector<Expr>& i) {
        const Expr root =
            p == 1   ? sum(i)
            : p == 2 ? call(Intrinsic::Sqrt, sum(i))
                     : call(Intrinsic::Pow, sum(i), make_const(acc, 1.0 / static_cast<double>(p)));
        return downcast(root, x.dtype());
      },
      ctx.node().describe())};
}

template <bool IsMax>
std::vector<te::Tensor> global_pool(OpContext& ctx) {
  const te::Tensor& x = pool_input(ctx, kFloatTypes);
  std::vector<Expr> shape = {x.shape(0), x.shape(1)};
  std::vector<Expr> spatial(x.shape().begin() + 2, x.shape().end());
  for (size_t d = 0; d < spatial.size(); ++d) shape.push_back(Expr(1));
  const Type acc = IsMax ? Type(x.dtype()) : accumulator_type(x.dtype());
  auto reduce = [&](const std::vector<Expr>& i) {
    std::vector<IterVar> axes;
    std::vector<Expr> p = {i[0], i[1]};
    for (size_t d = 0; d < spatial.size(); ++d) {
      axes.push_back(te::reduce_axis(spatial[d], ctx.stage_name("r" + std::to_string(d))));
      p.push_back(axes.back().var);
    }
    return IsMax ? te::max_reduce(x(p), axes) : te::sum(cast(acc, x(p)), axes);
  };
  if (IsMax) return {te::compute(ctx.output_name(0), shape, reduce, ctx.node().describe())};
  te::Tensor sum = te::compute(ctx.stage_name("sum"), shape, reduce, ctx.node().describe());
  const Expr n = cast(acc, product(spatial));
  return {te::compute(ctx.output_name(0), shape, [&](const std::vector<Expr>& i) {
    return downcast(sum(i) / n, x.dtype());
  }, ctx.node().describe())};
}

}  // namespace

void register_pooling(OpTable& table) {
  table.add(OpKind::MaxPool, max_pool);
  table.add(OpKind::AveragePool, average_pool);
  table.add(OpKind::LpPool, lp_pool);
  table.add(OpKind::GlobalAveragePool, global_pool<false>);
  table.add(OpKind::GlobalMaxPool, global_pool<true>);
}

}  // namespace kiln::ops
