// Tensors of 4- and 2-bit elements (int4, uint4, int2, uint2, float4 E2M1) in generated code.
// In memory they are packed, ONNX's layout (include/kiln/ir/Type.h): 4-bit element 2k in the low
// nibble of byte k, 2-bit element 4k + j in bits 2j..2j+1 of byte k. In registers each element is
// one C value: int8_t sign-extended (int4, int2), uint8_t (uint4, uint2), float4_e2m1_t (its
// 4-bit pattern). Local and shared arrays hold one element per byte; only global buffers are
// packed, read with load_packed and written with store_packed. Bit-exact with the CPU reference
// (runtime/HostTensor.cpp: packed(), set_packed(); ir/Simplify.cpp: wrap_to_type).
//
// store_packed on the GPU: threads may write neighbouring elements of one byte, so an element is
// written by clearing and then setting its bits in the aligned 32-bit word that holds its byte
// (atomicAnd, atomicOr; the other bits of the word are left as they are). The kernel contract
// therefore asks a packed tensor that a function writes to be 4-byte aligned (its signature says
// so; validate_arguments checks it) and to lie in an allocation that extends to the end of the
// 4-byte word holding its last byte (kiln_abi.h). On the CPU, generated code is serial and
// updates the byte in place.
// Included by kiln_common.h. Copied next to every generated source.
#ifndef KILN_PACKED_H_
#define KILN_PACKED_H_

#include <stdint.h>

namespace kiln {

// A packed integer type: its register type and width.
template <typename Value, int Bits>
struct packed_int {
  using value_type = Value;
  static constexpr int bits = Bits;
  static constexpr int per_byte = 8 / Bits;
  static constexpr unsigned mask = (1u << Bits) - 1u;
  // The register value of an element's bits (sign-extended for signed types).
  static KILN_HD Value decode(unsigned b) {
    if constexpr (static_cast<Value>(-1) < static_cast<Value>(0)) {
      constexpr int sign = 1 << (Bits - 1);
      return static_cast<Value>(static_cast<int>(b ^ static_cast<unsigned>(sign)) - sign);
    } else {
      return static_cast<Value>(b);
    }
  }
  static KILN_HD unsigned encode(Value v) { return static_cast<unsigned>(v) & mask; }
  // An integer wrapped to Bits bits, as the IR's integer arithmetic and casts wrap.
  static KILN_HD Value wrap(int64_t v) {
    return decode(static_cast<unsigned>(static_cast<uint64_t>(v) & mask));
  }
};
using packed_int4 = packed_int<int8_t, 4>;
using packed_uint4 = packed_int<uint8_t, 4>;
using packed_int2 = packed_int<int8_t, 2>;
using packed_uint2 = packed_int<uint8_t, 2>;

struct packed_float4_e2m1 {
  using value_type = float4_e2m1_t;
  static constexpr int bits = 4;
  static constexpr int per_byte = 2;
  static constexpr unsigned mask = 0xfu;
  static KILN_HD float4_e2m1_t decode(unsigned b) { return float4_e2m1_t{static_cast<uint8_t>(b)}; }
  static KILN_HD unsigned encode(float4_e2m1_t v) { return v.bits & mask; }
};

// Integer conversions to a packed integer type: the value (saturated to int64 from a float, NaN 0:
// kiln::cast) wrapped to the type's bits, as the CPU reference's Cast does.
template <typename P, typename From>
KILN_HD inline typename P::value_type cast_packed(From x) {
  return P::wrap(cast<int64_t, From>(x));
}

template <typename P>
KILN_HD inline typename P::value_type load_packed(const uint8_t* __restrict__ data, int64_t i) {
  const unsigned shift = static_cast<unsigned>(P::bits * (i % P::per_byte));
  return P::decode((static_cast<unsigned>(data[i / P::per_byte]) >> shift) & P::mask);
}

template <typename P>
KILN_HD inline void store_packed(uint8_t* __restrict__ data, int64_t i, typename P::value_type v) {
  const unsigned shift = static_cast<unsigned>(P::bits * (i % P::per_byte));
  uint8_t* byte = data + i / P::per_byte;
#if defined(__CUDA_ARCH__)
  const uintptr_t address = reinterpret_cast<uintptr_t>(byte);
  unsigned* word = reinterpret_cast<unsigned*>(address & ~static_cast<uintptr_t>(3));
  const unsigned word_shift = 8u * static_cast<unsigned>(address & 3u) + shift;
  atomicAnd(word, ~(P::mask << word_shift));
  if (const unsigned bits = P::encode(v); bits != 0u) atomicOr(word, bits << word_shift);
#else
  *byte = static_cast<uint8_t>((*byte & ~(P::mask << shift)) | (P::encode(v) << shift));
#endif
}

}  // namespace kiln

#endif  // KILN_PACKED_H_
