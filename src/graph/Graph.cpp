#include "kiln/graph/Graph.h"

#include <algorithm>

#include "kiln/ir/IR.h"
#include "kiln/ir/IRPrinter.h"
#include "kiln/support/Error.h"

namespace kiln {

std::string to_string(const TensorType& type) {
  std::string s = std::string(dtype_name(type.dtype)) + "[";
  for (size_t i = 0; i < type.shape.size(); ++i) {
    if (i) s += ", ";
    s += type.shape[i].defined() ? ir::to_string(type.shape[i]) : "?";
  }
  return s + "]";
}

const char* attribute_kind_name(Attribute::Kind kind) {
  switch (kind) {
    case Attribute::Kind::Int: return "int";
    case Attribute::Kind::Float: return "float";
    case Attribute::Kind::String: return "string";
    case Attribute::Kind::Ints: return "ints";
    case Attribute::Kind::Floats: return "floats";
    case Attribute::Kind::Strings: return "strings";
    case Attribute::Kind::Tensor: return "tensor";
    case Attribute::Kind::Graph:
      return "graph";
  }
  return "unknown";
}

std::string Node::describe() const {
  return "node '" + name + "' (" + (op_type.empty() ? std::string(op_kind_name(op)) : op_type) + ")";
}

const Attribute* Node::attr(const std::string& attr_name, Attribute::Kind kind) const {
  auto it = attributes.find(attr_name);
  if (it == attributes.end()) return nullptr;
  if (it->second.kind != kind) {
    user_error("{}: attribute '{}' is of kind {}, expected {}", describe(), attr_name,
               attribute_kind_name(it->second.kind), attribute_kind_name(kind));
  }
  return &it->second;
}

const Graph& Node::attr_graph(const std::string& attr_name) const {
  const Attribute* a = attr(attr_name, Attribute::Kind::Graph);
  if (a == nullptr || !a->graph)
    user_error("{}: the graph attribute '{}' is required", describe(), attr_name);
  return *a->graph;
}

int64_t Node::attr_int(const std::string& attr_name, int64_t fallback) const {
  const Attribute* a = attr(attr_name, Attribute::Kind::Int);
  return a ? a->i : fallback;
}

double Node::attr_float(const std::string& attr_name, double fallback) const {
  const Attribute* a = attr(attr_name, Attribute::Kind::Float);
  return a ? a->f : fallback;
}

std::string Node::attr_string(const std::string& attr_name, const std::string& fallback) const {
  const Attribute* a = attr(attr_name, Attribute::Kind::String);
  return a ? a->s : fallback;
}

std::vector<int64_t> Node::attr_ints(const std::string& attr_name, const std::vector<int64_t>& fallback) const {
  const Attribute* a = attr(attr_name, Attribute::Kind::Ints);
  return a ? a->ints : fallback;
}

std::vector<double> Node::attr_floats(const std::string& attr_name, const std::vector<double>& fallback) const {
  const Attribute* a = attr(attr_name, Attribute::Kind::Floats);
  return a ? a->floats : fallback;
}

int Graph::find_value(const std::string& value_name) const {
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i].name == value_name) return static_cast<int>(i);
  }
  return -1;
}

int Graph::find_node(const std::string& node_name) const {
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].name == node_name) return static_cast<int>(i);
  }
  return -1;
}

ir::Expr Graph::symbol(const std::string& dim_name) {
  auto it = symbols_.find(dim_name);
  if (it != symbols_.end()) return it->second;
  ir::Expr s = ir::var(dim_name);
  symbols_.emplace(dim_name, s);
  return s;
}

Graph cut_graph(const Graph& graph, const std::vector<std::string>& names) {
  std::vector<int> outputs;
  std::string unknown;
  for (const std::string& name : names) {
    if (const int v = graph.find_value(name); v >= 0) {
      outputs.push_back(v);
    } else if (const int n = graph.find_node(name); n >= 0) {
      for (int o : graph.nodes[n].outputs) {
        if (o >= 0) outputs.push_back(o);
      }
    } else {
      unknown += (unknown.empty() ? "'" : ", '") + name + "'";
    }
  }
  if (!unknown.empty()) user_error("--outputs: no value or node named {} in the model", unknown);
  if (outputs.empty()) user_error("--outputs: no values named");
  // Walk back from the cut: the nodes it needs, and the values they read.
  std::vector<bool> needed_node(graph.nodes.size(), false), needed_value(graph.values.size(), false);
  std::vector<int> work = outputs;
  while (!work.empty()) {
    const int v = work.back();
    work.pop_back();
    if (v < 0 || needed_value[v]) continue;
    needed_value[v] = true;
    const int producer = graph.values[v].producer;
    if (producer >= 0 && !needed_node[producer]) {
      needed_node[producer] = true;
      for (int in : graph.nodes[producer].inputs) work.push_back(in);
    }
  }
  Graph cut = graph;  // values (and the symbols' handles) stay; only nodes and the interface change
  cut.nodes.clear();
  for (Value& v : cut.values) v.producer = -1;
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    if (!needed_node[n]) continue;
    for (int o : graph.nodes[n].outputs) {
      if (o >= 0) cut.values[o].producer = static_cast<int>(cut.nodes.size());
    }
    cut.nodes.push_back(graph.nodes[n]);
  }
  cut.inputs.clear();
  for (int v : graph.inputs) {
    if (needed_value[v]) cut.inputs.push_back(v);
  }
  cut.outputs.clear();
  for (int v : outputs) {
    if (std::find(cut.outputs.begin(), cut.outputs.end(), v) == cut.outputs.end()) cut.outputs.push_back(v);
  }
  return cut;
}

}  // namespace kiln
