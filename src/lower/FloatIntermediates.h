#pragma once
// Lowering pass: a float16/bfloat16 intermediate of a fused elementwise chain keeps its float32
// value. Each op of a half-precision graph computes in float32 and rounds its result to the
// tensor's type; inlined into its reader, that result is widened again at once:
// Cast(float32, Cast(float16 | bfloat16, e)) with e float32. This pass drops the pair (e is used
// as is), so a chain rounds once, where it is stored, as torch.compile and TensorRT compute it.
// Results change by up to the rounding of each dropped intermediate (they move toward the exact
// value), so only where asked (Schedule::float_intermediates: `kiln compile
// --float-intermediates`, or a tuning record); the CPU reference rounds every op. The IR does not
// tell an op's rounding from a model's own Cast nodes: a Cast to float16 whose result is at once
// cast back to float32 (an explicit rounding step) is dropped too.
// Under the same option, Erf of such a chain (a float32 erf of an expression that reads a
// float16/bfloat16 value) becomes a shorter formula, absolute error about 2e-7 (erff was the
// largest part of an erf-GELU element's instructions), which its float16/bfloat16 result does not
// resolve (1 + erf, GELU's factor, as one formula; tanh-GELU's 1 + tanh as one exp2 and one
// reciprocal), a constant divided by such a chain a multiple of its reciprocal on the unit (Sigmoid),
// and Exp of such a chain runs on the exp2 unit alone (results below 2^-126 flushed to zero, which a float16 result does not resolve either); a
// float32 model's Erf and Exp keep erff and exp.
#include "kiln/ir/IR.h"

namespace kiln {

ir::Stmt float_intermediates(const ir::Stmt& s);

}  // namespace kiln
