#pragma once
// Shared by the elementwise op files (Elementwise.cpp, ElementwiseMath.cpp, ElementwiseLogic.cpp):
// the broadcasting map that every elementwise op is built from. Private to src/ops/.
#include <functional>
#include <vector>

#include "kiln/ops/Helpers.h"

namespace kiln::ops {

// The value of each broadcast input at one output element (float16/bfloat16 values upcast to
// float32), combined into the output's element.
using ElementFn = std::function<ir::Expr(const std::vector<ir::Expr>& values)>;

// Output `output` of the node: `fn` over the numpy broadcast of `tensors`.
te::Tensor broadcast_map(OpContext& ctx, const std::vector<te::Tensor>& tensors, const ElementFn& fn,
                         int output = 0);

// The element of a tensor that must hold one value (a rank-0 or one-element tensor, e.g. Clip's
// min): element 0. UserError naming `what` when the shape is known to hold more than one value.
ir::Expr read_scalar(const OpContext& ctx, const te::Tensor& t, const char* what);

// Cast's saturate=0 for float8 `to` (E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ): a value whose rounding
// lies beyond the largest finite one becomes infinity (E5M2) or NaN, not that value. (A cast in
// the IR is ONNX's default: round to nearest even, saturating.) Shared with QuantizeLinear.
ir::Expr cast_float8_without_saturation(const ir::Expr& x, DType to);

void register_elementwise_math(OpTable& table);   // ElementwiseMath.cpp
void register_elementwise_logic(OpTable& table);  // ElementwiseLogic.cpp

}  // namespace kiln::ops
