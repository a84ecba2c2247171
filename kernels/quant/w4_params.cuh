#pragma once
// Arguments of every 4-bit linear kernel launch (one struct, passed by value).
#include <cstdint>

#include "w4_device.cuh"

namespace kiln::quant::gpu {

struct LinearParams {
  const void* x;              // [m, k] activations (T)
  const uint8_t* weight;      // [n, k/2] kernel nibble order
  const void* scale;          // [n, k/group]: uint8 E4M3 / E8M0, or T (INT4)
  const void* zero;           // INT4: [n, k/group] T
  const float* scale2;        // NVFP4: tensor scale(s): [1], or [2] (gate, up) when gated
  const void* bias;           // [n] T or null (not with gated)
  void* y;                    // [m, n] (T), or [m, n/2] when gated
  float* partial;             // split-K: GEMM variant 1 [m, n] fp32 (zeroed), 2 [split][m, n]; or null
  unsigned* tile_counter;     // GEMM variant 2 split-K: per output tile, zeroed before the launch
  int m, n, k, group;
  Activation act;             // gated (fused gate/up) when != None
};

// fp32 accumulator of row `row` (a weight row), token `tok` -> output.
template <typename T, Format F>
__device__ __forceinline__ float row_factor(const LinearParams& p, int row) {
  float f = Scale<F, IsBf16<T>::value>::output_factor();
  if constexpr (F == Format::NvFp4) {
    const bool up = p.act != Activation::None && (row & 8);
    f *= p.scale2[up ? 1 : 0];
  }
  return f;
}

}  // namespace kiln::quant::gpu
