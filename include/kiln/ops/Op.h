#pragma once
// The operator library's contract. Each ONNX op is defined once, as a function that builds the
// op's output tensor expressions from its inputs' (OpBuilder). That one definition is the op's
// shape and type rule (the outputs' dtypes and shapes), its CPU code and its CUDA code (both
// generated from the expressions by lower/ and codegen/).
#include <fmt/format.h>

#include <optional>
#include <string>
#include <vector>

#include "kiln/graph/Graph.h"
#include "kiln/ops/GraphTensors.h"
#include "kiln/support/Error.h"
#include "kiln/te/Tensor.h"

namespace kiln::ops {

// What a definition sees: the node (attributes), its inputs as tensors, and the values of inputs
// that are known when compiling (initializers, Constant outputs, shape computations, and inputs
// the caller specialized on).
class OpContext {
 public:
  OpContext(const Graph& graph, const Node& node, std::vector<te::Tensor> inputs,
            std::vector<std::optional<std::vector<ir::Expr>>> known_values);

  const Node& node() const { return node_; }
  const Graph& graph() const { return graph_; }
  int64_t opset() const { return graph_.opset; }
  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  bool has_input(int i) const { return i < num_inputs() && inputs_[i].defined(); }
  // Input i; a UserError naming the node when a required input is missing.
  const te::Tensor& input(int i) const;

  // The values of input i when known at compile time, one expression per element (row-major):
  // constants, or expressions of the model's symbols (e.g. Shape of a [batch, 3] tensor).
  // UserError naming the node and the input when not known.
  const std::vector<ir::Expr>& known_values(int i, const char* what) const;
  bool is_known(int i) const { return i < num_inputs() && known_[i].has_value(); }
  // The same, required to be integer constants.
  std::vector<int64_t> constant_ints(int i, const char* what) const;
  std::vector<double> constant_floats(int i, const char* what) const;
  // The one value of an input that is a single known numeric constant (an initializer or a
  // Constant, not a graph input a caller may override), so that generated code can use it as a
  // literal (GELU's constants, Pow's exponent) instead of loading it; nullopt otherwise.
  std::optional<ir::Expr> known_scalar(const te::Tensor& input) const;

  // A UserError prefixed with the node: "node 'x' (Reshape): <message>".
  template <typename... Args>
  [[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) const {
    throw UserError(node_.describe() + ": " + fmt::format(format, std::forward<Args>(args)...));
  }

  // A tensor whose data is known now (Constant): a placeholder fed with `data` at run time, and
  // whose values are known to later nodes.
  te::Tensor constant_tensor(int output, HostTensor data);
  const std::vector<std::pair<te::Tensor, HostTensor>>& constants() const { return constants_; }
  // A placeholder with data made elsewhere (a subgraph's initializer or Constant).
  void add_constant(te::Tensor tensor, HostTensor data) {
    constants_.emplace_back(std::move(tensor), std::move(data));
  }

  // The values of the enclosing graph that the node's subgraphs capture (node.implicit_inputs,
  // in that order), and the build options, for building subgraphs.
  void set_implicit_inputs(std::vector<BoundValue> values, const BuildOptions& options) {
    implicit_ = std::move(values);
    options_ = &options;
  }
  // Builds subgraph `sub` of this node with its inputs bound to `inputs` and its captures to the
  // node's implicit inputs; its constants become this node's.
  std::vector<BoundValue> build_subgraph(const Graph& sub, const std::vector<BoundValue>& inputs);
  // Output k's values when the definition knows them (a subgraph's known outputs).
  void set_known_output(int k, std::optional<std::vector<ir::Expr>> values);
  const std::vector<ir::Expr>* known_output(int k) const;
  // Input i with its known values, to bind to a subgraph input.
  BoundValue bound_input(int i) const { return BoundValue{input(i), known_[i]}; }

  // An UnsupportedError prefixed with the node: valid input that kiln does not handle.
  template <typename... Args>
  [[noreturn]] void unsupported(fmt::format_string<Args...> format, Args&&... args) const {
    throw UnsupportedError(node_.describe() + ": " + fmt::format(format, std::forward<Args>(args)...));
  }

  // A name for output tensor i that says where it came from (the node's output value name).
  std::string output_name(int i) const;
  // Adds an intermediate stage (e.g. the row max of a softmax); names it after the node.
  std::string stage_name(const std::string& suffix) const;

 private:
  const Graph& graph_;
  const Node& node_;
  std::vector<te::Tensor> inputs_;
  std::vector<std::optional<std::vector<ir::Expr>>> known_;
  std::vector<std::pair<te::Tensor, HostTensor>> constants_;
  std::vector<BoundValue> implicit_;
  const BuildOptions* options_ = nullptr;
  std::vector<std::optional<std::vector<ir::Expr>>> known_outputs_;
};

// Builds one tensor per node output (undefined for an omitted optional output).
using OpBuilder = std::vector<te::Tensor> (*)(OpContext& ctx);

struct OpDefinition {
  OpKind kind;
  OpBuilder build;
};

// The definition of `kind`, or null when kiln cannot generate it.
const OpDefinition* find_op(OpKind kind);

// Each family of ops registers its definitions here (ops/OpRegistry.cpp calls every family).
class OpTable {
 public:
  void add(OpKind kind, OpBuilder build);
  const OpDefinition* find(OpKind kind) const;

 private:
  std::vector<std::optional<OpDefinition>> table_;
};

}  // namespace kiln::ops
