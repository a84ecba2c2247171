#pragma once
// CPU reference of the 4-bit linear layer: y = x · dequant(W)ᵀ (+ bias), dequantized exactly
// and multiplied in fp64. Clarity over speed: this is what kernels are checked against.
#include <cstdint>
#include <span>
#include <vector>

#include "kiln/quant/QuantizedWeight.h"

namespace kiln::quant {

// x [m, k] row-major, weight in export nibble order, bias [n] or empty. Returns y [m, n].
std::vector<double> linear_reference(std::span<const float> x, int64_t m, const QuantizedWeight& weight,
                                     std::span<const float> bias = {});

// The gated-MLP activations the fused kernels apply: GeGLU with tanh-approximate GELU, SwiGLU.
double gelu_tanh(double v);
double silu(double v);

}  // namespace kiln::quant
