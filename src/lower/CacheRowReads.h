#pragma once
// Lowering pass (GPU row kernels, Schedule::cache_row_bytes): inside a loop over rows bound to
// blocks (a fused softmax or LayerNorm), a global buffer that the row's stages only read, each
// through whole-vector loads of the same per-thread slice (thread t, step k of a loop of constant
// trip count K: the same element offsets and guard in every stage), is read from memory once per
// row into a local array of K vectors at the top of the row; every stage then reads that array
// (registers: the step loops become unrolled, so its indices are constants). One DRAM read per
// element instead of one per stage, and all K loads of a thread in flight at once. A buffer is
// cached only while the arrays of the row stay within `max_bytes` per thread, and only when
// every stage's thread loop has the same extent (the launch gives each thread one iteration, so
// a thread's slice is the same in every stage).
#include <cstdint>

#include "kiln/ir/IR.h"

namespace kiln {

ir::Stmt cache_row_reads(const ir::Stmt& s, int64_t max_bytes);

}  // namespace kiln
