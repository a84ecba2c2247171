// Helper code for generated C++ (the CPU backend): the half-precision storage types and the
// portable operations of kiln_common.h. Copied next to every generated source.
#ifndef KILN_CPU_H_
#define KILN_CPU_H_

#include <stdint.h>
#include <string.h>

#include <cmath>
#if defined(__F16C__)
#include <immintrin.h>
#endif

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

// Where the compiler may use the CPU's conversion instructions (x86 F16C: -mf16c or -march=native on
// a CPU that has it; every AArch64), float16 converts through them: the same values as the portable
// code above, bit for bit (NaN results are written as that code writes them, a quiet NaN of the
// sign; tests/codegen/HalfConversion_test.cpp compares every half and a sweep of floats). The
// generated C++ of a float16 model converts at every operation, so this is most of a CPU
// reference's time (kiln tune builds its reference with -mf16c where the CPU has F16C).
// A NaN as the portable code writes it: the quiet NaN of its sign.
inline uint16_t canonical_half_nan(uint16_t r) {
  return (r & 0x7c00u) == 0x7c00u && (r & 0x3ffu) ? static_cast<uint16_t>((r & 0x8000u) | 0x7e00u) : r;
}
#if defined(__F16C__)
inline float fast_half_bits_to_float(uint16_t h) { return _cvtsh_ss(h); }
inline uint16_t fast_float_to_half_bits(float f) {
  return canonical_half_nan(static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT)));
}
#define KILN_FAST_HALF 1
#elif defined(__aarch64__)
inline float fast_half_bits_to_float(uint16_t h) {
  __fp16 v;
  memcpy(&v, &h, 2);
  return static_cast<float>(v);
}
inline uint16_t fast_float_to_half_bits(float f) {
  const __fp16 v = static_cast<__fp16>(f);
  uint16_t r;
  memcpy(&r, &v, 2);
  return canonical_half_nan(r);
}
#define KILN_FAST_HALF 1
#endif

#if defined(KILN_FAST_HALF)
inline float to_float(half_t h) { return fast_half_bits_to_float(h.bits); }
#else
inline float to_float(half_t h) { return half_bits_to_float(h.bits); }
#endif
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
#if defined(KILN_FAST_HALF)
  return half_t{fast_float_to_half_bits(f)};
#else
  return half_t{float_to_half_bits(f)};
#endif
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
