#include "kiln/quant/Minifloat.h"

#include <bit>
#include <cmath>

#include "kiln/support/Error.h"

namespace kiln::quant {
namespace {

// A binary floating-point format with `exponent_bits`, `mantissa_bits` and IEEE-style bias,
// saturating at `max_finite`. Encodes through double, which holds every value exactly.
struct MiniFormat {
  int exponent_bits;
  int mantissa_bits;
  int bias;
  double max_finite;

  int min_normal_exponent() const { return 1 - bias; }

  uint32_t encode(double value) const {
    KILN_ASSERT(!std::isnan(value), "NaN reached a minifloat encoder");
    const uint32_t sign = std::signbit(value) ? 1u : 0u;
    const uint32_t sign_bit = sign << (exponent_bits + mantissa_bits);
    double magnitude = std::fabs(value);
    if (magnitude == 0.0) return sign_bit;
    // The spacing of representable values around `magnitude` (subnormal spacing below the
    // smallest normal), then round to a multiple of it, ties to even.
    int exponent = std::ilogb(magnitude);
    if (exponent < min_normal_exponent()) exponent = min_normal_exponent();
    const double quantum = std::ldexp(1.0, exponent - mantissa_bits);
    const double steps = std::nearbyint(magnitude / quantum);  // default mode: ties to even
    magnitude = steps * quantum;
    if (magnitude > max_finite) magnitude = max_finite;
    if (magnitude == 0.0) return sign_bit;
    int e = std::ilogb(magnitude);
    uint32_t field = 0;
    uint32_t mantissa = 0;
    if (e < min_normal_exponent()) {
      mantissa = static_cast<uint32_t>(std::ldexp(magnitude, -(min_normal_exponent() - mantissa_bits)));
    } else {
      field = static_cast<uint32_t>(e + bias);
      mantissa = static_cast<uint32_t>(std::ldexp(magnitude, mantissa_bits - e)) - (1u << mantissa_bits);
    }
    return sign_bit | (field << mantissa_bits) | mantissa;
  }

  double decode(uint32_t bits) const {
    const uint32_t mantissa = bits & ((1u << mantissa_bits) - 1);
    const uint32_t field = (bits >> mantissa_bits) & ((1u << exponent_bits) - 1);
    const bool negative = (bits >> (exponent_bits + mantissa_bits)) & 1u;
    double magnitude = field == 0
                           ? std::ldexp(static_cast<double>(mantissa), min_normal_exponent() - mantissa_bits)
                           : std::ldexp(1.0 + std::ldexp(static_cast<double>(mantissa), -mantissa_bits),
                                        static_cast<int>(field) - bias);
    return negative ? -magnitude : magnitude;
  }
};

constexpr MiniFormat kE2M1{2, 1, 1, 6.0};
constexpr MiniFormat kE4M3{4, 3, 7, 448.0};

}  // namespace

uint8_t e2m1_from_float(float value) { return static_cast<uint8_t>(kE2M1.encode(value)); }
float e2m1_to_float(uint8_t code) { return static_cast<float>(kE2M1.decode(code & 0xfu)); }

uint8_t e4m3_from_float(float value) { return static_cast<uint8_t>(kE4M3.encode(value)); }
float e4m3_to_float(uint8_t bits) {
  if ((bits & 0x7fu) == 0x7fu) return std::nanf("");
  return static_cast<float>(kE4M3.decode(bits));
}

uint8_t e8m0_from_exponent(int exponent) {
  if (exponent < -127) exponent = -127;
  if (exponent > 127) exponent = 127;
  return static_cast<uint8_t>(exponent + 127);
}
float e8m0_to_float(uint8_t bits) {
  if (bits == 0xffu) return std::nanf("");
  return std::ldexp(1.0f, static_cast<int>(bits) - 127);
}

}  // namespace kiln::quant
