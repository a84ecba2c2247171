#pragma once
// Lowering pass (GPU row kernels, after FuseRowStages): inside a loop over rows bound to blocks (a
// fused softmax or LayerNorm), a row reduction ends with block_allreduce, which leaves the row's
// result in every thread, and then thread 0 stores it to a global temporary that the row's later
// stages load back at the same index, after a barrier:
//
//   acc[0] = block_allreduce(acc[0], ...)
//   if (tx == 0) { softmax_max[row] = acc[0] }
//   sync_threads()
//   ... softmax_max[row] ...
//
// Each thread keeps its own copy instead (a local `<temporary>_value`, written unguarded: the
// allreduce gives every thread the same value), the later stages read it, and the temporary goes
// (it is removed from `temporaries`). Per row and result: no global store, no global load in each
// later stage, no latency of that round trip on the row's critical path. A temporary is replaced
// only when that guarded store is its only store, every load of it reads the stored index, and
// all of them come in statements of the same row body after the store's; and not in blocks of
// 1024 threads, where the registers it keeps live can halve the blocks an SM holds.
#include <vector>

#include "kiln/ir/IR.h"

namespace kiln {

ir::Stmt row_results_in_registers(const ir::Stmt& s, std::vector<ir::Buffer>& temporaries);

}  // namespace kiln
