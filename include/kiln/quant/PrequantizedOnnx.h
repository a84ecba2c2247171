#pragma once
// ONNX models whose weights are already NVFP4, as NVIDIA Model Optimizer exports them for
// TensorRT, rewritten to kiln.QuantLinear without re-quantizing (the bytes are copied).
//
// The pattern (opset 23 blocked DequantizeLinear; two-level scales):
//
//   s   = DequantizeLinear(scale_e4m3 [N, K/16] FLOAT8E4M3FN, scale_2 [] fp32/fp16/bf16)   optional
//   W   = DequantizeLinear(w_fp4 [N, K] FLOAT4E2M1, s (or scale_e4m3 itself), axis=1, block_size=16)
//   y   = MatMul(x, Transpose(W, perm=[1, 0]))       or   Gemm(x, W, transB=1[, bias])
//
// and the same with the weight stored [K, N] (blocks along axis 0) feeding MatMul directly or
// through Gemm(transB=0). Each match becomes the node `quantize_model` writes for that layer:
// kiln.QuantLinear(x, <B>_q4 uint8 [N, K/2], <B>_scales uint8 [N, K/16], <B>_tensor_scale fp32
// [1][, bias]) with in_features, out_features, block_size = 16, format = "nvfp4" (<B>: the name
// of the MatMul/Gemm's weight input). FLOAT4E2M1 packs two elements per byte, the first in the low
// nibble, which is kiln's exported order (QuantizedWeight.h), so [N, K] weights are copied
// byte for byte and [K, N] ones are transposed nibble by nibble. The Dequantize/Transpose nodes and
// initializers that only fed the pattern are removed; the model gains an opset import of "kiln".
//
// Works on the protobuf (FLOAT4E2M1 has no kiln dtype and the importer's opsets stop at 21):
// initializers are read by data type number, inline or as external data under `source`.
#include <string>
#include <vector>

#include "kiln/onnx/Proto.h"

namespace kiln::quant {

struct PrequantizedReport {
  std::vector<std::string> layers;   // MatMul/Gemm nodes rewritten
  std::vector<std::string> skipped;  // "node (reason)": FLOAT4E2M1 dequantizations left alone
};

PrequantizedReport rewrite_prequantized_nvfp4(onnx::ModelProto& model, const ExternalDataSource& source);

// load_onnx(path) with the rewrite above applied first (external data relative to the model's
// folder); what was rewritten or left alone goes to `report` when given. `kiln quantize` loads
// models this way; `kiln compile` and `kiln plugins` can call it in place of load_onnx.
Graph load_onnx_prequantized(const std::string& path, PrequantizedReport* report = nullptr);

}  // namespace kiln::quant
