#pragma once
// The plugin node kind of rewritten models (`kiln plugins`): how a replaced node or fused group
// is written into the ONNX model, and how kiln runs such a model on its CPU backend.
//
// A plugin node has op_type = the plugin's name, domain kPluginDomain, and these attributes:
//   plugin_version, plugin_namespace   read by TensorRT's ONNX parser to find the creator;
//   <settings>                         the replaced nodes' INT/FLOAT/STRING/INTS/FLOATS
//                                      attributes (fused groups: n<k>_<attr>), which the parser
//                                      passes as INT32/FLOAT32/CHAR/INT32[]/FLOAT32[] fields;
//                                      INT values are clamped to the int32 range;
//   kiln_subgraph                      the exact computation of the plugin's kernel: the fp32
//                                      variant's subgraph as the JSON form of an ONNX GraphProto
//                                      (inputs and outputs in plugin order, interior casts
//                                      included). The parser passes it as a CHAR field too.
// Inputs are the group's inputs in plugin order (weights as constant inputs); int64 and bool
// values cross the plugin boundary as int32 through Cast nodes around the plugin node.
//
// expand_plugin_nodes replaces each plugin node by its kiln_subgraph (interior values renamed
// `<plugin node>/<value>`), which is the semantics of the plugin; load_plugin_model does that and
// imports the result, so `kiln` runs a rewritten model like any other.
#include <onnx/onnx-ml.pb.h>

#include <string>

#include "kiln/graph/Graph.h"

namespace kiln::package {

inline constexpr const char* kPluginDomain = "trt.plugins";
inline constexpr const char* kSubgraphAttribute = "kiln_subgraph";

bool is_plugin_node(const onnx::NodeProto& node);
onnx::ModelProto expand_plugin_nodes(const onnx::ModelProto& model);
Graph load_plugin_model(const std::string& path);

}  // namespace kiln::package
