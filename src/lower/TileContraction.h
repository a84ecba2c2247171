#pragma once
// Lowering pass: builds the loop nest of a contraction stage (te/Contraction.h) as tiles of its
// matrix product C[batch, m, n] = sum_k a(m, k) * b(k, n):
//   for batch (blockIdx.z), m tile (blockIdx.y), n tile (blockIdx.x):       grid-stride
//     shared A[k][m], B[k][n]; for thread (threadIdx.x):                    runs once
//       registers acc[thread_m][thread_n] = 0
//       for each step of `k` along the reduction:
//         cooperative loads of both tiles (zero outside the bounds or the reduction's condition)
//         barrier; acc += A-column x B-row for each of the k; barrier
//       store acc where inside the output
// Axes on each side are flattened (m over the m axes, k over the reduction axes, in order), so
// a convolution is an implicit GEMM. A thread's outputs are strided by the thread counts, so a
// warp's shared-memory reads are conflict-free and its stores coalesced.
#include "kiln/ir/IR.h"
#include "kiln/schedule/Schedule.h"
#include "kiln/te/Contraction.h"

namespace kiln {

ir::Stmt tile_contraction(const te::Tensor& t, const te::Contraction& c, const ir::Buffer& out,
                          const ContractionTile& tile);

}  // namespace kiln
