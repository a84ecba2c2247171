#pragma once
// Tensor-core GEMM (variant 1): mma.sync m16n8k16 over fp16/bf16 operands, fp32 accumulators,
// for sm_80 and later (sm_90 and sm_110 run the same PTX).
//
// Schedule (TileConfig<BM, BN, BK, WARPS_M, WARPS_N, STAGES>). A CTA computes a BM x BN tile of
// C for one flat batch index (grid z) and one split of K; its WARPS_M x WARPS_N warps each own a
// (BM/WARPS_M) x (BN/WARPS_N) sub-tile, i.e. (BM/WARPS_M/16) x (BN/WARPS_N/8) mma tiles of fp32
// accumulators per B operand. K advances by BK: the A tile and the B tile(s) of a k-step are
// copied global -> shared by cp.async, 16 bytes per copy, STAGES deep (STAGES-1 steps in flight
// while one is computed); copies that cross M, N or K are zero-filled (cp.async src-size), so
// edge tiles need no other branch. Each thread's copy addresses are set up once (TileLoader):
// the first version recomputed them per k-step in 64-bit arithmetic and was issue-bound. Shared tiles keep the global layout (a row per m/n when k is
// contiguous, a row per k when m/n is) padded by 16 bytes per row: the 8 rows one ldmatrix phase
// reads then start in 8 different 16-byte bank groups (no conflicts, no swizzle arithmetic).
// Fragments come from ldmatrix.x4, .trans where the operand's k is not contiguous.
//
// Split-K (grids smaller than the GPU, batch 1, workspace given): split s of S sums its k-steps
// into its own fp32 slice of the workspace; a second kernel adds the slices in split order
// (deterministic) and calls the epilogue once per element.
//
// Dual products (Epilogue::kNumB == 2) share the A fragments between the two B tiles.
#include "gemm_ptx.cuh"
#include "gemm_simt.cuh"

namespace kiln::gemm::detail {

// Shared-memory footprint of one configuration and operand layout. A "row" of a shared tile is
// its global layout's strided axis; rows hold the contiguous axis plus 8 elements of padding.
template <typename T, typename Config, int kNumB, bool kAk, bool kBk>
struct TcLayout {
  static constexpr int BM = Config::BM, BN = Config::BN, BK = Config::BK;
  static constexpr int kALd = (kAk ? BK : BM) + 8, kARows = kAk ? BM : BK;
  static constexpr int kBLd = (kBk ? BK : BN) + 8, kBRows = kBk ? BN : BK;
  static constexpr int kAElems = kARows * kALd, kBElems = kBRows * kBLd;
  static constexpr int kStageElems = kAElems + kNumB * kBElems;
  static constexpr size_t kSmemBytes = size_t(Config::STAGES) * kStageElems * sizeof(T);
};

// The cp.async copies of one operand's tiles, one k-step after another: kRows x kCols elements
// of global rows (the strided axis) and contiguous columns, into shared rows of kLd elements.
// Thread `tid` copies column chunk tid % (kCols / 8) of rows tid / (kCols / 8) + i * kRowsPerPass;
// its pointer, strides and remaining extents are set up once, so that a k-step costs a few
// instructions per 16-byte copy. Rows past the row extent and columns past the column extent
// are zero-filled (src-size), so edge tiles need no other branch. kKAlongCols: k is the column
// axis (k contiguous), else the row axis.
template <typename T, int kRows, int kCols, int kLd, int kThreads, bool kKAlongCols>
struct TileLoader {
  static constexpr int kChunksPerRow = kCols / 8, kRowsPerPass = kThreads / kChunksPerRow;
  static constexpr int kPasses = (kRows + kRowsPerPass - 1) / kRowsPerPass;
  static_assert(kThreads % kChunksPerRow == 0, "TileConfig: the CTA's threads must cover whole rows of 16-byte chunks of a tile");
  const T* ptr;          // this thread's first chunk at the next k-step
  int64_t pass_stride;   // elements between a thread's rows
  int64_t step_stride;   // elements between k-steps
  int64_t row_rem;       // rows of the extent left from this thread's first row (at the next k-step)
  int64_t col_rem;       // columns of the extent left from this thread's chunk (at the next k-step)
  int dst;               // this thread's first chunk in the shared tile

