#include "kiln/ir/ExprUsesVar.h"

#include "kiln/ir/IRVisitor.h"

namespace kiln::ir {
namespace {

class CollectVariables : public IRVisitor {
 public:
  std::set<const ExprNode*> found;
  using IRVisitor::visit;

 protected:
  void visit(const Variable* op) override { found.insert(op); }
};

}  // namespace

std::set<const ExprNode*> variables_in(const Expr& e) {
  CollectVariables c;
  if (e.defined()) c.visit(e);
  return c.found;
}

bool expr_uses_var(const Expr& e, const Expr& var) {
  return var.defined() && variables_in(e).count(var.get()) > 0;
}

bool stmt_uses_var(const Stmt& s, const Expr& var) {
  if (!s.defined() || !var.defined()) return false;
  CollectVariables c;
  c.visit(s);
  return c.found.count(var.get()) > 0;
}

}  // namespace kiln::ir
