#pragma once
// Small kiln Graphs built directly in C++ (no ONNX) for the op-definition tests: add inputs,
// constants and nodes, then read the UserError of ops::infer_types or run it on the CPU.
#include <map>
#include <string>
#include <vector>

#include "kiln/graph/Graph.h"
#include "kiln/ir/IROperator.h"
#include "kiln/ops/GraphTensors.h"
#include "kiln/runtime/GraphRunner.h"
#include "kiln/support/Error.h"

namespace kiln::test {

inline Attribute int_attr(int64_t i) {
  Attribute a;
  a.kind = Attribute::Kind::Int;
  a.i = i;
  return a;
}
inline Attribute float_attr(double f) {
  Attribute a;
  a.kind = Attribute::Kind::Float;
  a.f = f;
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

class TestGraph {
 public:
  // With `mark_outputs`, every node output becomes a graph output (one-node tests); without it,
  // say which with output().
  explicit TestGraph(int64_t opset = 17, bool mark_outputs = true) : mark_outputs_(mark_outputs) {
    graph.opset = opset;
  }

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
  // Adds node `name` with `outputs` output values named "<name>_out<k>"; returns the first.
  int node(const std::string& name, OpKind op, std::vector<int> inputs, std::map<std::string, Attribute> attrs = {},
           int outputs = 1) {
    Node n;
    n.name = name;
    n.op = op;
    n.op_type = std::string(op_kind_name(op));
    n.inputs = std::move(inputs);
    n.attributes = std::move(attrs);
    for (int k = 0; k < outputs; ++k) {
      const int v = add_value(name + "_out" + std::to_string(k));
      graph.values[v].producer = static_cast<int>(graph.nodes.size());
      if (mark_outputs_) graph.outputs.push_back(v);
      n.outputs.push_back(v);
    }
    graph.nodes.push_back(std::move(n));
    return graph.nodes.back().outputs[0];
  }
  void output(int v) { graph.outputs.push_back(v); }

  // The message of the UserError (or UnsupportedError) that type inference raises, or "no error".
  std::string error() {
    try {
      ops::infer_types(graph);
    } catch (const UserError& e) {
      return e.what();
    }
    return "no error";
  }

  Graph graph;

 private:
  int add_value(const std::string& name) {
    Value v;
    v.name = name;
    graph.values.push_back(v);
    return static_cast<int>(graph.values.size()) - 1;
  }
  bool mark_outputs_;
};

// The one-node tests of the elementwise, reduction and normalization families.
using NodeTestGraph = TestGraph;

// The data-movement and contraction tests, which chain nodes and name the graph outputs.
class OpsTestGraph : public TestGraph {
 public:
  explicit OpsTestGraph(int64_t opset = 17) : TestGraph(opset, /*mark_outputs=*/false) {}
  static Attribute int_attr(int64_t i) { return test::int_attr(i); }
  static Attribute ints_attr(std::vector<int64_t> v) { return test::ints_attr(std::move(v)); }
};

inline HostTensor tensor(DType dtype, std::vector<int64_t> shape, const std::vector<double>& values) {
  HostTensor t(dtype, std::move(shape));
  for (size_t k = 0; k < values.size(); ++k) {
    if (is_float(dtype)) t.set_double(static_cast<int64_t>(k), values[k]);
    else t.set_int(static_cast<int64_t>(k), static_cast<int64_t>(values[k]));
  }
  return t;
}
inline HostTensor float_tensor(std::vector<int64_t> shape, const std::vector<double>& values) {
  return tensor(DType::Float32, std::move(shape), values);
}

inline std::vector<double> values_of(const HostTensor& t) {
  std::vector<double> out;
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    out.push_back(is_float(t.dtype()) ? t.get_double(i) : static_cast<double>(t.get_int(i)));
  }
  return out;
}

}  // namespace kiln::test
