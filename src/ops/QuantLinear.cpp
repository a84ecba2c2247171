// kiln.QuantLinear: y = x · dequant(W)ᵀ (+ bias), W stored 4-bit (NVFP4, MXFP4 or INT4, the
// layouts of include/kiln/quant/QuantizedWeight.h). `kiln quantize` writes these nodes.
//
//   inputs   x [..., K] (float16, bfloat16 or float32), weight uint8 [N, K/2],
//            scales [N, K/block] (NVFP4: E4M3 bits as uint8; MXFP4: E8M0 bits as uint8;
//            INT4: float16/bfloat16), then NVFP4: tensor scale (float32 as quantized) [] or [1] /
//            INT4: zeros like scales / MXFP4: absent, then an optional bias [N].
//   attributes  in_features (K), out_features (N), block_size, format ("nvfp4", "mxfp4", "int4").
// Accumulates in float32. The expression below is the reference (the CPU backend runs it); its
// accumulator is marked (te::QuantLinearInfo) so that the CUDA lowering can compute it with the
// hand-written kernels of kernels/quant/ instead (src/lower/TemplateContraction.cpp).
#include <cmath>

#include "Families.h"
#include "kiln/ops/Helpers.h"

namespace kiln::ops {
namespace {

using namespace ir;

const Type kF32(DType::Float32);

Expr f32(const Expr& e) { return cast(kF32, e); }

// 2^e for a small integer expression e >= 0, exactly.
Expr pow2(const Expr& e) { return f32(call(Intrinsic::ShiftLeft, Expr(1), e)); }

// E2M1 code (4 bits) to float: magnitudes {0, 0.5, 1, 1.5, 2, 3, 4, 6}.
Expr decode_e2m1(const Expr& code) {
  Expr mag = call(Intrinsic::BitAnd, code, Expr(7));
  Expr mant = call(Intrinsic::BitAnd, mag, Expr(1));
  Expr exp = call(Intrinsic::ShiftRight, mag, Expr(1));
  Expr normal = f32(mant + 2) * pow2(exp) * make_const(kF32, 0.25);
  Expr value = select(mag < 2, f32(mag) * make_const(kF32, 0.5), normal);
  return select(call(Intrinsic::BitAnd, code, Expr(8)) != 0, -value, value);
}

// E4M3 (fn) bits to float: bias 7, subnormals, 0x7f/0xff NaN.
Expr decode_e4m3(const Expr& bits) {
  Expr exp = call(Intrinsic::BitAnd, call(Intrinsic::ShiftRight, bits, Expr(3)), Expr(15));
  Expr mant = call(Intrinsic::BitAnd, bits, Expr(7));
  Expr subnormal = f32(mant) * make_const(kF32, 1.0 / 512.0);  // m/8 · 2^-6
  Expr normal = (f32(mant) * make_const(kF32, 0.125) + make_const(kF32, 1.0)) * call(Intrinsic::Pow, make_const(kF32, 2.0), f32(exp - 7));
  Expr value = select(exp == 0, subnormal, normal);
  value = select(call(Intrinsic::BitAnd, bits, Expr(127)) == 127, make_const(kF32, NAN), value);
  return select(call(Intrinsic::BitAnd, bits, Expr(128)) != 0, -value, value);
}

// E8M0 bits to float: 2^(bits - 127), 0xff NaN.
Expr decode_e8m0(const Expr& bits) {
  Expr value = call(Intrinsic::Pow, make_const(kF32, 2.0), f32(bits - 127));
  return select(bits == 255, make_const(kF32, NAN), value);
}

enum class Format { NvFp4, MxFp4, Int4 };

std::vector<te::Tensor> build_quant_linear(OpContext& ctx) {
  const Node& node = ctx.node();
  const std::string format_name = node.attr_string("format", "");
  Format format;
  if (format_name == "nvfp4") format = Format::NvFp4;
  else if (format_name == "mxfp4") format = Format::MxFp4;
  else if (format_name == "int4") format = Format::Int4;
  else ctx.fail("attribute 'format' is '{}', expected nvfp4, mxfp4 or int4", format_name);
  const int64_t k = node.attr_int("in_features", -1), n = node.attr_int("out_features", -1);
  const int64_t block = node.attr_int("block_size", -1);
  if (k <= 0 || n <= 0 || block <= 0) ctx.fail("attributes in_features, out_features and block_size must be positive");
  if (k % block != 0 || k % 2 != 0) ctx.fail("in_features {} must be a multiple of block_size {} (and even)", k, block);
  if (format == Format::NvFp4 && block != 16) ctx.fail("nvfp4 has block_size 16, got {}", block);
  if (format == Format::MxFp4 && block != 32) ctx.fail("mxfp4 has block_size 32, got {}", block);
  if (format == Format::Int4 && block != 32 && block != 64 && block != 128) {
    ctx.fail("int4 block_size must be 32, 64 or 128, got {}", block);
  }

  const te::Tensor& x = ctx.input(0);
  const te::Tensor& w = ctx.input(1);
  const te::Tensor& scales = ctx.input(2);
  check_dtype(ctx, x, "input 'x'", {DType::Float16, DType::BFloat16, DType::Float32});
  check_dtype(ctx, w, "input 'weight'", {DType::UInt8});
  if (x.ndim() < 1 || !is_const_int(x.shape(x.ndim() - 1), k)) {
    ctx.fail("input 'x' must end in in_features = {}", k);
  }
  auto expect_shape = [&](const te::Tensor& t, const char* what, int64_t rows, int64_t cols) {
    if (t.ndim() != 2 || !is_const_int(t.shape(0), rows) || !is_const_int(t.shape(1), cols)) {
      ctx.fail("input '{}' must have shape [{}, {}]", what, rows, cols);
    }
  };
  expect_shape(w, "weight", n, k / 2);
  expect_shape(scales, "scales", n, k / block);
  if (format == Format::Int4) {
    check_dtype(ctx, scales, "input 'scales'", {DType::Float16, DType::BFloat16});
    expect_shape(ctx.input(3), "zeros", n, k / block);
    check_dtype(ctx, ctx.input(3), "input 'zeros'", {scales.dtype()});
  } else {
    check_dtype(ctx, scales, "input 'scales'", {DType::UInt8, DType::Float8E4M3, DType::Float8E8M0});
  }
  // The tensor scale is float32 as quantized; a plugin built for float16/bfloat16 activations
  // passes every float input in that type, so those are accepted too (and widened).
  if (format == Format::NvFp4) check_dtype(ctx, ctx.input(3), "input 'tensor_scale'", kFloatTypes);

  // dequant(W)[r, c] in float32.
  auto weight_at = [&](const Expr& r, const Expr& c) {
    Expr byte = cast(kIndexType, w({r, c / 2}));
    Expr code = select(c % 2 == 0, call(Intrinsic::BitAnd, byte, Expr(15)), call(Intrinsic::ShiftRight, byte, Expr(4)));
    Expr s = scales({r, c / block});
    switch (format) {
      case Format::NvFp4: {
        const te::Tensor& ts = ctx.input(3);
        std::vector<Expr> zero(ts.ndim(), Expr(0));
        return decode_e2m1(code) * decode_e4m3(cast(kIndexType, s)) * f32(ts(zero));
      }
      case Format::MxFp4: return decode_e2m1(code) * decode_e8m0(cast(kIndexType, s));
      case Format::Int4: return (f32(code) - f32(ctx.input(3)({r, c / block}))) * f32(s);
    }
    return Expr();
  };

  std::vector<Expr> out_shape(x.shape().begin(), x.shape().end() - 1);
  out_shape.push_back(Expr(n));
  ir::IterVar kk = te::reduce_axis(Expr(k), ctx.stage_name("k"));
  te::Tensor acc = te::compute(
      ctx.stage_name("acc"), out_shape,
      [&](const std::vector<Expr>& i) {
        std::vector<Expr> xi(i.begin(), i.end() - 1);
        xi.push_back(kk.var);
        return te::sum(f32(x(xi)) * weight_at(i.back(), kk.var), {kk});
      },
      node.describe());
  te::QuantLinearInfo info;
  info.format = format == Format::NvFp4   ? te::QuantLinearFormat::NvFp4
                : format == Format::MxFp4 ? te::QuantLinearFormat::MxFp4
                                          : te::QuantLinearFormat::Int4;
  info.group = block;
  info.x = x;
  info.weight = w;
  info.scales = scales;
  if (format != Format::MxFp4) info.extra = ctx.input(3);
  acc = te::with_quant_linear(acc, std::move(info));
  const bool has_bias = ctx.has_input(4);
  if (has_bias && (ctx.input(4).ndim() != 1 || !is_const_int(ctx.input(4).shape(0), n))) {
    ctx.fail("input 'bias' must have shape [{}]", n);
  }
  te::Tensor y = te::compute(
      ctx.output_name(0), out_shape,
      [&](const std::vector<Expr>& i) {
        Expr v = acc(i);
        if (has_bias) v = v + f32(ctx.input(4)({i.back()}));
        return downcast(v, x.dtype());
      },
      node.describe());
  return {y};
}

}  // namespace

void register_quant(OpTable& table) { table.add(OpKind::QuantLinear, build_quant_linear); }

}  // namespace kiln::ops
