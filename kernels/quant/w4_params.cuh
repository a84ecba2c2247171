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
  const float* scale2;        // NVFP4: tensor scale(s): [1], or [2] (gate, up) when gated; null: the
                              // epilogue applies it (generated code: any float dtype)
  const void* bias;           // [n] T or null (not with gated)
  void* y;                    // [m, n] (T), or [m, n/2] when gated
  float* partial;             // split-K: GEMM variant 1 [m, n] fp32 (zeroed), 2 [split][m, n]; or null
  unsigned* tile_counter;     // GEMM variant 2 split-K: per output tile, zeroed before the launch
  int m, n, k, group;
  Activation act;             // gated (fused gate/up) when != None
};

// The epilogue of a plain (not gated) linear layer: y[m, n] = v + bias[n] as T, v being the
// row's fp32 sum with every scale applied. The kernels call it once per output element with
// kernels/gemm/gemm_problem.cuh's arguments (batch, m, n, accumulator), so that generated code
// can pass its own functor (a QuantLinear's folded consumers) in its place.
template <typename T>
struct LinearStore {
  T* y;
  const T* bias;
  int64_t n;
  __device__ __forceinline__ void operator()(int64_t, int64_t m, int64_t col, float v) const {
    if (bias) v += static_cast<float>(bias[col]);
    y[m * n + col] = from_float<T>(v);
  }
};
template <typename T>
LinearStore<T> linear_store(const LinearParams& p) {
  return LinearStore<T>{static_cast<T*>(p.y), static_cast<const T*>(p.bias), p.n};
}

// fp32 accumulator of row `row` (a weight row), token `tok` -> output.
template <typename T, Format F>
__device__ __forceinline__ float row_factor(const LinearParams& p, int row) {
  float f = Scale<F, IsBf16<T>::value>::output_factor();
  if constexpr (F == Format::NvFp4) {
    const bool up = p.act != Activation::None && (row & 8);
    if (p.scale2) f *= p.scale2[up ? 1 : 0];
  }
  return f;
}

}  // namespace kiln::quant::gpu
