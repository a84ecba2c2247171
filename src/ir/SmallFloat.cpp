#include "kiln/ir/SmallFloat.h"

#include <bit>
#include <cmath>
#include <limits>

#include "kiln/support/Error.h"

namespace kiln {
namespace {

// A sign-exponent-mantissa format with a sign bit. `fn`: no infinity, only the all-ones pattern
// is NaN; `fnuz`: no infinity, no negative zero, 0x80 is NaN; otherwise IEEE-like (E5M2).
struct Format {
  int exp_bits;
  int mant_bits;
  int bias;
  enum Kind { Ieee, Fn, Fnuz, NoSpecial } kind;
};

Format format_of(DType dtype) {
  switch (dtype) {
    case DType::Float8E4M3: return {4, 3, 7, Format::Fn};
    case DType::Float8E4M3FNUZ: return {4, 3, 8, Format::Fnuz};
    case DType::Float8E5M2: return {5, 2, 15, Format::Ieee};
    case DType::Float8E5M2FNUZ: return {5, 2, 16, Format::Fnuz};
    case DType::Float4E2M1: return {2, 1, 1, Format::NoSpecial};
    default: internal_error("not a sign-exponent-mantissa small float: " + std::string(dtype_name(dtype)));
  }
}

int total_bits(const Format& f) { return 1 + f.exp_bits + f.mant_bits; }
uint32_t sign_bit(const Format& f) { return 1u << (total_bits(f) - 1); }

// Largest finite magnitude's bit pattern (without sign).
uint32_t max_bits(const Format& f) {
  const uint32_t all = sign_bit(f) - 1;
  switch (f.kind) {
    case Format::Fn: return all - 1;                        // S.1111.110
    case Format::Ieee: return all - (1u << f.mant_bits);    // S.11110.11
    case Format::Fnuz:
    case Format::NoSpecial: return all;
  }
  return all;
}

double decode(const Format& f, uint32_t bits) {
  const uint32_t sign = bits & sign_bit(f);
  const uint32_t mag = bits & (sign_bit(f) - 1);
  const uint32_t exp = mag >> f.mant_bits;
  const uint32_t mant = mag & ((1u << f.mant_bits) - 1);
  const uint32_t exp_all = (1u << f.exp_bits) - 1;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  if (f.kind == Format::Fnuz && bits == sign_bit(f)) return nan;
  if (f.kind == Format::Fn && mag == sign_bit(f) - 1) return sign ? -nan : nan;
  if (f.kind == Format::Ieee && exp == exp_all) {
    if (mant != 0) return sign ? -nan : nan;
    return sign ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
  }
  const double v = exp == 0 ? std::ldexp(static_cast<double>(mant), 1 - f.bias - f.mant_bits)
                            : std::ldexp(static_cast<double>(mant | (1u << f.mant_bits)),
                                         static_cast<int>(exp) - f.bias - f.mant_bits);
  return sign ? -v : v;
}

uint32_t nan_bits(const Format& f, bool negative) {
  switch (f.kind) {
    case Format::Fn: return (sign_bit(f) - 1) | (negative ? sign_bit(f) : 0);
    case Format::Ieee:  // quiet NaN: exponent all ones, the top mantissa bit (0x7e)
      return (((1u << f.exp_bits) - 1) << f.mant_bits) | (1u << (f.mant_bits - 1)) | (negative ? sign_bit(f) : 0);
    case Format::Fnuz: return sign_bit(f);
    case Format::NoSpecial: return negative ? 0 : sign_bit(f);
  }
  return 0;
}

uint32_t encode(const Format& f, double value, bool saturate) {
  const bool negative = std::signbit(value);
  const uint32_t sign = negative ? sign_bit(f) : 0;
  if (std::isnan(value)) return nan_bits(f, negative);
  const double max = decode(f, max_bits(f));
  // What a value beyond the largest finite one becomes.
  auto overflow = [&]() -> uint32_t {
    if (saturate || f.kind == Format::NoSpecial) return sign | max_bits(f);
    if (f.kind == Format::Ieee) return sign | (((1u << f.exp_bits) - 1) << f.mant_bits);  // inf
    return nan_bits(f, negative);
  };
  const double a = std::fabs(value);
  if (std::isinf(a)) return overflow();
  // Round to the grid of the binade of `a` (the subnormal spacing below the smallest normal):
  // scaling by a power of two is exact, nearbyint rounds to nearest even.
  const int min_exp = 1 - f.bias;
  int e = std::ilogb(a == 0 ? 1.0 : a);
  if (e < min_exp) e = min_exp;
  const double quantum = std::ldexp(1.0, e - f.mant_bits);
  const double r = std::nearbyint(a / quantum) * quantum;
  if (r > max) return overflow();
  if (r == 0) return f.kind == Format::Fnuz ? 0 : sign;
  const int re = std::ilogb(r);
  uint32_t mag;
  if (re < min_exp) {
    mag = static_cast<uint32_t>(std::ldexp(r, f.bias - 1 + f.mant_bits));  // subnormal
  } else {
    const uint32_t mant = static_cast<uint32_t>(std::ldexp(r, f.mant_bits - re)) - (1u << f.mant_bits);
    mag = (static_cast<uint32_t>(re + f.bias) << f.mant_bits) | mant;
  }
  return sign | mag;
}

// onnx.numpy_helper.to_float8e8m0, on the float32 value's bits.
uint32_t encode_e8m0(double value, bool saturate, E8M0Rounding rounding) {
  const uint32_t bits = std::bit_cast<uint32_t>(static_cast<float>(value));
  uint32_t exponent = (bits >> 23) & 0xffu;
  if (exponent == 0xffu) return 0xffu;
  bool round_up = false;
  switch (rounding) {
    case E8M0Rounding::Up: round_up = (bits & 0x7fffffu) != 0; break;
    case E8M0Rounding::Down: break;
    case E8M0Rounding::Nearest: {
      const bool g = bits & 0x400000u, r = bits & 0x200000u, s = bits & 0x1fffffu, lsb = exponent > 0;
      round_up = g && (r || s || lsb);
      break;
    }
  }
  if (round_up && saturate && exponent == 0xfeu) round_up = false;
  exponent += round_up ? 1 : 0;
  return exponent & 0xffu;
}

}  // namespace

double small_float_decode(DType dtype, uint32_t bits) {
  if (dtype == DType::Float8E8M0) {
    bits &= 0xffu;
    if (bits == 0xffu) return std::numeric_limits<double>::quiet_NaN();
    return std::ldexp(1.0, static_cast<int>(bits) - 127);
  }
  const Format f = format_of(dtype);
  return decode(f, bits & ((1u << total_bits(f)) - 1));
}

uint32_t small_float_encode(DType dtype, double value, bool saturate, E8M0Rounding e8m0_rounding) {
  if (dtype == DType::Float8E8M0) return encode_e8m0(value, saturate, e8m0_rounding);
  // ONNX converts from float32: round there first, as its reference does.
  return encode(format_of(dtype), static_cast<float>(value), saturate);
}

double small_float_max(DType dtype) {
  if (dtype == DType::Float8E8M0) return std::ldexp(1.0, 127);
  const Format f = format_of(dtype);
  return decode(f, max_bits(f));
}

}  // namespace kiln
