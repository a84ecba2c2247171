// Resize (opsets 10-19) and Upsample (7-9): interpolation one axis at a time (the ONNX reference
// is separable, so this is the same computation). Each resized axis is a stage whose element
// at output position o reads n taps of the previous stage around the source coordinate
// x(o) = the coordinate transformation of o: nearest (2 taps, a select between them), linear
// (2), cubic (4), or an antialiasing filter stretched by 1/scale when downsampling. Coordinates
// and weights are float64 (the reference's precision); values accumulate in float32 for
// 16/32-bit floats and float64 otherwise. Output sizes must be compile-time constants.
#include <cmath>

#include "Families.h"
#include "IndexMath.h"
#include "kiln/ir/IRPrinter.h"
#include "kiln/ops/Helpers.h"

namespace kiln::ops {
namespace {

using namespace ir;

enum class Mode { Nearest, Linear, Cubic };
enum class Coordinates { TfHalfPixelForNn, HalfPixel, HalfPixelSymmetric, PytorchHalfPixel, AlignCorners, Asymmetric, TfCropAndResize };
enum class Rounding { RoundPreferFloor, RoundPreferCeil, Floor, Ceil };

struct ResizeSettings {
  Mode mode = Mode::Nearest;
  Coordinates coordinates = Coordinates::HalfPixel;
  Rounding rounding = Rounding::RoundPreferFloor;
  double cubic_a = -0.75;
  bool exclude_outside = false;
  bool antialias = false;
  double extrapolation = 0.0;
};

// One resized axis: the input and output extents, the scale, and for tf_crop_and_resize the
// region of interest (normalized start and end).
struct AxisResize {
  int axis = 0;
  int64_t in = 0, out = 0;
  double scale = 1.0;
  double roi_start = 0.0, roi_end = 1.0;
};

Expr f64(double v) { return make_const(Type(DType::Float64), v); }

Mode parse_mode(const OpContext& ctx) {
  const std::string m = ctx.node().attr_string("mode", "nearest");
  if (m == "nearest") return Mode::Nearest;
  if (m == "linear" || m == "bilinear") return Mode::Linear;
  if (m == "cubic" && ctx.node().op != OpKind::Upsample) return Mode::Cubic;
  ctx.fail("attribute 'mode' is '{}', expected nearest, linear{}", m,
           ctx.node().op == OpKind::Upsample ? "" : " or cubic");
}

Coordinates parse_coordinates(const OpContext& ctx) {
  const std::string c = ctx.node().attr_string("coordinate_transformation_mode", "half_pixel");
  if (c == "half_pixel") return Coordinates::HalfPixel;
  if (c == "half_pixel_symmetric") return Coordinates::HalfPixelSymmetric;
  if (c == "pytorch_half_pixel") return Coordinates::PytorchHalfPixel;
  if (c == "align_corners") return Coordinates::AlignCorners;
  if (c == "asymmetric") return Coordinates::Asymmetric;
  if (c == "tf_crop_and_resize") return Coordinates::TfCropAndResize;
  if (c == "tf_half_pixel_for_nn" && ctx.opset() < 13) return Coordinates::TfHalfPixelForNn;  // Resize-11 only
  ctx.fail("attribute 'coordinate_transformation_mode' is '{}', expected half_pixel, half_pixel_symmetric, "
           "pytorch_half_pixel, align_corners, asymmetric or tf_crop_and_resize", c);
}

Rounding parse_rounding(const OpContext& ctx) {
  const std::string r = ctx.node().attr_string("nearest_mode", "round_prefer_floor");
  if (r == "round_prefer_floor") return Rounding::RoundPreferFloor;
  if (r == "round_prefer_ceil") return Rounding::RoundPreferCeil;
  if (r == "floor") return Rounding::Floor;
  if (r == "ceil") return Rounding::Ceil;
  ctx.fail("attribute 'nearest_mode' is '{}', expected round_prefer_floor, round_prefer_ceil, floor or ceil", r);
}

ResizeSettings read_settings(const OpContext& ctx) {
  ResizeSettings s;
  s.mode = parse_mode(ctx);
  if (ctx.node().op == OpKind::Upsample || ctx.opset() < 11) {
    // Upsample and Resize-10: out[i] reads in[floor(i / scale)]; linear is asymmetric too.
    s.coordinates = Coordinates::Asymmetric;
    s.rounding = Rounding::Floor;
    return s;
  }
  s.coordinates = parse_coordinates(ctx);
  s.rounding = parse_rounding(ctx);
  s.cubic_a = ctx.node().attr_float("cubic_coeff_a", -0.75);
  s.exclude_outside = ctx.node().attr_int("exclude_outside", 0) != 0;
  s.extrapolation = ctx.node().attr_float("extrapolation_value", 0.0);
  s.antialias = ctx.node().attr_int("antialias", 0) != 0;
  if (s.antialias && s.mode == Mode::Nearest) ctx.fail("attribute 'antialias' is 1 but mode is nearest");
  return s;
}

int64_t constant_dim(const OpContext& ctx, const te::Tensor& x, int d) {
  auto n = as_const_int(x.shape(d));
  if (!n) ctx.unsupported("resizing dimension {} of {}, which is symbolic", d, shape_text(x.shape()));
  return *n;
}

// The resized axes with their extents, from scales or sizes (and axes, keep_aspect_ratio_policy).
std::vector<AxisResize> plan_axes(const OpContext& ctx, const te::Tensor& x, const ResizeSettings& settings) {
  const int rank = x.ndim();
  const Node& node = ctx.node();
  std::vector<double> scales;
  std::vector<int64_t> sizes;
  std::vector<double> roi;
  if (node.op == OpKind::Upsample && ctx.opset() < 9) {
    scales = node.attr_floats("scales", {});
  } else if (node.op == OpKind::Upsample || ctx.opset() < 11) {
    scales = ctx.constant_floats(1, "scales");
  } else {
    if (ctx.has_input(2)) scales = ctx.constant_floats(2, "scales");
    if (ctx.has_input(3)) sizes = ctx.constant_ints(3, "sizes");
    if (!scales.empty() && !sizes.empty()) ctx.fail("both 'scales' and 'sizes' are given; exactly one is allowed");
    if (scales.empty() && sizes.empty()) ctx.fail("neither 'scales' nor 'sizes' is given; exactly one is required");
    if (settings.coordinates == Coordinates::TfCropAndResize && ctx.has_input(1)) {
      roi = ctx.constant_floats(1, "roi");
    }
  }
  std::vector<int> axes;
  for (int64_t a : node.attr_ints("axes", {})) {
    const int axis = normalize_axis(ctx, a, rank, "attribute 'axes'");
    for (int b : axes) {
      if (b == axis) ctx.fail("axis {} is listed twice in attribute 'axes'", a);
    }
    axes.push_back(axis);
  }
  if (axes.empty()) {
    for (int d = 0; d < rank; ++d) axes.push_back(d);
  }
  const size_t n = axes.size();
  if (!scales.empty() && scales.size() != n) {
    ctx.fail("'scales' has {} values, expected {} (one per {})", scales.size(), n, n == size_t(rank) ? "input dimension" : "axis");
  }
  if (!sizes.empty() && sizes.size() != n) {
    ctx.fail("'sizes' has {} values, expected {} (one per {})", sizes.size(), n, n == size_t(rank) ? "input dimension" : "axis");
  }
  if (!roi.empty() && roi.size() != 2 * n) ctx.fail("'roi' has {} values, expected {}", roi.size(), 2 * n);

  std::vector<AxisResize> plan;
  for (size_t k = 0; k < n; ++k) {
    AxisResize a;
    a.axis = axes[k];
    if (!scales.empty() && scales[k] == 1.0 && roi.empty()) continue;  // identity
    if (!sizes.empty()) {
      if (sizes[k] < 0) ctx.fail("'sizes'[{}] is negative ({})", k, sizes[k]);
      if (auto c = as_const_int(x.shape(a.axis)); c && *c == sizes[k] && roi.empty()) continue;
    }
    a.in = constant_dim(ctx, x, a.axis);
    if (!scales.empty()) {
      if (!(scales[k] > 0)) ctx.fail("'scales'[{}] is {}; scales must be positive", k, scales[k]);
      a.scale = scales[k];
      a.out = static_cast<int64_t>(a.scale * static_cast<double>(a.in));
    } else {
      a.out = sizes[k];
      a.scale = static_cast<double>(a.out) / static_cast<double>(a.in);
    }
    if (!roi.empty()) {
      a.roi_start = roi[k];
      a.roi_end = roi[k + n];
    }
    plan.push_back(a);
  }
  const std::string policy = node.attr_string("keep_aspect_ratio_policy", "stretch");
  if (!sizes.empty() && policy != "stretch") {
    if (policy != "not_larger" && policy != "not_smaller") {
      ctx.fail("attribute 'keep_aspect_ratio_policy' is '{}', expected stretch, not_larger or not_smaller", policy);
    }
    // One scale for every listed axis (the smallest or largest), sizes rounded half up.
    std::vector<AxisResize> all;
    double scale = policy == "not_larger" ? INFINITY : 0.0;
    for (size_t k = 0; k < n; ++k) {
      const double in = static_cast<double>(constant_dim(ctx, x, axes[k]));
      const double s = static_cast<double>(sizes[k]) / in;
      scale = policy == "not_larger" ? std::min(scale, s) : std::max(scale, s);
    }
    for (size_t k = 0; k < n; ++k) {
      AxisResize a;
      a.axis = axes[k];
      a.in = constant_dim(ctx, x, a.axis);
      a.scale = scale;
      a.out = static_cast<int64_t>(scale * static_cast<double>(a.in) + 0.5);
      if (!roi.empty()) {
        a.roi_start = roi[k];
        a.roi_end = roi[k + n];
      }
      if (a.out != a.in || scale != 1.0) all.push_back(a);
    }
    plan = all;
  }
  return plan;
}

// The source coordinate of output position `o` (float64), as the coordinate mode defines it.
Expr source_coordinate(const AxisResize& a, Coordinates mode, const Expr& o) {
  const Expr y = cast(Type(DType::Float64), o);
  const double in = static_cast<double>(a.in);
  const double out_width = a.scale * in;  // the reference's (fractional) output width
  switch (mode) {
    case Coordinates::AlignCorners:
      if (out_width == 1.0) return f64(0.0);
      return y * f64(in - 1) / f64(out_width - 1);
    case Coordinates::Asymmetric: return y / f64(a.scale);
    case Coordinates::TfCropAndResize: {
      const double span = a.roi_end - a.roi_start;
      Expr x = out_width == 1.0 ? f64(span * (in - 1) / 2) : y * f64(span) * f64(in - 1) / f64(out_width - 1);
      return x + f64(a.roi_start * (in - 1));
    }
    case Coordinates::PytorchHalfPixel:
      if (out_width == 1.0) return f64(-0.5);
      return (y + f64(0.5)) / f64(a.scale) - f64(0.5);
    case Coordinates::TfHalfPixelForNn: return (y + f64(0.5)) / f64(a.scale);
    case Coordinates::HalfPixel: return (y + f64(0.5)) / f64(a.scale) - f64(0.5);
    case Coordinates::HalfPixelSymmetric: {
      const double adjustment = static_cast<double>(a.out) / out_width;
      const double offset = in / 2 * (1 - adjustment);
      return f64(offset) + (y + f64(0.5)) / f64(a.scale) - f64(0.5);
    }
  }
  return Expr();
}

// Weights of `taps` consecutive input positions starting at floor(x) + first (ratio r = x -
// floor(x), in (0, 1]); one expression per tap.
struct Filter {
  int taps = 2;
  int first = 0;  // offset of the first tap from floor(x)
  std::function<std::vector<Expr>(const Expr& r)> weights;
};

Expr cubic_near(double A, const Expr& t) { return ((f64(A + 2) * t - f64(A + 3)) * t) * t + f64(1); }  // |t| <= 1
Expr cubic_far(double A, const Expr& t) {  // 1 < |t| < 2
  return ((f64(A) * t - f64(5 * A)) * t + f64(8 * A)) * t - f64(4 * A);
}

Filter make_filter(const ResizeSettings& s, double scale) {
  Filter f;
  if (s.mode == Mode::Nearest || (!s.antialias && s.mode == Mode::Linear)) {
    f.taps = 2;
    f.first = 0;
    f.weights = [](const Expr& r) { return std::vector<Expr>{f64(1) - r, r}; };
    return f;
  }
  const double A = s.cubic_a;
  if (!s.antialias || scale >= 1.0) {
    if (s.mode == Mode::Cubic) {
      f.taps = 4;
      f.first = -1;
      f.weights = [A](const Expr& r) {
        const Expr q = f64(1) - r;
        return std::vector<Expr>{cubic_far(A, r + f64(1)), cubic_near(A, r), cubic_near(A, q), cubic_far(A, q + f64(1))};
      };
      return f;
    }
    f.weights = [](const Expr& r) { return std::vector<Expr>{f64(1) - r, r}; };
    return f;
  }
  // Antialiasing (downsampling): the kernel stretched by 1/scale, weights normalized to sum 1.
  const bool cubic = s.mode == Mode::Cubic;
  const int start = static_cast<int>(std::floor((cubic ? -2.0 : -1.0) / scale) + 1);
  f.taps = 2 - 2 * start;
  f.first = start;
  f.weights = [cubic, start, taps = f.taps, scale, A](const Expr& r) {
    std::vector<Expr> w;
    Expr total;
    for (int t = 0; t < taps; ++t) {
      const Expr arg = call(Intrinsic::Abs, (f64(start + t) - r) * f64(scale));
      Expr c = cubic ? select(arg <= f64(1), cubic_near(A, arg), select(arg < f64(2), cubic_far(A, arg), f64(0)))
                     : max(f64(1) - arg, f64(0));
      w.push_back(c);
      total = total.defined() ? total + c : c;
    }
    for (Expr& c : w) c = c / total;
    return w;
  };
  return f;
}

// Resizes axis a.axis of `x` (a stage of dtype `value_type`).
te::Tensor resize_axis(const OpContext& ctx, const te::Tensor& x, const AxisResize& a, const ResizeSettings& s,
                       DType value_type, const std::string& name) {
  std::vector<Expr> shape = x.shape();
  shape[a.axis] = Expr(a.out);
  const Filter filter = make_filter(s, a.scale);
  return te::compute(
      name, shape,
      [&](const std::vector<Expr>& i) {
        const Expr xo = source_coordinate(a, s.coordinates, i[a.axis]);
        // floor(x) and ratio in (0, 1]: an integral x counts as the right end of [x - 1, x].
        const Expr fl = call(Intrinsic::Floor, xo);
        const Expr integral = xo == fl;
        const Expr base = cast(kIndexType, select(integral, fl - f64(1), fl));
        const Expr r = select(integral, f64(1), xo - fl);
        auto read = [&](const Expr& position) {
          std::vector<Expr> index = i;
          index[a.axis] = clamp(position, Expr(0), Expr(a.in - 1));
          return x(index);
        };
        Expr value;
        if (s.mode == Mode::Nearest) {
          Expr pick_first;
          switch (s.rounding) {
            case Rounding::RoundPreferFloor: pick_first = r <= f64(0.5); break;
            case Rounding::RoundPreferCeil: pick_first = r < f64(0.5); break;
            case Rounding::Floor: pick_first = r < f64(1); break;
            case Rounding::Ceil: pick_first = make_bool(false); break;
          }
          value = select(pick_first, read(base), read(base + 1));
          value = cast(Type(value_type), value);
        } else {
          std::vector<Expr> w = filter.weights(r);
          std::vector<Expr> positions;
          for (int t = 0; t < filter.taps; ++t) positions.push_back(base + Expr(filter.first + t));
          if (s.exclude_outside) {
            Expr total;
            for (int t = 0; t < filter.taps; ++t) {
              w[t] = select(positions[t] >= 0 && positions[t] < Expr(a.in), w[t], f64(0));
              total = total.defined() ? total + w[t] : w[t];
            }
            total = select(total == f64(0), f64(1), total);
            for (Expr& c : w) c = c / total;
          }
          const Type acc(value_type);
          for (int t = 0; t < filter.taps; ++t) {
            const Expr term = cast(acc, w[t]) * cast(acc, read(positions[t]));
            value = value.defined() ? value + term : term;
          }
        }
        if (s.coordinates == Coordinates::TfCropAndResize) {
          value = select(xo < f64(0) || xo > f64(static_cast<double>(a.in - 1)),
                         make_const(Type(value_type), s.extrapolation), value);
        }
        return value;
      },
      ctx.node().describe());
}

std::vector<te::Tensor> build_resize(OpContext& ctx) {
  const te::Tensor& x = ctx.input(0);
  const ResizeSettings settings = read_settings(ctx);
  const std::vector<AxisResize> plan = plan_axes(ctx, x, settings);
  const DType dtype = x.dtype();
  DType value_type = dtype;
  if (settings.mode != Mode::Nearest) {
    value_type = (dtype == DType::Float16 || dtype == DType::BFloat16 || dtype == DType::Float32) ? DType::Float32
                                                                                                 : DType::Float64;
  }
  te::Tensor current = x;
  for (size_t k = 0; k < plan.size(); ++k) {
    current = resize_axis(ctx, current, plan[k], settings, value_type, ctx.stage_name("axis" + std::to_string(plan[k].axis)));
  }
  return {te::compute(
      ctx.output_name(0), current.shape(),
      [&](const std::vector<Expr>& i) {
        Expr v = current(i);
        if (value_type == dtype) return v;
        if (is_float(dtype)) return cast(Type(dtype), v);
        // Integers: rounded to nearest and saturated, as a float-to-integer resize stores.
        v = call(Intrinsic::RoundEven, v);
        v = max(min(v, cast(v.type(), highest_value(Type(dtype)))), cast(v.type(), lowest_value(Type(dtype))));
        return cast(Type(dtype), v);
      },
      ctx.node().describe())};
}

}  // namespace

void register_resampling(OpTable& table) {
  table.add(OpKind::Resize, build_resize);
  table.add(OpKind::Upsample, build_resize);
}

}  // namespace kiln::ops
