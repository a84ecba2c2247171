#pragma once
// Simplification: folds constants (with each dtype's own rounding and wrap-around), removes
// identities (x + 0, x * 1, select(true, a, b)), and merges constant terms of index arithmetic.
// Used on symbolic shapes, on values known when compiling, and on lowered loop nests.
#include "kiln/ir/Expr.h"

namespace kiln::ir {

Expr simplify(const Expr& e);
Stmt simplify(const Stmt& s);

// Rounds `value` to what dtype `t` can hold (float16/bfloat16/float32 rounding, integer
// wrap-around, bool to 0/1). Shared with the interpreter so both agree bit for bit.
// Small floats: the nearest value of the format, infinities kept where it has them (E5M2).
double round_to_type(DType t, double value);
// What a Cast to `t` makes of `value`: round_to_type, except that float8/float4 saturate
// (ONNX's default, saturate=1): beyond the largest finite value, infinities included.
double cast_to_type(DType t, double value);
int64_t wrap_to_type(DType t, int64_t value);

}  // namespace kiln::ir
