#pragma once
// Lowering pass for serial loops (stages no schedule maps to threads: the CPU backend, the tuner's
// reference): a reduction whose inner loop walks an operand across rows (a MatMul's [K, N] weight
// read along K, a cache miss per step) runs with that loop outside the stage's last spatial loop,
// over a row of accumulators:
//
//   for n: { acc = init; for k: acc = acc + a[k] * w[k, n]; out[n] = acc; }
// becomes
//   acc[N]; for n: acc[n] = init; for k: for n: acc[n] = acc[n] + a[k] * w[k, n]; for n: out[n] = acc[n]
//
// Parts of an unconditional update that do not depend on n (an inlined GELU of a[k]) are computed
// once per k, before the loop over n. Each output element still adds the same terms in the same
// order from the same start, so results are bit-identical. Applied where the last spatial loop has a constant extent N >= 2 whose
// accumulators fit in `max_row_bytes`, and its loads step across fewer rows (|stride| > 1 or not a
// constant) than the innermost reduction loop's.
#include <cstdint>

#include "kiln/ir/IR.h"

namespace kiln {

ir::Stmt interchange_reductions(const ir::Stmt& s, int64_t max_row_bytes = 64 * 1024);

}  // namespace kiln
