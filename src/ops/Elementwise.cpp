// Elementwise ops: the broadcasting map they are all built from. The ops themselves are in
// ElementwiseMath.cpp (arithmetic, math, activations, casts) and ElementwiseLogic.cpp
// (comparisons, logic, bitwise, selection).
#include "Elementwise.h"

#include "Families.h"

namespace kiln::ops {

using namespace ir;

te::Tensor broadcast_map(OpContext& ctx, const std::vector<te::Tensor>& tensors, const ElementFn& fn, int output) {
  return te::compute(
      ctx.output_name(output), broadcast_shape(ctx, tensors),
      [&](const std::vector<Expr>& i) {
        std::vector<Expr> values;
        values.reserve(tensors.size());
        for (const te::Tensor& t : tensors) {
          const std::optional<Expr> literal = ctx.known_scalar(t);
          values.push_back(upcast(literal && literal->type() == Type(t.dtype()) ? *literal : broadcast_read(t, i)));
        }
        return fn(values);
      },
      ctx.node().describe());
}

Expr read_scalar(const OpContext& ctx, const te::Tensor& t, const char* what) {
  for (int d = 0; d < t.ndim(); ++d) {
    auto n = as_const_int(t.shape(d));
    if (n && *n != 1) ctx.fail("{} must hold a single value, but its dimension {} is {}", what, d, *n);
  }
  return t(std::vector<Expr>(static_cast<size_t>(t.ndim()), Expr(0)));
}

void register_elementwise(OpTable& table) {
  register_elementwise_math(table);
  register_elementwise_logic(table);
}

}  // namespace kiln::ops
