#include "kiln/ir/Simplify.h"

#include <cmath>

#include "kiln/ir/Equality.h"
#include "kiln/ir/SmallFloat.h"
#include "kiln/ir/IRMutator.h"
#include "kiln/ir/IROperator.h"
#include "kiln/runtime/HostTensor.h"

namespace kiln::ir {

double round_to_type(DType t, double value) {
  switch (t) {
    case DType::Float16: return half_bits_to_float(float_to_half_bits(static_cast<float>(value)));
    case DType::BFloat16: return bfloat16_bits_to_float(float_to_bfloat16_bits(static_cast<float>(value)));
    case DType::Float32: return static_cast<float>(value);
    case DType::Float64: return value;
    default:
      if (is_small_float(t)) {
        const bool keeps_inf = t == DType::Float8E5M2 && std::isinf(value);
        return keeps_inf ? value : small_float_decode(t, small_float_encode(t, value));
      }
      return value;
  }
}

double cast_to_type(DType t, double value) {
  if (is_small_float(t)) return small_float_decode(t, small_float_encode(t, value, /*saturate=*/true));
  return round_to_type(t, value);
}

int64_t wrap_to_type(DType t, int64_t value) {
  switch (t) {
    case DType::Bool: return value != 0;
    case DType::Int8: return static_cast<int8_t>(value);
    case DType::Int16: return static_cast<int16_t>(value);
    case DType::Int32: return static_cast<int32_t>(value);
    case DType::UInt8: return static_cast<uint8_t>(value);
    case DType::UInt16: return static_cast<uint16_t>(value);
    case DType::UInt32: return static_cast<uint32_t>(value);
    case DType::Int4: return static_cast<int64_t>((static_cast<uint64_t>(value) & 0xfu) ^ 8u) - 8;
    case DType::UInt4: return static_cast<int64_t>(static_cast<uint64_t>(value) & 0xfu);
    case DType::Int2: return static_cast<int64_t>((static_cast<uint64_t>(value) & 0x3u) ^ 2u) - 2;
    case DType::UInt2: return static_cast<int64_t>(static_cast<uint64_t>(value) & 0x3u);
    default: return value;
  }
}

namespace {

bool is_scalar_const(const Expr& e) { return e.defined() && (e.as<IntImm>() || e.as<FloatImm>()); }

Expr int_const(Type t, int64_t v) { return IntImm::make(t, wrap_to_type(t.dtype, v)); }
Expr float_const(Type t, double v) { return FloatImm::make(t, round_to_type(t.dtype, v)); }

double as_double(const Expr& e) {
  if (const IntImm* i = e.as<IntImm>()) {
    return e.type().dtype == DType::UInt64 ? static_cast<double>(static_cast<uint64_t>(i->value))
                                           : static_cast<double>(i->value);
  }
  return e.as<FloatImm>()->value;
}

class Simplifier : public IRMutator {
 public:
  using IRMutator::mutate;

 protected:
  Expr visit(const Cast* op, const Expr& self) override {
    Expr v = mutate(op->value);
    const Type t = op->type;
    if (is_scalar_const(v) && t.is_scalar()) {
      if (t.is_float()) return FloatImm::make(t, cast_to_type(t.dtype, as_double(v)));
      if (t.is_bool()) return make_bool(as_double(v) != 0);
      if (const IntImm* i = v.as<IntImm>()) return int_const(t, i->value);
      const double d = as_double(v);
      if (std::isfinite(d) && std::fabs(d) < 9.2e18) return int_const(t, static_cast<int64_t>(d));
    }
    if (v.type() == t) return v;
    return v.same_as(op->value) ? self : Cast::make(t, v);
  }

  template <typename T, typename IntFn, typename FloatFn>
  Expr fold_arith(const T* op, const Expr& self, IntFn int_fn, FloatFn float_fn) {
    Expr a = mutate(op->a), b = mutate(op->b);
    if (is_scalar_const(a) && is_scalar_const(b)) {
      if (op->type.is_float()) return float_const(op->type, float_fn(as_double(a), as_double(b)));
      if (auto r = int_fn(a.as<IntImm>()->value, b.as<IntImm>()->value)) return int_const(op->type, *r);
    }
    if (a.same_as(op->a) && b.same_as(op->b)) return self;
    return T::make(a, b);
  }

