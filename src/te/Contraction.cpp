#include "kiln/te/Contraction.h"

#include <set>

#include "kiln/ir/ExprUsesVar.h"

namespace kiln::te {

using namespace ir;

std::optional<Contraction> as_contraction(const Tensor& t) {
  if (t.is_placeholder() || t.ndim() < 1) return std::nullopt;
  const Reduce* red = t->body.as<Reduce>();
  if (!red || red->reduce_kind != ReduceKind::Sum) return std::nullopt;
  const Mul* mul = red->source.as<Mul>();
  if (!mul || mul->type.lanes != 1) return std::nullopt;
  Contraction c;
  c.a = mul->a;
  c.b = mul->b;
  std::set<const ExprNode*> in_a = variables_in(c.a), in_b = variables_in(c.b);
  const int last = t.ndim() - 1;
  if (in_a.count(t->axes[last].var.get()) && !in_b.count(t->axes[last].var.get())) {
    std::swap(c.a, c.b);
    std::swap(in_a, in_b);
  }
  for (int d = 0; d < t.ndim(); ++d) {
    const ExprNode* v = t->axes[d].var.get();
    const bool a = in_a.count(v) > 0, b = in_b.count(v) > 0;
    (a && !b ? c.m_axes : !a && b ? c.n_axes : c.batch_axes).push_back(d);
  }
  if (c.m_axes.empty() || c.n_axes.empty() || c.n_axes.back() != last) return std::nullopt;
  const std::set<const ExprNode*> in_condition = variables_in(red->condition);
  bool reads_m = false, reads_n = false;
  for (int d : c.m_axes) reads_m = reads_m || in_condition.count(t->axes[d].var.get());
  for (int d : c.n_axes) reads_n = reads_n || in_condition.count(t->axes[d].var.get());
  if (reads_m && reads_n) return std::nullopt;
  c.condition_on_a = !reads_n;
  return c;
}

}  // namespace kiln::te
