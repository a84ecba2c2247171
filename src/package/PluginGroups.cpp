#include "PluginGroups.h"

#include <algorithm>
#include <set>

#include "kiln/codegen/Codegen.h"
#include "kiln/ir/IROperator.h"
#include "kiln/ir/IRPrinter.h"
#include "kiln/ir/Simplify.h"
#include "kiln/onnx/Proto.h"
#include "kiln/support/Error.h"

namespace kiln::package {

namespace {

std::string join_names(const std::vector<std::string>& names, size_t limit = 12) {
  std::string s;
  for (size_t i = 0; i < names.size() && i < limit; ++i) s += (i ? ", " : "") + ("'" + names[i] + "'");
  if (names.size() > limit) s += ", ... (" + std::to_string(names.size()) + " in all)";
  return s;
}

// Integer constants of at most this many elements that a group reads stay inside its kernel:
// they are shape operands (Reshape's shape, Slice's starts) the op definitions need as known
// values, and TensorRT could not pass int64 anyway.
constexpr int64_t kMaxBakedElements = 64;

bool is_baked_constant(const Graph& graph, int v) {
  const Value& value = graph.values[v];
  if (!value.constant) return false;
  return !is_float(value.constant->dtype()) && value.constant->num_elements() <= kMaxBakedElements;
}

// Kiln names unnamed nodes "<op_type>_<index in the GraphProto>" (onnx/Import.cpp).
int proto_index(const onnx::ModelProto& model, const Node& node) {
  const auto& nodes = model.graph().node();
  for (int i = 0; i < nodes.size(); ++i) {
    const std::string name = nodes[i].name().empty() ? nodes[i].op_type() + "_" + std::to_string(i) : nodes[i].name();
    if (name == node.name) return i;
  }
  internal_error("node " + node.name + " not found in the model's GraphProto");
}

void check_convex(const Graph& graph, const std::set<int>& group, const std::string& what) {
  // depends[n]: node n depends on the group through a node outside it.
  std::vector<char> reaches(graph.nodes.size(), 0), outside_path(graph.nodes.size(), 0);
  std::vector<int> producer_of(graph.values.size(), -1);
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    for (int v : graph.nodes[n].outputs) {
      if (v >= 0) producer_of[v] = static_cast<int>(n);
    }
  }
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    const bool in = group.count(static_cast<int>(n)) != 0;
    for (int v : graph.nodes[n].inputs) {
      const int p = v < 0 ? -1 : producer_of[v];
      if (p < 0) continue;
      const bool p_in = group.count(p) != 0;
      if (in && outside_path[p]) {
        throw UserError(what + " is not convex: node '" + graph.nodes[n].name +
                        "' depends on the group through node '" + graph.nodes[p].name +
                        "' outside it; select that node too or do not fuse");
      }
      if (!in && (p_in || outside_path[p])) outside_path[n] = 1;
    }
    (void)reaches;
  }
}

}  // namespace

DType boundary_dtype(DType dtype, DType float_type) {
  if (is_float(dtype)) return float_type;
  if (dtype == DType::Int64 || dtype == DType::Bool) return DType::Int32;
  return dtype;
}

