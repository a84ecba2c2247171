#include "kiln/ir/Equality.h"

#include <functional>

#include "kiln/ir/IR.h"
#include "kiln/te/Tensor.h"

namespace kiln::ir {
namespace {

template <typename T>
const T& node(const Expr& e) {
  return *static_cast<const T*>(e.get());
}

bool all_equal(const std::vector<Expr>& a, const std::vector<Expr>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!structurally_equal(a[i], b[i])) return false;
  }
  return true;
}

template <typename T>
bool binary_equal(const Expr& a, const Expr& b) {
  return structurally_equal(node<T>(a).a, node<T>(b).a) && structurally_equal(node<T>(a).b, node<T>(b).b);
}

void combine(size_t& seed, size_t v) { seed ^= v + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2); }

}  // namespace

bool structurally_equal(const Expr& a, const Expr& b) {
  if (a.same_as(b)) return true;
  if (!a.defined() || !b.defined()) return false;
  if (a.kind() != b.kind() || a.type() != b.type()) return false;
  switch (a.kind()) {
    case NodeKind::IntImm: return node<IntImm>(a).value == node<IntImm>(b).value;
    case NodeKind::FloatImm: return node<FloatImm>(a).value == node<FloatImm>(b).value;
    case NodeKind::Variable: return false;  // distinct variables (identity checked above)
    case NodeKind::Cast: return structurally_equal(node<Cast>(a).value, node<Cast>(b).value);
#define KILN_BINARY_EQUAL(name) \
  case NodeKind::name:          \
    return binary_equal<name>(a, b);
      KILN_BINARY_EQUAL(Add) KILN_BINARY_EQUAL(Sub) KILN_BINARY_EQUAL(Mul) KILN_BINARY_EQUAL(Div)
      KILN_BINARY_EQUAL(Mod) KILN_BINARY_EQUAL(Min) KILN_BINARY_EQUAL(Max) KILN_BINARY_EQUAL(EQ)
      KILN_BINARY_EQUAL(NE) KILN_BINARY_EQUAL(LT) KILN_BINARY_EQUAL(LE) KILN_BINARY_EQUAL(GT)
      KILN_BINARY_EQUAL(GE) KILN_BINARY_EQUAL(And) KILN_BINARY_EQUAL(Or)
#undef KILN_BINARY_EQUAL
    case NodeKind::Not: return structurally_equal(node<Not>(a).a, node<Not>(b).a);
    case NodeKind::Select: {
      const auto &x = node<Select>(a), &y = node<Select>(b);
      return structurally_equal(x.condition, y.condition) && structurally_equal(x.true_value, y.true_value) &&
             structurally_equal(x.false_value, y.false_value);
    }
    case NodeKind::Call: return node<Call>(a).op == node<Call>(b).op && all_equal(node<Call>(a).args, node<Call>(b).args);
    case NodeKind::Load:
      return node<Load>(a).buffer.same_as(node<Load>(b).buffer) &&
             structurally_equal(node<Load>(a).index, node<Load>(b).index);
    case NodeKind::Ramp: {
      const auto &x = node<Ramp>(a), &y = node<Ramp>(b);
      return x.lanes == y.lanes && structurally_equal(x.base, y.base) && structurally_equal(x.stride, y.stride);
    }
    case NodeKind::Broadcast:
      return node<Broadcast>(a).lanes == node<Broadcast>(b).lanes &&
             structurally_equal(node<Broadcast>(a).value, node<Broadcast>(b).value);
    case NodeKind::Let: {
      const auto &x = node<Let>(a), &y = node<Let>(b);
      return x.var.same_as(y.var) && structurally_equal(x.value, y.value) && structurally_equal(x.body, y.body);
    }
    case NodeKind::TensorRead:
      return node<TensorRead>(a).tensor == node<TensorRead>(b).tensor &&
             all_equal(node<TensorRead>(a).indices, node<TensorRead>(b).indices);
    case NodeKind::Reduce: {
      const auto &x = node<Reduce>(a), &y = node<Reduce>(b);
      if (x.reduce_kind != y.reduce_kind || x.axes.size() != y.axes.size()) return false;
      for (size_t i = 0; i < x.axes.size(); ++i) {
        if (!x.axes[i].var.same_as(y.axes[i].var)) return false;
      }
      return structurally_equal(x.source, y.source) && structurally_equal(x.condition, y.condition);
    }
    default: return false;
  }
}

size_t structural_hash(const Expr& e) {
  if (!e.defined()) return 0;
  size_t seed = static_cast<size_t>(e.kind()) * 31 + static_cast<size_t>(e.type().dtype);
  if (const IntImm* i = e.as<IntImm>()) combine(seed, std::hash<int64_t>()(i->value));
  else if (const FloatImm* f = e.as<FloatImm>()) combine(seed, std::hash<double>()(f->value));
  else if (e.as<Variable>()) combine(seed, std::hash<const void*>()(e.get()));
  else if (const Add* x = e.as<Add>()) { combine(seed, structural_hash(x->a)); combine(seed, structural_hash(x->b)); }
  else if (const Mul* m = e.as<Mul>()) { combine(seed, structural_hash(m->a)); combine(seed, structural_hash(m->b)); }
  else if (const Load* l = e.as<Load>()) { combine(seed, std::hash<const void*>()(l->buffer.get())); combine(seed, structural_hash(l->index)); }
  return seed;  // coarser for other kinds: equal expressions still hash equal
}

}  // namespace kiln::ir
