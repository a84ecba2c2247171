// GridSample (opsets 16 and 20): output (n, c, o...) samples X[n, c] at the grid's normalized
// coordinates (grid[n, o..., :] lists them last spatial dim first). Coordinates are
// denormalized (align_corners or not), out-of-range coordinates clamped (border) or reflected
// (reflection), then nearest (round half to even), linear (2 taps per dim) or cubic (4 taps per
// dim, a = -0.75) interpolation reads pixels, which outside the input are 0 (zeros), clamped
// (border) or reflected (reflection). The taps of all dims combine as a tensor product, written
// out in one expression (4^dims terms for cubic). Math in float32 (float64 for float64 input).
// AffineGrid makes such grids from affine matrices.
#include "Families.h"
#include "IndexMath.h"
#include "kiln/ops/Helpers.h"

namespace kiln::ops {
namespace {

using namespace ir;

enum class SampleMode { Nearest, Linear, Cubic };
enum class Padding { Zeros, Border, Reflection };

// Reflects x into [lo, hi] by the near border until it is inside (the reference's loop, closed).
Expr reflect(const Expr& x, const Expr& lo, const Expr& hi) {
  const Expr range = hi - lo;
  auto fold = [&](const Expr& dx, const Expr& near, const Expr& far, bool below) {
    const Expr n = call(Intrinsic::Trunc, dx / range);
    const Expr r = dx - n * range;
    const Expr even = floor_mod(cast(kIndexType, n), Expr(2)) == 0;
    return below ? select(even, near + r, far - r) : select(even, near - r, far + r);
  };
  return select(x < lo, fold(lo - x, lo, hi, true), select(x > hi, fold(x - hi, hi, lo, false), x));
}

std::vector<Expr> cubic_weights(const Expr& t, Type acc) {
  const double A = -0.75;
  auto c = [&](double v) { return make_const(acc, v); };
  auto far = [&](const Expr& u) { return ((c(A) * u - c(5 * A)) * u + c(8 * A)) * u - c(4 * A); };
  auto near = [&](const Expr& u) { return ((c(A + 2) * u - c(A + 3)) * u) * u + c(1); };
  const Expr q = c(1) - t;
  return {far(t + c(1)), near(t), near(q), far(q + c(1))};
}

std::vector<te::Tensor> grid_sample(OpContext& ctx) {
  const te::Tensor& x = ctx.input(0);
  const te::Tensor& grid = ctx.input(1);
  check_dtype(ctx, x, "input 0", kFloatTypes);
  check_dtype(ctx, grid, "input 1 (grid)", kFloatTypes);
  const int rank = x.ndim();
  const int dims = rank - 2;
  if (rank < 3) ctx.fail("input 0 {} must have rank 3 or more ([N, C, D1, ...])", shape_text(x.shape()));
  if (ctx.opset() < 20 && rank != 4) ctx.fail("input 0 {} must have rank 4 before opset 20", shape_text(x.shape()));
  if (grid.ndim() != rank || !is_const_int(grid.shape(rank - 1), dims)) {
    ctx.fail("grid {} must have shape [N, out dims..., {}] for input {}", shape_text(grid.shape()), dims,
             shape_text(x.shape()));
  }
  const std::string mode_name = ctx.node().attr_string("mode", ctx.opset() < 20 ? "bilinear" : "linear");
  SampleMode mode;
  if (mode_name == "nearest") mode = SampleMode::Nearest;
  else if (mode_name == (ctx.opset() < 20 ? "bilinear" : "linear")) mode = SampleMode::Linear;
  else if (mode_name == (ctx.opset() < 20 ? "bicubic" : "cubic")) mode = SampleMode::Cubic;
  else {
    ctx.fail("attribute 'mode' is '{}', expected {}", mode_name,
             ctx.opset() < 20 ? "bilinear, nearest or bicubic" : "linear, nearest or cubic");
  }
  const std::string padding_name = ctx.node().attr_string("padding_mode", "zeros");
  Padding padding;
  if (padding_name == "zeros") padding = Padding::Zeros;
  else if (padding_name == "border") padding = Padding::Border;
  else if (padding_name == "reflection") padding = Padding::Reflection;
  else ctx.fail("attribute 'padding_mode' is '{}', expected zeros, border or reflection", padding_name);
  const bool align = ctx.node().attr_int("align_corners", 0) != 0;
  const Type acc = x.dtype() == DType::Float64 ? Type(DType::Float64) : Type(DType::Float32);
  auto c = [&](double v) { return make_const(acc, v); };

  std::vector<Expr> shape = {x.shape(0), x.shape(1)};
  for (int d = 0; d < dims; ++d) shape.push_back(grid.shape(1 + d));
  return {te::compute(
      ctx.output_name(0), shape,
      [&](const std::vector<Expr>& i) {
        std::vector<Expr> pos, lo, hi, extent;
        for (int d = 0; d < dims; ++d) {
          const Expr len = cast(acc, x.shape(2 + d));
          extent.push_back(x.shape(2 + d));
          std::vector<Expr> at = {i[0]};
          at.insert(at.end(), i.begin() + 2, i.end());
          at.push_back(Expr(dims - 1 - d));
          const Expr g = cast(acc, grid(at));
          Expr p = align ? (g + c(1)) / c(2) * (len - c(1)) : ((g + c(1)) * len - c(1)) / c(2);
          lo.push_back(align ? c(0) : c(-0.5));
          hi.push_back(align ? len - c(1) : len - c(0.5));
          if (mode == SampleMode::Nearest) p = call(Intrinsic::RoundEven, p);
          if (padding == Padding::Border) p = select(p < lo[d] || p > hi[d], max(min(p, len - c(1)), c(0)), p);
          if (padding == Padding::Reflection) p = reflect(p, lo[d], hi[d]);
          pos.push_back(p);
        }
        // A pixel at integer position `index` (one per dim), with the padding rule.
        auto pixel = [&](const std::vector<Expr>& index) {
          std::vector<Expr> at = {i[0], i[1]};
          Expr inside = make_bool(true);
          for (int d = 0; d < dims; ++d) {
            Expr k = index[d];
            if (padding == Padding::Zeros) inside = inside && k >= 0 && k < extent[d];
            if (padding == Padding::Reflection) k = cast(kIndexType, call(Intrinsic::Trunc, reflect(cast(acc, k), lo[d], hi[d])));
            at.push_back(clamp(k, Expr(0), extent[d] - 1));
          }
          const Expr v = cast(acc, x(at));
          return padding == Padding::Zeros ? select(inside, v, make_zero(acc)) : v;
        };
        if (mode == SampleMode::Nearest) {
          std::vector<Expr> index;
          for (int d = 0; d < dims; ++d) index.push_back(cast(kIndexType, pos[d]));
          return downcast(pixel(index), x.dtype());
        }
        const int taps = mode == SampleMode::Linear ? 2 : 4;
        const int first = mode == SampleMode::Linear ? 0 : -1;
        std::vector<Expr> base;
        std::vector<std::vector<Expr>> weights;
        for (int d = 0; d < dims; ++d) {
          const Expr fl = call(Intrinsic::Floor, pos[d]);
          base.push_back(cast(kIndexType, fl));
          const Expr t = pos[d] - fl;
          weights.push_back(mode == SampleMode::Linear ? std::vector<Expr>{c(1) - t, t} : cubic_weights(t, acc));
        }
        Expr total;
        std::vector<int> tap(dims, 0);
        while (true) {
          std::vector<Expr> index;
          Expr w;
          for (int d = 0; d < dims; ++d) {
            index.push_back(base[d] + Expr(first + tap[d]));
            w = w.defined() ? w * weights[d][tap[d]] : weights[d][tap[d]];
          }
          const Expr term = w * pixel(index);
          total = total.defined() ? total + term : term;
          int d = dims - 1;
          while (d >= 0 && ++tap[d] == taps) tap[d--] = 0;
          if (d < 0) break;
        }
        return downcast(total, x.dtype());
      },
      ctx.node().describe())};
}

// AffineGrid (opset 20): the sampling grid GridSample reads, theta [N, 2, 3] (or [N, 3, 4]) applied
// to the normalized positions of an output of `size` [N, C, H, W] (or [N, C, D, H, W]):
// grid[n, (d,) h, w, j] = sum_k theta[n, j, k] * (x, y(, z))_k + theta[n, j, dims]. A position
// along a dim of n points is -1 + 2i / (n - 1) (align_corners) or -1 + (2i + 1) / n. In float64.
std::vector<te::Tensor> affine_grid(OpContext& ctx) {
  const te::Tensor& theta = ctx.input(0);
  check_dtype(ctx, theta, "input 0 (theta)", kFloatTypes);
  const std::vector<int64_t> size = ctx.constant_ints(1, "size");
  if (size.size() != 4 && size.size() != 5) {
    ctx.fail("input 1 ('size') has {} values; expected 4 ([N, C, H, W]) or 5 ([N, C, D, H, W])",
             size.size());
  }
  const int dims = static_cast<int>(size.size()) - 2;
  if (theta.ndim() != 3 || !is_const_int(theta.shape(1), dims) ||
      !is_const_int(theta.shape(2), dims + 1)) {
    ctx.fail("theta {} must have shape [N, {}, {}] for a {}-D size", shape_text(theta.shape()),
             dims, dims + 1, dims);
  }
  const bool align = ctx.node().attr_int("align_corners", 0) != 0;
  const Type acc(DType::Float64);
  std::vector<Expr> shape = {theta.shape(0)};
  for (int d = 0; d < dims; ++d) shape.push_back(Expr(size[2 + d]));
  shape.push_back(Expr(dims));
  return {te::compute(
      ctx.output_name(0), shape,
      [&](const std::vector<Expr>& i) {
        // Component k of the position (x first): spatial dim dims - 1 - k of the output.
        auto position = [&](int k) {
          const int d = dims - 1 - k;
          const double n = static_cast<double>(size[2 + d]);
          const Expr at = cast(acc, i[1 + d]);
          if (align)
            return n > 1 ? make_const(acc, -1) + at * make_const(acc, 2 / (n - 1))
                         : make_const(acc, -1);
          return make_const(acc, -1 + 1 / n) + at * make_const(acc, 2 / n);
        };
        const Expr j = i[1 + dims];
        Expr v = cast(acc, theta({i[0], j, Expr(dims)}));
        for (int k = 0; k < dims; ++k) v = v + cast(acc, theta({i[0], j, Expr(k)})) * position(k);
        return cast(Type(theta.dtype()), v);
      },
      ctx.node().describe())};
}

}  // namespace

void register_grid_sample(OpTable& table) {
  table.add(OpKind::GridSample, grid_sample);
  table.add(OpKind::AffineGrid, affine_grid);
}

}  // namespace kiln::ops
