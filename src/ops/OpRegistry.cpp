#include "Families.h"

namespace kiln::ops {

static OpTable make_table() {
  OpTable table;
  register_elementwise(table);
  register_reduction(table);
  register_normalization(table);
  register_data_movement(table);
  register_contraction(table);
  register_quant(table);
  register_resampling(table);
  register_quantization(table);
  register_grid_sample(table);
  register_scatter(table);
  register_sorting(table);
  register_einsum(table);
  register_losses(table);
  register_normalization_stats(table);
  register_signal(table);
  register_recurrent(table);
  register_attention(table);
  register_rotary_embedding(table);
  register_control_flow(table);
  register_optimizers(table);
  register_causal_conv(table);
  register_fold(table);
  register_determinant(table);
  register_roi_align(table);
  return table;
}

const OpDefinition* find_op(OpKind kind) {
  static const OpTable table = make_table();
  return table.find(kind);
}

}  // namespace kiln::ops
