#pragma once
// Reduction stages shared by Reduction.cpp and Normalization.cpp: a reduction of an input-shaped
// expression over a set of axes, and reads of such a result from the input's index space (a
// softmax's row max read by its normalize stage). Private to src/ops/.
#include <functional>
#include <string>
#include <vector>

#include "kiln/ops/Helpers.h"

namespace kiln::ops {

// The value reduced at one point of the input's index space (all of its dimensions).
using SourceFn = std::function<ir::Expr(const std::vector<ir::Expr>& input_index)>;

// Reduces `source` over `axes` (sorted, distinct dims of `shape`) with `kind`, where `condition`
// (optional) holds. The result has `shape` with the reduced dims kept as 1 when `keepdims`, dropped
// otherwise; its dtype is the source's.
te::Tensor reduce_stage(const OpContext& ctx, const std::string& name, const std::vector<ir::Expr>& shape,
                        const std::vector<int>& axes, bool keepdims, ir::ReduceKind kind, const SourceFn& source,
                        const SourceFn& condition = nullptr);

// Reads a keepdims reduce_stage result at an index of the input's space (reduced dims read at 0).
ir::Expr read_reduced(const te::Tensor& stage, const std::vector<ir::Expr>& input_index, const std::vector<int>& axes);

// Drops the reduced dims of an input-space index (for a result without keepdims).
std::vector<ir::Expr> drop_axes(const std::vector<ir::Expr>& index, const std::vector<int>& axes);

// The row-major position of `index` within the block spanned by `axes` (Hardmax over a coerced
// 2-D view, ArgMax's position along one axis).
ir::Expr flat_position(const std::vector<ir::Expr>& shape, const std::vector<ir::Expr>& index,
                       const std::vector<int>& axes);

// The number of elements reduced over `axes`, as an index expression.
ir::Expr reduced_count(const std::vector<ir::Expr>& shape, const std::vector<int>& axes);

// The type reductions accumulate in: float32 for float16/bfloat16, the dtype otherwise.
Type accumulate_type(DType dtype);

}  // namespace kiln::ops
