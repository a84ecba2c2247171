#pragma once
// Which contraction template (kernels/gemm/) a TemplateContraction runs, and with which knobs:
// schedule data (StageSchedule::gemm_template), carried by the IR node to the CUDA printer. The
// numbers are template arguments of kernels/gemm/kiln_gemm.cuh (GemvConfig, TileConfig,
// WgmmaConfig).
#include <cstdint>
#include <string>

namespace kiln::ir {

// A tensor-core tile: gemm<T, TileConfig<bm, bn, bk, warps_m, warps_n, stages>>.
struct GemmTile {
  int64_t bm = 128, bn = 128, bk = 64;
  int64_t warps_m = 2, warps_n = 2;
  int64_t stages = 3;
};

// The Hopper kernel: gemm_wgmma<T, WgmmaConfig<bm, bn, stages, pingpong, dual_halves, swap_ab>,
// TileConfig<...>> (wgmma + TMA; runs on sm_90 devices from sm_90a builds, else the TileConfig's
// mma.sync kernel). dual_halves (dual products): one bm x bn accumulator tile holds bn/2 columns of
// each B. swap_ab: the kernel computes the output's transpose, bm weight rows x bn tokens (the
// tokens on wgmma's N, which comes in steps of 8).
struct GemmWgmmaTile {
  int64_t bm = 128, bn = 256;
  int64_t stages = 4;
  bool pingpong = false;
  bool dual_halves = false;
  bool swap_ab = false;
};

struct GemmTemplate {
  // The small-M kernel (gemv<T, GemvConfig<gemv_max_m, gemv_warps>>) runs when M <= gemv_max_m;
  // 0: never.
  int64_t gemv_max_m = 16;
  int64_t gemv_warps = 8;
  // The tensor-core kernel otherwise: `mid_tile` while M <= mid_max_m (0: never; few output
  // tiles, so smaller ones and split-K), `tile` above. A dual product (two B operands, twice the
  // accumulators) uses `dual_mid_tile` / `dual_tile`.
  int64_t mid_max_m = 256;
  GemmTile mid_tile{64, 128, 32, 2, 2, 4};
  GemmTile tile{256, 128, 64, 4, 2, 3};
  GemmTile dual_mid_tile{64, 128, 32, 2, 2, 4};
  GemmTile dual_tile{128, 128, 32, 2, 4, 3};
  // Above mid_max_m on Hopper: `tile` / `dual_tile` become the fallback of these (when `wgmma`).
  // The wide tile runs when K >= wgmma_wide_min_k and its tiles, in whole waves, are no more work
  // than the narrow tile's (decided per call, kiln::gemm::wgmma_prefers_wide), the narrow one
  // otherwise (a short K, or wide tiles that leave more of their last wave idle). Both
  // cooperative: measured on H200 (bench/gemm/NOTES.md, session 6), 128x128 cooperative beats
  // 128x128 ping-pong on every ViT and Linear M = 816 shape, since a ping-pong warpgroup runs the
  // whole tile's epilogue alone. Dual products keep 64x128 ping-pong: their long epilogue (the
  // activation) hides under the other warpgroup's mainloop (Gemma M = 816 gate*up in the model,
  // H200, two runs of session 6: 230.9 us 128x128 cooperative, 210.4 us 64x128 ping-pong; session
  // 10: 235.3 us for 128x128 cooperative half tiles, dual_halves).
  bool wgmma = true;
  GemmWgmmaTile wgmma_tile{128, 256, 4, false};
  GemmWgmmaTile wgmma_narrow_tile{128, 128, 6, false};
  int64_t wgmma_wide_min_k = 2048;
  GemmWgmmaTile wgmma_dual_tile{64, 128, 5, true};
  // SWAP_AB tiles, chosen per call over the tile above where their whole waves are less work
  // (kiln::gemm::wgmma_swap_choice: 816 tokens fill 3 x 272 or 4 x 208 tokens, where 128-row tiles
  // compute 896 rows): two for single products, one for dual ones (ping-pong, like the tile above:
  // a warpgroup's long epilogue runs under the other's mainloop). Off: `wgmma_swap` false.
  bool wgmma_swap = true;
  GemmWgmmaTile wgmma_swap_tile{128, 272, 4, false, false, true};
  GemmWgmmaTile wgmma_swap_narrow_tile{128, 208, 5, false, false, true};
  GemmWgmmaTile wgmma_dual_swap_tile{64, 136, 6, true, false, true};
  // A convolution read as an implicit im2col (a ContractionOperand with a window): one call of
  // conv<T, TileConfig<conv_tile>> (kernels/gemm/conv_implicit_gemm.cuh), `conv_reason` the why.
  GemmTile conv_tile{64, 128, 32, 2, 2, 2};
  std::string conv_reason;
  // The Hopper convolution (kernels/gemm/conv_wgmma.cuh) first, where it runs: lowering then gives
  // the call the workspace it needs. Set from DefaultScheduleOptions::conv_wgmma (on by default).
  bool conv_wgmma = false;
  // Float32 factors through TF32 tensor cores (the user allowed it); else float16/bfloat16 ones.
  bool tf32 = false;
  // A kiln.QuantLinear: the 4-bit weight kernels of kernels/quant/ (launch_linear_epilogue: GEMV
  // up to gemv_max_m, GEMM above) instead of kernels/gemm/; the tile knobs above are unused.
  bool w4 = false;
  std::string reason;  // why this path and these knobs; printed above the call
};

// The paths of a template call, tried in this order by the call's M: the small-M kernel (M <=
// gemv_max_m), the mid tiles (M <= mid_max_m), the large tiles above (on Hopper the wgmma tiles,
// where `wgmma` and not `tf32`).
enum class GemmPath { SmallM, Mid, Large };

// The path a call with this M takes: for a constant M the only one compiled (CudaPrinter), whose
// knobs are the only ones that change the generated code (tune/SearchSpace).
inline GemmPath gemm_path(const GemmTemplate& c, int64_t m) {
  if (c.gemv_max_m > 0 && m <= c.gemv_max_m) return GemmPath::SmallM;
  if (c.mid_max_m > 0 && m <= c.mid_max_m) return GemmPath::Mid;
  return GemmPath::Large;
}

}  // namespace kiln::ir
