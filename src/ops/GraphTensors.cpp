#include "kiln/ops/GraphTensors.h"

#include <cmath>
#include <deque>
#include <unordered_map>

#include "kiln/ir/IRMutator.h"
#include "kiln/ir/IROperator.h"
#include "kiln/ir/Simplify.h"
#include "kiln/ops/Op.h"

namespace kiln::ops {
namespace {

using namespace ir;

std::optional<int64_t> constant_size(const std::vector<Expr>& shape) {
  int64_t n = 1;
  for (const Expr& d : shape) {
    auto c = as_const_int(d);
    if (!c) return std::nullopt;
    n *= *c;
  }
  return n;
}

// Small tensors of dtypes with IR constants (not the float8 storage types) have known values.
bool tracks_known(const HostTensor& t, const BuildOptions& options) {
  return t.num_elements() <= options.max_known_elements && !is_small_float(t.dtype());
}

std::vector<Expr> known_from_host(const HostTensor& t) {
  std::vector<Expr> out;
  out.reserve(static_cast<size_t>(t.num_elements()));
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    if (is_float(t.dtype())) out.push_back(FloatImm::make(Type(t.dtype()), t.get_double(i)));
    else out.push_back(IntImm::make(Type(t.dtype()), t.get_int(i)));
  }
  return out;
}

// Evaluates a tensor's elements symbolically from the known values of what it reads.
class KnownEvaluator : public IRMutator {
 public:
  explicit KnownEvaluator(const std::unordered_map<const te::TensorNode*, const std::vector<Expr>*>& known)
      : known_(known) {}
  bool failed = false;
  using IRMutator::mutate;

 protected:
  Expr visit(const TensorRead* op, const Expr& self) override {
    auto it = known_.find(op->tensor.get());
    if (it == known_.end()) {
      failed = true;
      return self;
    }
    int64_t flat = 0;
    for (size_t d = 0; d < op->indices.size(); ++d) {
      auto i = as_const_int(simplify(mutate(op->indices[d])));
      auto n = as_const_int(op->tensor->shape[d]);
      if (!i || !n || *i < 0 || *i >= *n) {
        failed = true;
        return self;
      }
      flat = flat * *n + *i;
    }
    return (*it->second)[static_cast<size_t>(flat)];
  }
  // Rounding a known float is exact, so a trip count computed as ceil((limit - start) / delta)
  // (Range's expansion into a Loop) stays known. Other math is left to run time.
  Expr visit(const Call* op, const Expr& self) override {
    Expr e = IRMutator::visit(op, self);
    const Call* call = e.as<Call>();
    if (call == nullptr || call->args.size() != 1 || !call->type.is_float()) return e;
    auto x = as_const_float(simplify(call->args[0]));
    if (!x) return e;
    switch (call->op) {
      case Intrinsic::Floor:
        return FloatImm::make(call->type, std::floor(*x));
      case Intrinsic::Ceil:
        return FloatImm::make(call->type, std::ceil(*x));
      case Intrinsic::Trunc:
        return FloatImm::make(call->type, std::trunc(*x));
      case Intrinsic::RoundEven:
        return FloatImm::make(call->type, std::nearbyint(*x));
      case Intrinsic::Abs:
        return FloatImm::make(call->type, std::fabs(*x));
      default:
        return e;
    }
  }
  Expr visit(const Reduce* op, const Expr& self) override {
    // Unroll small constant reductions (e.g. ReduceProd of a shape).
    std::vector<std::vector<int64_t>> points(1);
    for (const IterVar& a : op->axes) {
      auto n = as_const_int(a.extent);
      if (!n || *n > 64) {
        failed = true;
        return self;
      }
      std::vector<std::vector<int64_t>> next;
      for (const auto& p : points) {
        for (int64_t k = 0; k < *n; ++k) {
          next.push_back(p);
          next.back().push_back(k);
        }
      }
      points = std::move(next);
    }
    Expr acc = reduce_identity(op->reduce_kind, op->type);
    for (const auto& p : points) {
      std::vector<std::pair<Expr, Expr>> map;
      for (size_t a = 0; a < p.size(); ++a) map.emplace_back(op->axes[a].var, Expr(p[a]));
      Expr cond = simplify(mutate(substitute(op->condition, map)));
      if (is_zero(cond)) continue;
      if (!is_one(cond)) {
        failed = true;
        return self;
      }
      acc = simplify(reduce_combine(op->reduce_kind, acc, mutate(substitute(op->source, map))));
    }
    return acc;
  }

