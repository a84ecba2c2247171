#pragma once
// The data-movement family, split by concept: layout changes (DataMovementLayout.cpp),
// selections and copies of parts (DataMovementSelect.cpp), tensors made from shapes and
// attributes (DataMovementGenerate.cpp). register_data_movement (DataMovement.cpp) calls each.
#include "kiln/ops/Op.h"

namespace kiln::ops {

void register_layout_ops(OpTable& table);
void register_select_ops(OpTable& table);
void register_generate_ops(OpTable& table);

}  // namespace kiln::ops