  TileLoader() = default;
  __device__ __forceinline__ TileLoader(const T* src, int64_t row_stride, int64_t row0, int64_t row_limit, int64_t col0,
                                        int64_t col_limit) {
    const int row = int(threadIdx.x) / kChunksPerRow, col = 8 * (int(threadIdx.x) % kChunksPerRow);
    ptr = src + (row0 + row) * row_stride + col0 + col;
    pass_stride = row_stride * kRowsPerPass;
    step_stride = kKAlongCols ? int64_t(kCols) : row_stride * kRows;
    row_rem = row_limit - row0 - row;
    col_rem = col_limit - col0 - col;
    dst = row * kLd + col;
  }

  __device__ __forceinline__ void issue(T* tile) {
    const int rows_ok = row_rem <= 0 ? 0 : row_rem >= int64_t(kPasses) * kRowsPerPass ? kPasses : int((row_rem + kRowsPerPass - 1) / kRowsPerPass);
    const int bytes = col_rem <= 0 ? 0 : col_rem >= 8 ? 16 : int(col_rem) * int(sizeof(T));
    const int row = dst / kLd;
#pragma unroll
    for (int i = 0; i < kPasses; ++i) {
      if (kRows % kRowsPerPass != 0 && row + i * kRowsPerPass >= kRows) break;
      // A zero src-size reads nothing: the pointer may lie past the extent.
      cp_async16(tile + dst + i * kRowsPerPass * kLd, ptr + i * pass_stride, i < rows_ok ? bytes : 0);
    }
    ptr += step_stride;
    if (kKAlongCols) {
      col_rem -= kCols;
    } else {
      row_rem -= kRows;
    }
  }
};

template <typename T, typename Config, typename Epilogue, bool kAk, bool kBk>
__global__ void __launch_bounds__(Config::kThreads)
    tensorcore_gemm_kernel(Problem p, Epilogue epilogue, float* partial, int splits, int k_steps_per_split) {
  constexpr int NB = Epilogue::kNumB;
  constexpr int BM = Config::BM, BN = Config::BN, BK = Config::BK, STAGES = Config::STAGES;
  constexpr int kThreads = Config::kThreads;
  constexpr int WM = BM / Config::WARPS_M, WN = BN / Config::WARPS_N;
  constexpr int MT = WM / 16, NT = WN / 8;
  using L = TcLayout<T, Config, NB, kAk, kBk>;

  extern __shared__ __align__(16) unsigned char tc_smem[];
  T* smem = reinterpret_cast<T*>(tc_smem);
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  const int wm0 = (warp % Config::WARPS_M) * WM, wn0 = (warp / Config::WARPS_M) * WN;
  // Grouped rasterization: consecutive CTAs walk kGroupM m-tiles down one n-column before the
  // next column, so that the CTAs resident at once share their B tiles in L2.
  constexpr int64_t kGroupM = 8;
  const int64_t linear = int64_t(blockIdx.y) * gridDim.x + blockIdx.x, per_group = kGroupM * gridDim.x;
  const int64_t first_m = linear / per_group * kGroupM;
  const int64_t group_m = gridDim.y - first_m < kGroupM ? gridDim.y - first_m : kGroupM;
  const int64_t m0 = (first_m + linear % per_group % group_m) * BM, n0 = (linear % per_group / group_m) * BN;
  const int64_t b = blockIdx.z / splits;
  const int split = int(blockIdx.z % splits);

  const T* a_ptr = static_cast<const T*>(p.a.data) + p.batch_offset(p.a, b);
  const T* b_ptr[NB];
#pragma unroll
  for (int j = 0; j < NB; ++j) b_ptr[j] = static_cast<const T*>(p.b[j].data) + p.batch_offset(p.b[j], b);

  const int64_t k_steps = (p.k + BK - 1) / BK;
  const int64_t step0 = int64_t(split) * k_steps_per_split;
  const int64_t step_end = step0 + k_steps_per_split < k_steps ? step0 + k_steps_per_split : k_steps;
  const int steps = int(step_end - step0);

  const int64_t k_first = step0 * BK;
  TileLoader<T, L::kARows, kAk ? BK : BM, L::kALd, kThreads, kAk> a_load =
      kAk ? TileLoader<T, L::kARows, kAk ? BK : BM, L::kALd, kThreads, kAk>(a_ptr, p.a.stride_mn, m0, p.m, k_first, p.k)
          : TileLoader<T, L::kARows, kAk ? BK : BM, L::kALd, kThreads, kAk>(a_ptr, p.a.stride_k, k_first, p.k, m0, p.m);
  using BLoader = TileLoader<T, L::kBRows, kBk ? BK : BN, L::kBLd, kThreads, kBk>;
  BLoader b_load[NB] = {kBk ? BLoader(b_ptr[0], p.b[0].stride_mn, n0, p.n, k_first, p.k) : BLoader(b_ptr[0], p.b[0].stride_k, k_first, p.k, n0, p.n)};
  if constexpr (NB == 2)
    b_load[NB - 1] = kBk ? BLoader(b_ptr[NB - 1], p.b[NB - 1].stride_mn, n0, p.n, k_first, p.k)
                         : BLoader(b_ptr[NB - 1], p.b[NB - 1].stride_k, k_first, p.k, n0, p.n);
  // Copies the next k-step (the loaders advance by one step per call) into shared stage `stage`.
  auto issue_stage = [&](int stage) {
    T* st = smem + stage * L::kStageElems;
    a_load.issue(st);
#pragma unroll
    for (int j = 0; j < NB; ++j) b_load[j].issue(st + L::kAElems + j * L::kBElems);
  };

  float acc[NB][MT][NT][4];
#pragma unroll
  for (int j = 0; j < NB; ++j)
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int t = 0; t < NT; ++t) acc[j][i][t][0] = acc[j][i][t][1] = acc[j][i][t][2] = acc[j][i][t][3] = 0.0f;

#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < steps) issue_stage(s);
    cp_async_commit();
  }

  // ldmatrix lane roles: matrix q = lane / 8 of an x4, row r = lane % 8 of it.
  const int q = lane / 8, r = lane % 8;
  for (int s = 0; s < steps; ++s) {
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    if (s + STAGES - 1 < steps) issue_stage((s + STAGES - 1) % STAGES);
    cp_async_commit();

    const T* st = smem + (s % STAGES) * L::kStageElems;
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      uint32_t af[MT][4];
#pragma unroll
      for (int i = 0; i < MT; ++i) {
        // Matrices (m 0-7, k 0-7), (m 8-15, k 0-7), (m 0-7, k 8-15), (m 8-15, k 8-15) = a0..a3.
        if constexpr (kAk) {
          ldmatrix_x4<false>(af[i], st + (wm0 + 16 * i + 8 * (q % 2) + r) * L::kALd + kk + 8 * (q / 2));
        } else {
          ldmatrix_x4<true>(af[i], st + (kk + 8 * (q / 2) + r) * L::kALd + wm0 + 16 * i + 8 * (q % 2));
        }
      }
#pragma unroll
      for (int j = 0; j < NB; ++j) {
        const T* bt = st + L::kAElems + j * L::kBElems;
#pragma unroll
        for (int tp = 0; tp < NT / 2; ++tp) {
          // Matrices (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15): b0, b1 of
          // n-tile 2tp, then of n-tile 2tp+1.
          uint32_t bf[4];
          if constexpr (kBk) {
            ldmatrix_x4<false>(bf, bt + (wn0 + 16 * tp + 8 * (q / 2) + r) * L::kBLd + kk + 8 * (q % 2));
          } else {
            ldmatrix_x4<true>(bf, bt + (kk + 8 * (q % 2) + r) * L::kBLd + wn0 + 16 * tp + 8 * (q / 2));
          }
#pragma unroll
          for (int i = 0; i < MT; ++i) {
            mma16816<T>(acc[j][i][2 * tp], af[i], bf[0], bf[1]);
            mma16816<T>(acc[j][i][2 * tp + 1], af[i], bf[2], bf[3]);
          }
        }
      }
    }
  }
  cp_async_wait<0>();

  // C fragment of an mma tile: c0, c1 = (row g, columns 2t, 2t+1), c2, c3 = (row g + 8, same).
  const int g = lane / 4, t4 = lane % 4;
  const int64_t slice = p.m * p.n;
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t m = m0 + wm0 + 16 * i + 8 * h + g;
      if (m >= p.m) continue;
