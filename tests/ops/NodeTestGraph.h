#pragma once
// One-node-at-a-time kiln Graphs for the elementwise, reduction and normalization op tests:
// build the graph in C++, then read the UserError of ops::infer_types or run it on the CPU.
#include <map>
#include <string>
#include <vector>

#include "kiln/graph/Graph.h"
#include "kiln/ops/GraphTensors.h"
#include "kiln/runtime/GraphRunner.h"
#include "kiln/support/Error.h"

namespace kiln::test {

struct NodeTestGraph {
  Graph graph;

  explicit NodeTestGraph(int64_t opset = 17) { graph.opset = opset; }

  int input(const std::string& name, DType dtype, std::vector<ir::Expr> shape) {
    const int v = value(name);
    graph.values[v].type = TensorType{dtype, std::move(shape)};
    graph.inputs.push_back(v);
    return v;
  }
  int constant(const std::string& name, HostTensor data) {
    const int v = value(name);
    graph.values[v].constant = std::move(data);
    return v;
  }
  // Adds node `name` and marks its outputs as graph outputs; returns its first output.
  int node(const std::string& name, OpKind op, std::vector<int> inputs, std::map<std::string, Attribute> attrs = {},
           int outputs = 1) {
    Node n;
    n.name = name;
    n.op = op;
    n.op_type = std::string(op_kind_name(op));
    n.inputs = std::move(inputs);
    n.attributes = std::move(attrs);
    for (int k = 0; k < outputs; ++k) {
      const int v = value(name + "_out" + std::to_string(k));
      graph.values[v].producer = static_cast<int>(graph.nodes.size());
      graph.outputs.push_back(v);
      n.outputs.push_back(v);
    }
    graph.nodes.push_back(std::move(n));
    return graph.nodes.back().outputs[0];
  }

  // The message of the UserError (or UnsupportedError) that type inference raises, or "no error".
  std::string error() {
    try {
      ops::infer_types(graph);
    } catch (const UserError& e) {  // UnsupportedError too
      return e.what();
    }
    return "no error";
  }

 private:
  int value(const std::string& name) {
    Value v;
    v.name = name;
    graph.values.push_back(v);
    return static_cast<int>(graph.values.size()) - 1;
  }
};

inline Attribute int_attr(int64_t i) {
  Attribute a;
  a.kind = Attribute::Kind::Int;
  a.i = i;
  return a;
}
inline Attribute ints_attr(std::vector<int64_t> v) {
  Attribute a;
  a.kind = Attribute::Kind::Ints;
  a.ints = std::move(v);
  return a;
}
inline Attribute string_attr(std::string s) {
  Attribute a;
  a.kind = Attribute::Kind::String;
  a.s = std::move(s);
  return a;
}

inline HostTensor tensor(DType dtype, std::vector<int64_t> shape, const std::vector<double>& values) {
  HostTensor t(dtype, std::move(shape));
  for (size_t k = 0; k < values.size(); ++k) {
    if (is_float(dtype)) t.set_double(static_cast<int64_t>(k), values[k]);
    else t.set_int(static_cast<int64_t>(k), static_cast<int64_t>(values[k]));
  }
  return t;
}

inline std::vector<double> values_of(const HostTensor& t) {
  std::vector<double> out;
  for (int64_t i = 0; i < t.num_elements(); ++i) out.push_back(is_float(t.dtype()) ? t.get_double(i) : static_cast<double>(t.get_int(i)));
  return out;
}

}  // namespace kiln::test
