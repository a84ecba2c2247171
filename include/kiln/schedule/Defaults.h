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

Schedule default_gpu_schedule(const std::vector<te::Tensor>& inputs, const std::vector<te::Tensor>& outputs);

}  // namespace kiln