#pragma unroll
      for (int t = 0; t < NT; ++t)
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          const int64_t n = n0 + wn0 + 8 * t + 2 * t4 + c;
          if (n >= p.n) continue;
          if (splits > 1) {
#pragma unroll
            for (int j = 0; j < NB; ++j) __stcg(partial + (int64_t(split) * NB + j) * slice + m * p.n + n, acc[j][i][t][2 * h + c]);
          } else if constexpr (NB == 2) {
            epilogue(b, m, n, acc[0][i][t][2 * h + c], acc[1][i][t][2 * h + c]);
          } else {
            epilogue(b, m, n, acc[0][i][t][2 * h + c]);
          }
        }
    }
}

// Split-K reduction: adds the splits' slices in order and calls the epilogue once per element.
template <typename Epilogue>
__global__ void __launch_bounds__(256) splitk_epilogue_kernel(const float* partial, int64_t m, int64_t n, int splits,
                                                              Epilogue epilogue) {
  constexpr int NB = Epilogue::kNumB;
  const int64_t slice = m * n;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < slice; i += int64_t(gridDim.x) * blockDim.x) {
    float v[NB];
#pragma unroll
    for (int j = 0; j < NB; ++j) v[j] = 0.0f;
    for (int s = 0; s < splits; ++s)
#pragma unroll
      for (int j = 0; j < NB; ++j) v[j] += __ldcg(partial + (int64_t(s) * NB + j) * slice + i);
    if constexpr (NB == 2) {
      epilogue(0, i / n, i % n, v[0], v[1]);
    } else {
      epilogue(0, i / n, i % n, v[0]);
    }
  }
}

