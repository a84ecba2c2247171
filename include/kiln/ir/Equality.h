#pragma once
// Structural equality and hashing of expressions: two expressions are equal when they have the
// same node kinds, types, constants and the same variables (by identity) in the same places.
#include <cstddef>

#include "kiln/ir/Expr.h"

namespace kiln::ir {

bool structurally_equal(const Expr& a, const Expr& b);
size_t structural_hash(const Expr& e);

}  // namespace kiln::ir
