#include "kiln/package/PluginNodes.h"

#include <google/protobuf/util/json_util.h>

#include <climits>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "PluginGroups.h"
#include "kiln/onnx/Proto.h"
#include "kiln/support/Error.h"

namespace kiln::package {

namespace {

const onnx::AttributeProto* find_attribute(const onnx::NodeProto& node, const std::string& name) {
  for (const auto& a : node.attribute()) {
    if (a.name() == name) return &a;
  }
  return nullptr;
}

// Kahn's algorithm over value names, keeping the given order where it is already valid.
void sort_nodes(onnx::GraphProto* g) {
  std::set<std::string> available;
  for (const auto& v : g->input()) available.insert(v.name());
  for (const auto& v : g->initializer()) available.insert(v.name());
  available.insert("");
  std::vector<onnx::NodeProto> pending(g->node().begin(), g->node().end()), sorted;
  while (!pending.empty()) {
    bool progress = false;
    for (size_t i = 0; i < pending.size(); ++i) {
      bool ready = true;
      for (const std::string& in : pending[i].input()) ready = ready && available.count(in);
      if (!ready) continue;
      for (const std::string& out : pending[i].output()) available.insert(out);
      sorted.push_back(pending[i]);
      pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(i));
      progress = true;
      break;
    }
    if (!progress) internal_error("rewritten graph has a cycle or an undefined input at node " + pending[0].name());
  }
  g->clear_node();
  for (auto& n : sorted) *g->add_node() = std::move(n);
}

onnx::AttributeProto string_attribute(const std::string& name, const std::string& value) {
  onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(onnx::AttributeProto::STRING);
  a.set_s(value);
  return a;
}

}  // namespace

bool is_plugin_node(const onnx::NodeProto& node) {
  return node.domain() == kPluginDomain && find_attribute(node, kSubgraphAttribute) != nullptr;
}

std::vector<onnx::AttributeProto> plugin_settings(const onnx::ModelProto& model, const PluginGroup& group) {
  std::vector<onnx::AttributeProto> fields;
  for (size_t k = 0; k < group.protos.size(); ++k) {
    const onnx::NodeProto& node = model.graph().node(group.protos[k]);
    for (const onnx::AttributeProto& a : node.attribute()) {
      onnx::AttributeProto f;
      f.set_name(group.protos.size() == 1 ? a.name() : "n" + std::to_string(k) + "_" + a.name());
      auto clamp = [](int64_t v) { return std::clamp<int64_t>(v, INT32_MIN, INT32_MAX); };
      switch (a.type()) {
        case onnx::AttributeProto::INT: f.set_type(a.type()); f.set_i(clamp(a.i())); break;
        case onnx::AttributeProto::FLOAT: f.set_type(a.type()); f.set_f(a.f()); break;
        case onnx::AttributeProto::STRING: f.set_type(a.type()); f.set_s(a.s()); break;
        case onnx::AttributeProto::INTS:
          f.set_type(a.type());
          for (int64_t v : a.ints()) f.add_ints(clamp(v));
          break;
        case onnx::AttributeProto::FLOATS:
          f.set_type(a.type());
          for (float v : a.floats()) f.add_floats(v);
          break;
        default: continue;  // tensors, graphs, string lists: in kiln_subgraph only
      }
      if (f.name() == "plugin_version" || f.name() == "plugin_namespace" || f.name() == kSubgraphAttribute) {
        f.set_name("n" + std::to_string(k) + "_" + a.name());
      }
      fields.push_back(std::move(f));
    }
  }
  return fields;
}