 private:
  const std::unordered_map<const te::TensorNode*, const std::vector<Expr>*>& known_;
};

std::optional<std::vector<Expr>> evaluate_known(
    const te::Tensor& t, const std::unordered_map<const te::TensorNode*, const std::vector<Expr>*>& known,
    int64_t limit) {
  auto n = constant_size(t.shape());
  if (!n || *n > limit || t.is_placeholder()) return std::nullopt;
  std::vector<Expr> values;
  values.reserve(static_cast<size_t>(*n));
  std::vector<int64_t> index(t.ndim(), 0);
  for (int64_t flat = 0; flat < *n; ++flat) {
    int64_t rest = flat;
    for (int d = t.ndim() - 1; d >= 0; --d) {
      const int64_t extent = *as_const_int(t.shape(d));
      index[d] = rest % extent;
      rest /= extent;
    }
    std::vector<std::pair<Expr, Expr>> map;
    for (int d = 0; d < t.ndim(); ++d) map.emplace_back(t->axes[d].var, Expr(index[d]));
    KnownEvaluator eval(known);
    Expr v = simplify(eval.mutate(substitute(t->body, map)));
    if (eval.failed || !(v.as<IntImm>() || v.as<FloatImm>() || (v.type() == kIndexType))) return std::nullopt;
    values.push_back(v);
  }
  return values;
}

void collect_unsupported(const Graph& graph,
                         std::map<std::string, std::vector<std::string>>& missing) {
  for (const Node& n : graph.nodes) {
    if (n.op == OpKind::Unsupported || find_op(n.op) == nullptr) {
      missing[n.domain.empty() ? n.op_type : n.domain + "." + n.op_type].push_back(n.name);
    }
    for (const auto& [name, attr] : n.attributes) {
      if (attr.kind == Attribute::Kind::Graph && attr.graph)
        collect_unsupported(*attr.graph, missing);
    }
  }
}

// Builds every node of `graph`; values in `bound` (by value id) are given tensors instead of
// placeholders (a subgraph's inputs and captures).
GraphTensors build_tensors(const Graph& graph, const BuildOptions& options,
                           const std::map<int, const BoundValue*>& bound);

}  // namespace

std::string describe_unsupported(const Graph& graph) {
  std::map<std::string, std::vector<std::string>> missing;
  collect_unsupported(graph, missing);
  std::string s;
  for (const auto& [op, names] : missing) {
    if (!s.empty()) s += ", ";
    s += op + " (" + std::to_string(names.size()) + (names.size() == 1 ? " node: " : " nodes: ");
    for (size_t i = 0; i < names.size() && i < 5; ++i) s += (i ? ", " : "") + names[i];
    if (names.size() > 5) s += ", ...";
    s += ")";
  }
  return s;
}

GraphTensors build_graph_tensors(const Graph& graph, const BuildOptions& options) {
  if (std::string missing = describe_unsupported(graph); !missing.empty() && !options.keep_going) {
    unsupported("the model uses ops kiln does not support: {}", missing);
  }
  return build_tensors(graph, options, {});
}

SubgraphTensors build_subgraph_tensors(const Graph& sub, const std::vector<BoundValue>& inputs,
                                       const std::vector<BoundValue>& captures,
                                       const BuildOptions& options) {
  KILN_ASSERT(inputs.size() == sub.inputs.size(), "subgraph '{}': {} inputs bound, it has {}",
              sub.name, inputs.size(), sub.inputs.size());
  KILN_ASSERT(captures.size() == sub.captures.size(), "subgraph '{}': {} captures bound, it has {}",
              sub.name, captures.size(), sub.captures.size());
  std::map<int, const BoundValue*> bound;
  for (size_t i = 0; i < inputs.size(); ++i) bound[sub.inputs[i]] = &inputs[i];
  for (size_t i = 0; i < captures.size(); ++i) bound[sub.captures[i].first] = &captures[i];
  BuildOptions sub_options = options;
  sub_options.keep_going = false;
  sub_options.specialize.clear();
  GraphTensors built = build_tensors(sub, sub_options, bound);
  SubgraphTensors out;
  for (int v : sub.outputs) out.outputs.push_back(BoundValue{built.tensors[v], built.known[v]});
  for (size_t i = 0; i < built.placeholders.size(); ++i) {
    KILN_ASSERT(built.data[i].has_value(), "subgraph placeholder '{}' without data",
                built.placeholders[i]->name);
    out.constants.emplace_back(built.placeholders[i], *built.data[i]);
  }
  return out;
}

