#pragma once
// Reversible, documented reorderings of a QuantizedWeight for kiln's 4-bit kernels
// (kernels/quant/). The exported layout (QuantizedWeight.h) is what checkpoints hold; these
// functions map it to the kernel layout and back, bit for bit.
//
// Kernel nibble order. In every aligned group of 8 consecutive elements e0..e7 of a row (4 bytes,
// read by the kernel as one little-endian 32-bit word), nibble position p (bits 4p..4p+3) holds
// element [0, 2, 4, 6, 1, 3, 5, 7][p]: even elements in the low 16 bits, odd ones in the high 16.
// A kernel then gets the pair (e2i, e2i+1) into the two halves of a 32-bit register with one
// shift and one mask, the order an mma fragment wants. Scales and zeros are not reordered.
//
// Gate/up interleave (fused MLP). Rows of gate [I, k] and up [I, k] alternate in groups of 8:
// rows 16j..16j+7 are gate rows 8j..8j+7 and rows 16j+8..16j+15 are up rows 8j..8j+7, so one
// 16-row tile of the fused weight yields gate and up of the same 8 features.
#include <cstdint>
#include <span>
#include <vector>

#include "kiln/quant/QuantizedWeight.h"

namespace kiln::quant {

// data [n, k/2] in export order -> kernel order, and back. k must be a multiple of 8.
std::vector<uint8_t> to_kernel_nibble_order(std::span<const uint8_t> data, int64_t n, int64_t k);
std::vector<uint8_t> from_kernel_nibble_order(std::span<const uint8_t> data, int64_t n, int64_t k);

// A weight ready for kiln's kernels: nibbles in kernel order. Throws UserError if the kernels
// cannot take it: n not a multiple of 16, k not a multiple of 128, or (MXFP4) a block scale above
// 2^1 (E8M0 code > 128; the kernels fold the scale into one 16-bit multiplier).
struct KernelWeight {
  QuantizedWeight weight;  // data in kernel nibble order
  std::vector<float> tensor_scales;  // NVFP4: one per row group (1 plain, 2 fused gate/up)
};
KernelWeight prepack(const QuantizedWeight& weight);
QuantizedWeight unpack(const KernelWeight& packed);

// Fused gate/up: both [I, k] of one format, group and scale dtype; rows interleaved as above.
KernelWeight prepack_gate_up(const QuantizedWeight& gate, const QuantizedWeight& up);
// The inverse: {gate, up} in export order.
std::vector<QuantizedWeight> unpack_gate_up(const KernelWeight& packed);

}  // namespace kiln::quant
