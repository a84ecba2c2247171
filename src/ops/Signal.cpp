// Signal processing: the window functions (HannWindow, HammingWindow, BlackmanWindow), DFT,
// STFT and MelWeightMatrix. Transforms are direct sums, O(n^2) per transformed row (no FFT): X[k] =
// sum over n of x[n] e^(-2 pi i k n / N), the phase reduced modulo N in integers and evaluated in
// float64. Complex tensors are real tensors with a last dim of 2 (real, imaginary); real inputs
// have a last dim of 1. Lengths that decide shapes (window size, dft_length, frame_step) must be
// known.
#include <cmath>
#include <numbers>

#include "Families.h"
#include "IndexMath.h"
#include "kiln/onnx/Proto.h"
#include "kiln/ops/Helpers.h"

namespace kiln::ops {
namespace {

using namespace ir;

Expr f64(double v) { return make_const(Type(DType::Float64), v); }

int64_t scalar_int(const OpContext& ctx, int input, const char* what) {
  const std::vector<int64_t> v = ctx.constant_ints(input, what);
  if (v.size() != 1) ctx.fail("input {} ('{}') must hold one value, got {}", input, what, v.size());
  return v[0];
}

DType output_datatype(const OpContext& ctx) {
  const int64_t code = ctx.node().attr_int("output_datatype", 1);
  std::optional<DType> d = dtype_from_onnx(static_cast<int32_t>(code));
  if (!d || *d == DType::Bool) ctx.fail("attribute 'output_datatype' is {}, expected a numeric ONNX data type", code);
  return *d;
}

enum class Window { Hann, Hamming, Blackman };

template <Window W>
std::vector<te::Tensor> build_window(OpContext& ctx) {
  const int64_t size = scalar_int(ctx, 0, "size");
  if (size < 0) ctx.fail("input 0 ('size') is {}, expected a non-negative number", size);
  const bool periodic = ctx.node().attr_int("periodic", 1) != 0;
  const DType dtype = output_datatype(ctx);
  const double n = static_cast<double>(periodic ? size : size - 1);
  return {te::compute(
      ctx.output_name(0), {Expr(size)},
      [&](const std::vector<Expr>& i) {
        const Expr phase = f64(2 * std::numbers::pi / n) * cast(Type(DType::Float64), i[0]);
        Expr w;
        if constexpr (W == Window::Hann) w = f64(0.5) - f64(0.5) * call(Intrinsic::Cos, phase);
        if constexpr (W == Window::Hamming) w = f64(25.0 / 46) - f64(21.0 / 46) * call(Intrinsic::Cos, phase);
        if constexpr (W == Window::Blackman) {
          w = f64(0.42) - f64(0.5) * call(Intrinsic::Cos, phase) + f64(0.08) * call(Intrinsic::Cos, phase * f64(2));
        }
        return cast(Type(dtype), w);
      },
      ctx.node().describe())};
}

// The complex component `c` (0 real, 1 imaginary) of sum over n < count of sample(n) *
// e^(sign 2 pi i k n / N), where sample(n) gives (real, imaginary).
Expr dft_sum(const std::string& name, const Expr& k, const Expr& c, int64_t count, int64_t length, double sign,
             const std::function<std::pair<Expr, Expr>(const Expr& n)>& sample) {
  const IterVar n = te::reduce_axis(Expr(count), name);
  const Expr phase = f64(sign * 2 * std::numbers::pi / static_cast<double>(length)) *
                     cast(Type(DType::Float64), floor_mod(k * n.var, Expr(length)));
  const Expr cs = call(Intrinsic::Cos, phase), sn = call(Intrinsic::Sin, phase);
  const auto [re, im] = sample(n.var);
  // (re + i im)(cos + i sin)
  return te::sum(select(c == 0, re * cs - im * sn, re * sn + im * cs), {n});
}

std::vector<te::Tensor> build_dft(OpContext& ctx) {
  const te::Tensor& x = ctx.input(0);
  check_dtype(ctx, x, "input 0", kFloatTypes);
  const int rank = x.ndim();
  auto last = as_const_int(x.shape(rank - 1));
  if (rank < 2 || !last || (*last != 1 && *last != 2)) {
    ctx.fail("input 0 {} must end in a dim of 1 (real) or 2 (complex)", shape_text(x.shape()));
  }
  const bool complex_in = *last == 2;
  int64_t axis_value = ctx.opset() >= 20 ? -2 : 1;
  if (ctx.opset() >= 20) {
    if (ctx.has_input(2)) axis_value = scalar_int(ctx, 2, "axis");
  } else {
    axis_value = ctx.node().attr_int("axis", 1);
  }
  const int axis = normalize_axis(ctx, axis_value, rank, "axis");
  if (axis == rank - 1) ctx.fail("axis {} is the real/imaginary dim; it must be a signal dim", axis_value);
  const bool inverse = ctx.node().attr_int("inverse", 0) != 0;
  const bool onesided = ctx.node().attr_int("onesided", 0) != 0;
  auto in_len = as_const_int(x.shape(axis));
  if (!in_len) ctx.unsupported("transforming dim {} of {}, which is symbolic", axis, shape_text(x.shape()));
  // An inverse one-sided DFT makes a real signal from half a spectrum (the rest is conjugate
  // symmetric: X[k] = conj(X[N - k])); its default length is 2 * (bins - 1).
  const bool real_out = inverse && onesided;
  int64_t length = real_out ? 2 * (*in_len - 1) : *in_len;
  if (ctx.has_input(1)) length = scalar_int(ctx, 1, "dft_length");
  if (length < 1) ctx.fail("dft_length is {}, expected a positive number", length);
  const int64_t bins = onesided && !inverse ? length / 2 + 1 : length;
  std::vector<Expr> shape = x.shape();
  shape[axis] = Expr(bins);
  shape[rank - 1] = Expr(real_out ? 1 : 2);
  const Type f(DType::Float64);
  if (real_out && !complex_in) ctx.fail("an inverse one-sided DFT needs a complex input (last dim 2)");
  const te::Tensor sums = real_out ? te::compute(
      ctx.stage_name("dft"), shape,
      [&](const std::vector<Expr>& i) {
        return dft_sum(ctx.stage_name("k"), i[axis], Expr(0), length, length, 1.0, [&](const Expr& k) {
          const Expr mirrored = k >= Expr(*in_len);
          const Expr source = select(mirrored, Expr(length) - k, k);
          std::vector<Expr> at = i;
          at[axis] = clamp(source, Expr(0), Expr(*in_len - 1));
          const Expr present = source < Expr(*in_len);
          at[rank - 1] = Expr(0);
          const Expr re = select(present, cast(f, x(at)), f64(0));
          at[rank - 1] = Expr(1);
          const Expr im = select(present, cast(f, x(at)), f64(0));
          return std::make_pair(re, select(mirrored, -im, im));
        });
      },
      ctx.node().describe()) : te::compute(
      ctx.stage_name("dft"), shape,
      [&](const std::vector<Expr>& i) {
        return dft_sum(ctx.stage_name("n"), i[axis], i[rank - 1], std::min(length, *in_len), length,
                       inverse ? 1.0 : -1.0, [&](const Expr& n) {
                         std::vector<Expr> at = i;
                         at[axis] = n;
                         at[rank - 1] = Expr(0);
                         const Expr re = cast(f, x(at));
                         if (!complex_in) return std::make_pair(re, f64(0));
                         at[rank - 1] = Expr(1);
                         return std::make_pair(re, cast(f, x(at)));
                       });
      },
      ctx.node().describe());
  return {te::compute(
      ctx.output_name(0), shape,
      [&](const std::vector<Expr>& i) {
        Expr v = sums(i);
        if (inverse) v = v / f64(static_cast<double>(length));
        return cast(Type(x.dtype()), v);
      },
      ctx.node().describe())};
}

// STFT: frames of frame_length samples every frame_step, each multiplied by the window and
// transformed; output [batch, frames, bins, 2].
std::vector<te::Tensor> build_stft(OpContext& ctx) {
  const te::Tensor& x = ctx.input(0);
  check_dtype(ctx, x, "input 0", kFloatTypes);
  auto last = as_const_int(x.shape(x.ndim() - 1));
  if (x.ndim() != 3 || !last || (*last != 1 && *last != 2)) {
    ctx.fail("signal {} must have shape [batch, length, 1 or 2]", shape_text(x.shape()));
  }
  const bool complex_in = *last == 2;
  const int64_t step = scalar_int(ctx, 1, "frame_step");
  if (step < 1) ctx.fail("frame_step is {}, expected a positive number", step);
  te::Tensor window;
  int64_t frame = 0;
  if (ctx.has_input(2)) {
    window = ctx.input(2);
    if (window.ndim() != 1) ctx.fail("window {} must have rank 1", shape_text(window.shape()));
    auto w = as_const_int(window.shape(0));
    if (!w) ctx.unsupported("a window of symbolic length {}", shape_text(window.shape()));
    frame = *w;
  }
  if (ctx.has_input(3)) {
    const int64_t fl = scalar_int(ctx, 3, "frame_length");
    if (window.defined() && fl != frame) ctx.fail("frame_length is {} but the window has {} values", fl, frame);
    frame = fl;
  }
  if (frame < 1) ctx.fail("the frame length is unknown: give a window or frame_length");
  auto len = as_const_int(x.shape(1));
  if (!len) ctx.unsupported("a signal of symbolic length {}", shape_text(x.shape()));
  if (*len < frame) ctx.fail("the signal has {} samples, fewer than one frame of {}", *len, frame);
  const int64_t frames = 1 + (*len - frame) / step;
  const bool onesided = ctx.node().attr_int("onesided", 1) != 0;
  if (onesided && complex_in) ctx.fail("onesided is 1 but the signal is complex");
  const int64_t bins = onesided ? frame / 2 + 1 : frame;
  const std::vector<Expr> shape = {x.shape(0), Expr(frames), Expr(bins), Expr(2)};
  const Type f(DType::Float64);
  const te::Tensor sums = te::compute(
      ctx.stage_name("stft"), shape,
      [&](const std::vector<Expr>& i) {
        return dft_sum(ctx.stage_name("n"), i[2], i[3], frame, frame, -1.0, [&](const Expr& n) {
          const Expr w = window.defined() ? cast(f, window({n})) : f64(1);
          std::vector<Expr> at = {i[0], i[1] * Expr(step) + n, Expr(0)};
          const Expr re = cast(f, x(at)) * w;
          if (!complex_in) return std::make_pair(re, f64(0));
          at[2] = Expr(1);
          return std::make_pair(re, cast(f, x(at)) * w);
        });
      },
      ctx.node().describe());
  return {te::compute(
      ctx.output_name(0), shape, [&](const std::vector<Expr>& i) { return cast(Type(x.dtype()), sums(i)); },
      ctx.node().describe())};
}

double scalar_float(const OpContext& ctx, int input, const char* what) {
  const std::vector<double> v = ctx.constant_floats(input, what);
  if (v.size() != 1) ctx.fail("input {} ('{}') must hold one value, got {}", input, what, v.size());
  return v[0];
}

// MelWeightMatrix (opset 17): [dft_length / 2 + 1, num_mel_bins] triangular filters whose edges
// are num_mel_bins + 2 points evenly spaced in mel between the edge frequencies, mapped to DFT
// bins as floor((dft_length + 1) * hz / sample_rate) (the reference's formula). Every input
// must be known: the edges are computed here, the filters are the tensor's expression.
std::vector<te::Tensor> build_mel_weight_matrix(OpContext& ctx) {
  const int64_t mel_bins = scalar_int(ctx, 0, "num_mel_bins");
  const int64_t dft_length = scalar_int(ctx, 1, "dft_length");
  const double sample_rate = scalar_float(ctx, 2, "sample_rate");
  const double lower = scalar_float(ctx, 3, "lower_edge_hertz"),
               upper = scalar_float(ctx, 4, "upper_edge_hertz");
  if (mel_bins < 1 || dft_length < 1 || sample_rate <= 0) {
    ctx.fail("num_mel_bins ({}), dft_length ({}) and sample_rate ({}) must be positive", mel_bins,
             dft_length, sample_rate);
  }
  auto to_mel = [](double hz) { return 2595 * std::log1p(hz / 700) / std::log(10.0); };
  const double low_mel = to_mel(lower),
               step = (to_mel(upper) - low_mel) / static_cast<double>(mel_bins + 2);
  std::vector<int64_t> edge(static_cast<size_t>(mel_bins + 2));
  for (int64_t k = 0; k < mel_bins + 2; ++k) {
    const double hz =
        700 * std::expm1((static_cast<double>(k) * step + low_mel) / 2595 * std::log(10.0));
    edge[k] =
        static_cast<int64_t>(std::floor(static_cast<double>(dft_length + 1) * hz / sample_rate));
  }
  const DType dtype = output_datatype(ctx);
  const Type acc(DType::Float64);
  return {te::compute(
      ctx.output_name(0), {Expr(dft_length / 2 + 1), Expr(mel_bins)},
      [&](const std::vector<Expr>& i) {
        const Expr j = i[0];
        Expr value = make_zero(acc);
        for (int64_t m = mel_bins - 1; m >= 0; --m) {
          const int64_t lo = edge[m], center = edge[m + 1], hi = edge[m + 2];
          const Expr jf = cast(acc, j);
          Expr v = lo == center ? select(j == Expr(center), f64(1), f64(0))
                                : select(j >= Expr(lo) && j <= Expr(center),
                                         (jf - f64(static_cast<double>(lo))) /
                                             f64(static_cast<double>(center - lo)),
                                         f64(0));
          if (hi > center) {
            v = select(j >= Expr(center) && j < Expr(hi),
                       (f64(static_cast<double>(hi)) - jf) / f64(static_cast<double>(hi - center)),
                       v);
          }
          value = m == mel_bins - 1 ? v : select(i[1] == Expr(m), v, value);
        }
        return cast(Type(dtype), value);
      },
      ctx.node().describe())};
}

}  // namespace

void register_signal(OpTable& table) {
  table.add(OpKind::HannWindow, build_window<Window::Hann>);
  table.add(OpKind::HammingWindow, build_window<Window::Hamming>);
  table.add(OpKind::BlackmanWindow, build_window<Window::Blackman>);
  table.add(OpKind::DFT, build_dft);
  table.add(OpKind::STFT, build_stft);
  table.add(OpKind::MelWeightMatrix, build_mel_weight_matrix);
}

}  // namespace kiln::ops
