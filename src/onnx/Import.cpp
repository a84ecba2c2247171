// ModelProto -> Graph. The order matters: values first (initializers, graph inputs, node
// outputs), so that node inputs may refer to outputs of nodes listed later; then declared types;
// then the topological sort.
#include "kiln/onnx/Import.h"

#include <algorithm>
#include <climits>
#include <filesystem>
#include <fstream>
#include <unordered_map>
#include <unordered_set>

#include "kiln/graph/TopoSort.h"
#include "kiln/onnx/Proto.h"
#include "kiln/support/Error.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

// protobuf cannot parse a message of 2 GiB or more; larger weights must be external data.
constexpr int64_t kMaxModelBytes = INT_MAX;

// Imports one graph: the model's main graph, or (with a parent) a subgraph attribute, whose
// nodes may name values of the enclosing graphs (captures).
class Importer {
 public:
  Importer(const onnx::ModelProto& model, const ExternalDataSource& source) : model_(model), source_(source) {}

  Graph run() {
    if (!model_.has_graph()) user_error("the model has no graph; expected an ONNX ModelProto");
    graph_.opset = default_opset();
    import_graph(model_.graph());
    return std::move(graph_);
  }

 private:
  Importer(Importer& parent, const std::string& where)
      : model_(parent.model_), source_(parent.source_), parent_(&parent), where_(where) {
    graph_.opset = parent.graph_.opset;
  }

  void import_graph(const onnx::GraphProto& g) {
    graph_.name = g.name();
    add_initializers(g);
    add_inputs(g);
    add_node_outputs(g);
    // After every node's outputs have ids: a subgraph may read a value of a later node.
    for (int i = 0; i < g.node_size(); ++i) add_attributes(g.node(i), graph_.nodes[i]);
    for (int i = 0; i < g.node_size(); ++i) graph_.nodes[i].inputs = resolve_inputs(g.node(i), graph_.nodes[i]);
    add_outputs(g);
    for (const auto& vi : g.input()) declare_type(vi, "graph input");
    for (const auto& vi : g.output()) declare_type(vi, "graph output");
    for (const auto& vi : g.value_info()) declare_type(vi, "value");
    sort_topologically(graph_);
  }

  // The id of the value named `name` in this graph; a value of an enclosing graph becomes a
  // capture of this one. -1 when no enclosing graph has it either.
  int resolve(const std::string& name) {
    if (auto it = ids_.find(name); it != ids_.end()) return it->second;
    if (parent_ == nullptr) return -1;
    const int outer = parent_->resolve(name);
    if (outer < 0) return -1;
    const int id = add_value(name, "a value of the enclosing graph");
    graph_.captures.emplace_back(id, outer);
    return id;
  }

  std::shared_ptr<const Graph> import_subgraph(const onnx::GraphProto& g, Node& node,
                                               const std::string& what) {
    Importer sub(*this, what);
    sub.import_graph(g);
    for (const auto& [inner, outer] : sub.graph_.captures) {
      (void)inner;
      if (std::find(node.implicit_inputs.begin(), node.implicit_inputs.end(), outer) ==
          node.implicit_inputs.end()) {
        node.implicit_inputs.push_back(outer);
      }
    }
    return std::make_shared<const Graph>(std::move(sub.graph_));
  }
  int64_t default_opset() const {
    std::optional<int64_t> opset;
    for (const auto& o : model_.opset_import()) {
      if (o.domain().empty() || o.domain() == "ai.onnx") opset = o.version();
    }
    if (!opset) {
      // Only other domains' nodes (the training domain's optimizers): the ai.onnx opset is moot.
      if (first_default_domain_node().empty()) return kMaxOpset;
      unsupported(
          "the model imports no opset of the default domain (ai.onnx) but has ai.onnx nodes{}; "
          "kiln "
          "supports ai.onnx opsets {} to {}",
          first_default_domain_node(), kMinOpset, kMaxOpset);
    }
    if (*opset < kMinOpset) {
      user_error("the model uses ai.onnx opset {}{}; expected an opset from {} to {}", *opset,
                 first_default_domain_node(), kMinOpset, kMaxOpset);
    }
    if (*opset > kMaxOpset) {  // a valid model newer than kiln: unsupported, not wrong
      unsupported("the model uses ai.onnx opset {}{}; kiln supports opsets {} to {} (convert it with "
                  "onnx.version_converter)",
                  *opset, first_default_domain_node(), kMinOpset, kMaxOpset);
    }
    return *opset;
  }

