#pragma once
// The quantizer: float weights in, packed QuantizedWeight out. This is the API `kiln quantize`
// calls per constant MatMul/Gemm weight; it holds no ONNX knowledge.
#include <cstdint>
#include <span>
#include <vector>

#include "kiln/quant/QuantizedWeight.h"

namespace kiln::quant {

struct QuantSpec {
  QuantFormat format = QuantFormat::NvFp4;
  int64_t group = 0;                     // 0: the format's own (16 NVFP4, 32 MXFP4, 128 INT4)
  DType scale_dtype = DType::BFloat16;   // INT4 scales and zeros: Float16 or BFloat16
};

// Quantizes row-major W [n, k] (y = x · Wᵀ). Rules (bit-compatible with the producers named):
//  NVFP4 (NVIDIA Model Optimizer): s2 = amax|W| / (6·448) in fp32 (1.0 if W is all zero); block
//    scale = E4M3(amax_block / (6·s2)), 1.0 for an all-zero block; element = E2M1 RNE of
//    W / (e4m3 block scale · s2) in fp32, saturating at ±6 (0 where the block scale rounds to 0).
//  MXFP4 (OCP MX v1.0 §6.3): X = 2^(floor(log2 amax_block) - 2), exponent clamped to
//    [-127, 127], 2^-127 for an all-zero block; element = E2M1 RNE of W / X, saturating at ±6.
//  INT4 (asymmetric, range widened to include 0): s = (max - min) / 15 rounded to scale_dtype
//    (1 for a zero range), z = round(-min / s) clamped to [0, 15] (stored exactly in
//    scale_dtype), q = clamp(RNE(W / s + z), 0, 15).
// Throws UserError for a bad shape or group, a size mismatch, or a non-finite weight.
QuantizedWeight quantize(std::span<const float> weights, int64_t n, int64_t k, const QuantSpec& spec);

// W [n, k] from a checked QuantizedWeight, exactly (every product fits a double).
std::vector<double> dequantize(const QuantizedWeight& weight);

// ‖W − dequant(W)‖₂ / ‖W‖₂ and max |W − dequant(W)|, for the quantize report.
struct QuantError {
  double relative_l2 = 0.0;
  double max_abs = 0.0;
};
QuantError quantization_error(std::span<const float> weights, const QuantizedWeight& weight);

}  // namespace kiln::quant
