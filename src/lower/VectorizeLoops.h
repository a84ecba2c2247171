#pragma once
// Lowering pass: turns each loop marked Vectorized (constant extent V) whose body stores one
// element per iteration into whole-vector memory accesses around scalar compute:
//   - every global load whose index is base + v (base a multiple of V, v the loop variable, and
//     free of variables that loops or lets inside the loop bind) is read once as a V-element
//     vector into a local array before the loop;
//   - the store, if its index has that form, writes a local array, copied out as one vector;
//   - the loop itself becomes an unrolled loop over registers.
// Loads of other forms (broadcast, gathers) stay scalar inside the loop. The printers turn a
// vector copy into 16-byte accesses (kiln::copy_vector).
#include "kiln/ir/IR.h"

namespace kiln {

ir::Stmt vectorize_loops(const ir::Stmt& s);

}  // namespace kiln
