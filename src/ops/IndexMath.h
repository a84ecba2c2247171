#pragma once
// Index arithmetic shared by the data-movement and contraction definitions: products of dims,
// row-major flattening, clamping. Dims and indices are kIndexType expressions (constants or
// expressions of the model's size symbols).
#include <string>
#include <vector>

#include "kiln/ir/IROperator.h"

namespace kiln::ops {

// The product of `dims` (1 for none), folded when constant.
ir::Expr product(const std::vector<ir::Expr>& dims);
// The row-major offset of `indices` in a tensor of shape `dims`.
ir::Expr flatten_index(const std::vector<ir::Expr>& indices, const std::vector<ir::Expr>& dims);
// The row-major indices of offset `flat` in a tensor of shape `dims`.
std::vector<ir::Expr> unflatten_index(const ir::Expr& flat, const std::vector<ir::Expr>& dims);
// min(max(x, lo), hi).
ir::Expr clamp(const ir::Expr& x, const ir::Expr& lo, const ir::Expr& hi);
// ceil(a / b) for b > 0.
ir::Expr ceil_div(const ir::Expr& a, const ir::Expr& b);
// "[2, batch, 3]"
std::string shape_text(const std::vector<ir::Expr>& shape);
// The dims of `shape` simplified (a shape built from arithmetic reads better folded).
std::vector<ir::Expr> simplified(std::vector<ir::Expr> shape);

}  // namespace kiln::ops
