#pragma once
// The nibble orders of a 4-bit weight word, shared by the kernels and host-side tests (plain C++).
//
// A 32-bit word (4 bytes, little-endian) holds 8 consecutive elements e0..e7 of a weight row.
//   exported order (include/kiln/quant/QuantizedWeight.h, what checkpoints and kiln.QuantLinear
//     nodes store): nibble i holds e_i (element 2j in the low nibble of byte j);
//   kernel order (include/kiln/quant/Prepack.h, what libkiln_quant takes): nibble p holds
//     e[0, 2, 4, 6, 1, 3, 5, 7][p], so that the pair (e2p, e2p+1) sits in nibbles p and p + 4.
// The kernels decode kernel order. Generated code passes kiln.QuantLinear's stored (exported)
// bytes as they are and defines KILN_QUANT_EXPORT_NIBBLE_ORDER before including the kernels,
// instead of keeping a second, prepacked copy of the weights. The GEMVs (M <= 16) then pair the
// activations to match the stored nibbles (stored_order_x_pairs below, through w4_gemv_half2.cuh's
// pair_x_as_stored and w4_device.cuh's x_pairs_as_stored); the GEMMs reorder each word in registers
// as they decode it (export_to_kernel_nibbles: 5 integer instructions per 8 weights, or
// stored_pair below).
#include <cstdint>

#if defined(__CUDACC__)
#define KILN_QUANT_HD __host__ __device__ __forceinline__
#else
#define KILN_QUANT_HD inline
#endif

namespace kiln::quant::gpu {

KILN_QUANT_HD uint32_t export_to_kernel_nibbles(uint32_t x) {
  // Swap nibbles 1 <-> 2 and 5 <-> 6 (e0 e2 e1 e3 | e4 e6 e5 e7), then bytes 1 <-> 2.
  const uint32_t t = ((x >> 4) ^ x) & 0x00f000f0u;
  x ^= t ^ (t << 4);
  return (x & 0xff0000ffu) | ((x & 0x0000ff00u) << 8) | ((x & 0x00ff0000u) >> 8);
}

// The word as the decoders read it (see above).
KILN_QUANT_HD uint32_t kernel_nibbles(uint32_t word) {
#ifdef KILN_QUANT_EXPORT_NIBBLE_ORDER
  return export_to_kernel_nibbles(word);
#else
  return word;
#endif
}

// The activation pairs for a word whose pair q is read from nibbles q and q + 4 (the GEMVs:
// w4_gemv_half2.cuh's half2 decoders, w4_device.cuh's decode_word_as_stored), from x's pairs in element order: xp[q] = (x[2q], x[2q + 1]) as
// 16-bit halves (low, high), which kernel order keeps. Exported order holds elements q and q + 4 in
// those nibbles, so the pairs become (x[q], x[q + 4]).
KILN_QUANT_HD void exported_order_x_pairs(uint32_t (&xp)[4]) {
  const uint32_t a = xp[0], b = xp[1], c = xp[2], d = xp[3];  // (x0, x1), (x2, x3), (x4, x5), (x6, x7)
  xp[0] = (a & 0xffffu) | (c << 16);      // (x0, x4)
  xp[1] = (a >> 16) | (c & 0xffff0000u);  // (x1, x5)
  xp[2] = (b & 0xffffu) | (d << 16);      // (x2, x6)
  xp[3] = (b >> 16) | (d & 0xffff0000u);  // (x3, x7)
}

// x's pairs for the word as stored (the decoders' pairing; see kernel_nibbles): the identity in
// kernel order.
KILN_QUANT_HD void stored_order_x_pairs(uint32_t (&xp)[4]) {
#ifdef KILN_QUANT_EXPORT_NIBBLE_ORDER
  exported_order_x_pairs(xp);
#else
  (void)xp;
#endif
}

KILN_QUANT_HD uint32_t rotate_left(uint32_t x, int n) {
  n &= 31;
  return n == 0 ? x : (x << n) | (x >> (32 - n));
}

// Pair p (elements e2p, e2p+1) of a word moved to where the pair decoders (w4_device.cuh's
// decode_pair_at) take it: E2M1 (kInt4 false) e2p in nibble 3 and e2p+1 in nibble 7 (the sign
// bits 15 and 31), INT4 e2p in nibble 0 and e2p+1 in nibble 4. Other bits are left undefined.
// In kernel order one shift; in exported order two rotations and a select (3 instructions instead
// of export_to_kernel_nibbles' 5 before the shift, for a decoder that takes one pair of a word).
template <bool kInt4>
KILN_QUANT_HD uint32_t kernel_order_pair(uint32_t word, int p) {
  return kInt4 ? word >> (4 * p) : word << (12 - 4 * p);
}

template <bool kInt4>
KILN_QUANT_HD uint32_t exported_order_pair(uint32_t word, int p) {
  // e2p sits in bits 8p..8p+3, e2p+1 in bits 8p+4..8p+7.
  const uint32_t low = rotate_left(word, (kInt4 ? 0 : 12) - 8 * p);   // e2p to bit 0 or 12
  const uint32_t high = rotate_left(word, (kInt4 ? 12 : 24) - 8 * p);  // e2p+1 to bit 16 or 28
  return (low & 0x0000ffffu) | (high & 0xffff0000u);
}

// Pair p of a word as stored (the decoders' input; see kernel_nibbles).
template <bool kInt4>
KILN_QUANT_HD uint32_t stored_pair(uint32_t word, int p) {
#ifdef KILN_QUANT_EXPORT_NIBBLE_ORDER
  return exported_order_pair<kInt4>(word, p);
#else
  return kernel_order_pair<kInt4>(word, p);
#endif
}

}  // namespace kiln::quant::gpu
