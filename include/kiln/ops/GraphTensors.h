#pragma once
// From a typed graph to tensor expressions: every node's op definition builds its outputs from
// its inputs' tensors. This is also kiln's shape and type inference (infer_types), so the op
// library is the single source of both.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kiln/graph/Graph.h"
#include "kiln/te/Tensor.h"

namespace kiln::ops {

struct BuildOptions {
  // Graph inputs whose values are known when compiling (the conformance runner specializes on
  // its test inputs). Keyed by value name.
  std::map<std::string, HostTensor> specialize;
  // Known values are tracked for tensors of at most this many elements (shape arithmetic).
  int64_t max_known_elements = 4096;
  // Inspection mode: a node kiln cannot build (unsupported op, or an error in its definition)
  // is recorded in GraphTensors::node_errors and its outputs stay unbuilt, instead of throwing.
  bool keep_going = false;
};

struct GraphTensors {
  std::vector<te::Tensor> tensors;  // per value id; undefined for values not built
  std::vector<std::optional<std::vector<ir::Expr>>> known;  // per value id, when known
  // The placeholders: graph inputs, initializers, then Constant outputs, with the data of those
  // known now (initializers, Constant outputs, specialized inputs) in `data`.
  std::vector<te::Tensor> placeholders;
  std::vector<std::optional<HostTensor>> data;
  // With keep_going: per node, why it was not built ("" when it was).
  std::vector<std::string> node_errors;
};

// Builds every node. Unsupported ops are a UserError listing every unsupported op type in the
// graph at once (with node names); a definition's own errors name the node.
GraphTensors build_graph_tensors(const Graph& graph, const BuildOptions& options = BuildOptions());

// A value bound from outside a subgraph: its tensor and, when known, its values.
struct BoundValue {
  te::Tensor tensor;
  std::optional<std::vector<ir::Expr>> known;
};

struct SubgraphTensors {
  std::vector<BoundValue> outputs;  // per subgraph output
  // The placeholders its initializers and Constant nodes made, with their data.
  std::vector<std::pair<te::Tensor, HostTensor>> constants;
};

// Builds a subgraph (If's branch, a Loop or Scan body) once, its inputs and captures bound to
// the given tensors (`captures` in the order of sub.captures). Unrolled loops call it per step.
SubgraphTensors build_subgraph_tensors(const Graph& sub, const std::vector<BoundValue>& inputs,
                                       const std::vector<BoundValue>& captures,
                                       const BuildOptions& options = BuildOptions());

// Sets each node output's type from its tensor (dtype, symbolic shape).
void infer_types(Graph& graph, const BuildOptions& options = BuildOptions());

// "Relu (2 nodes: r1, r2), Foo (1 node: f)" for every op kiln cannot generate (subgraphs
// included); empty if none.
std::string describe_unsupported(const Graph& graph);

}  // namespace kiln::ops
