#pragma once
// Private to package/: a plugin's kernels (one per float type) and the data its IPluginV3 needs.
#include <onnx/onnx-ml.pb.h>

#include <string>
#include <vector>

#include "kiln/graph/Graph.h"
#include "kiln/package/Plugins.h"
#include "kiln/lower/LoweredFunc.h"

namespace kiln::package {

// One step of an output dim's postfix program (kiln_trt::ShapeOp in kiln_trt_plugin.h).
struct ShapeStep {
  int code;  // kiln_trt::ShapeOpCode
  int64_t a = 0, b = 0;
};

struct PluginKernels {
  std::vector<DType> float_types;       // compiled variants
  std::vector<std::string> functions;   // kiln_<function> per variant
  std::vector<LoweredFunc> lowered;
  std::vector<std::string> schedule_notes;  // per variant, when PluginOptions::schedule_for is set
  std::vector<int> io_types;            // per input then output: -1 float class, else nvinfer1::DataType
  std::vector<std::vector<std::vector<ShapeStep>>> output_dims;  // per output, per dim
  std::vector<std::string> output_dims_text;                     // per output: "[batch, 16384]"
  Graph fp32_graph;  // the fp32 (first variant's) subgraph, imported and typed
};

// Lowers one variant's subgraph with the default GPU schedules (schedule/Defaults.h), the
// plugin's inputs as the function's parameters (baked constants stay inside). UserError naming the op and
// dtype when the op definitions cannot take the dtype.
// With `schedule_for` (PluginOptions), its schedule where it gives one; `note` says which.
LoweredFunc lower_plugin_subgraph(const Graph& sub, const std::string& function_name,
                                  const PluginOptions* options = nullptr, std::string* note = nullptr);

// nvinfer1::DataType value of a boundary dtype; UserError for dtypes TensorRT plugins cannot take.
int trt_data_type(DType dtype, const std::string& what);

// The output dims of `sub` as programs over its input dims; UserError when a dim uses a symbol
// no input dim is (TensorRT could not compute it from the inputs).
std::vector<std::vector<std::vector<ShapeStep>>> output_shape_programs(const Graph& sub, const std::string& plugin);

}  // namespace kiln::package
