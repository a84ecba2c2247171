#include "kiln/ops/Op.h"

#include <algorithm>

#include "kiln/ir/IROperator.h"
#include "kiln/ir/IRPrinter.h"

namespace kiln::ops {

OpContext::OpContext(const Graph& graph, const Node& node, std::vector<te::Tensor> inputs,
                     std::vector<std::optional<std::vector<ir::Expr>>> known_values)
    : graph_(graph), node_(node), inputs_(std::move(inputs)), known_(std::move(known_values)) {
  known_.resize(inputs_.size());
}

const te::Tensor& OpContext::input(int i) const {
  if (!has_input(i)) fail("input {} is required but missing", i);
  return inputs_[i];
}

const std::vector<ir::Expr>& OpContext::known_values(int i, const char* what) const {
  if (!has_input(i)) fail("input {} ('{}') is required but missing", i, what);
  if (!known_[i]) {
    const int v = node_.inputs[i];
    fail("input {} ('{}', value '{}') must be known when compiling (an initializer, a Constant, or "
         "computed from shapes); kiln specializes kernels on it",
         i, what, graph_.values[v].name);
  }
  return *known_[i];
}

std::optional<ir::Expr> OpContext::known_scalar(const te::Tensor& input) const {
  for (int i = 0; i < num_inputs(); ++i) {
    if (!inputs_[i].defined() || !inputs_[i].same_as(input) || !known_[i] || known_[i]->size() != 1) continue;
    const ir::Expr& value = known_[i]->front();
    if (!ir::as_const_float(value) && !ir::as_const_int(value)) return std::nullopt;
    const int v = node_.inputs[i];
    if (std::find(graph_.inputs.begin(), graph_.inputs.end(), v) != graph_.inputs.end()) return std::nullopt;
    return value;
  }
  return std::nullopt;
}

std::vector<int64_t> OpContext::constant_ints(int i, const char* what) const {
  std::vector<int64_t> out;
  for (const ir::Expr& e : known_values(i, what)) {
    auto c = ir::as_const_int(e);
    if (!c) {
      if (auto f = ir::as_const_float(e)) {
        out.push_back(static_cast<int64_t>(*f));
        continue;
      }
      fail("input {} ('{}') must be a constant, but element {} is the symbolic value {}", i, what,
           out.size(), ir::to_string(e));
    }
    out.push_back(*c);
  }
  return out;
}

std::vector<double> OpContext::constant_floats(int i, const char* what) const {
  std::vector<double> out;
  for (const ir::Expr& e : known_values(i, what)) {
    if (auto f = ir::as_const_float(e)) out.push_back(*f);
    else if (auto c = ir::as_const_int(e)) out.push_back(static_cast<double>(*c));
    else fail("input {} ('{}') must be a constant, element {} is {}", i, what, out.size(), ir::to_string(e));
  }
  return out;
}

te::Tensor OpContext::constant_tensor(int output, HostTensor data) {
  std::vector<ir::Expr> shape;
  for (int64_t d : data.shape()) shape.push_back(ir::Expr(d));
  te::Tensor t = te::placeholder(output_name(output), data.dtype(), shape);
  constants_.emplace_back(t, std::move(data));
  return t;
}

std::vector<BoundValue> OpContext::build_subgraph(const Graph& sub,
                                                  const std::vector<BoundValue>& inputs) {
  std::vector<BoundValue> captures;
  for (const auto& [inner, outer] : sub.captures) {
    (void)inner;
    auto it = std::find(node_.implicit_inputs.begin(), node_.implicit_inputs.end(), outer);
    KILN_ASSERT(
        it != node_.implicit_inputs.end() && implicit_.size() == node_.implicit_inputs.size(),
        "{}: subgraph capture '{}' is not an implicit input", node_.describe(),
        graph_.values[outer].name);
    captures.push_back(implicit_[static_cast<size_t>(it - node_.implicit_inputs.begin())]);
  }
  SubgraphTensors built =
      build_subgraph_tensors(sub, inputs, captures, options_ ? *options_ : BuildOptions());
  for (auto& [tensor, data] : built.constants) add_constant(tensor, std::move(data));
  return std::move(built.outputs);
}

void OpContext::set_known_output(int k, std::optional<std::vector<ir::Expr>> values) {
  if (known_outputs_.size() <= static_cast<size_t>(k))
    known_outputs_.resize(static_cast<size_t>(k) + 1);
  known_outputs_[static_cast<size_t>(k)] = std::move(values);
}

const std::vector<ir::Expr>* OpContext::known_output(int k) const {
  if (static_cast<size_t>(k) >= known_outputs_.size() || !known_outputs_[static_cast<size_t>(k)])
    return nullptr;
  return &*known_outputs_[static_cast<size_t>(k)];
}

std::string OpContext::output_name(int i) const {
  if (i < static_cast<int>(node_.outputs.size()) && node_.outputs[i] >= 0) {
    return graph_.values[node_.outputs[i]].name;
  }
  return node_.name + "_out" + std::to_string(i);
}

std::string OpContext::stage_name(const std::string& suffix) const { return node_.name + "_" + suffix; }

void OpTable::add(OpKind kind, OpBuilder build) {
  const size_t i = static_cast<size_t>(kind);
  if (table_.size() <= i) table_.resize(i + 1);
  KILN_ASSERT(!table_[i].has_value(), "op {} defined twice", op_kind_name(kind));
  table_[i] = OpDefinition{kind, build};
}

const OpDefinition* OpTable::find(OpKind kind) const {
  const size_t i = static_cast<size_t>(kind);
  return i < table_.size() && table_[i] ? &*table_[i] : nullptr;
}

}  // namespace kiln::ops