  // " (first node: 'name' (OpType))" for the out-of-range opset message, or "" for a graph
  // without ai.onnx nodes.
  std::string first_default_domain_node() const {
    const onnx::GraphProto& g = model_.graph();
    for (int i = 0; i < g.node_size(); ++i) {
      const onnx::NodeProto& n = g.node(i);
      if (!n.domain().empty() && n.domain() != "ai.onnx") continue;
      const std::string name = n.name().empty() ? n.op_type() + "_" + std::to_string(i) : n.name();
      return " (first node: '" + name + "' (" + n.op_type() + "))";
    }
    return "";
  }

  int add_value(const std::string& name, const std::string& what) {
    if (name.empty()) user_error("{} has an empty name", what);
    auto [it, inserted] = ids_.emplace(name, static_cast<int>(graph_.values.size()));
    if (!inserted) {
      user_error("value '{}' is defined twice (by {} and by {}); expected each name to be produced once",
                 name, origin_[it->second], what);
    }
    Value v;
    v.name = name;
    graph_.values.push_back(std::move(v));
    origin_.push_back(what);
    return it->second;
  }

  void add_initializers(const onnx::GraphProto& g) {
    if (g.sparse_initializer_size() > 0) {
      user_error("sparse initializer '{}' is not supported; expected dense initializers",
                 g.sparse_initializer(0).values().name());
    }
    for (const auto& t : g.initializer()) {
      const std::string what = "initializer '" + t.name() + "'";
      const int id = add_value(t.name(), what);
      HostTensor tensor = tensor_from_proto(t, source_, what);
      Value& v = graph_.values[id];
      v.type = TensorType{.dtype = tensor.dtype(), .shape = {}};
      for (int64_t d : tensor.shape()) v.type->shape.push_back(ir::Expr(d));
      v.constant = std::move(tensor);
    }
  }

  void add_inputs(const onnx::GraphProto& g) {
    for (const auto& vi : g.input()) {
      auto it = ids_.find(vi.name());
      if (it != ids_.end() && graph_.values[it->second].constant) continue;  // IR < 4: initializers listed as inputs
      graph_.inputs.push_back(add_value(vi.name(), "graph input '" + vi.name() + "'"));
    }
  }

  void add_node_outputs(const onnx::GraphProto& g) {
    // A nameless node is called "<op_type>_<index>", made unique against the model's names, so
    // that --nodes and messages can name every node.
    std::unordered_set<std::string> names;
    for (const auto& proto : g.node()) names.insert(proto.name());
    for (int i = 0; i < g.node_size(); ++i) {
      const onnx::NodeProto& proto = g.node(i);
      Node node;
      node.name = proto.name();
      if (node.name.empty()) {
        node.name = proto.op_type() + "_" + std::to_string(i);
        while (!names.insert(node.name).second) node.name += "_";
      }
      node.op_type = proto.op_type();
      node.domain = proto.domain() == "ai.onnx" ? "" : proto.domain();
      node.op = op_kind_from_onnx(node.domain, node.op_type).value_or(OpKind::Unsupported);
      for (const auto& out : proto.output()) {
        if (out.empty()) {
          node.outputs.push_back(-1);
          continue;
        }
        const int id = add_value(out, node.describe());
        graph_.values[id].producer = i;
        node.outputs.push_back(id);
      }
      graph_.nodes.push_back(std::move(node));
    }
  }

  std::vector<int> resolve_inputs(const onnx::NodeProto& proto, const Node& node) {
    std::vector<int> inputs;
    for (int k = 0; k < proto.input_size(); ++k) {
      const std::string& in = proto.input(k);
      if (in.empty()) {
        inputs.push_back(-1);
        continue;
      }
      const int id = resolve(in);
      if (id < 0) {
        user_error("{}{}: input {} '{}' is not produced by any node, initializer or graph input",
                   where_prefix(), node.describe(), k, in);
      }
      inputs.push_back(id);
    }
    return inputs;
  }

  void add_outputs(const onnx::GraphProto& g) {
    for (const auto& vi : g.output()) {
      const int id = resolve(vi.name());
      if (id < 0) {
        user_error("{}graph output '{}' is not produced by any node, initializer or graph input",
                   where_prefix(), vi.name());
      }
      graph_.outputs.push_back(id);
    }
  }