template <typename T, typename Config, typename Epilogue, bool kAk, bool kBk>
cudaError_t launch_tensorcore(const Problem& p, const Epilogue& epilogue, float* partial, int splits, int k_steps_per_split,
                              dim3 grid, cudaStream_t stream) {
  using L = TcLayout<T, Config, Epilogue::kNumB, kAk, kBk>;
  auto kernel = tensorcore_gemm_kernel<T, Config, Epilogue, kAk, kBk>;
  if (L::kSmemBytes > 48 * 1024) {
    const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(L::kSmemBytes));
    if (e != cudaSuccess) return e;
  }
  kernel<<<grid, Config::kThreads, L::kSmemBytes, stream>>>(p, epilogue, partial, splits, k_steps_per_split);
  return cudaGetLastError();
}

}  // namespace kiln::gemm::detail

namespace kiln::gemm {

// The tensor-core path needs both operands readable in 16-byte vectors (gemm_ptx.cuh:
// vector_axis), all B operands in the same layout, and a grid within CUDA's limits; anything
// else runs simt. Split-K is used when the output tiles fill less than the GPU, batch is 1 and
// the workspace holds at least two fp32 slices.
template <typename T, typename Config, typename Epilogue>
cudaError_t gemm_tensorcore(const Problem& p, const Epilogue& epilogue, void* workspace, int64_t workspace_bytes,
                            cudaStream_t stream) {
  static_assert(std::is_same<T, __half>::value || std::is_same<T, __nv_bfloat16>::value, "gemm<T>: T is __half or __nv_bfloat16");
  static_assert(Config::BK % 16 == 0 && Config::BM % (16 * Config::WARPS_M) == 0 && Config::BN % (16 * Config::WARPS_N) == 0,
                "TileConfig: BK a multiple of 16, each warp's tile a multiple of 16 x 16");
  static_assert(Config::STAGES >= 2, "TileConfig: at least 2 stages");
  constexpr int NB = Epilogue::kNumB;
  static_assert(NB == 1 || NB == 2, "Epilogue::kNumB is 1 or 2");
  const int64_t batch = p.batch();
  if (p.m <= 0 || p.n <= 0 || batch <= 0) return cudaSuccess;
  const int a_axis = detail::vector_axis(p, p.a, p.m);
  int b_axis = detail::vector_axis(p, p.b[0], p.n);
  if (NB == 2 && detail::vector_axis(p, p.b[1], p.n) != b_axis) b_axis = -1;
  const int64_t tiles_m = (p.m + Config::BM - 1) / Config::BM, tiles_n = (p.n + Config::BN - 1) / Config::BN;
  if (p.k <= 0 || p.num_b != NB || a_axis < 0 || b_axis < 0 || tiles_m > 65535 || tiles_n > 2147483647 || batch > 65535)
    return simt<T>(p, epilogue, stream);

  const int64_t k_steps = (p.k + Config::BK - 1) / Config::BK;
  int64_t splits = 1;
  const int64_t slice_bytes = int64_t(NB) * p.m * p.n * 4;
  if (batch == 1 && workspace != nullptr && reinterpret_cast<uintptr_t>(workspace) % 16 == 0 && workspace_bytes >= 2 * slice_bytes) {
    const int64_t tiles = tiles_m * tiles_n, sms = detail::device_sm_count();
    splits = tiles < sms ? sms / tiles : 1;
    if (splits > 8) splits = 8;
    if (splits > k_steps / 4) splits = k_steps / 4;  // at least 4 k-steps per split
    if (splits > workspace_bytes / slice_bytes) splits = workspace_bytes / slice_bytes;
    if (splits < 1) splits = 1;
  }
  const int64_t per_split = (k_steps + splits - 1) / splits;
  splits = (k_steps + per_split - 1) / per_split;
  float* partial = splits > 1 ? static_cast<float*>(workspace) : nullptr;

  const dim3 grid{unsigned(tiles_n), unsigned(tiles_m), unsigned(batch * splits)};
  cudaError_t e;
  if (a_axis == 1) {
    e = b_axis == 1 ? detail::launch_tensorcore<T, Config, Epilogue, true, true>(p, epilogue, partial, int(splits), int(per_split), grid, stream)
                    : detail::launch_tensorcore<T, Config, Epilogue, true, false>(p, epilogue, partial, int(splits), int(per_split), grid, stream);
  } else {
    e = b_axis == 1 ? detail::launch_tensorcore<T, Config, Epilogue, false, true>(p, epilogue, partial, int(splits), int(per_split), grid, stream)
                    : detail::launch_tensorcore<T, Config, Epilogue, false, false>(p, epilogue, partial, int(splits), int(per_split), grid, stream);
  }
  if (e != cudaSuccess || splits == 1) return e;
  const int64_t blocks = (p.m * p.n + 255) / 256;
  detail::splitk_epilogue_kernel<Epilogue><<<unsigned(blocks < 4096 ? blocks : 4096), 256, 0, stream>>>(partial, p.m, p.n, int(splits), epilogue);
  return cudaGetLastError();
}

}  // namespace kiln::gemm