namespace {

GraphTensors build_tensors(const Graph& graph, const BuildOptions& options,
                           const std::map<int, const BoundValue*>& bound) {
  GraphTensors out;
  const size_t n_values = graph.values.size();
  out.tensors.resize(n_values);
  out.known.resize(n_values);
  std::unordered_map<const te::TensorNode*, const std::vector<Expr>*> known_by_tensor;
  std::deque<std::vector<Expr>> constant_known;  // stable addresses for known_by_tensor

  auto add_placeholder = [&](int v) {
    const Value& value = graph.values[v];
    TensorType type;
    if (value.type) {
      type = *value.type;
    } else if (value.constant) {  // an initializer's type is its data's
      type.dtype = value.constant->dtype();
      for (int64_t d : value.constant->shape()) type.shape.push_back(Expr(d));
    } else {
      user_error("graph input '{}' has no declared type (dtype and shape)", value.name);
    }
    out.tensors[v] = te::placeholder(value.name, type.dtype, type.shape);
    const HostTensor* host = value.constant ? &*value.constant : nullptr;
    auto spec = options.specialize.find(value.name);
    if (spec != options.specialize.end()) host = &spec->second;
    out.placeholders.push_back(out.tensors[v]);
    out.data.push_back(value.constant ? std::optional<HostTensor>(*value.constant) : std::nullopt);
    if (host && tracks_known(*host, options)) {
      out.known[v] = known_from_host(*host);
      known_by_tensor[out.tensors[v].node().get()] = &*out.known[v];
    }
  };
  for (const auto& [v, value] : bound) {
    out.tensors[v] = value->tensor;
    out.known[v] = value->known;
    if (out.known[v]) {
      auto& slot = constant_known.emplace_back(*out.known[v]);
      known_by_tensor[value->tensor.node().get()] = &slot;
    }
  }
  for (int v : graph.inputs) {
    if (!bound.count(v)) add_placeholder(v);
  }
  for (size_t v = 0; v < n_values; ++v) {
    if (graph.values[v].constant && !out.tensors[v].defined()) add_placeholder(static_cast<int>(v));
  }

  out.node_errors.assign(graph.nodes.size(), "");
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    const Node& node = graph.nodes[n];
    std::vector<te::Tensor> inputs;
    std::vector<std::optional<std::vector<Expr>>> known;
    std::string missing_input;
    for (int v : node.inputs) {
      inputs.push_back(v >= 0 ? out.tensors[v] : te::Tensor());
      known.push_back(v >= 0 ? out.known[v] : std::nullopt);
      if (v >= 0 && !out.tensors[v].defined() && missing_input.empty()) missing_input = graph.values[v].name;
    }
    const OpDefinition* def = find_op(node.op);
    if (options.keep_going && (!def || !missing_input.empty())) {
      out.node_errors[n] = !def ? "op not supported" : "input '" + missing_input + "' has no known type";
      continue;
    }
    std::vector<BoundValue> implicit;
    for (int v : node.implicit_inputs) {
      implicit.push_back(BoundValue{out.tensors[v], out.known[v]});
      if (!out.tensors[v].defined() && missing_input.empty()) missing_input = graph.values[v].name;
    }
    if (options.keep_going && !missing_input.empty()) {
      out.node_errors[n] = "input '" + missing_input + "' has no known type";
      continue;
    }
    if (!missing_input.empty()) user_error("{}: input '{}' is not available", node.describe(), missing_input);
    OpContext ctx(graph, node, inputs, known);
    ctx.set_implicit_inputs(std::move(implicit), options);
    std::vector<te::Tensor> results;
    try {
      results = def->build(ctx);
    } catch (const UserError& e) {
      if (!options.keep_going) throw;
      out.node_errors[n] = e.what();
      continue;
    }
    for (const auto& [tensor, data] : ctx.constants()) {
      out.placeholders.push_back(tensor);
      out.data.push_back(data);
      if (tracks_known(data, options)) {
        auto& slot = constant_known.emplace_back(known_from_host(data));
        known_by_tensor[tensor.node().get()] = &slot;
      }
    }
    for (size_t k = 0; k < node.outputs.size(); ++k) {
      const int v = node.outputs[k];
      if (v < 0) continue;
      if (k >= results.size() || !results[k].defined()) {
        user_error("{}: output {} ('{}') is not produced by kiln's definition of {}", node.describe(), k,
                   graph.values[v].name, node.op_type);
      }
      out.tensors[v] = results[k];
      if (const auto* given = ctx.known_output(static_cast<int>(k))) {  // from a subgraph
        out.known[v] = *given;
        known_by_tensor[results[k].node().get()] = &*out.known[v];
      } else if (auto it = known_by_tensor.find(results[k].node().get());
                 it != known_by_tensor.end()) {
        out.known[v] = *it->second;  // a Constant, or an input passed through
      } else if (auto values =
                     evaluate_known(results[k], known_by_tensor, options.max_known_elements)) {
        out.known[v] = std::move(values);
        known_by_tensor[results[k].node().get()] = &*out.known[v];
      }
    }
  }
  return out;
}

}  // namespace

void infer_types(Graph& graph, const BuildOptions& options) {
  GraphTensors tensors = build_graph_tensors(graph, options);
  for (const Node& node : graph.nodes) {
    for (int v : node.outputs) {
      if (v < 0 || !tensors.tensors[v].defined()) continue;
      const te::Tensor& t = tensors.tensors[v];
      std::vector<Expr> shape;
      for (const Expr& d : t.shape()) shape.push_back(simplify(d));
      graph.values[v].type = TensorType{t.dtype(), shape};
    }
  }
}

}  // namespace kiln::ops
