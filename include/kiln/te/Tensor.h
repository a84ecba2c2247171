#pragma once
// Tensor expressions: how every operator is defined (ops/). A tensor is either a placeholder
// (an input of the function being built) or a compute definition: its element at index vector
// i is `body` with the axis variables bound to i. A body may be a single Reduce. Tensors are
// immutable and form a DAG through the TensorRead nodes in their bodies.
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/ir/IR.h"

namespace kiln::te {

// How a compute definition reads its inputs; fusion and default schedules key off it.
enum class Pattern : uint8_t {
  Placeholder,
  Injective,  // each output element reads a bounded number of input elements
  Reduction,  // the body is a Reduce
};
const char* pattern_name(Pattern pattern);

struct QuantLinearInfo;

struct TensorNode {
  std::string name;
  DType dtype;
  std::vector<ir::Expr> shape;
  std::vector<ir::IterVar> axes;  // one per output dimension; empty for placeholders
  ir::Expr body;                  // undefined for placeholders
  Pattern pattern;
  std::string origin;             // the model node it implements, for comments and errors
  // Set on a kiln.QuantLinear's accumulator (ops/QuantLinear.cpp): what its body decodes, so that
  // lowering can give the contraction to the 4-bit kernels (kernels/quant/). Kept by inlining.
  std::shared_ptr<const QuantLinearInfo> quant_linear;
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<const TensorNode> node) : node_(std::move(node)) {}

  bool defined() const { return node_ != nullptr; }
  const TensorNode* operator->() const { return node_.get(); }
  const std::shared_ptr<const TensorNode>& node() const { return node_; }
  bool same_as(const Tensor& other) const { return node_ == other.node_; }

  const std::string& name() const { return node_->name; }
  DType dtype() const { return node_->dtype; }
  int ndim() const { return static_cast<int>(node_->shape.size()); }
  const std::vector<ir::Expr>& shape() const { return node_->shape; }
  const ir::Expr& shape(int i) const { return node_->shape.at(i); }
  bool is_placeholder() const { return node_->pattern == Pattern::Placeholder; }

  // Reads one element; indices are kIndexType expressions, one per dimension.
  ir::Expr operator()(std::vector<ir::Expr> indices) const;

 private:
  std::shared_ptr<const TensorNode> node_;
};

// A kiln.QuantLinear accumulator acc[..., n] = sum_k x[..., k] * dequant(weight)[n, k]: the
// weight's format and block size, and the tensors the body reads (in the node's stored layout,
// include/kiln/quant/QuantizedWeight.h). `extra` is the NVFP4 tensor scale or the INT4 zeros.
enum class QuantLinearFormat : uint8_t { NvFp4, MxFp4, Int4 };
struct QuantLinearInfo {
  QuantLinearFormat format = QuantLinearFormat::NvFp4;
  int64_t group = 16;
  Tensor x, weight, scales, extra;
};

// `t` (a compute definition) marked as a QuantLinear accumulator.
Tensor with_quant_linear(const Tensor& t, QuantLinearInfo info);

Tensor placeholder(std::string name, DType dtype, std::vector<ir::Expr> shape);

using ComputeFn = std::function<ir::Expr(const std::vector<ir::Expr>& indices)>;

// A compute definition over `shape`. The pattern is Reduction when the body is a Reduce and
// Injective otherwise. `origin` names the model node for generated comments.
Tensor compute(std::string name, std::vector<ir::Expr> shape, const ComputeFn& fn,
               std::string origin = "");

// A reduction axis over [0, extent).
ir::IterVar reduce_axis(ir::Expr extent, std::string name);

ir::Expr sum(ir::Expr source, std::vector<ir::IterVar> axes, ir::Expr condition = ir::Expr());
ir::Expr prod(ir::Expr source, std::vector<ir::IterVar> axes, ir::Expr condition = ir::Expr());
ir::Expr max_reduce(ir::Expr source, std::vector<ir::IterVar> axes, ir::Expr condition = ir::Expr());
ir::Expr min_reduce(ir::Expr source, std::vector<ir::IterVar> axes, ir::Expr condition = ir::Expr());

// The number of elements of `t` where every dimension simplifies to a constant, else nullopt.
std::optional<int64_t> constant_num_elements(const Tensor& t);

// The tensors `t`'s body reads directly, in first-use order, without duplicates.
std::vector<Tensor> direct_inputs(const Tensor& t);

// Every tensor reachable from `outputs`, producers before consumers. Tensors in `stop_at` are
// boundaries: neither listed nor followed to their own inputs.
std::vector<Tensor> topological_order(const std::vector<Tensor>& outputs,
                                      const std::vector<Tensor>& stop_at = {});

// Replaces reads of each compute tensor in `inline_these` with its body (injective only).
Tensor inline_tensors(const Tensor& t, const std::vector<Tensor>& inline_these);

}  // namespace kiln::te
