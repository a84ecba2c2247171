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
template <typename T>
KILN_HD inline T fabs_(T x) {
  if constexpr (std::is_floating_point_v<T>) return fabs(x);
  else if constexpr (std::is_signed_v<T>) return x < T(0) ? static_cast<T>(T(0) - x) : x;
  else return x;
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

}  // namespace kiln

#endif  // KILN_COMMON_H_
