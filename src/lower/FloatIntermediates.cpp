#include "FloatIntermediates.h"

#include <cmath>
#include <utility>

#include "kiln/ir/IRMutator.h"
#include "kiln/ir/IROperator.h"
#include "kiln/ir/IRVisitor.h"

namespace kiln {
namespace {

using namespace ir;

bool is_half_precision(Type t) { return t.dtype == DType::Float16 || t.dtype == DType::BFloat16; }

class DropRoundTrips : public IRMutator {
 public:
  using IRMutator::mutate;

 protected:
  Expr visit(const Cast* op, const Expr& self) override {
    Expr value = mutate(op->value);
    if (op->type.dtype == DType::Float32) {
      const Cast* inner = value.as<Cast>();
      if (inner && is_half_precision(inner->type) && inner->value.type() == op->type) return inner->value;
    }
    return value.same_as(op->value) ? self : Cast::make(op->type, value);
  }
};

// Whether `e` reads a float16/bfloat16 value (widens one to float32).
class ReadsHalf : public IRVisitor {
 public:
  bool found = false;
  using IRVisitor::visit;

 protected:
  void visit(const Cast* op) override {
    found = found || is_half_precision(op->value.type());
    IRVisitor::visit(op);
  }
};

bool reads_half(const Expr& e) {
  ReadsHalf reads;
  reads.visit(e);
  return reads.found;
}

// erf(u) = sign(u) (1 - erfc(t)), t = min(|u|, 3.92), erfc(t) = exp(t q(t)) with q(t) = c1 + c2 t + ...
// + c8 t^7 a weighted least-squares fit of ln(erfc(t)) on [0, 3.92] (weight erfc(t), so that erf's
// absolute error is what it bounds; beyond 3.92 erf is 1 in float32). Absolute error about 1.1e-7
// in float32 with an exact exp (2e-7 with the GPU's exp2 unit), so about 2e-7 relative to 1 +
// erf(u), the GELU factor; near u = 0 the relative error of erf itself grows (4.7e-4 at u =
// 1e-4), which a float16/bfloat16 result does not resolve. The clamp is a select, so that NaN
// stays NaN.
//
// What the formula folds, each an instruction an element fewer (LayerNorm+GELU's time went down with
// its instruction count, runs s15e and s16c in bench/tune/NOTES.md): log2(e) into the coefficients, so that erfc is one exp2
// (Intrinsic::Exp2: the exp2 unit alone; erfc below 2^-126 is 0 to float32's 1 - erfc); an
// argument u = s v with a constant s > 0 (GELU's x / sqrt(2)), evaluated in v with s in the
// coefficients and the clamp; and GELU's 1 + erf(u), which is erfc(t) for u < 0 and 2 - erfc(t)
// else (closer to the exact value for u < 0 than 1 - (1 - erfc(t))).
const double kLnErfcCoefficients[] = {-1.128381014e+00, -6.365880370e-01, -1.029631793e-01, 1.967598684e-02,
                                      -6.389969494e-04, -9.716372006e-04, 2.905316942e-04, -2.927422611e-05};
constexpr double kErfLimit = 3.92;

// x as v * scale with a constant scale (finite, nonzero; positive if `positive`) where x is such a
// product, else (x, 1).
std::pair<Expr, double> split_scale(const Expr& x, bool positive) {
  if (const Mul* m = x.as<Mul>()) {
    for (const auto& [value, factor] : {std::pair{m->a, m->b}, std::pair{m->b, m->a}}) {
      const FloatImm* c = factor.as<FloatImm>();
      if (c && std::isfinite(c->value) && (positive ? c->value > 0 : c->value != 0)) return {value, c->value};
    }
  }
  return {x, 1.0};
}

// `plus_one`: the formula of 1 + erf(x) instead of erf(x).
Expr short_erf(const Expr& x, bool plus_one, int id) {
  const Type f32(DType::Float32);
  auto [v, scale] = split_scale(x, true);
  const std::string suffix = std::to_string(id);
  // Temporaries (Let), so that the argument and the exp2 are computed once.
  const Expr u = var("erf_u" + suffix, f32), t = var("erf_t" + suffix, f32), e = var("erf_c" + suffix, f32);
  const Expr a = call(Intrinsic::Abs, u), limit = FloatImm::make(f32, kErfLimit / scale);
  // log2(erfc(scale t)) = t (d1 + d2 t + ... + d8 t^7), d_i = c_i scale^i log2(e).
  auto coefficient = [&](int i) { return FloatImm::make(f32, kLnErfcCoefficients[i] * std::pow(scale, i + 1) * M_LOG2E); };
  Expr q = coefficient(7);
  for (int i = 6; i >= 0; --i) q = q * t + coefficient(i);
  const Expr one = FloatImm::make(f32, 1.0), two = FloatImm::make(f32, 2.0);
  const Expr negative = u < FloatImm::make(f32, 0.0);
  const Expr result = plus_one ? select(negative, e, two - e) : select(negative, e - one, one - e);
  return Let::make(u, v, Let::make(t, select(a > limit, limit, a), Let::make(e, call(Intrinsic::Exp2, q * t), result)));
}

// 1 + tanh(u) = 2 / (1 + exp(-2u)), tanh-GELU's factor: one exp2 and one reciprocal on their units
// (Intrinsic::Exp2, Intrinsic::Rcp) where tanhf spends about 20 instructions and a branch; a
// constant scale of u (GELU's sqrt(2 / pi)) folded into the exponent's factor. Relative error
// about 3e-7 of 1 + tanh(u) everywhere, including u -> -inf, where it goes to 0 (not through 1 -
// 1). Tanh alone keeps tanhf: 2 / (1 + exp(-2u)) - 1 loses tanh's relative precision near 0.
Expr short_tanh_plus_one(const Expr& x, int id) {
  const Type f32(DType::Float32);
  auto [v, scale] = split_scale(x, false);
  const Expr e = var("tanh_e" + std::to_string(id), f32);
  const Expr one = FloatImm::make(f32, 1.0), two = FloatImm::make(f32, 2.0);
  return Let::make(e, call(Intrinsic::Exp2, v * FloatImm::make(f32, -2.0 * scale * M_LOG2E)),
                   two * call(Intrinsic::Rcp, one + e));
}

// exp(u) = 2^(u log2(e)) on the exp2 unit; u = -v (0 - v, Sigmoid's argument) or u = s v with a
// constant s folds its sign or s into the factor.
Expr short_exp(const Expr& u) {
  const Type f32(DType::Float32);
  if (const Sub* s = u.as<Sub>()) {
    const FloatImm* zero = s->a.as<FloatImm>();
    if (zero && zero->value == 0.0) return call(Intrinsic::Exp2, s->b * FloatImm::make(f32, -M_LOG2E));
  }
  auto [v, scale] = split_scale(u, false);
  return call(Intrinsic::Exp2, v * FloatImm::make(f32, scale * M_LOG2E));
}

// Erf, Tanh and Exp of a float16/bfloat16 chain (a float32 call whose argument reads a
// float16/bfloat16 value; its result is rounded to float16/bfloat16 where stored): erf through
// short_erf, the GELU factors 1 + erf(u) and 1 + tanh(u) as one formula each, exp(u) as the exp2
// unit's 2^(u log2(e)) alone (kiln::exp_via_exp2's exp2f adds a scaling on either side of the unit
// so that results below 2^-126 stay subnormal: three of softmax's seven instructions an element),
// and a constant divided by such a value as a multiple of its reciprocal on the unit.
class ShortFormulas : public IRMutator {
 public:
  using IRMutator::mutate;