  Expr visit(const Add* op, const Expr& self) override {
    Expr r = fold_arith(op, self, [](int64_t x, int64_t y) -> std::optional<int64_t> { return x + y; },
                        [](double x, double y) { return x + y; });
    if (const Add* add = r.as<Add>()) {
      if (is_zero(add->b) && !r.type().is_float()) return add->a;
      if (is_zero(add->a) && !r.type().is_float()) return add->b;
      // (x / c) * c + x % c -> x: C's division identity, for any x and c != 0. Fused loops
      // produce it whenever a fused index is split back and flattened again.
      if (!r.type().is_float()) {
        const Mul* mul = add->a.as<Mul>();
        const Mod* mod = add->b.as<Mod>();
        const Div* div = mul ? mul->a.as<Div>() : nullptr;
        if (div && mod && structurally_equal(div->b, mul->b) && structurally_equal(div->b, mod->b) &&
            structurally_equal(div->a, mod->a)) {
          return mod->a;
        }
      }
      // (x + c1) + c2 -> x + (c1 + c2)
      const Add* inner = add->a.as<Add>();
      if (inner && add->b.as<IntImm>() && inner->b.as<IntImm>()) {
        return mutate(Add::make(inner->a, mutate(Add::make(inner->b, add->b))));
      }
    }
    return r;
  }
  Expr visit(const Sub* op, const Expr& self) override {
    Expr r = fold_arith(op, self, [](int64_t x, int64_t y) -> std::optional<int64_t> { return x - y; },
                        [](double x, double y) { return x - y; });
    if (const Sub* sub = r.as<Sub>()) {
      if (is_zero(sub->b) && !r.type().is_float()) return sub->a;
      if (!r.type().is_float() && structurally_equal(sub->a, sub->b)) return make_zero(r.type());
    }
    return r;
  }
  Expr visit(const Mul* op, const Expr& self) override {
    Expr r = fold_arith(op, self, [](int64_t x, int64_t y) -> std::optional<int64_t> { return x * y; },
                        [](double x, double y) { return x * y; });
    if (const Mul* mul = r.as<Mul>()) {
      if (!r.type().is_float()) {
        if (is_one(mul->b)) return mul->a;
        if (is_one(mul->a)) return mul->b;
        if (is_zero(mul->a) || is_zero(mul->b)) return make_zero(r.type());
      }
    }
    return r;
  }
  Expr visit(const Div* op, const Expr& self) override {
    Expr r = fold_arith(
        op, self,
        [](int64_t x, int64_t y) -> std::optional<int64_t> {
          if (y == 0) return std::nullopt;
          return x / y;
        },
        [](double x, double y) { return x / y; });
    if (const Div* div = r.as<Div>(); div && !r.type().is_float()) {
      if (is_one(div->b)) return div->a;
      // (x * c) / c -> x
      if (const Mul* m = div->a.as<Mul>(); m && structurally_equal(m->b, div->b)) return m->a;
    }
    return r;
  }
  Expr visit(const Mod* op, const Expr& self) override {
    Expr r = fold_arith(
        op, self,
        [](int64_t x, int64_t y) -> std::optional<int64_t> {
          if (y == 0) return std::nullopt;
          return x % y;
        },
        [](double x, double y) { return std::fmod(x, y); });
    if (const Mod* mod = r.as<Mod>(); mod && !r.type().is_float()) {
      if (is_one(mod->b)) return make_zero(r.type());
      if (const Mul* m = mod->a.as<Mul>(); m && structurally_equal(m->b, mod->b)) return make_zero(r.type());
    }
    return r;
  }
  Expr visit(const Min* op, const Expr& self) override {
    Expr r = fold_arith(op, self, [](int64_t x, int64_t y) -> std::optional<int64_t> { return std::min(x, y); },
                        [](double x, double y) { return std::fmin(x, y); });
    if (const Min* m = r.as<Min>(); m && structurally_equal(m->a, m->b)) return m->a;
    return r;
  }
  Expr visit(const Max* op, const Expr& self) override {
    Expr r = fold_arith(op, self, [](int64_t x, int64_t y) -> std::optional<int64_t> { return std::max(x, y); },
                        [](double x, double y) { return std::fmax(x, y); });
    if (const Max* m = r.as<Max>(); m && structurally_equal(m->a, m->b)) return m->a;
    return r;
  }

