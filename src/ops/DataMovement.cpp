#include "DataMovement.h"

#include "Families.h"

namespace kiln::ops {

void register_data_movement(OpTable& table) {
  register_layout_ops(table);
  register_select_ops(table);
  register_generate_ops(table);
}

}  // namespace kiln::ops
