#include "ReciprocalDivisors.h"

#include <set>

#include "kiln/ir/Equality.h"
#include "kiln/ir/IRMutator.h"
#include "kiln/ir/IROperator.h"
#include "kiln/ir/IRVisitor.h"

namespace kiln {
namespace {

using namespace ir;

// Variables bound inside a statement (loop variables, lets).
class BoundVars : public IRVisitor {
 public:
  std::set<const ExprNode*> vars;
  using IRVisitor::visit;

 protected:
  void visit(const For* op) override {
    vars.insert(op->var.get());
    IRVisitor::visit(op);
  }
  void visit(const LetStmt* op) override {
    vars.insert(op->var.get());
    IRVisitor::visit(op);
  }
  void visit(const Let* op) override {
    vars.insert(op->var.get());
    IRVisitor::visit(op);
  }
};

class UsesAny : public IRVisitor {
 public:
  explicit UsesAny(const std::set<const ExprNode*>& vars) : vars_(vars) {}
  bool found = false;
  bool loads = false;
  using IRVisitor::visit;

 protected:
  void visit(const Variable* op) override { found = found || vars_.count(op); }
  void visit(const Load* op) override {
    loads = true;
    IRVisitor::visit(op);
  }

 private:
  const std::set<const ExprNode*>& vars_;
};

// Replaces invariant divisors inside one loop body, outside conditions.
class ReplaceDivisors : public IRMutator {
 public:
  explicit ReplaceDivisors(const std::set<const ExprNode*>& bound) : bound_(bound) {}
  std::vector<std::pair<Expr, Expr>> hoisted;  // (reciprocal variable, divisor)
  using IRMutator::mutate;

 protected:
  Expr visit(const Div* op, const Expr& self) override {
    Expr a = mutate(op->a);
    if (!op->b.type().is_float() || op->b.type().dtype == DType::Float16 || op->b.type().dtype == DType::BFloat16 ||
        as_const_float(op->a) || as_const_float(op->b)) {
      return a.same_as(op->a) ? self : Div::make(a, op->b);
    }
    UsesAny uses(bound_);
    uses.visit(op->b);
    if (uses.found || !uses.loads) return a.same_as(op->a) ? self : Div::make(a, op->b);
    for (const auto& [r, divisor] : hoisted) {
      if (structurally_equal(divisor, op->b)) return Mul::make(a, r);
    }
    Expr r = var("inv", op->b.type());
    hoisted.emplace_back(r, op->b);
    return Mul::make(a, r);
  }
  Expr visit(const Select* op, const Expr& self) override { return self; }
  Stmt visit(const IfThenElse* op, const Stmt& self) override { return self; }

 private:
  const std::set<const ExprNode*>& bound_;
};

class Rewrite : public IRMutator {
 public:
  using IRMutator::mutate;

 protected:
  Stmt visit(const For* op, const Stmt& self) override {
    Stmt s = IRMutator::visit(op, self);
    const For* f = s.as<For>();
    auto extent = as_const_int(f->extent);
    if (!extent || *extent < 1 || is_gpu_block(f->for_kind)) return s;
    BoundVars bound;
    bound.visit(s);
    ReplaceDivisors replace(bound.vars);
    Stmt body = replace.mutate(f->body);
    if (replace.hoisted.empty()) return s;
    Stmt out = For::make(f->var, f->min, f->extent, f->for_kind, body);
    for (auto it = replace.hoisted.rbegin(); it != replace.hoisted.rend(); ++it) {
      out = LetStmt::make(it->first, make_one(it->second.type()) / it->second, out);
    }
    return out;
  }
};

}  // namespace

Stmt reciprocal_divisors(const Stmt& s) { return Rewrite().mutate(s); }

}  // namespace kiln