  template <typename T, typename Cmp>
  Expr fold_cmp(const T* op, const Expr& self, Cmp cmp) {
    Expr a = mutate(op->a), b = mutate(op->b);
    if (is_scalar_const(a) && is_scalar_const(b)) {
      if (a.as<IntImm>() && a.type().dtype != DType::UInt64) {
        return make_bool(cmp(a.as<IntImm>()->value, b.as<IntImm>()->value));
      }
      return make_bool(cmp(as_double(a), as_double(b)));
    }
    if (a.same_as(op->a) && b.same_as(op->b)) return self;
    return T::make(a, b);
  }
  Expr visit(const EQ* op, const Expr& self) override { return fold_cmp(op, self, [](auto x, auto y) { return x == y; }); }
  Expr visit(const NE* op, const Expr& self) override { return fold_cmp(op, self, [](auto x, auto y) { return x != y; }); }
  Expr visit(const LT* op, const Expr& self) override { return fold_cmp(op, self, [](auto x, auto y) { return x < y; }); }
  Expr visit(const LE* op, const Expr& self) override { return fold_cmp(op, self, [](auto x, auto y) { return x <= y; }); }
  Expr visit(const GT* op, const Expr& self) override { return fold_cmp(op, self, [](auto x, auto y) { return x > y; }); }
  Expr visit(const GE* op, const Expr& self) override { return fold_cmp(op, self, [](auto x, auto y) { return x >= y; }); }

  Expr visit(const And* op, const Expr& self) override {
    Expr a = mutate(op->a), b = mutate(op->b);
    if (a.type().is_scalar()) {
      if (is_zero(a) || is_zero(b)) return make_bool(false);
      if (is_one(a)) return b;
      if (is_one(b)) return a;
    }
    if (a.same_as(op->a) && b.same_as(op->b)) return self;
    return And::make(a, b);
  }
  Expr visit(const Or* op, const Expr& self) override {
    Expr a = mutate(op->a), b = mutate(op->b);
    if (a.type().is_scalar()) {
      if (is_one(a) || is_one(b)) return make_bool(true);
      if (is_zero(a)) return b;
      if (is_zero(b)) return a;
    }
    if (a.same_as(op->a) && b.same_as(op->b)) return self;
    return Or::make(a, b);
  }
  Expr visit(const Not* op, const Expr& self) override {
    Expr a = mutate(op->a);
    if (auto c = as_const_int(a); c && a.type().is_scalar()) return make_bool(*c == 0);
    if (const Not* inner = a.as<Not>()) return inner->a;
    return a.same_as(op->a) ? self : Not::make(a);
  }
  Expr visit(const Select* op, const Expr& self) override {
    Expr c = mutate(op->condition);
    if (auto v = as_const_int(c); v && c.type().is_scalar()) return mutate(*v ? op->true_value : op->false_value);
    Expr t = mutate(op->true_value), f = mutate(op->false_value);
    if (structurally_equal(t, f)) return t;
    if (c.same_as(op->condition) && t.same_as(op->true_value) && f.same_as(op->false_value)) return self;
    return Select::make(c, t, f);
  }
  Expr visit(const Let* op, const Expr& self) override {
    Expr v = mutate(op->value);
    if (is_scalar_const(v) || v.as<Variable>()) return mutate(substitute(op->body, {{op->var, v}}));
    Expr b = mutate(op->body);
    if (v.same_as(op->value) && b.same_as(op->body)) return self;
    return Let::make(op->var, v, b);
  }

  Stmt visit(const For* op, const Stmt& self) override {
    Expr extent = mutate(op->extent);
    if (is_zero(extent)) return Evaluate::make(make_zero(kIndexType));
    return IRMutator::visit(op, self);
  }
  Stmt visit(const IfThenElse* op, const Stmt& self) override {
    Expr c = mutate(op->condition);
    if (auto v = as_const_int(c)) {
      if (*v) return mutate(op->then_case);
      return op->else_case.defined() ? mutate(op->else_case) : Evaluate::make(make_zero(kIndexType));
    }
    return IRMutator::visit(op, self);
  }
  Stmt visit(const LetStmt* op, const Stmt& self) override {
    Expr v = mutate(op->value);
    if (is_scalar_const(v)) return mutate(substitute(op->body, {{op->var, v}}));
    return IRMutator::visit(op, self);
  }
};

}  // namespace

Expr simplify(const Expr& e) { return Simplifier().mutate(e); }
Stmt simplify(const Stmt& s) { return Simplifier().mutate(s); }

}  // namespace kiln::ir
