#pragma once
// `kiln quantize`: rewrites every MatMul/Gemm whose weight is a constant (or the chosen ones)
// into kiln.QuantLinear (src/ops/QuantLinear.cpp) with the weight quantized by quant::quantize.
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "kiln/graph/Graph.h"
#include "kiln/quant/Quantize.h"

namespace kiln::quant {

struct LayerReport {
  std::string node;  // the MatMul/Gemm node's name
  int64_t n = 0, k = 0;
  QuantError error;
};

struct QuantizeModelOptions {
  QuantSpec spec;
  // Node names to quantize; empty: every eligible MatMul/Gemm. A named node that does not exist
  // or cannot be quantized is a UserError saying why.
  std::vector<std::string> nodes;
  std::function<void(const LayerReport&)> on_layer;  // progress, called after each layer
  // Weights already quantized (read_nvfp4_checkpoint), by the name of the float weight they
  // replace: such a layer takes these bytes as stored instead of quantizing (its report's error
  // compares them with the float weight). Shapes must match the layer's [N, K]: UserError if not.
  std::map<std::string, QuantizedWeight> prequantized;
};

struct QuantizeModelReport {
  std::vector<LayerReport> layers;
  std::vector<std::string> skipped;  // "node (reason)" for eligible-looking nodes left alone
  std::vector<std::string> from_checkpoint;  // nodes whose weights came from `prequantized`
  int64_t weight_bytes_before = 0, weight_bytes_after = 0;
};

QuantizeModelReport quantize_model(Graph& graph, const QuantizeModelOptions& options);

}  // namespace kiln::quant
