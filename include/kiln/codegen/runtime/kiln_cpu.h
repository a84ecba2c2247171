// Helper code for generated C++ (the CPU backend): the half-precision storage types and the
// portable operations of kiln_common.h. Copied next to every generated source.
#ifndef KILN_CPU_H_
#define KILN_CPU_H_

#include <stdint.h>
#include <string.h>

#include <cmath>

#define KILN_HD
#ifndef __restrict__
#define __restrict__ __restrict
#endif

namespace kiln {

using std::ceil;
using std::erf;
using std::exp;
using std::floor;
using std::fmax;
using std::fmin;
using std::fmod;
using std::isinf;
using std::isnan;
using std::log;
using std::pow;
using std::rint;
using std::sqrt;
using std::trunc;

// float16 and bfloat16 as 16-bit patterns; arithmetic goes through float, rounding to nearest
// even on the way back (as the CPU reference does).
inline float half_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu, bits;
  if (exponent == 0) {
    if (mantissa == 0) {
      bits = sign;
    } else {
      exponent = 127 - 15 + 1;
      while ((mantissa & 0x400u) == 0) {
        mantissa <<= 1;
        --exponent;
      }
      bits = sign | (exponent << 23) | ((mantissa & 0x3ffu) << 13);
    }
  } else if (exponent == 31) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else {
    bits = sign | ((exponent + 127 - 15) << 23) | (mantissa << 13);
  }
  float f;
  memcpy(&f, &bits, 4);
  return f;
}
inline uint16_t float_to_half_bits(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7e00u;
  if (abs >= 0x477ff000u) return sign | 0x7c00u;  // rounds to infinity
  if (abs < 0x38800000u) {                        // subnormal or zero in half
    const float scaled = std::fabs(f) * 16777216.0f;  // 2^24: one half subnormal ulp = 1
    return sign | static_cast<uint16_t>(std::nearbyint(scaled));
  }
  const uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
  return sign | static_cast<uint16_t>((rounded - 0x38000000u) >> 13);
}

struct half_t {
  uint16_t bits;
};
struct bfloat16_t {
  uint16_t bits;
};

inline float to_float(half_t h) { return half_bits_to_float(h.bits); }
inline float to_float(bfloat16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b.bits) << 16;
  float f;
  memcpy(&f, &bits, 4);
  return f;
}
template <typename T>
T from_float(float f);
template <>
inline half_t from_float<half_t>(float f) {
  return half_t{float_to_half_bits(f)};
}
template <>
inline bfloat16_t from_float<bfloat16_t>(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return bfloat16_t{static_cast<uint16_t>((x >> 16) | 0x40u)};
  return bfloat16_t{static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16)};
}

#define KILN_HALF_OPERATORS(T)                                                                   \
  inline T operator+(T a, T b) { return from_float<T>(to_float(a) + to_float(b)); }            \
  inline T operator-(T a, T b) { return from_float<T>(to_float(a) - to_float(b)); }            \
  inline T operator*(T a, T b) { return from_float<T>(to_float(a) * to_float(b)); }            \
  inline T operator/(T a, T b) { return from_float<T>(to_float(a) / to_float(b)); }            \
  inline T operator-(T a) { return from_float<T>(-to_float(a)); }                              \
  inline bool operator==(T a, T b) { return to_float(a) == to_float(b); }                      \
  inline bool operator!=(T a, T b) { return to_float(a) != to_float(b); }                      \
  inline bool operator<(T a, T b) { return to_float(a) < to_float(b); }                        \
  inline bool operator<=(T a, T b) { return to_float(a) <= to_float(b); }                      \
  inline bool operator>(T a, T b) { return to_float(a) > to_float(b); }                        \
  inline bool operator>=(T a, T b) { return to_float(a) >= to_float(b); }
KILN_HALF_OPERATORS(half_t)
KILN_HALF_OPERATORS(bfloat16_t)
#undef KILN_HALF_OPERATORS

}  // namespace kiln

#include "kiln_common.h"

namespace kiln {
template <>
struct is_half_like<half_t> : std::true_type {};
template <>
struct is_half_like<bfloat16_t> : std::true_type {};
}  // namespace kiln

#endif  // KILN_CPU_H_
