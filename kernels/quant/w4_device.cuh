#pragma once
// Device helpers shared by the 4-bit weight kernels: 4-bit decode with bit tricks (no lookup
// tables), per-block scale multipliers, mma.sync and the load wrappers. Portable PTX for sm_80+
// (fma.rn.bf16x2 and mma.m16n8k16 exist from sm_80; nothing sm_90a- or sm_100-only).
//
// Decoding. A weight word holds 8 elements in kernel nibble order (include/kiln/quant/Prepack.h):
// nibble p holds element [0,2,4,6,1,3,5,7][p], so pair p = (e2p, e2p+1) sits in nibbles p and
// p+4, i.e. in the same place of both 16-bit halves. One shift and one mask put a pair into a
// 16-bit float pair:
//   E2M1 -> fp16: sign to bit 15, the 3 magnitude bits to bits 11..9. The fp16 then reads
//                 v·2^-14 exactly (E2M1's subnormal 0.5 lands on fp16's subnormal range).
//   E2M1 -> bf16: magnitude to bits 8..6: v·2^-126 (0.5 becomes a bf16 subnormal; fma.bf16x2
//                 keeps subnormals, PTX ISA "fma": "subnormal numbers are supported").
//   INT4 -> fp16: 0x6400 | q = 1024 + q;  bf16: 0x4300 | q = 128 + q (exact small integers).
// The block scale then multiplies the pair (one mul per 2 elements), folding the 2^-14 / 2^-126
// back so that the mma operand is exact and normal; the remaining power of two and NVFP4's
// tensor scale are applied to the fp32 result in the epilogue (Scale::output_factor).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "w4_nibbles.h"

namespace kiln::quant::gpu {

enum class Format { NvFp4, MxFp4, Int4 };
enum class Activation { None = 0, GeluTanh = 1, Silu = 2 };

template <typename T>
struct IsBf16;
template <>
struct IsBf16<__half> {
  static constexpr bool value = false;
};
template <>
struct IsBf16<__nv_bfloat16> {
  static constexpr bool value = true;
};

// a * b on a pair of 16-bit floats (bits in a 32-bit register).
template <bool BF16>
__device__ __forceinline__ uint32_t mul2(uint32_t a, uint32_t b) {
  uint32_t d;
  if constexpr (BF16) {
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(0x80008000u));
  } else {
    asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  }
  return d;
}

