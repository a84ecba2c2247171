#include "FloatIntermediates.h"

#include "kiln/ir/IRMutator.h"

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

}  // namespace

Stmt float_intermediates(const Stmt& s) { return DropRoundTrips().mutate(s); }

}  // namespace kiln
