#pragma once
// Which variables an expression reads: the questions passes ask before moving code across loops.
#include <set>

#include "kiln/ir/Expr.h"

namespace kiln::ir {

// The Variables `e` reads (by identity); empty for an undefined expression.
std::set<const ExprNode*> variables_in(const Expr& e);

// Whether `e` reads the Variable `var`; false when either is undefined.
bool expr_uses_var(const Expr& e, const Expr& var);

}  // namespace kiln::ir
