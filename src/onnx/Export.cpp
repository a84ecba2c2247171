// Graph -> ModelProto. The graph is written as it is: nodes keep their op_type and domain (a
// node built by a rewrite may be Unsupported with a plugin's op_type), values keep their names.
#include <climits>
#include <filesystem>
#include <fstream>
#include <set>

#include "kiln/ir/IR.h"
#include "kiln/ir/IRPrinter.h"
#include "kiln/onnx/Import.h"
#include "kiln/onnx/Proto.h"
#include "kiln/support/Error.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

// The lowest IR version whose opset range includes `opset`.
int64_t ir_version_for_opset(int64_t opset) {
  if (opset <= 18) return 8;
  if (opset <= 20) return 9;
  return 10;
}

void write_type(const TensorType& type, onnx::TypeProto* proto) {
  auto* tt = proto->mutable_tensor_type();
  tt->set_elem_type(dtype_to_onnx(type.dtype));
  auto* shape = tt->mutable_shape();
  for (const ir::Expr& d : type.shape) {
    auto* dim = shape->add_dim();
    if (const auto* imm = d.as<ir::IntImm>()) dim->set_dim_value(imm->value);
    else if (const auto* v = d.as<ir::Variable>()) dim->set_dim_param(v->name);
    else if (d.defined()) dim->set_dim_param(ir::to_string(d));  // an inferred expression, "(batch * seq)"
  }
}

void write_value_info(const Value& v, onnx::ValueInfoProto* proto) {
  proto->set_name(v.name);
  if (v.type) write_type(*v.type, proto->mutable_type());
}

void write_graph(const Graph& graph, onnx::GraphProto* g);

void write_attribute(const std::string& name, const Attribute& a, onnx::AttributeProto* proto) {
  proto->set_name(name);
  switch (a.kind) {
    case Attribute::Kind::Int:
      proto->set_type(onnx::AttributeProto::INT);
      proto->set_i(a.i);
      break;
    case Attribute::Kind::Float:
      proto->set_type(onnx::AttributeProto::FLOAT);
      proto->set_f(static_cast<float>(a.f));
      break;
    case Attribute::Kind::String:
      proto->set_type(onnx::AttributeProto::STRING);
      proto->set_s(a.s);
      break;
    case Attribute::Kind::Ints:
      proto->set_type(onnx::AttributeProto::INTS);
      for (int64_t x : a.ints) proto->add_ints(x);
      break;
    case Attribute::Kind::Floats:
      proto->set_type(onnx::AttributeProto::FLOATS);
      for (double x : a.floats) proto->add_floats(static_cast<float>(x));
      break;
    case Attribute::Kind::Strings:
      proto->set_type(onnx::AttributeProto::STRINGS);
      for (const auto& x : a.strings) proto->add_strings(x);
      break;
    case Attribute::Kind::Tensor:
      proto->set_type(onnx::AttributeProto::TENSOR);
      *proto->mutable_t() = tensor_to_proto(a.tensor, "");
      break;
    case Attribute::Kind::Graph:
      proto->set_type(onnx::AttributeProto::GRAPH);
      write_graph(*a.graph, proto->mutable_g());
      break;
  }
}

void write_node(const Graph& graph, const Node& node, onnx::NodeProto* proto) {
  proto->set_name(node.name);
  proto->set_op_type(node.op_type.empty() ? std::string(op_kind_name(node.op)) : node.op_type);
  if (!node.domain.empty()) proto->set_domain(node.domain);
  for (int v : node.inputs) proto->add_input(v >= 0 ? graph.values[v].name : "");
  for (int v : node.outputs) proto->add_output(v >= 0 ? graph.values[v].name : "");
  for (const auto& [name, attr] : node.attributes) write_attribute(name, attr, proto->add_attribute());
}

