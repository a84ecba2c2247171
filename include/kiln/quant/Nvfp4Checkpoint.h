#pragma once
// NVFP4 weights from a Hugging Face checkpoint (safetensors), as the ecosystem ships them:
//
//   NVIDIA Model Optimizer (hf_quant_config.json / config.json quantization_config, quant_algo
//   "NVFP4"), per linear layer P:
//     P.weight          U8      [N, K/2]   two E2M1 codes per byte, element 2j in the low nibble
//     P.weight_scale    F8_E4M3 [N, K/16]
//     P.weight_scale_2  F32     [] or [1]  W = e2m1 · e4m3 · weight_scale_2
//   llm-compressor ("nvfp4-pack-quantized"): P.weight_packed, P.weight_scale and
//     P.weight_global_scale with W = e2m1 · e4m3 / global_scale: the inverse global scale is
//     detected by the name and kiln's tensor scale is 1/global_scale in fp32 (exact when the
//     global scale is a power of two; otherwise the product can differ in the last bit).
//
// The packed bytes and E4M3 scales are kiln's exported layout (QuantizedWeight.h) and are copied
// as stored. Fused projections (gate/up, q/k/v) are separate layers in these checkpoints with a
// weight_scale_2 each; each is kept with its own. A config beside the file that names another
// algorithm (NVFP4_AWQ, FP8, ...) is a UserError.
#include <map>
#include <string>

#include "kiln/quant/QuantizedWeight.h"

namespace kiln::quant {

// Keyed by the layer's weight parameter name "P.weight", the name torch.onnx gives the
// initializer of an exported nn.Linear weight (QuantizeModelOptions::prequantized).
std::map<std::string, QuantizedWeight> read_nvfp4_checkpoint(const std::string& safetensors_path);

}  // namespace kiln::quant
