#pragma once
// Default GPU schedules per op family (DESIGN.md: schedules are data). Chosen from each stage's
// pattern and shape:
//  - injective: the last axis split into 16-byte vectors, everything else fused into one loop
//    split over blocks of 256 threads (grid-stride, coalesced);
//  - reductions whose innermost reduction axis is the contiguous one (softmax, layernorm, reduce
//    over the last axis): a block per output row, the row spread over the block's threads and
//    combined with warp shuffles (reduce_threads);
//  - contractions (MatMul, Gemm, Conv, ConvTranspose; te/Contraction.h): tiled through shared
//    memory, a block per output tile, a register tile of outputs per thread (ContractionTile);
//  - other reductions: a thread per output element, threads along the contiguous output axis, so
//    that a warp reads consecutive addresses at each step of the reduction;
//  - injective stages over the same rows as a row reduction (softmax's normalize): a block per
//    row, so that the stages fuse into one kernel per row (Schedule::fuse_row_stages).
// The CPU reference uses no schedule (serial loops).
#include <vector>

#include "kiln/schedule/Schedule.h"
#include "kiln/te/Tensor.h"

namespace kiln {

// The constants the default schedules are built from, as one struct so that the tuner
// (tune/SearchSpace.h) can search over them per kernel; the defaults are the hand-chosen values.
struct DefaultScheduleOptions {
  int64_t threads_per_block = 256;  // elementwise stages, and reductions with a thread per output
  int64_t vector_bytes = 16;        // bytes per vector access (16: 128-bit loads and stores)
  // Threads across a row of a row reduction and its row stages; 0: by the row's length (32 up to
  // 256 elements, 128, 256, 512, 1024 over 16384).
  int64_t row_threads = 0;
  // Registers per thread a row kernel may spend on keeping its slice of the row between stages
  // (Schedule::cache_row_bytes); 0: no caching. 256: 64 words, 32768 floats over 512 threads.
  int64_t row_cache_bytes = 256;
  // Reductions over outer axes: threads along the outputs (threadIdx.x), and along the reduced
  // rows (threadIdx.y; 0: 4 per lane of the vector, at most 32).
  int64_t column_threads = 32;
  int64_t column_row_threads = 0;
  // Float32 contractions may run the tensor-core templates in TF32 (10-bit mantissas, about 1e-3
  // relative error; `kiln compile --tf32`). Off: exact FP32 on the tiled path.
  bool allow_tf32 = false;
  // Float16/bfloat16 elementwise chains fused into one expression keep their intermediates in
  // float32, rounding once where stored (Schedule::float_intermediates; `kiln compile
  // --float-intermediates`), as torch.compile computes them. Off: every op's result is rounded to
  // its type, as ONNX defines each op and the CPU reference computes.
  bool float_intermediates = false;
  // Contraction templates (kernels/gemm/, ir::GemmTemplate): warps per block of the small-M
  // kernel (0: by N: 4 above 4096 columns, 16 up to 4096, 8 when N is a symbol; else 4, 8 or 16),
  // and the K from which the wide Hopper tile (128x256, cooperative) runs when its tiles fill every
  // SM (below it, or with fewer tiles, the 128x128 cooperative tile). Only compiled, checked
  // configurations are reachable.
  int64_t gemv_warps = 0;
  int64_t wgmma_wide_min_k = 2048;
  // The Hopper tile of dual products (gate and up sharing A): 0 64x128 ping-pong (the default), 1
  // 128x128 cooperative with an accumulator set per B, 2 128x128 cooperative half tiles (64 columns
  // of each B). All three are checked by bench/gemm's harness; which is fastest depends on the
  // shape (H200, 816 x 16384 x 2048: 192 / 188 / 215 us in the harness, 64x128 ping-pong fastest in
  // the Gemma block; bench/gemm/NOTES.md, session 10): a tuner knob.
  int64_t wgmma_dual_tile = 0;
  // Hopper tiles with the tokens on wgmma's N (ir::GemmTemplate::wgmma_swap: SWAP_AB, chosen per call
  // where their whole waves are less work): on by default since session 20 (H200, 816 tokens: Linear
  // 16384 x 2048 88 us against 98, 4096 x 4096 43 against 48, Gemma's gate*up 175 against 192;
  // bench/gemm/NOTES.md); a tuner knob.
  bool wgmma_swap = true;
  // Convolutions try the Hopper kernel (kernels/gemm/conv_wgmma.cuh) first (ir::GemmTemplate::
  // conv_wgmma): on by default since session 7, 1.6-2.0x faster than the patch kernel on the CNN's
  // 64->64, 64->128 and 128->128 layers on an H200 (bench/gemm/NOTES_conv.md; channels off 8 keep the
  // mma.sync kernels at run time); `kiln compile --no-conv-wgmma` turns it off.
  bool conv_wgmma = true;
};

Schedule default_gpu_schedule(const std::vector<te::Tensor>& inputs, const std::vector<te::Tensor>& outputs,
                              const DefaultScheduleOptions& options = DefaultScheduleOptions());

}  // namespace kiln