  void add_attributes(const onnx::NodeProto& proto, Node& node) {
    for (const auto& a : proto.attribute()) {
      const std::string what = "attribute '" + a.name() + "' of " + node.describe();
      Attribute attr;
      switch (attribute_type(a)) {
        case onnx::AttributeProto::INT: attr.kind = Attribute::Kind::Int, attr.i = a.i(); break;
        case onnx::AttributeProto::FLOAT: attr.kind = Attribute::Kind::Float, attr.f = a.f(); break;
        case onnx::AttributeProto::STRING: attr.kind = Attribute::Kind::String, attr.s = a.s(); break;
        case onnx::AttributeProto::INTS:
          attr.kind = Attribute::Kind::Ints;
          attr.ints.assign(a.ints().begin(), a.ints().end());
          break;
        case onnx::AttributeProto::FLOATS:
          attr.kind = Attribute::Kind::Floats;
          attr.floats.assign(a.floats().begin(), a.floats().end());
          break;
        case onnx::AttributeProto::STRINGS:
          attr.kind = Attribute::Kind::Strings;
          attr.strings.assign(a.strings().begin(), a.strings().end());
          break;
        case onnx::AttributeProto::TENSOR:
          if (!dtype_from_onnx(a.t().data_type())) {
            mark_unsupported(node, what + " is a tensor of data type " + onnx_data_type_name(a.t().data_type()));
            continue;
          }
          attr.kind = Attribute::Kind::Tensor;
          attr.tensor = tensor_from_proto(a.t(), source_, what);
          break;
        case onnx::AttributeProto::GRAPH:
          attr.kind = Attribute::Kind::Graph;
          attr.graph = import_subgraph(a.g(), node, what);
          break;
        default:
          mark_unsupported(node, what + " is of type " + attribute_type_name(attribute_type(a)));
          continue;
      }
      if (a.name().empty()) user_error("{} has an attribute with an empty name", node.describe());
      node.attributes[a.name()] = std::move(attr);
    }
  }

  // Models written before IR version 2 may leave `type` unset; the filled field tells.
  static onnx::AttributeProto::AttributeType attribute_type(const onnx::AttributeProto& a) {
    if (a.type() != onnx::AttributeProto::UNDEFINED) return a.type();
    if (a.ints_size()) return onnx::AttributeProto::INTS;
    if (a.floats_size()) return onnx::AttributeProto::FLOATS;
    if (a.strings_size()) return onnx::AttributeProto::STRINGS;
    if (a.has_t()) return onnx::AttributeProto::TENSOR;
    if (a.has_g()) return onnx::AttributeProto::GRAPH;
    if (a.has_s()) return onnx::AttributeProto::STRING;
    if (a.has_f()) return onnx::AttributeProto::FLOAT;
    if (a.has_i()) return onnx::AttributeProto::INT;
    return onnx::AttributeProto::UNDEFINED;
  }

  static std::string attribute_type_name(onnx::AttributeProto::AttributeType t) {
    return onnx::AttributeProto::AttributeType_IsValid(t) ? onnx::AttributeProto::AttributeType_Name(t)
                                                          : "type " + std::to_string(static_cast<int>(t));
  }

  // A node kiln would know, but for an attribute it cannot represent: reported by
  // unsupported_ops, not an import error. Unknown ops keep their (ignored) attributes silently.
  static void mark_unsupported(Node& node, const std::string& reason) {
    if (node.op == OpKind::Unsupported) return;
    node.op = OpKind::Unsupported;
    node.unsupported_reason = reason + ", which kiln does not support";
  }

