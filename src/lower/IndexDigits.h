#pragma once
// Flat index -> per-axis indices, for the lowerings that run one loop (or one template axis) over
// several tensor axes (TileContraction, TemplateContraction, TemplateAttention).
#include <utility>
#include <vector>

#include "kiln/ir/IROperator.h"
#include "kiln/ir/Simplify.h"

namespace kiln {

// Binds `vars` (row-major over `extents`) to the digits of the flat index `flat`, appending the
// (var, digit) pairs to `out`.
inline void unflatten(const ir::Expr& flat, const std::vector<ir::Expr>& vars, const std::vector<ir::Expr>& extents,
                      std::vector<std::pair<ir::Expr, ir::Expr>>& out) {
  ir::Expr stride = ir::Expr(1);
  for (size_t k = vars.size(); k-- > 0;) {
    ir::Expr digit = ir::is_one(stride) ? flat : flat / stride;
    if (k > 0) digit = digit % extents[k];
    out.emplace_back(vars[k], ir::simplify(digit));
    stride = ir::simplify(stride * extents[k]);
  }
}

}  // namespace kiln