onnx::ModelProto rewrite_model(const onnx::ModelProto& model, const Graph& graph, const std::vector<PluginGroup>& groups,
                               const std::vector<onnx::GraphProto>& subgraphs, const PluginOptions& options) {
  onnx::ModelProto out = model;
  onnx::GraphProto* g = out.mutable_graph();
  std::set<int> replaced;
  for (const PluginGroup& group : groups) replaced.insert(group.protos.begin(), group.protos.end());
  g->clear_node();
  for (int i = 0; i < model.graph().node_size(); ++i) {
    if (!replaced.count(i)) *g->add_node() = model.graph().node(i);
  }
  for (size_t k = 0; k < groups.size(); ++k) {
    const PluginGroup& group = groups[k];
    const onnx::GraphProto& sub = subgraphs[k];
    onnx::NodeProto plugin;
    plugin.set_name(group.name);
    plugin.set_op_type(group.name);
    plugin.set_domain(kPluginDomain);
    for (size_t i = 0; i < group.inputs.size(); ++i) {
      const std::string& original = graph.values[group.inputs[i]].name;
      const std::string& boundary = sub.input(static_cast<int>(i)).name();
      if (boundary != original) {  // int64/bool -> int32 before the plugin
        onnx::NodeProto* cast = g->add_node();
        cast->set_op_type("Cast");
        cast->set_name(group.name + "/" + boundary);
        cast->add_input(original);
        cast->add_output(group.name + "/" + boundary);
        onnx::AttributeProto* to = cast->add_attribute();
        to->set_name("to");
        to->set_type(onnx::AttributeProto::INT);
        to->set_i(sub.input(static_cast<int>(i)).type().tensor_type().elem_type());
        plugin.add_input(cast->output(0));
      } else {
        plugin.add_input(original);
      }
    }
    for (size_t o = 0; o < group.outputs.size(); ++o) {
      const Value& value = graph.values[group.outputs[o]];
      const std::string& boundary = sub.output(static_cast<int>(o)).name();
      if (boundary != value.name) {  // int32 -> int64/bool after it
        plugin.add_output(group.name + "/" + boundary);
        onnx::NodeProto* cast = g->add_node();
        cast->set_op_type("Cast");
        cast->set_name(group.name + "/" + value.name);
        cast->add_input(plugin.output(static_cast<int>(o)));
        cast->add_output(value.name);
        onnx::AttributeProto* to = cast->add_attribute();
        to->set_name("to");
        to->set_type(onnx::AttributeProto::INT);
        to->set_i(dtype_to_onnx(value.type->dtype));
      } else {
        plugin.add_output(value.name);
      }
    }
    *plugin.add_attribute() = string_attribute("plugin_version", options.plugin_version);
    *plugin.add_attribute() = string_attribute("plugin_namespace", options.plugin_namespace);
    for (const onnx::AttributeProto& f : plugin_settings(model, group)) *plugin.add_attribute() = f;
    std::string json;
    google::protobuf::util::JsonPrintOptions print;
    if (!google::protobuf::util::MessageToJsonString(sub, &json, print).ok()) {
      internal_error("cannot write the subgraph of plugin " + group.name + " as JSON");
    }
    *plugin.add_attribute() = string_attribute(kSubgraphAttribute, json);
    *g->add_node() = std::move(plugin);
  }
  // Value infos of replaced interior values would describe values that no longer exist.
  std::set<std::string> produced;
  for (const auto& n : g->node()) produced.insert(n.output().begin(), n.output().end());
  std::vector<onnx::ValueInfoProto> infos;
  for (const auto& v : g->value_info()) {
    if (produced.count(v.name())) infos.push_back(v);
  }
  g->clear_value_info();
  for (auto& v : infos) *g->add_value_info() = std::move(v);
  sort_nodes(g);
  bool has_domain = false;
  for (const auto& op : out.opset_import()) has_domain = has_domain || op.domain() == kPluginDomain;
  if (!has_domain) {
    onnx::OperatorSetIdProto* op = out.add_opset_import();
    op->set_domain(kPluginDomain);
    op->set_version(1);
  }
  return out;
}

onnx::ModelProto expand_plugin_nodes(const onnx::ModelProto& model) {
  onnx::ModelProto out = model;
  onnx::GraphProto* g = out.mutable_graph();
  g->clear_node();
  for (const onnx::NodeProto& node : model.graph().node()) {
    if (!is_plugin_node(node)) {
      *g->add_node() = node;
      continue;
    }
    onnx::GraphProto sub;
    const std::string& json = find_attribute(node, kSubgraphAttribute)->s();
    if (!google::protobuf::util::JsonStringToMessage(json, &sub).ok()) {
      throw UserError("plugin node '" + node.name() + "' (" + node.op_type() + "): attribute " + kSubgraphAttribute +
                      " is not the JSON form of an ONNX GraphProto");
    }
    if (sub.input_size() != node.input_size() || sub.output_size() != node.output_size()) {
      throw UserError("plugin node '" + node.name() + "' (" + node.op_type() + "): it has " +
                      std::to_string(node.input_size()) + " inputs and " + std::to_string(node.output_size()) +
                      " outputs, its " + kSubgraphAttribute + " " + std::to_string(sub.input_size()) + " and " +
                      std::to_string(sub.output_size()));
    }
    std::map<std::string, std::string> rename;
    for (int i = 0; i < sub.input_size(); ++i) rename[sub.input(i).name()] = node.input(i);
    for (int o = 0; o < sub.output_size(); ++o) rename[sub.output(o).name()] = node.output(o);
    auto renamed = [&](const std::string& name) {
      if (name.empty()) return name;
      auto it = rename.find(name);
      return it != rename.end() ? it->second : node.name() + "/" + name;
    };
    for (const onnx::TensorProto& init : sub.initializer()) {
      onnx::TensorProto* t = g->add_initializer();
      *t = init;
      t->set_name(renamed(init.name()));
    }
    for (const onnx::NodeProto& inner : sub.node()) {
      onnx::NodeProto* n = g->add_node();
      *n = inner;
      n->set_name(node.name() + "/" + inner.name());
      for (int i = 0; i < n->input_size(); ++i) n->set_input(i, renamed(n->input(i)));
      for (int i = 0; i < n->output_size(); ++i) n->set_output(i, renamed(n->output(i)));
    }
  }
  sort_nodes(g);
  return out;
}

Graph load_plugin_model(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError("cannot open " + path);
  onnx::ModelProto model;
  if (!model.ParseFromIstream(&in)) throw UserError(path + " is not an ONNX model");
  const std::string dir = std::filesystem::path(path).parent_path().string();
  return graph_from_model_proto(expand_plugin_nodes(model), ExternalDataSource{dir.empty() ? "." : dir});
}

}  // namespace kiln::package