std::vector<PluginGroup> select_plugin_groups(const Graph& graph, const onnx::ModelProto& model,
                                              const PluginOptions& options) {
  std::set<int> selected;
  for (const std::string& name : options.nodes) {
    const int n = graph.find_node(name);
    if (n < 0) {
      std::vector<std::string> names;
      for (const Node& node : graph.nodes) names.push_back(node.name);
      throw UserError("--nodes: the model has no node named '" + name + "' (its nodes: " + join_names(names) + ")");
    }
    selected.insert(n);
  }
  for (const std::string& op : options.op_types) {
    bool any = false;
    for (size_t n = 0; n < graph.nodes.size(); ++n) {
      if (graph.nodes[n].op_type == op) selected.insert(static_cast<int>(n)), any = true;
    }
    if (!any) {
      std::set<std::string> ops;
      for (const Node& node : graph.nodes) ops.insert(node.op_type);
      throw UserError("--op-types: the model has no node of op type '" + op + "' (its op types: " +
                      join_names({ops.begin(), ops.end()}, 40) + ")");
    }
  }
  if (selected.empty()) throw UserError("no nodes selected: pass --nodes name1,name2 and/or --op-types Type1,Type2");

  // Groups: each node alone, or connected components of selected nodes along value edges.
  std::vector<std::vector<int>> groups;
  if (!options.fuse) {
    for (int n : selected) groups.push_back({n});
  } else {
    std::map<int, int> root;
    for (int n : selected) root[n] = n;
    std::function<int(int)> find = [&](int n) { return root[n] == n ? n : root[n] = find(root[n]); };
    for (int n : selected) {
      for (int v : graph.nodes[n].inputs) {
        const int p = v < 0 ? -1 : graph.values[v].producer;
        if (p >= 0 && selected.count(p)) root[find(n)] = find(p);
      }
    }
    std::map<int, std::vector<int>> by_root;
    for (int n : selected) by_root[find(n)].push_back(n);
    for (auto& [r, members] : by_root) groups.push_back(members);
  }
  std::sort(groups.begin(), groups.end());

  std::vector<PluginGroup> result;
  std::set<std::string> names;
  for (std::vector<int>& members : groups) {
    std::sort(members.begin(), members.end());
    PluginGroup g;
    g.nodes = members;
    const std::set<int> in_group(members.begin(), members.end());
    std::string base = graph.nodes[members.front()].name;
    if (members.size() > 1) base += "_fused" + std::to_string(members.size());
    g.name = codegen::c_identifier(options.prefix + base);
    for (int k = 2; names.count(g.name); ++k) g.name = codegen::c_identifier(options.prefix + base + "_" + std::to_string(k));
    names.insert(g.name);
    if (members.size() > 1) check_convex(graph, in_group, "fused group " + g.name);

    std::set<int> produced, seen_inputs;
    for (int n : members) {
      const Node& node = graph.nodes[n];
      if (node.op == OpKind::Unsupported) {
        throw UserError(node.describe() + ": kiln cannot generate a kernel for op type '" + node.op_type + "'" +
                        (node.unsupported_reason.empty() ? "" : " (" + node.unsupported_reason + ")"));
      }
      for (int v : node.inputs) {
        if (v < 0 || produced.count(v) || seen_inputs.count(v)) continue;
        seen_inputs.insert(v);
        (is_baked_constant(graph, v) ? g.baked : g.inputs).push_back(v);
      }
      for (int v : node.outputs) {
        if (v >= 0) produced.insert(v);
      }
      g.protos.push_back(proto_index(model, node));
    }
    std::set<int> used_outside(graph.outputs.begin(), graph.outputs.end());
    for (size_t n = 0; n < graph.nodes.size(); ++n) {
      if (in_group.count(static_cast<int>(n))) continue;
      for (int v : graph.nodes[n].inputs) used_outside.insert(v);
    }
    for (int n : members) {
      for (int v : graph.nodes[n].outputs) {
        if (v >= 0 && used_outside.count(v)) g.outputs.push_back(v);
      }
    }
    if (g.outputs.empty()) throw UserError("plugin " + g.name + ": its nodes' outputs are not used by the model");
    for (int v : g.inputs) {
      if (!graph.values[v].type) throw UserError("plugin " + g.name + ": input '" + graph.values[v].name + "' has no inferred type");
    }
    result.push_back(std::move(g));
  }
  return result;
}

namespace {

void set_value_info(onnx::ValueInfoProto* info, const std::string& name, DType dtype, const std::vector<ir::Expr>& shape) {
  info->set_name(name);
  onnx::TypeProto_Tensor* t = info->mutable_type()->mutable_tensor_type();
  t->set_elem_type(dtype_to_onnx(dtype));
  onnx::TensorShapeProto* s = t->mutable_shape();
  for (const ir::Expr& d : shape) {
    const ir::Expr simple = ir::simplify(d);
    if (auto c = ir::as_const_int(simple)) s->add_dim()->set_dim_value(*c);
    else {
      std::string text = ir::to_string(simple);  // a compound dim's text, without spaces
      std::erase(text, ' ');
      s->add_dim()->set_dim_param(text);
    }
  }
}

void add_cast(onnx::GraphProto* g, const std::string& from, const std::string& to, DType dtype) {
  onnx::NodeProto* cast = g->add_node();
  cast->set_op_type("Cast");
  cast->set_name("cast_" + to);
  cast->add_input(from);
  cast->add_output(to);
  onnx::AttributeProto* a = cast->add_attribute();
  a->set_name("to");
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(dtype_to_onnx(dtype));
}

}  // namespace

onnx::GraphProto plugin_subgraph(const Graph& graph, const onnx::ModelProto& model, const PluginGroup& group,
                                 DType float_type) {
  onnx::GraphProto sub;
  sub.set_name(group.name);
  for (int v : group.inputs) {
    const Value& value = graph.values[v];
    const DType dtype = value.type->dtype, at = boundary_dtype(dtype, float_type);
    const bool cast = at != dtype && !is_float(dtype);
    set_value_info(sub.add_input(), cast ? value.name + "__" + std::string(dtype_name(at)) : value.name, at,
                   value.type->shape);
    if (cast) add_cast(&sub, value.name + "__" + std::string(dtype_name(at)), value.name, dtype);
  }
  for (int v : group.baked) {
    *sub.add_initializer() = tensor_to_proto(*graph.values[v].constant, graph.values[v].name);
  }
  for (int p : group.protos) *sub.add_node() = model.graph().node(p);
  for (int v : group.outputs) {
    const Value& value = graph.values[v];
    KILN_ASSERT(value.type, "output {} has no type", value.name);
    const DType dtype = value.type->dtype, at = boundary_dtype(dtype, float_type);
    const bool cast = at != dtype && !is_float(dtype);
    const std::string name = cast ? value.name + "__" + std::string(dtype_name(at)) : value.name;
    if (cast) add_cast(&sub, value.name, name, at);
    set_value_info(sub.add_output(), name, at, value.type->shape);
  }
  return sub;
}

onnx::ModelProto subgraph_model(const onnx::GraphProto& sub, const onnx::ModelProto& model) {
  onnx::ModelProto m;
  m.set_ir_version(model.ir_version());
  m.set_producer_name("kiln plugins");
  *m.mutable_opset_import() = model.opset_import();
  *m.mutable_graph() = sub;
  return m;
}

}  // namespace kiln::package
