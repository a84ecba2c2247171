#pragma once
// Lowering pass: a float division whose divisor does not change inside a loop of constant trip
// count (a softmax's row sum inside the loop over a row's elements) becomes a multiplication by
// the divisor's reciprocal, computed once before the loop. Changes rounding by at most an ulp or
// two, so only the GPU schedules ask for it (Schedule::reciprocal_divisors); the CPU reference
// divides. Divisions under a condition inside the loop are left alone (hoisting would evaluate
// the divisor where the program did not).
#include "kiln/ir/IR.h"

namespace kiln {

ir::Stmt reciprocal_divisors(const ir::Stmt& s);

}  // namespace kiln
