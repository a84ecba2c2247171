#pragma once
// Building blocks shared by op definitions: broadcasting, axis normalization, dtype checks.
#include <vector>

#include "kiln/ir/IROperator.h"
#include "kiln/ops/Op.h"

namespace kiln::ops {

// Numpy-style multidirectional broadcast of the shapes of `tensors` (UserError naming the node
// and the dims when they cannot broadcast).
std::vector<ir::Expr> broadcast_shape(const OpContext& ctx, const std::vector<te::Tensor>& tensors);
// Reads `t` at output `indices` of a broadcast result of rank indices.size().
ir::Expr broadcast_read(const te::Tensor& t, const std::vector<ir::Expr>& indices);

// An axis in [-rank, rank) made non-negative; UserError naming the attribute otherwise.
int normalize_axis(const OpContext& ctx, int64_t axis, int rank, const char* what);

// UserError unless `t`'s dtype is one of `allowed`.
void check_dtype(const OpContext& ctx, const te::Tensor& t, const char* what,
                 std::initializer_list<DType> allowed);
// UserError unless every tensor has the same dtype as the first.
void check_same_dtype(const OpContext& ctx, const std::vector<te::Tensor>& tensors);

// Float types that math ops accept.
inline constexpr std::initializer_list<DType> kFloatTypes = {DType::Float16, DType::BFloat16,
                                                             DType::Float32, DType::Float64};

// Elementwise math is evaluated in float32 for float16/bfloat16 inputs (as CUDA does) and in the
// input type otherwise: `upcast` gives the compute type, `downcast` returns to the storage type.
ir::Expr upcast(const ir::Expr& e);
ir::Expr downcast(const ir::Expr& e, DType storage);

}  // namespace kiln::ops