// A graph's inputs, initializers, nodes, outputs and typed values. A subgraph's captures are
// neither inputs nor initializers: its nodes name the enclosing graph's values.
void write_graph(const Graph& graph, onnx::GraphProto* g) {
  g->set_name(graph.name.empty() ? "kiln" : graph.name);
  std::vector<bool> listed(graph.values.size(), false);  // inputs, outputs, initializers
  for (int v : graph.inputs) {
    write_value_info(graph.values[v], g->add_input());
    listed[v] = true;
  }
  for (size_t v = 0; v < graph.values.size(); ++v) {
    const Value& value = graph.values[v];
    if (!value.constant || value.producer >= 0 || listed[v]) continue;
    *g->add_initializer() = tensor_to_proto(*value.constant, value.name);
    listed[v] = true;
  }
  for (const Node& node : graph.nodes) write_node(graph, node, g->add_node());
  for (int v : graph.outputs) {
    write_value_info(graph.values[v], g->add_output());
    listed[v] = true;
  }
  for (size_t v = 0; v < graph.values.size(); ++v) {
    if (!listed[v] && graph.values[v].type) write_value_info(graph.values[v], g->add_value_info());
  }
}

// Moves initializers of at least `threshold` bytes into `file_name` next to the model.
void externalize_initializers(onnx::ModelProto& model, const fs::path& model_dir, const std::string& file_name,
                              size_t threshold) {
  if (file_name.empty() || fs::path(file_name).has_parent_path() || file_name == "." || file_name == "..") {
    user_error("external data file '{}' must be a plain file name in the model's folder", file_name);
  }
  const fs::path path = model_dir / file_name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) user_error("cannot write external data file {}", path.string());
  int64_t offset = 0;
  for (auto& t : *model.mutable_graph()->mutable_initializer()) {
    if (t.raw_data().size() < threshold) continue;
    // 64-byte alignment so that the file can be memory-mapped and read with vector loads.
    const int64_t aligned = (offset + 63) / 64 * 64;
    out << std::string(static_cast<size_t>(aligned - offset), '\0');
    out.write(t.raw_data().data(), static_cast<std::streamsize>(t.raw_data().size()));
    auto add = [&t](const char* key, const std::string& value) {
      auto* e = t.add_external_data();
      e->set_key(key);
      e->set_value(value);
    };
    add("location", file_name);
    add("offset", std::to_string(aligned));
    add("length", std::to_string(t.raw_data().size()));
    offset = aligned + static_cast<int64_t>(t.raw_data().size());
    t.set_data_location(onnx::TensorProto::EXTERNAL);
    t.clear_raw_data();
  }
  if (!out) user_error("cannot write external data file {}", path.string());
}

}  // namespace

onnx::ModelProto model_proto_from_graph(const Graph& graph, const ExportOptions& options) {
  if (graph.opset < kMinOpset || graph.opset > kMaxOpset) {
    user_error("cannot export a graph of ai.onnx opset {}; expected {} to {}", graph.opset, kMinOpset, kMaxOpset);
  }
  onnx::ModelProto model;
  model.set_ir_version(options.ir_version ? options.ir_version : ir_version_for_opset(graph.opset));
  model.set_producer_name(options.producer_name);
  auto* opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(graph.opset);
  std::set<std::string> domains;
  for (const Node& node : graph.nodes) {
    if (!node.domain.empty()) domains.insert(node.domain);
  }
  for (const std::string& domain : domains) {
    auto it = options.domain_versions.find(domain);
    auto* o = model.add_opset_import();
    o->set_domain(domain);
    o->set_version(it == options.domain_versions.end() ? 1 : it->second);
  }

  write_graph(graph, model.mutable_graph());
  return model;
}

std::string serialize_onnx(const Graph& graph, const ExportOptions& options) {
  const onnx::ModelProto model = model_proto_from_graph(graph, options);
  if (model.ByteSizeLong() > static_cast<size_t>(INT_MAX)) {
    user_error("the model would be {} bytes, over protobuf's 2 GiB limit; save it with external data",
               model.ByteSizeLong());
  }
  return model.SerializeAsString();
}

void save_onnx(const Graph& graph, const std::string& path, const ExportOptions& options) {
  onnx::ModelProto model = model_proto_from_graph(graph, options);
  if (!options.external_data_file.empty()) {
    fs::path dir = fs::path(path).parent_path();
    if (dir.empty()) dir = ".";
    externalize_initializers(model, dir, options.external_data_file, options.external_data_threshold);
  }
  if (model.ByteSizeLong() > static_cast<size_t>(INT_MAX)) {
    user_error("{}: the model would be {} bytes, over protobuf's 2 GiB limit; set external_data_file", path,
               model.ByteSizeLong());
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out || !model.SerializeToOstream(&out)) user_error("{}: cannot write the model", path);
}

}  // namespace kiln
