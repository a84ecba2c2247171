#pragma once
// Builds small kiln Graphs directly (no ONNX) for the op-definition tests of the data-movement
// and contraction families.
#include <string>
#include <vector>

#include "kiln/graph/Graph.h"
#include "kiln/ir/IROperator.h"

namespace kiln::test {

class OpsTestGraph {
 public:
  explicit OpsTestGraph(int64_t opset = 17) { graph.opset = opset; }

  int input(const std::string& name, DType dtype, std::vector<ir::Expr> shape) {
    const int v = add_value(name);
    graph.values[v].type = TensorType{dtype, std::move(shape)};
    graph.inputs.push_back(v);
    return v;
  }
  int constant(const std::string& name, HostTensor data) {
    const int v = add_value(name);
    graph.values[v].constant = std::move(data);
    return v;
  }
  int ints(const std::string& name, const std::vector<int64_t>& values) {
    HostTensor t(DType::Int64, {static_cast<int64_t>(values.size())});
    for (size_t k = 0; k < values.size(); ++k) t.set_int(static_cast<int64_t>(k), values[k]);
    return constant(name, t);
  }
  // Adds a node with `outputs` output values named "<name>_out<k>"; returns the first.
  int node(const std::string& name, OpKind op, std::vector<int> inputs,
           std::map<std::string, Attribute> attributes = {}, int outputs = 1) {
    Node n;
    n.name = name;
    n.op = op;
    n.op_type = std::string(op_kind_name(op));
    n.inputs = std::move(inputs);
    n.attributes = std::move(attributes);
    for (int k = 0; k < outputs; ++k) {
      const int v = add_value(name + "_out" + std::to_string(k));
      graph.values[v].producer = static_cast<int>(graph.nodes.size());
      n.outputs.push_back(v);
    }
    graph.nodes.push_back(std::move(n));
    return graph.nodes.back().outputs[0];
  }
  void output(int v) { graph.outputs.push_back(v); }

  static Attribute int_attr(int64_t i) {
    Attribute a;
    a.kind = Attribute::Kind::Int;
    a.i = i;
    return a;
  }
  static Attribute ints_attr(std::vector<int64_t> v) {
    Attribute a;
    a.kind = Attribute::Kind::Ints;
    a.ints = std::move(v);
    return a;
  }

  Graph graph;

 private:
  int add_value(const std::string& name) {
    Value v;
    v.name = name;
    graph.values.push_back(v);
    return static_cast<int>(graph.values.size()) - 1;
  }
};

inline HostTensor float_tensor(std::vector<int64_t> shape, const std::vector<double>& values) {
  HostTensor t(DType::Float32, std::move(shape));
  for (size_t k = 0; k < values.size(); ++k) t.set_double(static_cast<int64_t>(k), values[k]);
  return t;
}

inline std::vector<double> values_of(const HostTensor& t) {
  std::vector<double> out;
  for (int64_t i = 0; i < t.num_elements(); ++i) out.push_back(t.get_double(i));
  return out;
}

}  // namespace kiln::test
