#pragma once
// kiln's own typed graph, what the ONNX importer produces and every later layer reads.
// Values are tensors (graph inputs, initializers, node outputs); nodes are topologically sorted.
// Dimensions are IR expressions: constants, symbols named as in the model (`batch`, `seq`), or
// expressions of symbols after shape inference (`batch * seq`).
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/graph/OpKind.h"
#include "kiln/ir/Expr.h"
#include "kiln/runtime/HostTensor.h"

namespace kiln {

struct TensorType {
  DType dtype = DType::Float32;
  std::vector<ir::Expr> shape;  // kIndexType expressions
};
std::string to_string(const TensorType& type);  // "float32[batch, 3, 224, 224]"

class Graph;

struct Attribute {
  enum class Kind : uint8_t { Int, Float, String, Ints, Floats, Strings, Tensor, Graph };
  Kind kind = Kind::Int;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<double> floats;
  std::vector<std::string> strings;
  HostTensor tensor;
  // Kind::Graph: a subgraph (If's branches, Loop's and Scan's body).
  std::shared_ptr<const Graph> graph;
};
const char* attribute_kind_name(Attribute::Kind kind);

struct Value {
  std::string name;
  std::optional<TensorType> type;    // declared by the model or inferred
  int producer = -1;                  // index of the producing node; -1 for inputs/initializers
  std::optional<HostTensor> constant; // initializers (and folded constants)
};

struct Node {
  std::string name;       // the model's node name, or "<op_type>_<index>" when it has none
  OpKind op = OpKind::Unsupported;
  std::string op_type;    // as in the model; kept for messages and re-export only
  std::string domain;
  std::vector<int> inputs;   // value ids; -1 for an omitted optional input
  std::vector<int> outputs;  // value ids; -1 for an omitted optional output
  // Values of the enclosing graph that the node's subgraphs read by name (the outer side of
  // their captures): data dependencies that are not inputs.
  std::vector<int> implicit_inputs;
  std::map<std::string, Attribute> attributes;
  // Why a node whose op_type kiln knows was imported as Unsupported (an attribute of a kind
  // kiln cannot represent, say); empty otherwise.
  std::string unsupported_reason;

  bool has_attribute(const std::string& attr) const { return attributes.count(attr) != 0; }
  // Typed attribute access. A present attribute of the wrong kind is a UserError naming the
  // node, the attribute, the kind found and the kind expected.
  int64_t attr_int(const std::string& attr, int64_t fallback) const;
  double attr_float(const std::string& attr, double fallback) const;
  std::string attr_string(const std::string& attr, const std::string& fallback) const;
  std::vector<int64_t> attr_ints(const std::string& attr, const std::vector<int64_t>& fallback) const;
  std::vector<double> attr_floats(const std::string& attr, const std::vector<double>& fallback) const;
  const Attribute* attr(const std::string& attr, Attribute::Kind kind) const;  // null when absent
  // The subgraph attribute `attr`; UserError naming the node when absent or not a graph.
  const Graph& attr_graph(const std::string& attr) const;
  std::string describe() const;  // "node 'conv1' (Conv)"
};

class Graph {
 public:
  std::vector<Value> values;
  std::vector<Node> nodes;   // topologically sorted
  std::vector<int> inputs;   // graph inputs that are not initializers
  std::vector<int> outputs;
  int64_t opset = 0;         // the ai.onnx opset the model imports
  std::string name;
  // A subgraph (a Graph attribute) reads values of its enclosing graph by name: each capture is
  // (a value of this graph without producer, the enclosing graph's value it stands for). Empty
  // for a model's main graph.
  std::vector<std::pair<int, int>> captures;

  int find_value(const std::string& value_name) const;  // -1 when absent
  int find_node(const std::string& node_name) const;    // -1 when absent
  // The symbol for a named dimension, created on first use; one Variable per name per graph.
  ir::Expr symbol(const std::string& dim_name);
  const std::map<std::string, ir::Expr>& symbols() const { return symbols_; }

 private:
  std::map<std::string, ir::Expr> symbols_;
};

// The part of `graph` that computes the named values (value names, or node names standing for all
// their outputs): those values become the outputs, the nodes they do not need are dropped, and so
// are graph inputs they do not read. How a model with an unsupported node is still compiled up to a
// cut before it (`kiln compile --outputs`). An unknown name is a UserError listing the names.
Graph cut_graph(const Graph& graph, const std::vector<std::string>& names);

}  // namespace kiln
