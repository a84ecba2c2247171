#include "kiln/te/Tensor.h"

#include <unordered_map>
#include <unordered_set>

#include "kiln/ir/IRMutator.h"
#include "kiln/ir/Simplify.h"
#include "kiln/ir/IROperator.h"
#include "kiln/ir/IRVisitor.h"
#include "kiln/support/Error.h"

namespace kiln::te {

using namespace ir;

const char* pattern_name(Pattern pattern) {
  switch (pattern) {
    case Pattern::Placeholder: return "placeholder";
    case Pattern::Injective: return "injective";
    case Pattern::Reduction: return "reduction";
  }
  return "?";
}

Expr Tensor::operator()(std::vector<Expr> indices) const {
  return TensorRead::make(node_, std::move(indices));
}

Tensor placeholder(std::string name, DType dtype, std::vector<Expr> shape) {
  for (const Expr& d : shape) KILN_ASSERT(d.defined() && d.type() == kIndexType, "placeholder {} dim", name);
  return Tensor(std::make_shared<const TensorNode>(
      TensorNode{std::move(name), dtype, std::move(shape), {}, Expr(), Pattern::Placeholder, "", nullptr}));
}

Tensor compute(std::string name, std::vector<Expr> shape, const ComputeFn& fn, std::string origin) {
  std::vector<IterVar> axes;
  std::vector<Expr> indices;
  for (size_t i = 0; i < shape.size(); ++i) {
    KILN_ASSERT(shape[i].defined() && shape[i].type() == kIndexType, "compute {} dim {}", name, i);
    Expr v = var(name + "_i" + std::to_string(i));
    axes.push_back(IterVar{v, shape[i]});
    indices.push_back(v);
  }
  Expr body = fn(indices);
  KILN_ASSERT(body.defined() && body.type().is_scalar(), "compute {} has no scalar body", name);
  const Pattern pattern = body.as<Reduce>() ? Pattern::Reduction : Pattern::Injective;
  const DType dtype = body.type().dtype;
  return Tensor(std::make_shared<const TensorNode>(TensorNode{
      std::move(name), dtype, std::move(shape), std::move(axes), std::move(body), pattern, std::move(origin), nullptr}));
}

Tensor with_quant_linear(const Tensor& t, QuantLinearInfo info) {
  KILN_ASSERT(!t.is_placeholder(), "with_quant_linear on placeholder {}", t.name());
  TensorNode node = *t.operator->();
  node.quant_linear = std::make_shared<const QuantLinearInfo>(std::move(info));
  return Tensor(std::make_shared<const TensorNode>(std::move(node)));
}

IterVar reduce_axis(Expr extent, std::string name) { return IterVar{var(std::move(name)), std::move(extent)}; }

Expr sum(Expr source, std::vector<IterVar> axes, Expr condition) {
  return Reduce::make(ReduceKind::Sum, std::move(source), std::move(axes), std::move(condition));
}
Expr prod(Expr source, std::vector<IterVar> axes, Expr condition) {
  return Reduce::make(ReduceKind::Prod, std::move(source), std::move(axes), std::move(condition));
}
Expr max_reduce(Expr source, std::vector<IterVar> axes, Expr condition) {
  return Reduce::make(ReduceKind::Max, std::move(source), std::move(axes), std::move(condition));
}
Expr min_reduce(Expr source, std::vector<IterVar> axes, Expr condition) {
  return Reduce::make(ReduceKind::Min, std::move(source), std::move(axes), std::move(condition));
}

namespace {

class CollectReads : public IRVisitor {
 public:
  std::vector<Tensor> tensors;
  using IRVisitor::visit;

 protected:
  void visit(const TensorRead* op) override {
    if (seen_.insert(op->tensor.get()).second) tensors.emplace_back(op->tensor);
    IRVisitor::visit(op);
  }

 private:
  std::unordered_set<const TensorNode*> seen_;
};

}  // namespace

std::optional<int64_t> constant_num_elements(const Tensor& t) {
  int64_t n = 1;
  for (const ir::Expr& d : t.shape()) {
    const std::optional<int64_t> e = ir::as_const_int(ir::simplify(d));
    if (!e) return std::nullopt;
    n *= *e;
  }
  return n;
}

std::vector<Tensor> direct_inputs(const Tensor& t) {
  if (t.is_placeholder()) return {};
  CollectReads reads;
  reads.visit(t->body);
  return reads.tensors;
}

std::vector<Tensor> topological_order(const std::vector<Tensor>& outputs, const std::vector<Tensor>& stop_at) {
  std::vector<Tensor> order;
  std::unordered_set<const TensorNode*> done;
  for (const Tensor& t : stop_at) done.insert(t.node().get());
  // Iterative post-order: deep graphs (hundreds of layers) must not overflow the stack.
  std::vector<std::pair<Tensor, bool>> stack;
  for (auto it = outputs.rbegin(); it != outputs.rend(); ++it) stack.emplace_back(*it, false);
  while (!stack.empty()) {
    auto [t, expanded] = stack.back();
    stack.pop_back();
    if (done.count(t.node().get())) continue;
    if (expanded) {
      done.insert(t.node().get());
      order.push_back(t);
      continue;
    }
    stack.emplace_back(t, true);
    std::vector<Tensor> inputs = direct_inputs(t);
    for (auto it = inputs.rbegin(); it != inputs.rend(); ++it) {
      if (!done.count(it->node().get())) stack.emplace_back(*it, false);
    }
  }
  return order;
}

namespace {

class InlineReads : public IRMutator {
 public:
  explicit InlineReads(const std::vector<Tensor>& tensors) {
    for (const Tensor& t : tensors) {
      KILN_ASSERT(t->pattern == Pattern::Injective, "only injective tensors inline, not {}", t.name());
      targets_[t.node().get()] = t;
    }
  }
  using IRMutator::mutate;

 protected:
  Expr visit(const TensorRead* op, const Expr& self) override {
    Expr read = IRMutator::visit(op, self);
    const TensorRead* r = read.as<TensorRead>();
    auto it = targets_.find(r->tensor.get());
    if (it == targets_.end()) return read;
    const Tensor& t = it->second;
    std::vector<std::pair<Expr, Expr>> map;
    for (size_t i = 0; i < t->axes.size(); ++i) map.emplace_back(t->axes[i].var, r->indices[i]);
    // The inlined body may itself read tensors that are inlined too.
    return mutate(substitute(t->body, map));
  }

 private:
  std::unordered_map<const TensorNode*, Tensor> targets_;
};

}  // namespace

Tensor inline_tensors(const Tensor& t, const std::vector<Tensor>& inline_these) {
  if (t.is_placeholder() || inline_these.empty()) return t;
  Expr body = InlineReads(inline_these).mutate(t->body);
  if (body.same_as(t->body)) return t;
  TensorNode node = *t.operator->();
  node.body = body;
  return Tensor(std::make_shared<const TensorNode>(std::move(node)));
}

}  // namespace kiln::te