  void declare_type(const onnx::ValueInfoProto& vi, const char* role) {
    auto it = ids_.find(vi.name());
    if (it == ids_.end()) return;  // value_info of a value nothing uses
    Value& v = graph_.values[it->second];
    if (v.constant) return;  // an initializer's own dims are authoritative
    if (!vi.has_type()) return;
    if (!vi.type().has_tensor_type()) {
      if (std::string(role) != "value") {
        unsupported("{} '{}' is a sequence, map or optional; kiln supports tensors only", role, vi.name());
      }
      return;
    }
    const auto& tt = vi.type().tensor_type();
    if (tt.elem_type() == onnx::TensorProto::UNDEFINED || !tt.has_shape()) return;
    const std::string what = std::string(role) + " '" + vi.name() + "'";
    const std::optional<DType> dtype = dtype_from_onnx(tt.elem_type());
    if (!dtype) {
      unsupported("{}: data type {} is not supported; expected float, float16, bfloat16, double, int2-64, "
                  "uint2-64, bool, float8 (e4m3fn, e4m3fnuz, e5m2, e5m2fnuz, e8m0) or float4e2m1",
                 what, onnx_data_type_name(tt.elem_type()));
    }
    TensorType type{.dtype = *dtype, .shape = {}};
    int64_t static_elements = 1;
    for (int i = 0; i < tt.shape().dim_size(); ++i) {
      const auto& dim = tt.shape().dim(i);
      if (dim.has_dim_value()) {
        if (dim.dim_value() < 0) {
          user_error("{}: dim {} is {}; expected a size >= 0 or a symbolic name", what, i, dim.dim_value());
        }
        if (__builtin_mul_overflow(static_elements, dim.dim_value(), &static_elements)) {
          user_error("{}: the product of its dims overflows int64", what);
        }
        type.shape.push_back(ir::Expr(dim.dim_value()));
      } else if (dim.has_dim_param() && !dim.dim_param().empty()) {
        type.shape.push_back(graph_.symbol(dim.dim_param()));
      } else {
        type.shape.push_back(graph_.symbol(vi.name() + "_d" + std::to_string(i)));
      }
    }
    v.type = std::move(type);
  }

  // "in <subgraph>: " for messages about a subgraph's contents.
  std::string where_prefix() const { return parent_ ? "in " + where_ + ": " : ""; }

  const onnx::ModelProto& model_;
  const ExternalDataSource& source_;
  Importer* parent_ = nullptr;
  std::string where_;  // a subgraph: "attribute 'body' of node 'loop' (Loop)"
  Graph graph_;
  std::unordered_map<std::string, int> ids_;
  std::vector<std::string> origin_;  // what defined each value, for duplicate-name errors
};

}  // namespace

Graph graph_from_model_proto(const onnx::ModelProto& model, const ExternalDataSource& source) {
  return Importer(model, source).run();
}

Graph load_onnx_from_bytes(std::string_view bytes, const std::string& external_data_dir) {
  if (static_cast<int64_t>(bytes.size()) > kMaxModelBytes) {
    user_error("the model is {} bytes; protobuf limits a model to 2 GiB (store large weights as external data)",
               bytes.size());
  }
  onnx::ModelProto model;
  if (!model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    user_error("cannot parse the model: the file is truncated, corrupt or not an ONNX model");
  }
  return graph_from_model_proto(model, ExternalDataSource{external_data_dir});
}

Graph load_onnx(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) user_error("{}: no such file", path);
  const auto size = fs::file_size(path, ec);
  if (ec) user_error("{}: cannot read: {}", path, ec.message());
  if (size > static_cast<uintmax_t>(kMaxModelBytes)) {
    user_error("{}: the model is {} bytes; protobuf limits a model to 2 GiB (store large weights as external "
               "data)",
               path, size);
  }
  std::string bytes(size, '\0');
  std::ifstream in(path, std::ios::binary);
  if (!in.read(bytes.data(), static_cast<std::streamsize>(size))) user_error("{}: cannot read", path);
  std::string dir = fs::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  try {
    return load_onnx_from_bytes(bytes, dir);
  } catch (const UnsupportedError& e) {
    throw UnsupportedError(path + ": " + e.what());
  } catch (const UserError& e) {
    throw UserError(path + ": " + e.what());
  }
}

std::vector<std::string> unsupported_ops(const Graph& graph) {
  std::map<std::string, std::vector<std::string>> by_op;  // "op (reason)" -> node names
  for (const Node& node : graph.nodes) {
    if (node.op != OpKind::Unsupported) continue;
    std::string key = node.domain.empty() ? node.op_type : node.domain + "." + node.op_type;
    if (!node.unsupported_reason.empty()) key += " (" + node.unsupported_reason + ")";
    by_op[key].push_back(node.name);
  }
  std::vector<std::string> lines;
  for (const auto& [op, names] : by_op) {
    std::string line = op + (names.size() == 1 ? ": node " : ": nodes ");
    for (size_t i = 0; i < names.size(); ++i) line += (i ? ", '" : "'") + names[i] + "'";
    lines.push_back(std::move(line));
  }
  return lines;
}

}  // namespace kiln
