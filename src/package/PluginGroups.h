#pragma once
// Private to package/: which nodes become which plugin, and each plugin's kernel subgraph.
#include <onnx/onnx-ml.pb.h>

#include <map>
#include <string>
#include <vector>

#include "kiln/graph/Graph.h"
#include "kiln/package/Plugins.h"

namespace kiln::package {

// One plugin: a node, or a convex connected group of nodes (fuse).
struct PluginGroup {
  std::string name;          // plugin name (a C identifier)
  std::vector<int> nodes;    // kiln node indices, topological order
  std::vector<int> protos;   // the same nodes' indices in the model's GraphProto
  std::vector<int> inputs;   // value ids the plugin takes, in order (weights included)
  std::vector<int> outputs;  // value ids it produces that the rest of the model or its outputs use
  std::vector<int> baked;    // small integer constants compiled into the kernel (shape operands)
};

// The selected groups, in model order. UserError on an unknown node or op type, an empty
// selection, or a fused group that is not convex (a path leaves it and comes back).
std::vector<PluginGroup> select_plugin_groups(const Graph& graph, const onnx::ModelProto& model,
                                              const PluginOptions& options);

// The type a value crosses the plugin boundary with: int64 and bool as int32 (TensorRT passes
// neither to plugins), float types as the variant's float type.
DType boundary_dtype(DType dtype, DType float_type);

// The kernel subgraph of `group` for one float type, as an ONNX graph: inputs and outputs in
// plugin order and boundary types, Casts inside where the boundary type differs, the group's
// nodes, baked constants as initializers. Dims: constants, or dim_params named after the model's
// symbols (a compound dim such as batch*seq becomes its own dim_param, its text).
onnx::GraphProto plugin_subgraph(const Graph& graph, const onnx::ModelProto& model, const PluginGroup& group,
                                 DType float_type);

// The subgraph as a model kiln can import (opsets of `model`).
onnx::ModelProto subgraph_model(const onnx::GraphProto& sub, const onnx::ModelProto& model);

}  // namespace kiln::package

namespace kiln::package {

// The model with each group replaced by its plugin node (package/PluginNodes.h), Casts around it
// for int64/bool boundary values, nodes in topological order. `subgraphs[i]` is group i's fp32
// subgraph, stored in its kiln_subgraph attribute.
onnx::ModelProto rewrite_model(const onnx::ModelProto& model, const Graph& graph, const std::vector<PluginGroup>& groups,
                               const std::vector<onnx::GraphProto>& subgraphs, const PluginOptions& options);

// The settings fields of a group's plugin node: (name, attribute as the parser reads it).
std::vector<onnx::AttributeProto> plugin_settings(const onnx::ModelProto& model, const PluginGroup& group);

}  // namespace kiln::package
