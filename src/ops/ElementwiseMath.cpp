// Elementwise arithmetic, math and activation ops, casts, and the pass-through ops (Identity,
// Dropout at inference). float16/bfloat16 values are computed in float32 and stored back
// (broadcast_map upcasts, `downcast` stores), as the CUDA code does.
#include <cmath>
#include <limits>

#include "Elementwise.h"
#include "IndexMath.h"
#include "kiln/ir/SmallFloat.h"
#include "kiln/onnx/Proto.h"

namespace kiln::ops {
namespace {

using namespace ir;

inline constexpr std::initializer_list<DType> kSignedTypes = {
    DType::Int8,    DType::Int16,    DType::Int32,   DType::Int64,
    DType::Float16, DType::BFloat16, DType::Float32, DType::Float64};
inline constexpr std::initializer_list<DType> kNumericTypes = {
    DType::Int8,   DType::Int16,   DType::Int32,   DType::Int64,    DType::UInt8,   DType::UInt16,
    DType::UInt32, DType::UInt64,  DType::Float16, DType::BFloat16, DType::Float32, DType::Float64};

using UnaryFn = std::function<Expr(Expr)>;

// Every input has the same dtype, one of `allowed`; the result is stored in that dtype.
te::Tensor same_type_map(OpContext& ctx, const std::vector<te::Tensor>& inputs, std::initializer_list<DType> allowed,
                         const ElementFn& fn) {
  check_same_dtype(ctx, inputs);
  check_dtype(ctx, inputs[0], "input 0", allowed);
  const DType dtype = inputs[0].dtype();
  return broadcast_map(ctx, inputs, [&](const std::vector<Expr>& v) { return downcast(fn(v), dtype); });
}

te::Tensor unary(OpContext& ctx, std::initializer_list<DType> allowed, const UnaryFn& fn) {
  return same_type_map(ctx, {ctx.input(0)}, allowed, [&](const std::vector<Expr>& v) { return fn(v[0]); });
}

Expr constant(const Expr& like, double value) { return make_const(like.type(), value); }

// ---- Arithmetic ------------------------------------------------------------------------------

using BinaryFn = Expr (*)(Expr, Expr);

template <BinaryFn Fn>
std::vector<te::Tensor> arithmetic(OpContext& ctx) {
  return {same_type_map(ctx, {ctx.input(0), ctx.input(1)}, kNumericTypes,
                        [](const std::vector<Expr>& v) { return Fn(v[0], v[1]); })};
}

Expr add(Expr a, Expr b) { return std::move(a) + std::move(b); }
Expr sub(Expr a, Expr b) { return std::move(a) - std::move(b); }
Expr mul(Expr a, Expr b) { return std::move(a) * std::move(b); }

// float16/bfloat16 division by a literal (an exported GELU's x / sqrt(2)) is a product with the
// float32 reciprocal: the quotient is rounded to 16 bits afterwards either way, and the product has
// no division's slow-path branch, which keeps a fused epilogue's elements in one basic block.
// float32 and float64 keep the exact quotient.
std::vector<te::Tensor> build_div(OpContext& ctx) {
  return {same_type_map(ctx, {ctx.input(0), ctx.input(1)}, kNumericTypes, [&](const std::vector<Expr>& v) {
    const DType dtype = ctx.input(0).dtype();
    const std::optional<double> c = as_const_float(v[1]);
    if ((dtype == DType::Float16 || dtype == DType::BFloat16) && c && std::isfinite(*c) && *c != 0.0) {
      return v[0] * make_const(v[0].type(), static_cast<double>(static_cast<float>(1.0 / *c)));
    }
    return v[0] / v[1];
  })};
}

// Pow's exponent may have another type than its base; the result has the base's type. Integer
// bases are computed in float64 (exact for the results an integer can hold) and converted back.
std::vector<te::Tensor> build_pow(OpContext& ctx) {
  const te::Tensor& base = ctx.input(0);
  const te::Tensor& exponent = ctx.input(1);
  check_dtype(ctx, base, "input 0 (base)", kNumericTypes);
  check_dtype(ctx, exponent, "input 1 (exponent)", kNumericTypes);
  const DType dtype = base.dtype();
  return {broadcast_map(ctx, {base, exponent}, [&](const std::vector<Expr>& v) {
    const Type compute = is_float(dtype) ? v[0].type() : Type(DType::Float64);
    // A literal exponent of 2 or 3 on a float base (tanh-GELU's x^3): products, as ONNX Runtime
    // computes them, rather than a general pow.
    std::optional<double> e = as_const_float(v[1]);
    if (const auto i = as_const_int(v[1]); !e && i) e = static_cast<double>(*i);
    if (is_float(dtype) && e && (*e == 2.0 || *e == 3.0)) {
      const Expr x = cast(compute, v[0]);
      return downcast(*e == 2.0 ? x * x : x * x * x, dtype);
    }
    return downcast(call(Intrinsic::Pow, cast(compute, v[0]), cast(compute, v[1])), dtype);
  })};
}

// fmod=1: C's fmod / remainder (sign of the dividend). fmod=0: the result takes the divisor's sign,
// as Python's %. Older opsets require fmod=1 for floats; newer ones define float fmod=0 as floor
// modulo, which kiln computes for every opset.
std::vector<te::Tensor> build_mod(OpContext& ctx) {
  const bool c_fmod = ctx.node().attr_int("fmod", 0) != 0;
  return {same_type_map(ctx, {ctx.input(0), ctx.input(1)}, kNumericTypes, [&](const std::vector<Expr>& v) {
    return c_fmod ? v[0] % v[1] : floor_mod(v[0], v[1]);
  })};
}

// Sum, Mean, Min, Max: any number of inputs (at least one), broadcast together.
enum class Variadic { Sum, Mean, Min, Max };

template <Variadic V>
std::vector<te::Tensor> variadic(OpContext& ctx) {
  std::vector<te::Tensor> inputs;
  for (int k = 0; k < ctx.num_inputs(); ++k) inputs.push_back(ctx.input(k));
  if (inputs.empty()) ctx.fail("needs at least one input");
  const auto& allowed = V == Variadic::Mean ? kFloatTypes : kNumericTypes;
  return {same_type_map(ctx, inputs, allowed, [](const std::vector<Expr>& v) {
    Expr acc = v[0];
    for (size_t k = 1; k < v.size(); ++k) {
      if constexpr (V == Variadic::Min) acc = min(acc, v[k]);
      else if constexpr (V == Variadic::Max) acc = max(acc, v[k]);
      else acc = acc + v[k];
    }
    if constexpr (V == Variadic::Mean) acc = acc / constant(acc, static_cast<double>(v.size()));
    return acc;
  })};
}

// ---- Unary math ------------------------------------------------------------------------------

template <Intrinsic Op>
std::vector<te::Tensor> math(OpContext& ctx) {
  return {unary(ctx, kFloatTypes, [](Expr x) { return call(Op, std::move(x)); })};
}

std::vector<te::Tensor> build_neg(OpContext& ctx) {
  return {unary(ctx, kSignedTypes, [](Expr x) { return -x; })};
}

std::vector<te::Tensor> build_abs(OpContext& ctx) {
  return {unary(ctx, kNumericTypes, [](Expr x) { return call(Intrinsic::Abs, std::move(x)); })};
}

// -1, 0 or 1; NaN stays NaN.
std::vector<te::Tensor> build_sign(OpContext& ctx) {
  return {unary(ctx, kNumericTypes, [](Expr x) {
    const Expr zero = make_zero(x.type()), one = make_one(x.type());
    if (x.type().is_uint()) return select(x > zero, one, zero);
    return select(x > zero, one, select(x < zero, constant(x, -1), x));
  })};
}

std::vector<te::Tensor> build_reciprocal(OpContext& ctx) {
  return {unary(ctx, kFloatTypes, [](Expr x) { return constant(x, 1) / x; })};
}

Expr exp(Expr x) { return call(Intrinsic::Exp, std::move(x)); }
Expr log(Expr x) { return call(Intrinsic::Log, std::move(x)); }

Expr sigmoid(const Expr& x) { return constant(x, 1) / (constant(x, 1) + exp(-x)); }

// log(1 + exp(x)) without overflow for large x.
Expr softplus(const Expr& x) {
  return max(x, make_zero(x.type())) + log(constant(x, 1) + exp(-call(Intrinsic::Abs, x)));
}

// ---- Activations -----------------------------------------------------------------------------

double attr(const OpContext& ctx, const char* name, double fallback) { return ctx.node().attr_float(name, fallback); }

std::vector<te::Tensor> build_sigmoid(OpContext& ctx) { return {unary(ctx, kFloatTypes, sigmoid)}; }

std::vector<te::Tensor> build_relu(OpContext& ctx) {
  return {unary(ctx, kSignedTypes, [](Expr x) { return max(x, make_zero(x.type())); })};
}

std::vector<te::Tensor> build_leaky_relu(OpContext& ctx) {
  const double alpha = attr(ctx, "alpha", 0.01);
  return {unary(ctx, kFloatTypes, [=](Expr x) { return select(x < constant(x, 0), constant(x, alpha) * x, x); })};
}

std::vector<te::Tensor> build_elu(OpContext& ctx) {
  const double alpha = attr(ctx, "alpha", 1.0);
  return {unary(ctx, kFloatTypes, [=](Expr x) {
    return select(x < constant(x, 0), constant(x, alpha) * (exp(x) - constant(x, 1)), x);
  })};
}

std::vector<te::Tensor> build_selu(OpContext& ctx) {
  const double alpha = attr(ctx, "alpha", 1.67326319217681884765625);
  const double gamma = attr(ctx, "gamma", 1.05070102214813232421875);
  return {unary(ctx, kFloatTypes, [=](Expr x) {
    const Expr negative = constant(x, alpha) * exp(x) - constant(x, alpha);
    return constant(x, gamma) * select(x > constant(x, 0), x, negative);
  })};
}

std::vector<te::Tensor> build_celu(OpContext& ctx) {
  const double alpha = attr(ctx, "alpha", 1.0);
  return {unary(ctx, kFloatTypes, [=](Expr x) {
    const Expr zero = constant(x, 0);
    return max(zero, x) + min(zero, constant(x, alpha) * (exp(x / constant(x, alpha)) - constant(x, 1)));
  })};
}

std::vector<te::Tensor> build_hard_sigmoid(OpContext& ctx) {
  const double alpha = attr(ctx, "alpha", 0.2), beta = attr(ctx, "beta", 0.5);
  return {unary(ctx, kFloatTypes, [=](Expr x) {
    return max(constant(x, 0), min(constant(x, 1), constant(x, alpha) * x + constant(x, beta)));
  })};
}

std::vector<te::Tensor> build_hard_swish(OpContext& ctx) {
  return {unary(ctx, kFloatTypes, [](Expr x) {
    return x * max(constant(x, 0), min(constant(x, 1), x * constant(x, 1.0 / 6) + constant(x, 0.5)));
  })};
}

// Swish (opset 24): x * sigmoid(alpha x).
std::vector<te::Tensor> build_swish(OpContext& ctx) {
  const double alpha = attr(ctx, "alpha", 1.0);
  return {unary(ctx, kFloatTypes, [=](Expr x) { return x * sigmoid(constant(x, alpha) * x); })};
}

// SwiGLU (opset 28): Swish_alpha(A) * B, A and B of one shape (no broadcasting).
std::vector<te::Tensor> build_swiglu(OpContext& ctx) {
  const te::Tensor& a = ctx.input(0);
  const te::Tensor& b = ctx.input(1);
  bool same = a.ndim() == b.ndim();
  for (int d = 0; same && d < a.ndim(); ++d) {
    auto x = as_const_int(a.shape(d)), y = as_const_int(b.shape(d));
    same = x && y ? *x == *y : a.shape(d).same_as(b.shape(d));
  }
  if (!same) {
    ctx.fail("A {} and B {} must have the same shape (SwiGLU does not broadcast)",
             shape_text(a.shape()), shape_text(b.shape()));
  }
  const double alpha = attr(ctx, "alpha", 1.0);
  return {same_type_map(ctx, {a, b}, kFloatTypes, [=](const std::vector<Expr>& v) {
    return v[0] * sigmoid(constant(v[0], alpha) * v[0]) * v[1];
  })};
}

std::vector<te::Tensor> build_softplus(OpContext& ctx) { return {unary(ctx, kFloatTypes, softplus)}; }

std::vector<te::Tensor> build_softsign(OpContext& ctx) {
  return {unary(ctx, kFloatTypes, [](Expr x) { return x / (constant(x, 1) + call(Intrinsic::Abs, x)); })};
}

std::vector<te::Tensor> build_gelu(OpContext& ctx) {
  const std::string approximate = ctx.node().attr_string("approximate", "none");
  if (approximate != "none" && approximate != "tanh") {
    ctx.fail("attribute 'approximate' is '{}', expected 'none' or 'tanh'", approximate);
  }
  const bool use_tanh = approximate == "tanh";
  return {unary(ctx, kFloatTypes, [=](Expr x) {
    const Expr inner = use_tanh ? call(Intrinsic::Tanh, constant(x, std::sqrt(2.0 / M_PI)) *
                                                            (x + constant(x, 0.044715) * x * x * x))
                                : call(Intrinsic::Erf, x * constant(x, M_SQRT1_2));
    return constant(x, 0.5) * x * (constant(x, 1) + inner);
  })};
}

std::vector<te::Tensor> build_mish(OpContext& ctx) {
  return {unary(ctx, kFloatTypes, [](Expr x) { return x * call(Intrinsic::Tanh, softplus(x)); })};
}

std::vector<te::Tensor> build_thresholded_relu(OpContext& ctx) {
  const double alpha = attr(ctx, "alpha", 1.0);
  return {unary(ctx, kFloatTypes, [=](Expr x) { return select(x > constant(x, alpha), x, constant(x, 0)); })};
}

// PRelu: the slope broadcasts to the input (unidirectionally: the output has the input's shape).
std::vector<te::Tensor> build_prelu(OpContext& ctx) {
  const te::Tensor& x = ctx.input(0);
  const te::Tensor& slope = ctx.input(1);
  if (slope.ndim() > x.ndim()) {
    ctx.fail("slope has rank {} but the input has rank {}; the slope must broadcast to the input", slope.ndim(),
             x.ndim());
  }
  te::Tensor out = same_type_map(ctx, {x, slope}, kSignedTypes, [](const std::vector<Expr>& v) {
    return select(v[0] < make_zero(v[0].type()), v[1] * v[0], v[0]);
  });
  for (int d = 0; d < x.ndim(); ++d) {
    auto want = as_const_int(x.shape(d)), got = as_const_int(out.shape(d));
    if (want && got && *want != *got) {
      ctx.fail("slope does not broadcast to the input: dimension {} of the input is {} but the slope makes it {}",
               d, *want, *got);
    }
  }
  return {out};
}

// Shrink: integers are compared with the float lambd in float64.
std::vector<te::Tensor> build_shrink(OpContext& ctx) {
  const double lambd = attr(ctx, "lambd", 0.5), bias = attr(ctx, "bias", 0.0);
  return {unary(ctx, kNumericTypes, [=](Expr x) {
    const Type compute = x.type().is_float() ? x.type() : Type(DType::Float64);
    const Expr y = cast(compute, x);
    const Expr r = select(y < constant(y, -lambd), y + constant(y, bias),
                          select(y > constant(y, lambd), y - constant(y, bias), constant(y, 0)));
    return cast(x.type(), r);
  })};
}

// Clip: bounds are attributes before opset 11 and optional scalar inputs from 11 on. NaN stays NaN.
std::vector<te::Tensor> build_clip(OpContext& ctx) {
  const te::Tensor& x = ctx.input(0);
  check_dtype(ctx, x, "input 0", kNumericTypes);
  std::optional<double> lo_attr, hi_attr;
  te::Tensor lo, hi;
  if (ctx.opset() < 11) {
    if (ctx.node().has_attribute("min")) lo_attr = attr(ctx, "min", 0);
    if (ctx.node().has_attribute("max")) hi_attr = attr(ctx, "max", 0);
  } else {
    if (ctx.has_input(1)) lo = ctx.input(1);
    if (ctx.has_input(2)) hi = ctx.input(2);
    check_same_dtype(ctx, {x, lo.defined() ? lo : x, hi.defined() ? hi : x});
  }
  const Expr lo_value = lo.defined() ? upcast(read_scalar(ctx, lo, "input 1 (min)")) : Expr();
  const Expr hi_value = hi.defined() ? upcast(read_scalar(ctx, hi, "input 2 (max)")) : Expr();
  return {unary(ctx, kNumericTypes, [&](Expr v) {
    Expr low = lo_attr ? constant(v, *lo_attr) : lo_value;
    Expr high = hi_attr ? constant(v, *hi_attr) : hi_value;
    if (low.defined()) v = select(v < low, low, v);
    if (high.defined()) v = select(v > high, high, v);
    return v;
  })};
}

std::vector<te::Tensor> build_floor(OpContext& ctx) { return math<Intrinsic::Floor>(ctx); }
std::vector<te::Tensor> build_ceil(OpContext& ctx) { return math<Intrinsic::Ceil>(ctx); }
std::vector<te::Tensor> build_round(OpContext& ctx) { return math<Intrinsic::RoundEven>(ctx); }

// ---- Casts and pass-through ------------------------------------------------------------------

}  // namespace

Expr cast_float8_without_saturation(const Expr& x, DType to) {
  const double max = small_float_max(to);
  const uint32_t max_bits = small_float_encode(to, max);
  const double quantum = max - small_float_decode(to, max_bits - 1);
  const double mid = max + quantum / 2;  // halfway to the first value past the range
  const bool mid_overflows = !std::isfinite(small_float_decode(to, small_float_encode(to, mid, false)));
  const Type f32(DType::Float32);
  const Expr f = cast(f32, x);
  const Expr zero = make_zero(f32), limit = make_const(f32, mid);
  const Expr a = select(f < zero, -f, f);
  const Expr overflow = mid_overflows ? a >= limit : a > limit;
  const double inf = std::numeric_limits<double>::infinity();
  const Expr big = to == DType::Float8E5M2 ? select(f < zero, make_const(Type(to), -inf), make_const(Type(to), inf))
                                           : make_const(Type(to), std::numeric_limits<double>::quiet_NaN());
  return select(overflow, big, cast(Type(to), x));
}

namespace {

te::Tensor cast_to(OpContext& ctx, const te::Tensor& x, DType to) {
  bool saturate = true;
  if (ctx.node().has_attribute("saturate")) saturate = ctx.node().attr_int("saturate", 1) != 0;
  const std::string round_mode = ctx.node().attr_string("round_mode", "up");
  if (round_mode != "up" && round_mode != "down" && round_mode != "nearest") {
    ctx.fail("attribute 'round_mode' is '{}'; expected 'up', 'down' or 'nearest'", round_mode);
  }
  if (to == DType::Float8E8M0 && x.dtype() != to && (round_mode != "up" || !saturate)) {
    ctx.unsupported("casting to float8e8m0 with round_mode '{}' and saturate={} is not supported (only "
                    "'up' with saturation)",
                    round_mode, saturate ? 1 : 0);
  }
  const bool fp8 = to == DType::Float8E4M3 || to == DType::Float8E4M3FNUZ || to == DType::Float8E5M2 ||
                   to == DType::Float8E5M2FNUZ;
  const bool no_saturation = fp8 && !saturate && x.dtype() != to && !is_integral(x.dtype()) && !is_bool(x.dtype());
  return te::compute(
      ctx.output_name(0), x.shape(),
      [&](const std::vector<Expr>& i) { return no_saturation ? cast_float8_without_saturation(x(i), to) : cast(Type(to), x(i)); },
      ctx.node().describe());
}

std::vector<te::Tensor> build_cast(OpContext& ctx) {
  if (!ctx.node().has_attribute("to")) ctx.fail("attribute 'to' is required");
  const int64_t code = ctx.node().attr_int("to", 0);
  const std::optional<DType> to = dtype_from_onnx(static_cast<int32_t>(code));
  if (!to) ctx.unsupported("casting to ONNX data type {} is not supported", onnx_data_type_name(static_cast<int32_t>(code)));
  return {cast_to(ctx, ctx.input(0), *to)};
}

// BitCast (opset 26): the bits of each element as `to`, a type of the same width. Types stored as
// bit patterns but computed as float32 (float8, float4) and packed sub-byte types are not
// supported.
std::vector<te::Tensor> build_bit_cast(OpContext& ctx) {
  if (!ctx.node().has_attribute("to")) ctx.fail("attribute 'to' is required");
  const int32_t code = static_cast<int32_t>(ctx.node().attr_int("to", 0));
  const std::optional<DType> to = dtype_from_onnx(code);
  if (!to)
    ctx.unsupported("bit-casting to ONNX data type {} is not supported", onnx_data_type_name(code));
  const te::Tensor& x = ctx.input(0);
  if (dtype_bits(x.dtype()) != dtype_bits(*to)) {
    ctx.fail("input 0 is {} ({} bits) but 'to' is {} ({} bits); expected types of the same width",
             dtype_name(x.dtype()), dtype_bits(x.dtype()), dtype_name(*to), dtype_bits(*to));
  }
  for (DType t : {x.dtype(), *to}) {
    if (is_small_float(t) || is_packed(t))
      ctx.unsupported("bit-casting {} is not supported", dtype_name(t));
  }
  const Type target(*to);
  return {te::compute(
      ctx.output_name(0), x.shape(),
      [&](const std::vector<Expr>& i) {
        if (x.dtype() == *to) return x(i);
        return Call::make(target, Intrinsic::BitCast, {x(i)});
      },
      ctx.node().describe())};
}

std::vector<te::Tensor> build_cast_like(OpContext& ctx) { return {cast_to(ctx, ctx.input(0), ctx.input(1).dtype())}; }

te::Tensor copy(OpContext& ctx, const te::Tensor& x) {
  return te::compute(
      ctx.output_name(0), x.shape(), [&](const std::vector<Expr>& i) { return x(i); }, ctx.node().describe());
}

std::vector<te::Tensor> build_identity(OpContext& ctx) { return {copy(ctx, ctx.input(0))}; }

// Dropout at inference: the output is the input, the mask all true. Training mode is unsupported.
std::vector<te::Tensor> build_dropout(OpContext& ctx) {
  if (ctx.opset() <= 6 && ctx.node().attr_int("is_test", 0) == 0) {
    ctx.unsupported("training mode (attribute 'is_test' is 0) is not supported; kiln compiles inference");
  }
  if (ctx.opset() >= 12 && ctx.has_input(2)) {
    if (!ctx.is_known(2)) ctx.unsupported("input 2 ('training_mode') must be known when compiling");
    const std::vector<int64_t> training = ctx.constant_ints(2, "training_mode");
    // Training with ratio 0 drops nothing: the identity, as at inference. Other ratios need
    // random numbers, which kiln does not generate.
    const bool zero_ratio = ctx.has_input(1) && ctx.is_known(1) &&
                            ctx.constant_floats(1, "ratio") == std::vector<double>{0.0};
    if (!training.empty() && training[0] != 0 && !zero_ratio) {
      ctx.unsupported(
          "training mode (input 'training_mode' is true) with a nonzero ratio is not supported (it "
          "draws random numbers); kiln compiles inference");
    }
  }
  const te::Tensor& x = ctx.input(0);
  std::vector<te::Tensor> out = {copy(ctx, x)};
  const Node& node = ctx.node();
  if (node.outputs.size() > 1 && node.outputs[1] >= 0) {
    const DType mask_type = ctx.opset() >= 10 ? DType::Bool : x.dtype();
    out.push_back(te::compute(
        ctx.output_name(1), x.shape(), [&](const std::vector<Expr>&) { return make_one(Type(mask_type)); },
        node.describe()));
  }
  return out;
}

}  // namespace

void register_elementwise_math(OpTable& table) {
  table.add(OpKind::Add, arithmetic<add>);
  table.add(OpKind::Sub, arithmetic<sub>);
  table.add(OpKind::Mul, arithmetic<mul>);
  table.add(OpKind::Div, build_div);
  table.add(OpKind::Pow, build_pow);
  table.add(OpKind::Mod, build_mod);
  table.add(OpKind::Sum, variadic<Variadic::Sum>);
  table.add(OpKind::Mean, variadic<Variadic::Mean>);
  table.add(OpKind::Min, variadic<Variadic::Min>);
  table.add(OpKind::Max, variadic<Variadic::Max>);
  table.add(OpKind::Neg, build_neg);
  table.add(OpKind::Abs, build_abs);
  table.add(OpKind::Sign, build_sign);
  table.add(OpKind::Reciprocal, build_reciprocal);
  table.add(OpKind::Sqrt, math<Intrinsic::Sqrt>);
  table.add(OpKind::Exp, math<Intrinsic::Exp>);
  table.add(OpKind::Log, math<Intrinsic::Log>);
  table.add(OpKind::Sin, math<Intrinsic::Sin>);
  table.add(OpKind::Cos, math<Intrinsic::Cos>);
  table.add(OpKind::Tan, math<Intrinsic::Tan>);
  table.add(OpKind::Asin, math<Intrinsic::Asin>);
  table.add(OpKind::Acos, math<Intrinsic::Acos>);
  table.add(OpKind::Atan, math<Intrinsic::Atan>);
  table.add(OpKind::Sinh, math<Intrinsic::Sinh>);
  table.add(OpKind::Cosh, math<Intrinsic::Cosh>);
  table.add(OpKind::Asinh, math<Intrinsic::Asinh>);
  table.add(OpKind::Acosh, math<Intrinsic::Acosh>);
  table.add(OpKind::Atanh, math<Intrinsic::Atanh>);
  table.add(OpKind::Tanh, math<Intrinsic::Tanh>);
  table.add(OpKind::Erf, math<Intrinsic::Erf>);
  table.add(OpKind::Floor, build_floor);
  table.add(OpKind::Ceil, build_ceil);
  table.add(OpKind::Round, build_round);
  table.add(OpKind::Sigmoid, build_sigmoid);
  table.add(OpKind::Relu, build_relu);
  table.add(OpKind::LeakyRelu, build_leaky_relu);
  table.add(OpKind::Elu, build_elu);
  table.add(OpKind::Selu, build_selu);
  table.add(OpKind::Celu, build_celu);
  table.add(OpKind::HardSigmoid, build_hard_sigmoid);
  table.add(OpKind::HardSwish, build_hard_swish);
  table.add(OpKind::Softplus, build_softplus);
  table.add(OpKind::Softsign, build_softsign);
  table.add(OpKind::Gelu, build_gelu);
  table.add(OpKind::Mish, build_mish);
  table.add(OpKind::Swish, build_swish);
  table.add(OpKind::SwiGLU, build_swiglu);
  table.add(OpKind::PRelu, build_prelu);
  table.add(OpKind::ThresholdedRelu, build_thresholded_relu);
  table.add(OpKind::Shrink, build_shrink);
  table.add(OpKind::Clip, build_clip);
  table.add(OpKind::Cast, build_cast);
  table.add(OpKind::CastLike, build_cast_like);
  table.add(OpKind::BitCast, build_bit_cast);
  table.add(OpKind::Identity, build_identity);
  table.add(OpKind::Dropout, build_dropout);
}

}  // namespace kiln::ops
