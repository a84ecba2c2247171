// Linear quantization: QuantizeLinear and DequantizeLinear (per tensor, per axis, blocked; every
// opset's attributes: axis, block_size, saturate, output_dtype, precision),
// DynamicQuantizeLinear, MatMulInteger, QLinearMatMul, ConvInteger, QLinearConv.
//
// Rounding follows the onnx package's reference implementation: x / scale is computed in the
// precision (or the scale's type; float64 for integer x, as numpy promotes), rounded half to even,
// then the zero point added and the result clamped to the output type; float8 outputs are a
// cast (saturating unless saturate=0), float4 outputs a saturating cast of x / scale + zero point.
#include <cmath>

#include "Elementwise.h"
#include "Families.h"
#include "IndexMath.h"
#include "Windows.h"
#include "kiln/ir/Simplify.h"
#include "kiln/ir/SmallFloat.h"
#include "kiln/onnx/Proto.h"
#include "kiln/ops/Helpers.h"

namespace kiln::ops {
namespace {

using namespace ir;

const Type kF32(DType::Float32);
const Type kF64(DType::Float64);
const Type kI32(DType::Int32);

// How a scale or zero point maps onto x's elements.
struct QuantParam {
  te::Tensor t;
  int axis = 0;        // x's quantized axis (per axis, blocked)
  int64_t block = 0;   // block_size (blocked)
  bool scalar = true;  // rank 0 or one element: per tensor
};

// Checks `p` against x (`what` names it) for per-tensor, per-axis (1-D of x's axis length) or
// blocked (x's rank, ceil(len / block) along the axis) quantization.
QuantParam quant_param(const OpContext& ctx, const te::Tensor& p, const te::Tensor& x, int64_t axis_attr,
                       int64_t block, const char* what) {
  QuantParam q{p, 0, block, true};
  const auto n = te::constant_num_elements(p);
  if (p.ndim() == 0 || (p.ndim() == 1 && n && *n == 1 && block == 0)) return q;
  q.scalar = false;
  q.axis = normalize_axis(ctx, axis_attr, x.ndim(), "attribute 'axis'");
  const auto len = as_const_int(x.shape(q.axis));
  if (block == 0) {
    if (p.ndim() != 1) {
      ctx.fail("{} {} must be a scalar or 1-D (per axis) without block_size; got rank {}", what,
               shape_text(p.shape()), p.ndim());
    }
    const auto m = as_const_int(p.shape(0));
    if (len && m && *len != *m) {
      ctx.fail("{} has {} elements but x {} has {} along axis {}", what, *m, shape_text(x.shape()), *len, q.axis);
    }
    return q;
  }
  if (block < 0) ctx.fail("attribute 'block_size' must be >= 0, got {}", block);
  if (p.ndim() != x.ndim()) {
    ctx.fail("{} {} must have x's rank {} for blocked quantization (block_size {})", what, shape_text(p.shape()),
             x.ndim(), block);
  }
  for (int d = 0; d < x.ndim(); ++d) {
    const auto xd = as_const_int(x.shape(d)), pd = as_const_int(p.shape(d));
    if (!xd || !pd) continue;
    const int64_t expected = d == q.axis ? (*xd + block - 1) / block : *xd;
    if (*pd != expected) {
      ctx.fail("{} {} must have {} along axis {} for x {} with block_size {} on axis {}", what, shape_text(p.shape()),
               expected, d, shape_text(x.shape()), block, q.axis);
    }
  }
  return q;
}

Expr read_param(const QuantParam& q, const std::vector<Expr>& i) {
  if (q.scalar) return q.t.ndim() == 0 ? q.t({}) : q.t(std::vector<Expr>(q.t.ndim(), Expr(0)));
  if (q.block == 0) return q.t({i[q.axis]});
  std::vector<Expr> idx = i;
  idx[q.axis] = i[q.axis] / Expr(q.block);
  return q.t(idx);
}

bool is_float8(DType d) {
  return d == DType::Float8E4M3 || d == DType::Float8E4M3FNUZ || d == DType::Float8E5M2 || d == DType::Float8E5M2FNUZ;
}

// The integer range of a quantized integer type.
std::pair<int64_t, int64_t> int_range(DType d) {
  switch (d) {
    case DType::UInt8: return {0, 255};
    case DType::Int8: return {-128, 127};
    case DType::UInt16: return {0, 65535};
    case DType::Int16: return {-32768, 32767};
    case DType::UInt4: return {0, 15};
    case DType::Int4: return {-8, 7};
    case DType::UInt2: return {0, 3};
    case DType::Int2: return {-2, 1};
    default: return {0, 0};
  }
}

bool is_quant_int(DType d) { return int_range(d).first != int_range(d).second; }

// round_half_even(v) + zero point, clamped to `out` (v a float expression).
Expr round_clamp(const Expr& v, const Expr& zero_point, DType out) {
  const auto [lo, hi] = int_range(out);
  const Type i64(DType::Int64);
  Expr q = cast(i64, call(Intrinsic::RoundEven, v));
  if (zero_point.defined()) q = q + cast(i64, zero_point);
  q = max(min(q, make_const(i64, static_cast<double>(hi))), make_const(i64, static_cast<double>(lo)));
  return cast(Type(out), q);
}

std::optional<DType> attr_dtype(OpContext& ctx, const char* name) {
  const int64_t code = ctx.node().attr_int(name, 0);
  if (code == 0) return std::nullopt;
  const std::optional<DType> d = dtype_from_onnx(static_cast<int32_t>(code));
  if (!d) ctx.unsupported("attribute '{}' names data type {}, which kiln does not support", name,
                          onnx_data_type_name(static_cast<int32_t>(code)));
  return d;
}

// a / b computed in `p` (float16/bfloat16 through float32 and rounded back, as numpy does).
Expr divide_in(const Expr& a, const Expr& b, DType p) {
  if (p == DType::Float16 || p == DType::BFloat16) {
    const Expr pa = cast(Type(p), a), pb = cast(Type(p), b);
    return cast(kF32, cast(Type(p), cast(kF32, pa) / cast(kF32, pb)));
  }
  return cast(Type(p), a) / cast(Type(p), b);
}

std::vector<te::Tensor> quantize_linear(OpContext& ctx) {
  const te::Tensor& x = ctx.input(0);
  const te::Tensor& scale = ctx.input(1);
  check_dtype(ctx, x, "input 'x'", {DType::Float32, DType::Float16, DType::BFloat16, DType::Int32});
  check_dtype(ctx, scale, "input 'y_scale'", {DType::Float32, DType::Float16, DType::BFloat16, DType::Int32});
  const int64_t axis = ctx.node().attr_int("axis", 1), block = ctx.node().attr_int("block_size", 0);
  const bool saturate = ctx.node().attr_int("saturate", 1) != 0;
  const std::optional<DType> output_dtype = attr_dtype(ctx, "output_dtype");
  DType out = output_dtype.value_or(DType::UInt8);
  const bool has_zp = ctx.has_input(2);
  if (has_zp) {
    const DType zp = ctx.input(2).dtype();
    if (output_dtype && *output_dtype != zp) {
      ctx.fail("attribute 'output_dtype' is {} but input 'y_zero_point' is {}; expected them to agree",
               dtype_name(*output_dtype), dtype_name(zp));
    }
    out = zp;
  }
  if (!is_quant_int(out) && !is_float8(out) && out != DType::Float4E2M1) {
    ctx.fail("the output type {} is not a quantized type; expected (u)int2, (u)int4, (u)int8, (u)int16, float8 or float4e2m1",
             dtype_name(out));
  }
  const QuantParam s = quant_param(ctx, scale, x, axis, block, "input 'y_scale'");
  QuantParam zp;
  if (has_zp) zp = quant_param(ctx, ctx.input(2), x, axis, block, "input 'y_zero_point'");
  DType precision = is_float(x.dtype()) ? scale.dtype() : DType::Float64;
  if (is_integral(precision)) precision = DType::Float64;
  if (const std::optional<DType> p = attr_dtype(ctx, "precision")) precision = *p;
  return {te::compute(
      ctx.output_name(0), x.shape(),
      [&](const std::vector<Expr>& i) {
        const Expr v = divide_in(x(i), read_param(s, i), precision);
        const Expr z = has_zp ? read_param(zp, i) : Expr();
        if (is_quant_int(out)) return round_clamp(v, z, out);
        if (is_float8(out)) return saturate ? cast(Type(out), v) : cast_float8_without_saturation(v, out);
        return cast(Type(out), has_zp ? v + cast(v.type(), z) : v);  // float4e2m1: always saturates
      },
      ctx.node().describe())};
}

std::vector<te::Tensor> dequantize_linear(OpContext& ctx) {
  const te::Tensor& x = ctx.input(0);
  const te::Tensor& scale = ctx.input(1);
  const DType xt = x.dtype();
  if (!is_quant_int(xt) && !is_float8(xt) && xt != DType::Float4E2M1 && xt != DType::Int32) {
    ctx.fail("input 'x' is {}; expected (u)int2, (u)int4, (u)int8, (u)int16, int32, float8 or float4e2m1", dtype_name(xt));
  }
  check_dtype(ctx, scale, "input 'x_scale'", {DType::Float32, DType::Float16, DType::BFloat16});
  const int64_t axis = ctx.node().attr_int("axis", 1), block = ctx.node().attr_int("block_size", 0);
  const DType out = attr_dtype(ctx, "output_dtype").value_or(scale.dtype());
  const QuantParam s = quant_param(ctx, scale, x, axis, block, "input 'x_scale'");
  const bool use_zp = ctx.has_input(2) && !is_float8(xt) && xt != DType::Float4E2M1;
  QuantParam zp;
  if (use_zp) {
    if (ctx.input(2).dtype() != xt) {
      ctx.fail("input 'x_zero_point' is {} but x is {}; expected the same type", dtype_name(ctx.input(2).dtype()),
               dtype_name(xt));
    }
    zp = quant_param(ctx, ctx.input(2), x, axis, block, "input 'x_zero_point'");
  }
  return {te::compute(
      ctx.output_name(0), x.shape(),
      [&](const std::vector<Expr>& i) {
        Expr dx = cast(kF32, x(i));
        if (use_zp) dx = dx - cast(kF32, read_param(zp, i));
        return cast(Type(out), dx * cast(kF32, read_param(s, i)));
      },
      ctx.node().describe())};
}

std::vector<te::Tensor> dynamic_quantize_linear(OpContext& ctx) {
  const te::Tensor& x = ctx.input(0);
  check_dtype(ctx, x, "input 'x'", {DType::Float32});
  auto reduce_all = [&](bool is_max, const std::string& name) {
    return te::compute(ctx.stage_name(name), {}, [&](const std::vector<Expr>&) {
      std::vector<IterVar> axes;
      std::vector<Expr> idx;
      for (int d = 0; d < x.ndim(); ++d) {
        axes.push_back(te::reduce_axis(x.shape(d), ctx.stage_name(name + std::to_string(d))));
        idx.push_back(axes.back().var);
      }
      return is_max ? te::max_reduce(x(idx), axes) : te::min_reduce(x(idx), axes);
    });
  };
  const te::Tensor hi = reduce_all(true, "max"), lo = reduce_all(false, "min");
  const Expr zero = make_zero(kF32);
  te::Tensor y_scale = te::compute(
      ctx.output_name(1), {},
      [&](const std::vector<Expr>&) {
        const Expr maxx = max(zero, hi({})), minx = min(zero, lo({}));
        return select(maxx == minx, make_const(kF32, 1.0), maxx - minx) / make_const(kF32, 255.0);
      },
      ctx.node().describe());
  te::Tensor y_zp = te::compute(
      ctx.output_name(2), {},
      [&](const std::vector<Expr>&) {
        const Expr initial = zero - min(zero, lo({})) / y_scale({});
        const Expr clamped = max(zero, min(make_const(kF32, 255.0), initial));
        return cast(Type(DType::UInt8), call(Intrinsic::RoundEven, clamped));
      },
      ctx.node().describe());
  te::Tensor y = te::compute(
      ctx.output_name(0), x.shape(),
      [&](const std::vector<Expr>& i) {
        const Expr v = call(Intrinsic::RoundEven, x(i) / y_scale({})) + cast(kF32, y_zp({}));
        return cast(Type(DType::UInt8), max(zero, min(make_const(kF32, 255.0), v)));
      },
      ctx.node().describe());
  return {y, y_scale, y_zp};
}

// sum_k (A[.., m, k] - a_zp) * (B[.., k, n] - b_zp) in int32 over numpy-broadcast batches; a_zp
// per row m or per tensor, b_zp per column n or per tensor. `finish` maps the sum to the output.
using Finish = std::function<Expr(const Expr& acc, const Expr& m, const Expr& n)>;
te::Tensor integer_matmul(OpContext& ctx, const te::Tensor& a, const te::Tensor& b, const te::Tensor* a_zp,
                          const te::Tensor* b_zp, const Finish& finish) {
  if (a.ndim() < 1 || b.ndim() < 1) ctx.fail("A and B must have rank 1 or more");
  const bool a_vec = a.ndim() == 1, b_vec = b.ndim() == 1;
  const Expr k_extent = a.shape(a.ndim() - 1);
  const auto ka = as_const_int(k_extent), kb = as_const_int(b_vec ? b.shape(0) : b.shape(b.ndim() - 2));
  if (ka && kb && *ka != *kb) {
    ctx.fail("inner dimensions do not match: A {} has {} columns but B {} has {} rows", shape_text(a.shape()), *ka,
             shape_text(b.shape()), *kb);
  }
  const std::vector<Expr> a_batch(a.shape().begin(), a.shape().end() - (a_vec ? 1 : 2));
  const std::vector<Expr> b_batch(b.shape().begin(), b.shape().end() - (b_vec ? 1 : 2));
  std::vector<Expr> shape = broadcast_shape(
      ctx, {te::placeholder("A_batch", a.dtype(), a_batch), te::placeholder("B_batch", b.dtype(), b_batch)});
  const size_t nb = shape.size();
  if (!a_vec) shape.push_back(a.shape(a.ndim() - 2));
  if (!b_vec) shape.push_back(b.shape(b.ndim() - 1));
  auto batch_index = [](const std::vector<Expr>& dims, const std::vector<Expr>& out) {
    std::vector<Expr> idx;
    const size_t offset = out.size() - dims.size();
    for (size_t d = 0; d < dims.size(); ++d) idx.push_back(is_one(dims[d]) ? Expr(0) : out[d + offset]);
    return idx;
  };
  auto zp_read = [](const te::Tensor* zp, const Expr& at) {
    if (!zp) return make_zero(kI32);
    const auto n = te::constant_num_elements(*zp);
    if (zp->ndim() == 0) return cast(kI32, (*zp)({}));
    if (n && *n == 1) return cast(kI32, (*zp)(std::vector<Expr>(zp->ndim(), Expr(0))));
    std::vector<Expr> idx(zp->ndim(), Expr(0));
    idx.back() = at;
    return cast(kI32, (*zp)(idx));
  };
  te::Tensor acc = te::compute(ctx.stage_name("acc"), shape, [&](const std::vector<Expr>& i) {
    IterVar k = te::reduce_axis(k_extent, ctx.stage_name("k"));
    std::vector<Expr> batch(i.begin(), i.begin() + nb);
    std::vector<Expr> ai = batch_index(a_batch, batch), bi = batch_index(b_batch, batch);
    const Expr m = a_vec ? Expr(0) : i[nb];
    const Expr n = b_vec ? Expr(0) : i[nb + (a_vec ? 0 : 1)];
    if (!a_vec) ai.push_back(m);
    ai.push_back(k.var);
    bi.push_back(k.var);
    if (!b_vec) bi.push_back(n);
    return te::sum((cast(kI32, a(ai)) - zp_read(a_zp, m)) * (cast(kI32, b(bi)) - zp_read(b_zp, n)), {k});
  });
  return te::compute(
      ctx.output_name(0), shape,
      [&](const std::vector<Expr>& i) {
        const Expr m = a_vec ? Expr(0) : i[nb];
        const Expr n = b_vec ? Expr(0) : i[nb + (a_vec ? 0 : 1)];
        return finish(acc(i), m, n);
      },
      ctx.node().describe());
}

constexpr std::initializer_list<DType> k8BitTypes = {DType::Int8, DType::UInt8};

std::vector<te::Tensor> matmul_integer(OpContext& ctx) {
  const te::Tensor& a = ctx.input(0);
  const te::Tensor& b = ctx.input(1);
  check_dtype(ctx, a, "input 'A'", k8BitTypes);
  check_dtype(ctx, b, "input 'B'", k8BitTypes);
  const te::Tensor* a_zp = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  const te::Tensor* b_zp = ctx.has_input(3) ? &ctx.input(3) : nullptr;
  return {integer_matmul(ctx, a, b, a_zp, b_zp, [](const Expr& acc, const Expr&, const Expr&) { return acc; })};
}

std::vector<te::Tensor> qlinear_matmul(OpContext& ctx) {
  const te::Tensor& a = ctx.input(0);
  const te::Tensor& b = ctx.input(3);
  check_dtype(ctx, a, "input 'a'", k8BitTypes);
  check_dtype(ctx, b, "input 'b'", k8BitTypes);
  const te::Tensor &a_scale = ctx.input(1), &b_scale = ctx.input(4), &y_scale = ctx.input(6);
  const te::Tensor* a_zp = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  const te::Tensor* b_zp = ctx.has_input(5) ? &ctx.input(5) : nullptr;
  const bool has_y_zp = ctx.has_input(7);
  const DType out = has_y_zp ? ctx.input(7).dtype() : a.dtype();
  auto per = [](const te::Tensor& t, const Expr& at) {
    const auto n = te::constant_num_elements(t);
    std::vector<Expr> idx(t.ndim(), Expr(0));
    if (t.ndim() > 0 && !(n && *n == 1)) idx.back() = at;
    return cast(kF32, t(idx));
  };
  return {integer_matmul(ctx, a, b, a_zp, b_zp, [&](const Expr& acc, const Expr& m, const Expr& n) {
    // numpy: the float32 multiplier, applied to the int32 sum in float64.
    const Expr multiplier = per(a_scale, m) * per(b_scale, n) / per(y_scale, Expr(0));
    Expr d = cast(kF64, acc) * cast(kF64, multiplier);
    Expr zp;
    if (has_y_zp) zp = ctx.input(7).ndim() == 0 ? ctx.input(7)({}) : ctx.input(7)(std::vector<Expr>(ctx.input(7).ndim(), Expr(0)));
    return round_clamp(d, zp, out);
  })};
}

// sum over input channels (of the group) and the window of (x - x_zp) * (w - w_zp) in int32:
// padding contributes 0 (the reference pads x - x_zp with zeros). w_zp per tensor or per output
// channel. `finish` maps the sum at output index i to the output.
using ConvFinish = std::function<Expr(const Expr& acc, const std::vector<Expr>& i)>;
te::Tensor integer_conv(OpContext& ctx, const te::Tensor& x, const te::Tensor& w, const te::Tensor* x_zp,
                        const te::Tensor* w_zp, const ConvFinish& finish) {
  check_dtype(ctx, x, "input 'x'", k8BitTypes);
  check_dtype(ctx, w, "input 'w'", k8BitTypes);
  if (x.ndim() < 3 || w.ndim() != x.ndim()) {
    ctx.fail("x {} and w {} must have equal rank of 3 or more (N, C, spatial...)", shape_text(x.shape()),
             shape_text(w.shape()));
  }
  const int64_t group = ctx.node().attr_int("group", 1);
  if (group <= 0) ctx.fail("attribute 'group' must be positive, got {}", group);
  std::vector<int64_t> kernel = ctx.node().attr_ints("kernel_shape", {});
  if (kernel.empty()) {
    for (int d = 2; d < w.ndim(); ++d) {
      const auto c = as_const_int(w.shape(d));
      if (!c) ctx.fail("the weight {} has a symbolic kernel size; give attribute 'kernel_shape'", shape_text(w.shape()));
      kernel.push_back(*c);
    }
  }
  const std::vector<Expr> spatial(x.shape().begin() + 2, x.shape().end());
  const WindowGeometry g = window_geometry(ctx, spatial, kernel, false);
  std::vector<Expr> shape = {x.shape(0), w.shape(0)};
  shape.insert(shape.end(), g.out.begin(), g.out.end());
  const Expr group_channels = w.shape(1);
  const Expr per_group_out = simplify(w.shape(0) / Expr(group));
  auto zp_at = [](const te::Tensor* zp, const Expr& channel) {
    if (!zp) return make_zero(kI32);
    const auto n = te::constant_num_elements(*zp);
    std::vector<Expr> idx(zp->ndim(), Expr(0));
    if (zp->ndim() > 0 && !(n && *n == 1)) idx.back() = channel;
    return cast(kI32, (*zp)(idx));
  };
  te::Tensor acc = te::compute(ctx.stage_name("acc"), shape, [&](const std::vector<Expr>& i) {
    IterVar rc = te::reduce_axis(group_channels, ctx.stage_name("c"));
    std::vector<IterVar> axes = {rc};
    const Expr ch = group == 1 ? rc.var : (i[1] / per_group_out) * group_channels + rc.var;
    std::vector<Expr> xi = {i[0], ch}, wi = {i[1], rc.var};
    Expr cond = make_bool(true);
    for (size_t d = 0; d < spatial.size(); ++d) {
      IterVar k = te::reduce_axis(Expr(g.kernel[d]), ctx.stage_name("k" + std::to_string(d)));
      axes.push_back(k);
      const Expr pos = window_position(g, static_cast<int>(d), i[2 + d], k.var);
      cond = cond && inside(pos, spatial[d]);
      xi.push_back(pos);
      wi.push_back(k.var);
    }
    const Expr xv = cast(kI32, x(xi)) - zp_at(x_zp, Expr(0));
    const Expr wv = cast(kI32, w(wi)) - zp_at(w_zp, i[1]);
    return te::sum(xv * wv, axes, simplify(cond));
  });
  return te::compute(
      ctx.output_name(0), shape, [&](const std::vector<Expr>& i) { return finish(acc(i), i); }, ctx.node().describe());
}

std::vector<te::Tensor> conv_integer(OpContext& ctx) {
  const te::Tensor* x_zp = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  const te::Tensor* w_zp = ctx.has_input(3) ? &ctx.input(3) : nullptr;
  return {integer_conv(ctx, ctx.input(0), ctx.input(1), x_zp, w_zp,
                       [](const Expr& acc, const std::vector<Expr>&) { return acc; })};
}

// QLinearConv: x, x_scale, x_zp, w, w_scale (per tensor or per output channel), w_zp, y_scale,
// y_zp, optional int32 bias B; as the reference: (acc + B) * (x_scale * w_scale / y_scale),
// rounded half to even, plus y_zp, clamped.
std::vector<te::Tensor> qlinear_conv(OpContext& ctx) {
  const te::Tensor &x_scale = ctx.input(1), &w_scale = ctx.input(4), &y_scale = ctx.input(6);
  const te::Tensor* x_zp = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  const te::Tensor* w_zp = ctx.has_input(5) ? &ctx.input(5) : nullptr;
  const bool has_y_zp = ctx.has_input(7), has_bias = ctx.has_input(8);
  const DType out = has_y_zp ? ctx.input(7).dtype() : ctx.input(0).dtype();
  auto per = [](const te::Tensor& t, const Expr& at) {
    const auto n = te::constant_num_elements(t);
    std::vector<Expr> idx(t.ndim(), Expr(0));
    if (t.ndim() > 0 && !(n && *n == 1)) idx.back() = at;
    return t(idx);
  };
  return {integer_conv(ctx, ctx.input(0), ctx.input(3), x_zp, w_zp, [&](const Expr& acc, const std::vector<Expr>& i) {
    Expr sum = acc;
    if (has_bias) sum = sum + cast(kI32, ctx.input(8)({i[1]}));
    const Expr multiplier = cast(kF32, per(x_scale, Expr(0))) * cast(kF32, per(w_scale, i[1])) / cast(kF32, per(y_scale, Expr(0)));
    const Expr d = cast(kF64, sum) * cast(kF64, multiplier);
    return round_clamp(d, has_y_zp ? per(ctx.input(7), Expr(0)) : Expr(), out);
  })};
}

}  // namespace

void register_quantization(OpTable& table) {
  table.add(OpKind::ConvInteger, conv_integer);
  table.add(OpKind::QLinearConv, qlinear_conv);
  table.add(OpKind::QuantizeLinear, quantize_linear);
  table.add(OpKind::DequantizeLinear, dequantize_linear);
  table.add(OpKind::DynamicQuantizeLinear, dynamic_quantize_linear);
  table.add(OpKind::MatMulInteger, matmul_integer);
  table.add(OpKind::QLinearMatMul, qlinear_matmul);
}

}  // namespace kiln::ops