 protected:
  Expr visit(const Call* op, const Expr& self) override {
    Expr e = IRMutator::visit(op, self);
    const Call* c = e.as<Call>();
    if (takes_short_form(c, Intrinsic::Erf)) return short_erf(c->args[0], false, count_++);
    if (takes_short_form(c, Intrinsic::Exp)) return short_exp(c->args[0]);
    return e;
  }

  // c / d with a constant c: c times d's reciprocal on the unit, within about 2 ulp of float32 of
  // the correctly rounded quotient (Sigmoid's 1 / (1 + exp(-x)): about 10 instructions fewer an
  // element).
  Expr visit(const Div* op, const Expr& self) override {
    Expr e = IRMutator::visit(op, self);
    const Div* d = e.as<Div>();
    const FloatImm* c = d ? d->a.as<FloatImm>() : nullptr;
    if (!c || !std::isfinite(c->value) || d->type.dtype != DType::Float32 || !reads_half(d->b)) return e;
    const Expr reciprocal = call(Intrinsic::Rcp, d->b);
    return c->value == 1.0 ? reciprocal : d->a * reciprocal;
  }

  Expr visit(const Add* op, const Expr& self) override {
    for (const auto& [term, other] : {std::pair{op->a, op->b}, std::pair{op->b, op->a}}) {
      const Call* c = term.as<Call>();
      const FloatImm* k = other.as<FloatImm>();
      if (!k || k->value != 1.0) continue;
      if (takes_short_form(c, Intrinsic::Erf)) return short_erf(mutate(c->args[0]), true, count_++);
      if (takes_short_form(c, Intrinsic::Tanh)) return short_tanh_plus_one(mutate(c->args[0]), count_++);
    }
    return IRMutator::visit(op, self);
  }

 private:
  static bool takes_short_form(const Call* c, Intrinsic op) {
    return c && c->op == op && c->type.dtype == DType::Float32 && reads_half(c->args[0]);
  }

  int count_ = 0;
};

}  // namespace

Stmt float_intermediates(const Stmt& s) { return ShortFormulas().mutate(DropRoundTrips().mutate(s)); }

}  // namespace kiln
