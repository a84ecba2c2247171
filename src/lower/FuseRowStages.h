#pragma once
// Lowering pass: adjacent stages that each are one block-bound loop over the same rows (a
// softmax's max, sum and normalize; a layer norm's mean, variance and normalize) become one
// loop whose body runs the stages in turn with a block barrier between them, so that one kernel
// handles a row from its first read to its last write. A stage joins only if every value it
// reads from an earlier stage of the group is that row's own (one element per row, read at the
// row index), so no block reads what another block writes.
#include <string>
#include <vector>

#include "kiln/ir/IR.h"

namespace kiln {

// `body` is a function body: temporaries' allocations around a sequence of stages; `notes` has
// one line per stage and is merged the same way ("a + b + c" for a fused group).
ir::Stmt fuse_row_stages(const ir::Stmt& body, std::vector<std::string>& notes);

}  // namespace kiln
