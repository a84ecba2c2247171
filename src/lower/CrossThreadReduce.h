#pragma once
// Lowering pass: spreads a reduction stage's innermost reduction loop over `threads` threads of
// a block and combines their partial results with a block-wide all-reduce (intrinsic
// BlockAllReduce: warp shuffles, then shared memory). Thread 0 stores the result.
#include "kiln/ir/IR.h"

namespace kiln {

// `stage` is a scheduled reduction stage: loops over the output (bound to blocks or serial)
// around Allocate(acc){acc = identity; reduction loops; out = acc}. Returns it unchanged when it
// has no such accumulator.
// With `lanes` > 1 and a constant row length that is a multiple of it, each thread reads `lanes`
// consecutive elements per step (a Vectorized loop: lower/VectorizeLoops makes it one load).
ir::Stmt cross_thread_reduce(const ir::Stmt& stage, int64_t threads, int64_t lanes = 1);

}  // namespace kiln
