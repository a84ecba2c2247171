#pragma once
// A linear layer's weight W [n, k] (n output features, k input features, y = x · Wᵀ) quantized
// to 4 bits, in the byte layout the ecosystem ships (docs: bench/quant/NOTES.md, "Formats").
//
//   data     uint8 [n, k/2]: element k=2j of a row in the LOW nibble of byte j, 2j+1 in the high
//            nibble (NVIDIA Model Optimizer's export order, for all three formats).
//   scales   [n, k/group] of `scale_dtype`, little-endian bytes.
//   zeros    INT4 only: [n, k/group] of `scale_dtype` (integer values 0..15).
//   tensor_scale  NVFP4 only: the fp32 "weight_scale_2".
//
// Dequantization (exact, in real arithmetic):
//   NVFP4  W[r,c] = e2m1(q) · e4m3(scales[r, c/16]) · tensor_scale          group 16
//   MXFP4  W[r,c] = e2m1(q) · 2^(scales[r, c/32] - 127)                      group 32
//   INT4   W[r,c] = (q - zeros[r, c/g]) · scales[r, c/g], q unsigned 0..15   group 32, 64, 128
#include <cstdint>
#include <string_view>
#include <vector>

#include "kiln/ir/Type.h"

namespace kiln::quant {

enum class QuantFormat : uint8_t { NvFp4, MxFp4, Int4 };

std::string_view format_name(QuantFormat format);

struct QuantizedWeight {
  QuantFormat format = QuantFormat::NvFp4;
  int64_t n = 0;
  int64_t k = 0;
  int64_t group = 16;
  DType scale_dtype = DType::Float8E4M3;
  std::vector<uint8_t> data;
  std::vector<uint8_t> scales;
  std::vector<uint8_t> zeros;
  float tensor_scale = 1.0f;

  int64_t groups_per_row() const { return k / group; }
  int64_t scale_bytes_per_element() const { return dtype_bytes(scale_dtype); }
};

// Throws UserError unless `weight` is self-consistent: group allowed for the format, k a multiple
// of the group, every buffer of the size its shape implies, scale dtype the format's. `what`
// names the weight in the message (e.g. "node 'mlp.gate_proj' weight").
void check_quantized_weight(const QuantizedWeight& weight, std::string_view what = "weight");

}  // namespace kiln::quant
