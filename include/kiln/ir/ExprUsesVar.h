#pragma once
// Which variables an expression or a statement reads: the questions passes ask before moving code
// across loops, and the printers before binding a loop index.
#include <set>

#include "kiln/ir/Expr.h"

namespace kiln::ir {

// The Variables `e` reads (by identity); empty for an undefined expression.
std::set<const ExprNode*> variables_in(const Expr& e);

// Whether `e` reads the Variable `var`; false when either is undefined.
bool expr_uses_var(const Expr& e, const Expr& var);

// Whether anything in `s` reads the Variable `var`; false when either is undefined.
bool stmt_uses_var(const Stmt& s, const Expr& var);

}  // namespace kiln::ir