// a - b on a pair; exact for the small integers INT4 decoding subtracts.
template <bool BF16>
__device__ __forceinline__ uint32_t sub2(uint32_t a, uint32_t b) {
  uint32_t d;
  if constexpr (BF16) {
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(b), "r"(0xbf80bf80u), "r"(a));
  } else {
    asm("sub.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  }
  return d;
}

// D += A·B, m16n8k16, 16-bit float operands, fp32 accumulators.
template <bool BF16>
__device__ __forceinline__ void mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  if constexpr (BF16) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// Streaming 16-byte load of weights that are read once: skip L1.
__device__ __forceinline__ uint4 load_stream16(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

__device__ __forceinline__ uint4 load_cached16(const void* p) { return __ldg(reinterpret_cast<const uint4*>(p)); }

__device__ __forceinline__ uint32_t word_of(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// A pair moved into place (w4_nibbles.h's kernel_order_pair / stored_pair) as a 16-bit float pair,
// before the block scale.
template <Format F, bool BF16>
__device__ __forceinline__ uint32_t decode_pair_at(uint32_t t) {
  if constexpr (F == Format::Int4) {
    return (t & 0x000f000fu) | (BF16 ? 0x43004300u : 0x64006400u);
  } else {
    return (t & 0x80008000u) | ((t & 0x70007000u) >> (BF16 ? 6 : 3));
  }
}

template <Format F, bool BF16>
__device__ __forceinline__ uint32_t decode_pair(uint32_t w, int p) {
  return decode_pair_at<F, BF16>(kernel_order_pair<F == Format::Int4>(w, p));
}

// The 4 pairs of a weight word as the small-M GEMVs' mma steps read it (w4_gemv.cuh), with x's
// pairs to match: pair p is nibbles p and p + 4 (kernel_order_pair), i.e. elements 2p, 2p + 1 in
// kernel order, and in exported order, read as stored, elements p, p + 4. A thread's k slots there
// are its own 8 elements of the word, so any pairing is right as long as x is paired alike: in
// exported order x_pairs_as_stored pairs x (4 byte permutes a token) instead of each weight word
// being reordered (decode_word).
template <Format F, bool BF16>
__device__ __forceinline__ void decode_word_as_stored(uint32_t w, uint32_t (&out)[4]) {
#pragma unroll
  for (int p = 0; p < 4; ++p) out[p] = decode_pair<F, BF16>(w, p);
}
__device__ __forceinline__ uint4 x_pairs_as_stored(const uint4& v) {
  uint32_t xp[4] = {v.x, v.y, v.z, v.w};
  stored_order_x_pairs(xp);  // w4_nibbles.h
  return make_uint4(xp[0], xp[1], xp[2], xp[3]);
}

// The 4 pairs of a weight word in element order, (2p, 2p + 1), as 16-bit float pairs, before the
// block scale (the GEMMs, whose k slots follow the mma fragments).
template <Format F, bool BF16>
__device__ __forceinline__ void decode_word(uint32_t w, uint32_t (&out)[4]) {
  decode_word_as_stored<F, BF16>(kernel_nibbles(w), out);  // w4_nibbles.h: the identity in kernel order
}

// Per-(row, block) scale data as loaded (raw bits), and its expansion into pair multipliers.
//  NVFP4: 16 bits = the E4M3 scales of 2 consecutive 16-blocks (a thread's 32 elements).
//  MXFP4: 8 bits = the E8M0 scale of the thread's 32-block.
//  INT4:  16 bits scale, 16 bits zero (bits of the activation dtype).
template <Format F, bool BF16>
struct Scale {
  uint32_t mul[2];   // pair multiplier for block 0 (words 0,1) and block 1 (words 2,3)
  uint32_t zero;     // INT4: 1024 + z (fp16) or 128 + z (bf16), replicated

  __device__ __forceinline__ void expand(uint32_t raw, uint32_t raw_zero) {
    if constexpr (F == Format::NvFp4) {
#pragma unroll
      for (int b = 0; b < 2; ++b) {
        const uint32_t e4m3 = (raw >> (8 * b)) & 0x7fu;  // scales are non-negative
        if constexpr (BF16) {
          // bits << 4 read as bf16: s·2^-120 (subnormal scales too); two exact ·2^119 -> s·2^118.
          uint32_t m = e4m3 * 0x00100010u;
          m = mul2<true>(m, 0x7b007b00u);
          mul[b] = mul2<true>(m, 0x7b007b00u);
        } else {
          // bits << 7 read as fp16: s·2^-8 (subnormal scales too); ·2^8 -> s exactly.
          mul[b] = mul2<false>(e4m3 * 0x00800080u, 0x5c005c00u);
        }
      }
    } else if constexpr (F == Format::MxFp4) {
      const uint32_t e = raw & 0xffu;  // <= 128, checked by prepack
      uint32_t m;
      if constexpr (BF16) {
        m = (e + 126u) * 0x00800080u;  // 2^(e-1): v·2^-126 · 2^(e-1) = v·2^(e-127)
      } else {
        m = (e > 98u ? e - 98u : 0u) * 0x04000400u;  // 2^(e-113): v·2^-14 · 2^(e-113)
      }
      mul[0] = mul[1] = m;
    } else {
      mul[0] = mul[1] = (raw & 0xffffu) * 0x00010001u;
      const uint32_t z = raw_zero & 0xffffu;
      uint32_t zz;
      if constexpr (BF16) {
        const float f = __bfloat162float(__ushort_as_bfloat16(static_cast<unsigned short>(z))) + 128.0f;
        zz = __bfloat16_as_ushort(__float2bfloat16_rn(f));
      } else {
        zz = __half_as_ushort(__hadd(__ushort_as_half(static_cast<unsigned short>(z)), __float2half(1024.0f)));
      }
      zero = zz * 0x00010001u;
    }
  }

  // Scaled pair p of word i of the thread's 32 elements.
  __device__ __forceinline__ uint32_t apply(uint32_t pair, int word) const {
    if constexpr (F == Format::Int4) {
      return mul2<BF16>(sub2<BF16>(pair, zero), mul[0]);
    } else {
      return mul2<BF16>(pair, mul[word >> 1]);
    }
  }

  // What the fp32 result is multiplied by (times NVFP4's tensor scale).
  __host__ __device__ static constexpr float output_factor() {
    if constexpr (F == Format::NvFp4) return BF16 ? 256.0f : 16384.0f;
    return 1.0f;
  }
};

__device__ __forceinline__ float activate(float v, Activation act) {
  if (act == Activation::GeluTanh) {
    const float kAlpha = 0.7978845608028654f;
    return 0.5f * v * (1.0f + tanhf(kAlpha * (v + 0.044715f * v * v * v)));
  }
  if (act == Activation::Silu) return v / (1.0f + __expf(-v));
  return v;
}

template <typename T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ __half from_float<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

}  // namespace kiln::quant::gpu
