#pragma once
// Shared by the contraction family: MatMul, Gemm, Conv, ConvTranspose (Contraction.cpp) and the
// pooling windows (Pooling.cpp). register_contraction calls register_pooling.
#include "kiln/ops/Op.h"

namespace kiln::ops {

void register_pooling(OpTable& table);

// The type sums accumulate in: float32 for float16/bfloat16, the input type otherwise.
Type accumulator_type(DType dtype);

}  // namespace kiln::ops
