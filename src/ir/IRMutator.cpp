#include "kiln/ir/IRMutator.h"

#include <unordered_map>

#include "kiln/te/Tensor.h"

namespace kiln::ir {

Expr IRMutator::mutate(const Expr& e) {
  if (!e.defined()) return e;
  switch (e.kind()) {
#define KILN_EXPR_NODE(name)                              \
  case NodeKind::name:                                    \
    return visit(static_cast<const name*>(e.get()), e);
#include "kiln/ir/Nodes.def"
    default:
      return e;
  }
}

Stmt IRMutator::mutate(const Stmt& s) {
  if (!s.defined()) return s;
  switch (s.kind()) {
#define KILN_STMT_NODE(name)                              \
  case NodeKind::name:                                    \
    return visit(static_cast<const name*>(s.get()), s);
#include "kiln/ir/Nodes.def"
    default:
      return s;
  }
}

Expr IRMutator::visit(const IntImm*, const Expr& self) { return self; }
Expr IRMutator::visit(const FloatImm*, const Expr& self) { return self; }
Expr IRMutator::visit(const Variable*, const Expr& self) { return self; }
Expr IRMutator::visit(const Cast* op, const Expr& self) {
  Expr v = mutate(op->value);
  return v.same_as(op->value) ? self : Cast::make(op->type, v);
}
#define KILN_BINARY_MUTATE(name)                                   \
  Expr IRMutator::visit(const name* op, const Expr& self) {        \
    Expr a = mutate(op->a), b = mutate(op->b);                     \
    if (a.same_as(op->a) && b.same_as(op->b)) return self;         \
    return name::make(a, b);                                       \
  }
KILN_BINARY_MUTATE(Add)
KILN_BINARY_MUTATE(Sub)
KILN_BINARY_MUTATE(Mul)
KILN_BINARY_MUTATE(Div)
KILN_BINARY_MUTATE(Mod)
KILN_BINARY_MUTATE(Min)
KILN_BINARY_MUTATE(Max)
KILN_BINARY_MUTATE(EQ)
KILN_BINARY_MUTATE(NE)
KILN_BINARY_MUTATE(LT)
KILN_BINARY_MUTATE(LE)
KILN_BINARY_MUTATE(GT)
KILN_BINARY_MUTATE(GE)
KILN_BINARY_MUTATE(And)
KILN_BINARY_MUTATE(Or)
#undef KILN_BINARY_MUTATE
Expr IRMutator::visit(const Not* op, const Expr& self) {
  Expr a = mutate(op->a);
  return a.same_as(op->a) ? self : Not::make(a);
}
Expr IRMutator::visit(const Select* op, const Expr& self) {
  Expr c = mutate(op->condition), t = mutate(op->true_value), f = mutate(op->false_value);
  if (c.same_as(op->condition) && t.same_as(op->true_value) && f.same_as(op->false_value)) return self;
  return Select::make(c, t, f);
}
Expr IRMutator::visit(const Call* op, const Expr& self) {
  std::vector<Expr> args;
  bool changed = false;
  for (const Expr& a : op->args) {
    args.push_back(mutate(a));
    changed = changed || !args.back().same_as(a);
  }
  return changed ? Call::make(op->type, op->op, std::move(args)) : self;
}
Expr IRMutator::visit(const Load* op, const Expr& self) {
  Expr i = mutate(op->index);
  return i.same_as(op->index) ? self : Load::make(op->buffer, i);
}
Expr IRMutator::visit(const Ramp* op, const Expr& self) {
  Expr b = mutate(op->base), s = mutate(op->stride);
  if (b.same_as(op->base) && s.same_as(op->stride)) return self;
  return Ramp::make(b, s, op->lanes);
}
Expr IRMutator::visit(const Broadcast* op, const Expr& self) {
  Expr v = mutate(op->value);
  return v.same_as(op->value) ? self : Broadcast::make(v, op->lanes);
}
Expr IRMutator::visit(const Let* op, const Expr& self) {
  Expr v = mutate(op->value), b = mutate(op->body);
  if (v.same_as(op->value) && b.same_as(op->body)) return self;
  return Let::make(op->var, v, b);
}
Expr IRMutator::visit(const TensorRead* op, const Expr& self) {
  std::vector<Expr> indices;
  bool changed = false;
  for (const Expr& i : op->indices) {
    indices.push_back(mutate(i));
    changed = changed || !indices.back().same_as(i);
  }
  return changed ? TensorRead::make(op->tensor, std::move(indices)) : self;
}
Expr IRMutator::visit(const Reduce* op, const Expr& self) {
  Expr s = mutate(op->source), c = mutate(op->condition);
  if (s.same_as(op->source) && c.same_as(op->condition)) return self;
  return Reduce::make(op->reduce_kind, s, op->axes, c);
}
Stmt IRMutator::visit(const For* op, const Stmt& self) {
  Expr mn = mutate(op->min), ext = mutate(op->extent);
  Stmt body = mutate(op->body);
  if (mn.same_as(op->min) && ext.same_as(op->extent) && body.same_as(op->body)) return self;
  return For::make(op->var, mn, ext, op->for_kind, body);
}
Stmt IRMutator::visit(const Store* op, const Stmt& self) {
  Expr v = mutate(op->value), i = mutate(op->index);
  if (v.same_as(op->value) && i.same_as(op->index)) return self;
  return Store::make(op->buffer, v, i);
}
Stmt IRMutator::visit(const Seq* op, const Stmt& self) {
  std::vector<Stmt> stmts;
  bool changed = false;
  for (const Stmt& s : op->stmts) {
    stmts.push_back(mutate(s));
    changed = changed || !stmts.back().same_as(s);
  }
  return changed ? Seq::make(std::move(stmts)) : self;
}
Stmt IRMutator::visit(const LetStmt* op, const Stmt& self) {
  Expr v = mutate(op->value);
  Stmt b = mutate(op->body);
  if (v.same_as(op->value) && b.same_as(op->body)) return self;
  return LetStmt::make(op->var, v, b);
}
Stmt IRMutator::visit(const IfThenElse* op, const Stmt& self) {
  Expr c = mutate(op->condition);
  Stmt t = mutate(op->then_case), e = mutate(op->else_case);
  if (c.same_as(op->condition) && t.same_as(op->then_case) && e.same_as(op->else_case)) return self;
  return IfThenElse::make(c, t, e);
}
Stmt IRMutator::visit(const Allocate* op, const Stmt& self) {
  Stmt b = mutate(op->body);
  return b.same_as(op->body) ? self : Allocate::make(op->buffer, b);
}
Stmt IRMutator::visit(const Evaluate* op, const Stmt& self) {
  Expr v = mutate(op->value);
  return v.same_as(op->value) ? self : Evaluate::make(v);
}
ContractionOperand IRMutator::mutate_operand(const ContractionOperand& x, bool& changed) {
  auto expr = [&](const Expr& e) {
    Expr r = mutate(e);
    changed = changed || !r.same_as(e);
    return r;
  };
  ContractionOperand r{x.buffer, expr(x.offset), expr(x.stride_mn), expr(x.stride_k), {}, std::nullopt};
  for (const Expr& e : x.batch_strides) r.batch_strides.push_back(expr(e));
  if (x.window) {
    r.window = *x.window;
    for (Expr ConvWindow::*e : {&ConvWindow::channels, &ConvWindow::height, &ConvWindow::width, &ConvWindow::out_height,
                                &ConvWindow::out_width}) {
      (*r.window).*e = expr((*x.window).*e);
    }
  }
  return r;
}

Stmt IRMutator::visit(const TemplateContraction* op, const Stmt& self) {
  bool changed = false;
  auto expr = [&](const Expr& e) {
    Expr r = mutate(e);
    changed = changed || !r.same_as(e);
    return r;
  };
  auto operand = [&](const ContractionOperand& x) { return mutate_operand(x, changed); };
  std::vector<Expr> extents;
  for (const Expr& e : op->batch_extents) extents.push_back(expr(e));
  Expr m = expr(op->m), n = expr(op->n), k = expr(op->k);
  ContractionOperand a = operand(op->a);
  std::vector<ContractionOperand> b;
  for (const ContractionOperand& x : op->b) b.push_back(operand(x));
  Stmt epilogue = mutate(op->epilogue), reference = mutate(op->reference);
  changed = changed || !epilogue.same_as(op->epilogue) || !reference.same_as(op->reference);
  if (!changed) return self;
  return op->with(std::move(extents), m, n, k, std::move(a), std::move(b), epilogue, reference);
}

Stmt IRMutator::visit(const TemplateAttention* op, const Stmt& self) {
  bool changed = false;
  auto expr = [&](const Expr& e) {
    Expr r = mutate(e);
    changed = changed || !r.same_as(e);
    return r;
  };
  auto operand = [&](const ContractionOperand& x) { return mutate_operand(x, changed); };
  std::vector<Expr> extents;
  for (const Expr& e : op->batch_extents) extents.push_back(expr(e));
  Expr seq_q = expr(op->seq_q), seq_k = expr(op->seq_k);
  ContractionOperand q = operand(op->q), k = operand(op->k), v = operand(op->v);
  std::optional<ContractionOperand> mask;
  if (op->mask) mask = operand(*op->mask);
  Expr scale_expr = op->scale_expr.defined() ? expr(op->scale_expr) : Expr();
  Stmt epilogue = mutate(op->epilogue), reference = mutate(op->reference);
  changed = changed || !epilogue.same_as(op->epilogue) || !reference.same_as(op->reference);
  if (!changed) return self;
  return op->with(std::move(extents), seq_q, seq_k, std::move(q), std::move(k), std::move(v), std::move(mask), scale_expr,
                  epilogue, reference);
}

namespace {

class Substitute : public IRMutator {
 public:
  explicit Substitute(const std::vector<std::pair<Expr, Expr>>& map) {
    for (const auto& [from, to] : map) map_[from.get()] = to;
  }
  using IRMutator::mutate;

 protected:
  Expr visit(const Variable* op, const Expr& self) override {
    auto it = map_.find(op);
    return it == map_.end() ? self : it->second;
  }

 private:
  std::unordered_map<const ExprNode*, Expr> map_;
};

}  // namespace

Expr substitute(const Expr& e, const std::vector<std::pair<Expr, Expr>>& map) {
  if (map.empty()) return e;
  return Substitute(map).mutate(e);
}

Stmt substitute(const Stmt& s, const std::vector<std::pair<Expr, Expr>>& map) {
  if (map.empty()) return s;
  return Substitute(map).mutate(s);
}

}  // namespace kiln::ir
