#include "kiln/ir/IROperator.h"

#include <cmath>
#include <limits>

#include "kiln/support/Error.h"

namespace kiln::ir {

Expr make_const(Type t, double value) {
  Expr scalar = t.is_float() ? FloatImm::make(t.element_of(), value)
                             : IntImm::make(t.element_of(), static_cast<int64_t>(value));
  return t.lanes > 1 ? Broadcast::make(scalar, t.lanes) : scalar;
}

static Expr make_int_const(Type t, int64_t value) {
  Expr scalar = t.is_float() ? FloatImm::make(t.element_of(), static_cast<double>(value))
                             : IntImm::make(t.element_of(), value);
  return t.lanes > 1 ? Broadcast::make(scalar, t.lanes) : scalar;
}

Expr make_zero(Type t) { return make_int_const(t, 0); }
Expr make_one(Type t) { return make_int_const(t, 1); }
Expr make_bool(bool value) { return IntImm::make(kBoolType, value ? 1 : 0); }

Expr cast(Type t, Expr value) {
  if (value.type() == t) return value;
  if (t.lanes != value.type().lanes && value.type().is_scalar()) {
    return Broadcast::make(cast(t.element_of(), std::move(value)), t.lanes);
  }
  if (auto i = as_const_int(value); i && t.is_scalar()) {
    if (t.is_float()) return FloatImm::make(t, static_cast<double>(*i));
    if (t.is_bool()) return make_bool(*i != 0);
    if (t.bits() == 64 || (t.is_int() && *i >= -(int64_t{1} << (t.bits() - 1)) &&
                           *i < (int64_t{1} << (t.bits() - 1))) ||
        (t.is_uint() && *i >= 0 && *i < (int64_t{1} << t.bits()))) {
      return IntImm::make(t, *i);
    }
  }
  if (auto f = as_const_float(value); f && t.is_float() && t.is_scalar()) return FloatImm::make(t, *f);
  return Cast::make(t, std::move(value));
}

Expr lowest_value(Type t) {
  if (t.is_float()) return make_const(t, -std::numeric_limits<double>::infinity());
  if (t.is_bool() || t.is_uint()) return make_int_const(t, 0);
  return make_int_const(t, t.bits() == 64 ? std::numeric_limits<int64_t>::min()
                                          : -(int64_t{1} << (t.bits() - 1)));
}

Expr highest_value(Type t) {
  if (t.is_float()) return make_const(t, std::numeric_limits<double>::infinity());
  if (t.is_bool()) return make_int_const(t, 1);
  if (t.is_uint()) return make_int_const(t, t.bits() == 64 ? -1 : (int64_t{1} << t.bits()) - 1);
  return make_int_const(t, t.bits() == 64 ? std::numeric_limits<int64_t>::max()
                                          : (int64_t{1} << (t.bits() - 1)) - 1);
}

std::optional<int64_t> as_const_int(const Expr& e) {
  if (!e.defined()) return std::nullopt;
  if (const IntImm* i = e.as<IntImm>()) return i->value;
  if (const Broadcast* b = e.as<Broadcast>()) return as_const_int(b->value);
  return std::nullopt;
}

std::optional<double> as_const_float(const Expr& e) {
  if (!e.defined()) return std::nullopt;
  if (const FloatImm* f = e.as<FloatImm>()) return f->value;
  if (const Broadcast* b = e.as<Broadcast>()) return as_const_float(b->value);
  return std::nullopt;
}

bool is_const_int(const Expr& e, int64_t value) {
  auto i = as_const_int(e);
  if (i) return *i == value;
  auto f = as_const_float(e);
  return f && *f == static_cast<double>(value);
}
bool is_zero(const Expr& e) { return is_const_int(e, 0); }
bool is_one(const Expr& e) { return is_const_int(e, 1); }

static bool is_const(const Expr& e) { return as_const_int(e) || as_const_float(e); }

// Gives a constant operand the other operand's type, and broadcasts a scalar to a vector.
static void match_types(Expr& a, Expr& b) {
  KILN_ASSERT(a.defined() && b.defined(), "operator on an undefined expression");
  if (a.type() == b.type()) return;
  auto retype = [](const Expr& c, Type t) {
    if (auto i = as_const_int(c)) return make_int_const(t, *i);
    return make_const(t, *as_const_float(c));
  };
  if (is_const(a) && !is_const(b)) {
    a = retype(a, b.type());
  } else if (is_const(b) && !is_const(a)) {
    b = retype(b, a.type());
  } else if (is_const(a) && is_const(b)) {
    const bool a_wins = a.type().is_float() || (!b.type().is_float() && a.type().bits() >= b.type().bits());
    if (a_wins) b = retype(b, a.type()); else a = retype(a, b.type());
  } else if (a.type().element_of() == b.type().element_of()) {
    if (a.type().is_scalar()) a = Broadcast::make(a, b.type().lanes);
    else if (b.type().is_scalar()) b = Broadcast::make(b, a.type().lanes);
  }
  KILN_ASSERT(a.type() == b.type(), "operands of types {} and {}", to_string(a.type()), to_string(b.type()));
}

Expr operator+(Expr a, Expr b) {
  match_types(a, b);
  auto x = as_const_int(a), y = as_const_int(b);
  if (x && y && a.type().is_scalar() && a.type() == kIndexType) return IntImm::make(kIndexType, *x + *y);
  if (is_zero(b)) return a;
  if (is_zero(a)) return b;
  return Add::make(std::move(a), std::move(b));
}

Expr operator-(Expr a, Expr b) {
  match_types(a, b);
  auto x = as_const_int(a), y = as_const_int(b);
  if (x && y && a.type().is_scalar() && a.type() == kIndexType) return IntImm::make(kIndexType, *x - *y);
  if (is_zero(b)) return a;
  return Sub::make(std::move(a), std::move(b));
}

Expr operator*(Expr a, Expr b) {
  match_types(a, b);
  auto x = as_const_int(a), y = as_const_int(b);
  if (x && y && a.type().is_scalar() && a.type() == kIndexType) return IntImm::make(kIndexType, *x * *y);
  if (is_one(b)) return a;
  if (is_one(a)) return b;
  if (!a.type().is_float() && (is_zero(a) || is_zero(b))) return make_zero(a.type());
  return Mul::make(std::move(a), std::move(b));
}

Expr operator/(Expr a, Expr b) {
  match_types(a, b);
  auto x = as_const_int(a), y = as_const_int(b);
  if (x && y && *y != 0 && a.type().is_scalar() && a.type() == kIndexType) return IntImm::make(kIndexType, *x / *y);
  if (is_one(b)) return a;
  return Div::make(std::move(a), std::move(b));
}

Expr operator%(Expr a, Expr b) {
  match_types(a, b);
  auto x = as_const_int(a), y = as_const_int(b);
  if (x && y && *y != 0 && a.type().is_scalar() && a.type() == kIndexType) return IntImm::make(kIndexType, *x % *y);
  if (!a.type().is_float() && is_one(b)) return make_zero(a.type());
  return Mod::make(std::move(a), std::move(b));
}

Expr operator-(Expr a) {
  if (auto x = as_const_int(a); x && a.type() == kIndexType) return IntImm::make(kIndexType, -*x);
  if (auto f = as_const_float(a); f && a.type().is_scalar()) return FloatImm::make(a.type(), -*f);
  Expr zero = make_zero(a.type());
  return Sub::make(std::move(zero), std::move(a));
}

#define KILN_CMP_OPERATOR(op, Name)           \
  Expr operator op(Expr a, Expr b) {          \
    match_types(a, b);                        \
    return Name::make(std::move(a), std::move(b)); \
  }
KILN_CMP_OPERATOR(==, EQ)
KILN_CMP_OPERATOR(!=, NE)
KILN_CMP_OPERATOR(<, LT)
KILN_CMP_OPERATOR(<=, LE)
KILN_CMP_OPERATOR(>, GT)
KILN_CMP_OPERATOR(>=, GE)
#undef KILN_CMP_OPERATOR

Expr operator&&(Expr a, Expr b) {
  if (is_one(a)) return b;
  if (is_one(b)) return a;
  return And::make(std::move(a), std::move(b));
}

Expr operator||(Expr a, Expr b) {
  if (is_zero(a) && a.type().is_bool()) return b;
  if (is_zero(b) && b.type().is_bool()) return a;
  return Or::make(std::move(a), std::move(b));
}

Expr operator!(Expr a) { return Not::make(std::move(a)); }

Expr min(Expr a, Expr b) {
  match_types(a, b);
  auto x = as_const_int(a), y = as_const_int(b);
  if (x && y && a.type() == kIndexType) return IntImm::make(kIndexType, std::min(*x, *y));
  return Min::make(std::move(a), std::move(b));
}

Expr max(Expr a, Expr b) {
  match_types(a, b);
  auto x = as_const_int(a), y = as_const_int(b);
  if (x && y && a.type() == kIndexType) return IntImm::make(kIndexType, std::max(*x, *y));
  return Max::make(std::move(a), std::move(b));
}

Expr select(Expr condition, Expr true_value, Expr false_value) {
  match_types(true_value, false_value);
  if (auto c = as_const_int(condition); c && condition.type().is_scalar()) {
    return *c ? true_value : false_value;
  }
  return Select::make(std::move(condition), std::move(true_value), std::move(false_value));
}

Expr floor_div(Expr a, Expr b) {
  match_types(a, b);
  if (a.type().is_float()) return call(Intrinsic::Floor, a / b);
  auto x = as_const_int(a), y = as_const_int(b);
  if (x && y && *y != 0 && a.type() == kIndexType) {
    int64_t q = *x / *y;
    if ((*x % *y != 0) && ((*x < 0) != (*y < 0))) --q;
    return IntImm::make(kIndexType, q);
  }
  // q = a / b, minus one when the remainder is non-zero and the signs differ.
  Expr q = a / b;
  Expr r = a % b;
  Expr zero = make_zero(a.type());
  return select(r != zero && ((r < zero) != (b < zero)), q - make_one(a.type()), q);
}

Expr floor_mod(Expr a, Expr b) {
  match_types(a, b);
  Expr r = a % b;
  Expr zero = make_zero(a.type());
  if (auto x = as_const_int(a), y = as_const_int(b); x && y && *y != 0 && a.type() == kIndexType) {
    int64_t m = *x % *y;
    if (m != 0 && ((m < 0) != (*y < 0))) m += *y;
    return IntImm::make(kIndexType, m);
  }
  return select(r != zero && ((r < zero) != (b < zero)), r + b, r);
}

Expr call(Intrinsic op, Expr a) {
  Type t = (op == Intrinsic::IsNan || op == Intrinsic::IsInf) ? Type(DType::Bool, a.type().lanes) : a.type();
  return Call::make(t, op, {std::move(a)});
}

Expr call(Intrinsic op, Expr a, Expr b) {
  match_types(a, b);
  Type t = a.type();
  return Call::make(t, op, {std::move(a), std::move(b)});
}

}  // namespace kiln::ir
