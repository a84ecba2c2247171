#pragma once
// Writing a Graph back to ONNX: nodes (op_type and domain as the node has them, so rewritten
// models can carry plugin or kiln-domain nodes), attributes, initializers (inline or in one
// external data file), inputs, outputs and declared value types, and opset imports for every
// domain the nodes use. The result passes onnx.checker for graphs of standard ops.
#include <cstdint>
#include <map>
#include <string>

#include "kiln/graph/Graph.h"

namespace kiln {

struct ExportOptions {
  std::string producer_name = "kiln";
  // 0: the lowest IR version that allows graph.opset (8 up to opset 18, 9 for 19-20, 10 for 21).
  int64_t ir_version = 0;
  // Opset versions of non-default domains; a domain used by a node and not listed gets 1.
  std::map<std::string, int64_t> domain_versions;
  // When set, initializers of at least `external_data_threshold` bytes are written to this file,
  // relative to the model's folder (a plain file name, not a path).
  std::string external_data_file;
  size_t external_data_threshold = 1024;
};

void save_onnx(const Graph& graph, const std::string& path, const ExportOptions& options = {});

// The serialized ModelProto, every initializer inline (external_data_file is ignored).
std::string serialize_onnx(const Graph& graph, const ExportOptions& options = {});

}  // namespace kiln
