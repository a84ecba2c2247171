#include "FloatIntermediates.h"

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

// erf(u) = sign(u) (1 - exp(q(min(|u|, 3.92)))), q(t) = t (c1 + c2 t + ... + c8 t^7) a weighted
// least-squares fit of ln(erfc(t)) on [0, 3.92] (weight erfc(t), so that erf's absolute error is
// what it bounds; beyond 3.92 erf is 1 in float32). Absolute error about 1.1e-7 in float32 with an
// exact exp (2e-7 with the GPU's exp2 unit), so about 2e-7 relative to 1 + erf(u), the GELU factor;
// near u = 0 the relative error of erf itself grows (4.7e-4 at u = 1e-4), which a float16/bfloat16
// result does not resolve. 15 instructions where erff spends about 30 (two polynomials selected
// coefficient by coefficient, and a branch). The clamp is a select, so that NaN stays NaN.
Expr short_erf(const Expr& x, int id) {
  static const double kCoefficients[] = {-1.128381014e+00, -6.365880370e-01, -1.029631793e-01, 1.967598684e-02,
                                         -6.389969494e-04, -9.716372006e-04, 2.905316942e-04, -2.927422611e-05};
  const Type f32(DType::Float32);
  const std::string suffix = std::to_string(id);
  // Temporaries (Let), so that the argument and the exp are computed once.
  const Expr u = var("erf_u" + suffix, f32), t = var("erf_t" + suffix, f32), r = var("erf_r" + suffix, f32);
  const Expr a = call(Intrinsic::Abs, u), limit = FloatImm::make(f32, 3.92);
  Expr q = FloatImm::make(f32, kCoefficients[7]);
  for (int i = 6; i >= 0; --i) q = q * t + FloatImm::make(f32, kCoefficients[i]);
  const Expr sign = select(u < FloatImm::make(f32, 0.0), -r, r);
  return Let::make(u, x, Let::make(t, select(a > limit, limit, a), Let::make(r, FloatImm::make(f32, 1.0) - call(Intrinsic::Exp, q * t), sign)));
}

// Erf of a float16/bfloat16 chain (its result is rounded to float16/bfloat16 where stored) through
// short_erf.
class ShortErf : public IRMutator {
 public:
  using IRMutator::mutate;

 protected:
  Expr visit(const Call* op, const Expr& self) override {
    Expr e = IRMutator::visit(op, self);
    const Call* c = e.as<Call>();
    if (!c || c->op != Intrinsic::Erf || c->type.dtype != DType::Float32) return e;
    ReadsHalf reads;
    reads.visit(c->args[0]);
    return reads.found ? short_erf(c->args[0], count_++) : e;
  }

 private:
  int count_ = 0;
};

}  // namespace

Stmt float_intermediates(const Stmt& s) { return ShortErf().mutate(DropRoundTrips().mutate(s)); }

}  // namespace kiln
