// RoiAlign (opsets 10, 16): per region of interest and channel, an output_height x output_width
// grid of bins, each the average (or max) of bilinear samples of X on a regular grid inside the
// bin, as the ONNX reference computes it (samples outside [-1, size] count as 0; coordinates
// clamp into the image). With sampling_ratio 0 a bin takes ceil(roi size / bins) samples per
// dim, a count that depends on the region's coordinates: the reduction runs over the largest
// count among the regions (known when compiling) with a condition per region. Coordinates and
// sums in float64.
#include <cmath>
#include <tuple>

#include "Families.h"
#include "IndexMath.h"
#include "kiln/ops/Helpers.h"

namespace kiln::ops {
namespace {

using namespace ir;

Expr f64(double v) {
  return make_const(Type(DType::Float64), v);
}

std::vector<te::Tensor> roi_align(OpContext& ctx) {
  const Node& node = ctx.node();
  const te::Tensor& x = ctx.input(0);
  const te::Tensor& rois = ctx.input(1);
  const te::Tensor& batch = ctx.input(2);
  check_dtype(ctx, x, "input 0 (X)", kFloatTypes);
  check_dtype(ctx, batch, "input 2 (batch_indices)", {DType::Int64});
  if (x.ndim() != 4) ctx.fail("X {} must have rank 4 (N, C, H, W)", shape_text(x.shape()));
  if (rois.ndim() != 2 || !is_const_int(rois.shape(1), 4))
    ctx.fail("rois {} must have shape [num_rois, 4]", shape_text(rois.shape()));
  const std::string mode = node.attr_string("mode", "avg");
  if (mode != "avg" && mode != "max")
    ctx.fail("attribute 'mode' is '{}'; expected avg or max", mode);
  const std::string transform = node.attr_string(
      "coordinate_transformation_mode", ctx.opset() < 16 ? "output_half_pixel" : "half_pixel");
  if (transform != "half_pixel" && transform != "output_half_pixel") {
    ctx.fail(
        "attribute 'coordinate_transformation_mode' is '{}'; expected half_pixel or "
        "output_half_pixel",
        transform);
  }
  const bool half_pixel = transform == "half_pixel";
  const int64_t out_h = node.attr_int("output_height", 1), out_w = node.attr_int("output_width", 1);
  const int64_t ratio = node.attr_int("sampling_ratio", 0);
  const double scale = node.attr_float("spatial_scale", 1.0);
  if (out_h < 1 || out_w < 1 || ratio < 0)
    ctx.fail("output_height, output_width must be positive and sampling_ratio >= 0");
  const double offset = half_pixel ? 0.5 : 0.0;
  // The largest number of samples per bin along each dim.
  int64_t grid_h = ratio, grid_w = ratio;
  if (ratio == 0) {
    if (!ctx.is_known(1)) {
      ctx.unsupported(
          "sampling_ratio 0 with regions computed at run time (the sample count per bin depends on "
          "them)");
    }
    const std::vector<double> r = ctx.constant_floats(1, "rois");
    grid_h = grid_w = 1;
    for (size_t k = 0; k + 3 < r.size(); k += 4) {
      double w = (r[k + 2] - r[k]) * scale, h = (r[k + 3] - r[k + 1]) * scale;
      if (!half_pixel) w = std::max(w, 1.0), h = std::max(h, 1.0);
      grid_h = std::max(grid_h, static_cast<int64_t>(std::ceil(h / static_cast<double>(out_h))));
      grid_w = std::max(grid_w, static_cast<int64_t>(std::ceil(w / static_cast<double>(out_w))));
    }
  }
  const Expr height = x.shape(2), width = x.shape(3);
  const Type acc(DType::Float64);
  const std::vector<Expr> shape = {rois.shape(0), x.shape(1), Expr(out_h), Expr(out_w)};
  // The samples per bin along h and w of region n.
  auto counts = [&](const Expr& n) {
    auto roi = [&](int k) { return cast(acc, rois({n, Expr(k)})) * f64(scale); };
    Expr roi_w = roi(2) - roi(0), roi_h = roi(3) - roi(1);
    if (!half_pixel) roi_w = max(roi_w, f64(1)), roi_h = max(roi_h, f64(1));
    const Expr h = ratio > 0 ? Expr(ratio)
                             : cast(kIndexType,
                                    call(Intrinsic::Ceil, roi_h / f64(static_cast<double>(out_h))));
    const Expr w = ratio > 0 ? Expr(ratio)
                             : cast(kIndexType,
                                    call(Intrinsic::Ceil, roi_w / f64(static_cast<double>(out_w))));
    return std::pair{h, w};
  };
  const te::Tensor pooled = te::compute(
      ctx.stage_name(mode == "avg" ? "sum" : "max"), shape,
      [&](const std::vector<Expr>& i) {
        const Expr n = i[0], c = i[1];
        auto roi = [&](int k) { return cast(acc, rois({n, Expr(k)})) * f64(scale) - f64(offset); };
        Expr roi_w = roi(2) - roi(0), roi_h = roi(3) - roi(1);
        if (!half_pixel) roi_w = max(roi_w, f64(1)), roi_h = max(roi_h, f64(1));
        const Expr bin_h = roi_h / f64(static_cast<double>(out_h)),
                   bin_w = roi_w / f64(static_cast<double>(out_w));
        const auto [count_h, count_w] = counts(n);
        const IterVar iy = te::reduce_axis(Expr(grid_h), ctx.stage_name("iy"));
        const IterVar ix = te::reduce_axis(Expr(grid_w), ctx.stage_name("ix"));
        const Expr yy = roi(1) + cast(acc, i[2]) * bin_h +
                        (cast(acc, iy.var) + f64(0.5)) * bin_h / cast(acc, count_h);
        const Expr xx = roi(0) + cast(acc, i[3]) * bin_w +
                        (cast(acc, ix.var) + f64(0.5)) * bin_w / cast(acc, count_w);
        const Expr outside =
            yy < f64(-1) || yy > cast(acc, height) || xx < f64(-1) || xx > cast(acc, width);
        const Expr b = clamp(cast(kIndexType, batch({n})), Expr(0), x.shape(0) - 1);
        // Along one dim: the low and high pixel and the position's weight towards high.
        auto taps = [&](const Expr& p, const Expr& size) {
          const Expr pos = max(p, f64(0));
          const Expr low = cast(kIndexType, call(Intrinsic::Floor, pos));
          const Expr at_edge = low >= size - 1;
          const Expr lo = select(at_edge, size - 1, low);
          const Expr hi = select(at_edge, size - 1, low + 1);
          const Expr frac = select(at_edge, f64(0), pos - cast(acc, low));
          return std::tuple{clamp(lo, Expr(0), size - 1), clamp(hi, Expr(0), size - 1), frac};
        };
        const auto [y_lo, y_hi, ly] = taps(yy, height);
        const auto [x_lo, x_hi, lx] = taps(xx, width);
        const Expr hy = f64(1) - ly, hx = f64(1) - lx;
        auto v = [&](const Expr& y, const Expr& xc) { return cast(acc, x({b, c, y, xc})); };
        const Expr t1 = hy * hx * v(y_lo, x_lo), t2 = hy * lx * v(y_lo, x_hi),
                   t3 = ly * hx * v(y_hi, x_lo), t4 = ly * lx * v(y_hi, x_hi);
        const Expr inside_bin = iy.var < count_h && ix.var < count_w;
        if (mode == "avg")
          return te::sum(select(outside, f64(0), t1 + t2 + t3 + t4), {iy, ix}, inside_bin);
        return te::max_reduce(select(outside, f64(0), max(max(t1, t2), max(t3, t4))), {iy, ix},
                              inside_bin);
      },
      node.describe());
  return {te::compute(
      ctx.output_name(0), shape,
      [&](const std::vector<Expr>& i) {
        Expr v = pooled(i);
        if (mode == "avg") {
          const auto [count_h, count_w] = counts(i[0]);
          v = v / cast(acc, max(count_h * count_w, Expr(1)));
        }
        return cast(Type(x.dtype()), v);
      },
      node.describe())};
}

}  // namespace

void register_roi_align(OpTable& table) {
  table.add(OpKind::RoiAlign, roi_align);
}

}  // namespace kiln::ops
