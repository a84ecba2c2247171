#pragma once
// Each op family registers its definitions; OpRegistry.cpp calls every family once.
#include "kiln/ops/Op.h"

namespace kiln::ops {

void register_elementwise(OpTable& table);    // Elementwise*.cpp
void register_reduction(OpTable& table);      // Reduction.cpp
void register_normalization(OpTable& table);  // Normalization.cpp
void register_data_movement(OpTable& table);  // DataMovement*.cpp
void register_contraction(OpTable& table);    // Contraction.cpp, Pooling.cpp
void register_quant(OpTable& table);          // QuantLinear.cpp
void register_resampling(OpTable& table);     // Resize.cpp
void register_quantization(OpTable& table);   // Quantization.cpp
void register_grid_sample(OpTable& table);    // GridSample.cpp
void register_scatter(OpTable& table);        // Scatter.cpp
void register_sorting(OpTable& table);        // TopK.cpp
void register_einsum(OpTable& table);         // Einsum.cpp
void register_losses(OpTable& table);         // Losses.cpp
void register_normalization_stats(OpTable& table);  // NormalizationStats.cpp
void register_signal(OpTable& table);         // Signal.cpp
void register_recurrent(OpTable& table);      // Recurrent.cpp
void register_attention(OpTable& table);      // Attention.cpp
void register_rotary_embedding(OpTable& table);  // RotaryEmbedding.cpp
void register_control_flow(OpTable& table);      // ControlFlow.cpp
void register_optimizers(OpTable& table);        // Optimizers.cpp
void register_causal_conv(OpTable& table);       // CausalConv.cpp
void register_fold(OpTable& table);              // Fold.cpp
void register_determinant(OpTable& table);       // Determinant.cpp
void register_roi_align(OpTable& table);         // RoiAlign.cpp

}  // namespace kiln::ops
