#pragma once
// Lowering pass (GPU reductions over outer axes, StageSchedule::reduce_row_threads): a reduction
// whose outputs are bound to threadIdx.x (X threads along the contiguous output axis, each
// owning a vector of L outputs: its lane loop marked Vectorized) also spreads its outermost
// reduction loop over `row_threads` threads in threadIdx.y:
//   - each thread keeps one accumulator per lane (a local array of L), so the lane loop moves
//     inside the reduction and VectorizeLoops makes its reads 16-byte loads along the contiguous
//     axis (a warp reads 32 neighbouring vectors of one input row);
//   - thread (x, y) reduces rows y, y + Y, y + 2Y, ... (eight or four steps unrolled, so as many
//     loads are in flight), and the Y partial results of each output meet in shared memory, where thread
//     (x, 0) combines them and stores the vector.
// Every thread of the block reaches the barriers: the pass leaves a reduction under a guard
// between its thread loop and its accumulator alone.
#include <cstdint>

#include "kiln/ir/IR.h"

namespace kiln {

ir::Stmt split_column_reduction(const ir::Stmt& stage, int64_t row_threads);

}  // namespace kiln
