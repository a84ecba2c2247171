// Helper code shared by generated C++ (CPU) and CUDA sources: portable semantics of kiln's IR
// operations that C leaves undefined or spells differently per type (integer division by zero,
// float-to-int casts, NaN-ignoring min/max), and whole-vector copies for 16-byte accesses.
// Included by kiln_cpu.h and kiln_cuda.cuh, which define KILN_HD and the half/bfloat16 types
// first. Copied next to every generated source.
#ifndef KILN_COMMON_H_
#define KILN_COMMON_H_

#include <stdint.h>
#include <string.h>

#include <cmath>
#include <limits>
#include <type_traits>

namespace kiln {

template <typename T>
struct is_half_like : std::false_type {};
template <typename T>
inline constexpr bool is_float_like_v = std::is_floating_point_v<T> || is_half_like<T>::value;

// Float-to-integer conversion saturates and maps NaN to 0 (the CPU reference's rule); every
// other conversion is C's, with half types going through float.
template <typename To, typename From>
KILN_HD inline To cast(From x) {
  if constexpr (std::is_same_v<To, From>) {
    return x;
  } else if constexpr (is_half_like<From>::value) {
    return cast<To>(to_float(x));
  } else if constexpr (is_half_like<To>::value) {
    return from_float<To>(static_cast<float>(x));
  } else if constexpr (std::is_same_v<To, bool>) {
    return x != From(0);
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>) {
    if (x != x) return To(0);
    if (x <= static_cast<From>(std::numeric_limits<To>::lowest())) return std::numeric_limits<To>::lowest();
    if (x >= static_cast<From>(std::numeric_limits<To>::max())) return std::numeric_limits<To>::max();
    return static_cast<To>(x);
  } else {
    return static_cast<To>(x);
  }
}

// Integer division and remainder as C, except that a zero divisor gives 0 and x / -1 wraps.
template <typename T>
KILN_HD inline T idiv(T a, T b) {
  if (b == T(0)) return T(0);
  if constexpr (std::is_signed_v<T>) {
    if (b == T(-1)) return static_cast<T>(T(0) - static_cast<std::make_unsigned_t<T>>(a));
  }
  return a / b;
}
template <typename T>
KILN_HD inline T imod(T a, T b) {
  if (b == T(0)) return T(0);
  if constexpr (std::is_signed_v<T>) {
    if (b == T(-1)) return T(0);
  }
  return a % b;
}

// min/max: NaN-ignoring for floats (fmin/fmax), plain for integers.
template <typename T>
KILN_HD inline T min_(T a, T b) {
  if constexpr (is_half_like<T>::value) {
    return from_float<T>(fminf(to_float(a), to_float(b)));
  } else if constexpr (std::is_floating_point_v<T>) {
    return fmin(a, b);
  } else {
    return b < a ? b : a;
  }
}
template <typename T>
KILN_HD inline T max_(T a, T b) {
  if constexpr (is_half_like<T>::value) {
    return from_float<T>(fmaxf(to_float(a), to_float(b)));
  } else if constexpr (std::is_floating_point_v<T>) {
    return fmax(a, b);
  } else {
    return a < b ? b : a;
  }
}

template <typename T>
KILN_HD inline T infinity() {
  if constexpr (is_half_like<T>::value) return from_float<T>(std::numeric_limits<float>::infinity());
  else return std::numeric_limits<T>::infinity();
}
template <typename T>
KILN_HD inline T quiet_nan() {
  if constexpr (is_half_like<T>::value) return from_float<T>(std::numeric_limits<float>::quiet_NaN());
  else return std::numeric_limits<T>::quiet_NaN();
}

template <typename T>
KILN_HD inline T round_even(T x) {
  return rint(x);
}
template <typename T>
KILN_HD inline T rsqrt_(T x) {
  return T(1) / sqrt(x);
}

// 1 / x (Intrinsic::Rcp where no reciprocal unit is used: the host, and double on the GPU).
template <typename T>
KILN_HD inline T rcp_(T x) {
  return T(1) / x;
}
template <typename T>
KILN_HD inline T fabs_(T x) {
  if constexpr (std::is_floating_point_v<T>) return fabs(x);
  else if constexpr (std::is_signed_v<T>) return x < T(0) ? static_cast<T>(T(0) - x) : x;
  else return x;
}
// ONNX BitCast: the bits of x as a To of the same size.
template <typename To, typename From>
KILN_HD inline To bit_cast(From x) {
  static_assert(sizeof(To) == sizeof(From), "bit_cast between types of different sizes");
  To y;
  __builtin_memcpy(&y, &x, sizeof(To));
  return y;
}
template <typename T>
KILN_HD inline T shift_left(T a, T n) {
  return n < T(0) || n >= T(sizeof(T) * 8) ? T(0) : static_cast<T>(static_cast<std::make_unsigned_t<T>>(a) << n);
}
template <typename T>
KILN_HD inline T shift_right(T a, T n) {
  if constexpr (std::is_signed_v<T>) return a >> (n < T(0) ? T(0) : n >= T(sizeof(T) * 8) ? T(sizeof(T) * 8 - 1) : n);
  else return n >= T(sizeof(T) * 8) ? T(0) : static_cast<T>(a >> n);
}

// Copies N elements between 16-byte-aligned-enough addresses in chunks of up to 16 bytes: one
// vector load and one vector store per chunk (LDG.128 / STG.128 on the GPU).
template <int Bytes>
struct VectorChunk;
template <>
struct alignas(16) VectorChunk<16> { uint32_t w[4]; };
template <>
struct alignas(8) VectorChunk<8> { uint32_t w[2]; };
template <>
struct alignas(4) VectorChunk<4> { uint32_t w[1]; };
template <>
struct alignas(2) VectorChunk<2> { uint16_t w[1]; };
template <>
struct alignas(1) VectorChunk<1> { uint8_t w[1]; };

template <int N, typename T>
KILN_HD inline void copy_vector(T* __restrict__ dst, const T* __restrict__ src) {
  constexpr int kBytes = N * static_cast<int>(sizeof(T));
  constexpr int kChunk = kBytes >= 16 ? 16 : kBytes >= 8 ? 8 : kBytes >= 4 ? 4 : kBytes >= 2 ? 2 : 1;
  static_assert(kBytes % kChunk == 0, "vector access of an odd size");
  using Chunk = VectorChunk<kChunk>;
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
  for (int k = 0; k < kBytes / kChunk; ++k) {
    reinterpret_cast<Chunk*>(dst)[k] = reinterpret_cast<const Chunk*>(src)[k];
  }
}

// float8 (E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ, E8M0) and float4 E2M1 values in registers: their bit
// pattern in a byte (float4 in the low 4 bits), computed in float like half types. from_float is
// ONNX's Cast: round to nearest even, saturating (E8M0: the float's exponent rounded up).
// Bit-exact with kiln's CPU reference (include/kiln/ir/SmallFloat.h). Tensors of 4- and 2-bit
// types are packed: kiln_packed.h.
template <int ExpBits, int MantBits, int Bias, int Kind>  // Kind: 0 IEEE-like, 1 fn, 2 fnuz, 3 no inf/NaN
struct small_float_t {
  uint8_t bits;
};
using float8_e4m3fn_t = small_float_t<4, 3, 7, 1>;
using float8_e4m3fnuz_t = small_float_t<4, 3, 8, 2>;
using float8_e5m2_t = small_float_t<5, 2, 15, 0>;
using float8_e5m2fnuz_t = small_float_t<5, 2, 16, 2>;
using float4_e2m1_t = small_float_t<2, 1, 1, 3>;
struct float8_e8m0_t {
  uint8_t bits;
};

template <int E, int M, int B, int K>
KILN_HD inline float to_float(small_float_t<E, M, B, K> v) {
  constexpr unsigned sign_bit = 1u << (E + M), exp_all = (1u << E) - 1;
  const unsigned mag = v.bits & (sign_bit - 1), exp = mag >> M, mant = mag & ((1u << M) - 1);
  const bool negative = (v.bits & sign_bit) != 0;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  if (K == 2 && v.bits == sign_bit) return nan;
  if (K == 1 && mag == sign_bit - 1) return nan;
  if (K == 0 && exp == exp_all) {
    if (mant != 0) return nan;
    return negative ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
  }
  const float r = exp == 0 ? ldexpf(static_cast<float>(mant), 1 - B - M)
                           : ldexpf(static_cast<float>(mant | (1u << M)), static_cast<int>(exp) - B - M);
  return negative ? -r : r;
}

template <int E, int M, int B, int K>
KILN_HD inline small_float_t<E, M, B, K> small_float_from_float(float f) {
  using T = small_float_t<E, M, B, K>;
  constexpr unsigned sign_bit = 1u << (E + M), all = sign_bit - 1;
  constexpr unsigned max_bits = K == 1 ? all - 1 : K == 0 ? all - (1u << M) : all;
  uint32_t f_bits;
  memcpy(&f_bits, &f, sizeof f_bits);
  const bool negative = (f_bits >> 31) != 0;
  const unsigned sign = negative ? sign_bit : 0u;
  if (f != f) {
    if (K == 2) return T{static_cast<uint8_t>(sign_bit)};
    if (K == 3) return T{static_cast<uint8_t>(negative ? 0u : sign_bit)};
    if (K == 0) return T{static_cast<uint8_t>((((1u << E) - 1) << M) | (1u << (M - 1)) | sign)};
    return T{static_cast<uint8_t>(all | sign)};
  }
  const float max = to_float(T{static_cast<uint8_t>(max_bits)});
  const float a = fabsf(f);
  if (!(a <= max * 2.0f)) return T{static_cast<uint8_t>(sign | max_bits)};  // saturate (infinities too)
  int e = a == 0.0f ? 0 : ilogbf(a);
  if (e < 1 - B) e = 1 - B;
  const float quantum = ldexpf(1.0f, e - M);
  const float r = rintf(a / quantum) * quantum;
  if (r > max) return T{static_cast<uint8_t>(sign | max_bits)};
  if (r == 0.0f) return T{static_cast<uint8_t>(K == 2 ? 0u : sign)};
  const int re = ilogbf(r);
  unsigned mag;
  if (re < 1 - B) {
    mag = static_cast<unsigned>(ldexpf(r, B - 1 + M));
  } else {
    mag = (static_cast<unsigned>(re + B) << M) | (static_cast<unsigned>(ldexpf(r, M - re)) - (1u << M));
  }
  return T{static_cast<uint8_t>(sign | mag)};
}

KILN_HD inline float to_float(float8_e8m0_t v) {
  return v.bits == 0xffu ? std::numeric_limits<float>::quiet_NaN() : ldexpf(1.0f, static_cast<int>(v.bits) - 127);
}

template <>
KILN_HD inline float8_e8m0_t from_float<float8_e8m0_t>(float f) {
  uint32_t x;
  memcpy(&x, &f, sizeof x);
  uint32_t exponent = (x >> 23) & 0xffu;
  if (exponent == 0xffu) return float8_e8m0_t{0xffu};
  if ((x & 0x7fffffu) != 0 && exponent != 0xfeu) ++exponent;  // round up, saturating
  return float8_e8m0_t{static_cast<uint8_t>(exponent)};
}
template <>
KILN_HD inline float8_e4m3fn_t from_float<float8_e4m3fn_t>(float f) { return small_float_from_float<4, 3, 7, 1>(f); }
template <>
KILN_HD inline float8_e4m3fnuz_t from_float<float8_e4m3fnuz_t>(float f) { return small_float_from_float<4, 3, 8, 2>(f); }
template <>
KILN_HD inline float8_e5m2_t from_float<float8_e5m2_t>(float f) { return small_float_from_float<5, 2, 15, 0>(f); }
template <>
KILN_HD inline float8_e5m2fnuz_t from_float<float8_e5m2fnuz_t>(float f) { return small_float_from_float<5, 2, 16, 2>(f); }
template <>
KILN_HD inline float4_e2m1_t from_float<float4_e2m1_t>(float f) { return small_float_from_float<2, 1, 1, 3>(f); }

template <int E, int M, int B, int K>
struct is_half_like<small_float_t<E, M, B, K>> : std::true_type {};
template <>
struct is_half_like<float8_e8m0_t> : std::true_type {};

}  // namespace kiln

#include "kiln_packed.h"  // 4- and 2-bit tensors

#endif  // KILN_COMMON_H_
