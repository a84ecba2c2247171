#pragma once
// Building expressions: operators, constants, casts and math. Operands of different types are
// reconciled here, so node factories can insist on equal types: a constant operand takes the
// other operand's type; otherwise the types must already match.
#include <optional>

#include "kiln/ir/IR.h"

namespace kiln::ir {

Expr make_const(Type t, double value);  // IntImm for integral/bool types, FloatImm for floats
Expr make_zero(Type t);
Expr make_one(Type t);
Expr make_bool(bool value);
Expr cast(Type t, Expr value);  // no-op when the type already matches
Expr lowest_value(Type t);      // -inf for floats, the minimum for integers
Expr highest_value(Type t);     // +inf for floats, the maximum for integers

std::optional<int64_t> as_const_int(const Expr& e);
std::optional<double> as_const_float(const Expr& e);
bool is_const_int(const Expr& e, int64_t value);
bool is_zero(const Expr& e);
bool is_one(const Expr& e);

Expr operator+(Expr a, Expr b);
Expr operator-(Expr a, Expr b);
Expr operator*(Expr a, Expr b);
Expr operator/(Expr a, Expr b);  // Div: truncating for integers
Expr operator%(Expr a, Expr b);  // Mod: C remainder / fmod
Expr operator-(Expr a);
Expr operator==(Expr a, Expr b);
Expr operator!=(Expr a, Expr b);
Expr operator<(Expr a, Expr b);
Expr operator<=(Expr a, Expr b);
Expr operator>(Expr a, Expr b);
Expr operator>=(Expr a, Expr b);
Expr operator&&(Expr a, Expr b);
Expr operator||(Expr a, Expr b);
Expr operator!(Expr a);
Expr min(Expr a, Expr b);
Expr max(Expr a, Expr b);
Expr select(Expr condition, Expr true_value, Expr false_value);
Expr floor_div(Expr a, Expr b);  // integers: rounds toward -inf
Expr floor_mod(Expr a, Expr b);  // integers: result has the sign of b

Expr call(Intrinsic op, Expr a);
Expr call(Intrinsic op, Expr a, Expr b);

}  // namespace kiln::ir
