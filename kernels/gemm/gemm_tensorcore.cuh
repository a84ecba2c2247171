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
// edge tiles need no other branch. Shared tiles keep the global layout (a row per m/n when k is
// contiguous, a row per k when m/n is) padded by 16 bytes per row: the 8 rows one ldmatrix phase
// reads then start in 8 different 16-byte bank groups (no conflicts, no swizzle arithmetic).
// Fragments come from ldmatrix.x4, .trans where the operand's k is not contiguous.
//
// Mainloop (software-pipelined): the register fragments are double-buffered, so the ldmatrix of
// k-slice kk+1 is issued before the mmas of slice kk, across k-steps too (the next stage's first
// slice is read right after the single wait + barrier of each k-step); each thread's global ->
// shared copy plan (TileCopy) is computed once. On H100 this leaves the L2 request rate, not the
// mainloop, as the limit (bench/gemm/NOTES.md).
//
// Split-K (grids smaller than the GPU, batch 1, workspace given): split s of S sums its k-steps
// into its own fp32 slice of the workspace; a second kernel adds the slices in split order
// (deterministic) and calls the epilogue once per element.
//
// Dual products (Epilogue::kNumB == 2) share the A fragments between the two B tiles.
//
// Launched with programmatic dependent launch on sm_90+ (gemm_ptx.cuh: gemm_pdl): the blocks may
// start while the kernel before it on the stream finishes and wait (pdl_wait) before any global
// access; the split-K reduction kernel is launched plainly after it.
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

// One thread's share of copying an operand tile global -> shared, kept across k-steps. A tile is
// kRows x kCols elements (rows: the global layout's strided axis, columns its contiguous one),
// copied in 16-byte chunks; shared rows hold kLd elements. Chunks past row_rem rows or col_rem
// columns of the global operand read as zero (cp.async src-size), so edge tiles need no branch.
// When kThreads is a multiple of the chunks per row (every configuration in use), a thread's
// chunks share one column and are kRowStep rows apart: the per-step work is a compare, a select
// and a cp.async per chunk. Other shapes recompute each chunk's row and column.
template <typename T, int kRows, int kCols, int kLd, int kThreads>
struct TileCopy {
  static constexpr int kChunksPerRow = kCols / 8, kChunks = kRows * kChunksPerRow;
  static constexpr int kIters = (kChunks + kThreads - 1) / kThreads;
  static constexpr bool kRegular = kThreads % kChunksPerRow == 0;
  static constexpr int kRowStep = kRegular ? kThreads / kChunksPerRow : 0;

  const T* tile;        // global element (row 0, column 0) of the tile at the current k-step
  int64_t row_stride;   // global elements between rows
  int64_t row_rem;      // global rows left from the tile's row 0 (<= 0: all zero)
  int64_t col_rem;      // global columns left from the tile's column 0
  int r0, c0;           // this thread's first chunk (regular case)

  TileCopy() = default;

  __device__ __forceinline__ TileCopy(const T* src, int64_t stride, int64_t row0, int64_t row_limit, int64_t col0, int64_t col_limit)
      : tile(src + row0 * stride + col0), row_stride(stride), row_rem(row_limit - row0), col_rem(col_limit - col0) {
    r0 = int(threadIdx.x) / kChunksPerRow;
    c0 = int(threadIdx.x) % kChunksPerRow;
  }
  // Moves the tile `rows` rows and `cols` columns on.
  __device__ __forceinline__ void advance(int rows, int cols) {
    tile += rows * row_stride + cols;
    row_rem -= rows;
    col_rem -= cols;
  }
  // Issues this thread's cp.async copies into the shared tile at byte address `dst`.
  __device__ __forceinline__ void issue(uint32_t dst) const {
    if constexpr (kRegular) {
      const int64_t cols_left = col_rem - 8 * c0;
      const int col_bytes = cols_left <= 0 ? 0 : cols_left >= 8 ? 16 : int(cols_left) * int(sizeof(T));
      const T* first = tile + r0 * row_stride + 8 * c0;
      const uint32_t first_dst = dst + uint32_t((r0 * kLd + 8 * c0) * sizeof(T));
#pragma unroll
      for (int i = 0; i < kIters; ++i) {
        if (kChunks % kThreads != 0 && int(threadIdx.x) + i * kThreads >= kChunks) break;
        const bool row_ok = r0 + i * kRowStep < row_rem;
        const int bytes = row_ok ? col_bytes : 0;
        cp_async16(first_dst + uint32_t(i * kRowStep * kLd * sizeof(T)), bytes > 0 ? first + i * kRowStep * row_stride : tile, bytes);
      }
    } else {
#pragma unroll
      for (int i = 0; i < kIters; ++i) {
        const int idx = int(threadIdx.x) + i * kThreads;
        if (kChunks % kThreads != 0 && idx >= kChunks) break;
        const int r = idx / kChunksPerRow, c = idx % kChunksPerRow;
        int64_t left = r < row_rem ? col_rem - 8 * c : 0;
        const int bytes = left <= 0 ? 0 : left >= 8 ? 16 : int(left) * int(sizeof(T));
        cp_async16(dst + uint32_t((r * kLd + 8 * c) * sizeof(T)), bytes > 0 ? tile + r * row_stride + 8 * c : tile, bytes);
      }
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
  constexpr int MT = WM / 16, NT = WN / 8, KS = BK / 16;
  // Double-buffered fragments while accumulators + two fragment buffers stay within ~200
  // registers (every single-B configuration in use; not a dual product on 64x64 warp tiles).
  constexpr bool kPipelined = NB * MT * NT * 4 + 2 * (MT * 4 + NB * (NT / 2) * 4) <= 200;
  using L = TcLayout<T, Config, NB, kAk, kBk>;
  constexpr uint32_t kEl = sizeof(T), kStageBytes = L::kStageElems * kEl;
  // Copy plans: rows are the strided axis of each operand's global layout.
  using ACopy = TileCopy<T, kAk ? BM : BK, kAk ? BK : BM, L::kALd, kThreads>;
  using BCopy = TileCopy<T, kBk ? BN : BK, kBk ? BK : BN, L::kBLd, kThreads>;

  // Programmatic dependent launch (launch_tensorcore): the next kernel may be scheduled once every
  // block has started; every global access of this one waits for the kernel before it.
  pdl_trigger();
  pdl_wait();
  extern __shared__ __align__(16) unsigned char tc_smem[];
  const uint32_t smem = smem_addr(tc_smem);
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  const int wm0 = (warp % Config::WARPS_M) * WM, wn0 = (warp / Config::WARPS_M) * WN;
  const int64_t m0 = int64_t(blockIdx.y) * BM, n0 = int64_t(blockIdx.x) * BN;
  const int64_t b = blockIdx.z / splits;
  const int split = int(blockIdx.z % splits);

  const int64_t k_steps = (p.k + BK - 1) / BK;
  const int64_t step0 = int64_t(split) * k_steps_per_split;
  const int64_t step_end = step0 + k_steps_per_split < k_steps ? step0 + k_steps_per_split : k_steps;
  const int steps = int(step_end - step0);
  const int64_t k0 = step0 * BK;

  const T* a_base = static_cast<const T*>(p.a.data) + p.batch_offset(p.a, b);
  ACopy a_copy = kAk ? ACopy(a_base, p.a.stride_mn, m0, p.m, k0, p.k) : ACopy(a_base, p.a.stride_k, k0, p.k, m0, p.m);
  BCopy b_copy[NB];
#pragma unroll
  for (int j = 0; j < NB; ++j) {
    const T* base = static_cast<const T*>(p.b[j].data) + p.batch_offset(p.b[j], b);
    b_copy[j] = kBk ? BCopy(base, p.b[j].stride_mn, n0, p.n, k0, p.k) : BCopy(base, p.b[j].stride_k, k0, p.k, n0, p.n);
  }
  // Issues the copies of the next k-step into stage `stage` and moves the plans one step on.
  auto issue_stage = [&](int stage) {
    const uint32_t st = smem + uint32_t(stage) * kStageBytes;
    a_copy.issue(st);
    a_copy.advance(kAk ? 0 : BK, kAk ? BK : 0);
#pragma unroll
    for (int j = 0; j < NB; ++j) {
      b_copy[j].issue(st + (L::kAElems + j * L::kBElems) * kEl);
      b_copy[j].advance(kBk ? 0 : BK, kBk ? BK : 0);
    }
  };

  // ldmatrix lane roles: matrix q = lane / 8 of an x4, row r = lane % 8 of it. A: matrices
  // (m 0-7, k 0-7), (m 8-15, k 0-7), (m 0-7, k 8-15), (m 8-15, k 8-15) = a0..a3. B: (n 0-7, k 0-7),
  // (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15) = b0, b1 of n-tile 2tp, then of 2tp+1.
  // Each lane's byte address in stage 0 at (i, tp, kk) = 0; the rest is a compile-time offset.
  const int q = lane / 8, r = lane % 8;
  const uint32_t a_lane = smem + kEl * uint32_t(kAk ? (wm0 + 8 * (q % 2) + r) * L::kALd + 8 * (q / 2)
                                                    : (8 * (q / 2) + r) * L::kALd + wm0 + 8 * (q % 2));
  const uint32_t b_lane = smem + kEl * uint32_t(L::kAElems + (kBk ? (wn0 + 8 * (q / 2) + r) * L::kBLd + 8 * (q % 2)
                                                                  : (8 * (q % 2) + r) * L::kBLd + wn0 + 8 * (q / 2)));
  // Register fragments, double-buffered: slice kk + 1 is read from shared memory while the mmas
  // of slice kk run.
  uint32_t af[2][MT][4], bf[2][NB][NT / 2][4];
  auto load_frags = [&](int buf, uint32_t stage_off, int kk) {
#pragma unroll
    for (int i = 0; i < MT; ++i) {
      const uint32_t off = kEl * uint32_t(kAk ? 16 * i * L::kALd + kk : kk * L::kALd + 16 * i);
      ldmatrix_x4<!kAk>(af[buf][i], a_lane + stage_off + off);
    }
#pragma unroll
    for (int j = 0; j < NB; ++j)
#pragma unroll
      for (int tp = 0; tp < NT / 2; ++tp) {
        const uint32_t off = kEl * uint32_t(j * L::kBElems + (kBk ? 16 * tp * L::kBLd + kk : kk * L::kBLd + 16 * tp));
        ldmatrix_x4<!kBk>(bf[buf][j][tp], b_lane + stage_off + off);
      }
  };

  float acc[NB][MT][NT][4];
#pragma unroll
  for (int j = 0; j < NB; ++j)
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int t = 0; t < NT; ++t) acc[j][i][t][0] = acc[j][i][t][1] = acc[j][i][t][2] = acc[j][i][t][3] = 0.0f;

  auto mmas = [&](int buf) {
#pragma unroll
    for (int j = 0; j < NB; ++j)
#pragma unroll
      for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int tt = 0; tt < NT; ++tt) {
          const int t = i % 2 ? NT - 1 - tt : tt;  // serpentine: consecutive mmas share a fragment
          mma16816<T>(acc[j][i][t], af[buf][i], bf[buf][j][t / 2][2 * (t % 2)], bf[buf][j][t / 2][2 * (t % 2) + 1]);
        }
  };

  // Prologue: STAGES - 1 k-steps in flight (then, pipelined, the first slice's fragments).
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < steps) issue_stage(s);
    cp_async_commit();
  }
  uint32_t read_off = 0;
  int write_stage = STAGES - 1;
  if constexpr (!kPipelined) {
    // Accumulators too many for two fragment buffers (a dual product on 64x64 warp tiles): one
    // slice at a time, B fragments loaded per n-tile pair, as few live registers as possible.
    for (int s = 0; s < steps; ++s) {
      cp_async_wait<STAGES - 2>();
      __syncthreads();
      if (s + STAGES - 1 < steps) issue_stage(write_stage);
      cp_async_commit();
      write_stage = write_stage + 1 == STAGES ? 0 : write_stage + 1;
#pragma unroll
      for (int kk = 0; kk < BK; kk += 16) {
        uint32_t a1[MT][4];
#pragma unroll
        for (int i = 0; i < MT; ++i)
          ldmatrix_x4<!kAk>(a1[i], a_lane + read_off + kEl * uint32_t(kAk ? 16 * i * L::kALd + kk : kk * L::kALd + 16 * i));
#pragma unroll
        for (int j = 0; j < NB; ++j)
#pragma unroll
          for (int tp = 0; tp < NT / 2; ++tp) {
            uint32_t b1[4];
            ldmatrix_x4<!kBk>(b1, b_lane + read_off + kEl * uint32_t(j * L::kBElems + (kBk ? 16 * tp * L::kBLd + kk : kk * L::kBLd + 16 * tp)));
#pragma unroll
            for (int i = 0; i < MT; ++i) {
              mma16816<T>(acc[j][i][2 * tp], a1[i], b1[0], b1[1]);
              mma16816<T>(acc[j][i][2 * tp + 1], a1[i], b1[2], b1[3]);
            }
          }
      }
      read_off = read_off + kStageBytes == STAGES * kStageBytes ? 0 : read_off + kStageBytes;
    }
  } else {
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    load_frags(0, 0, 0);

    // Mainloop. Step s reads stage s % STAGES; at its first slice it issues step s + STAGES - 1
    // into the stage step s - 1 read (every warp finished reading it before the barrier that ended
    // step s - 1); at its last slice it waits for step s + 1, syncs once, and loads step s + 1's
    // first fragments, so the ldmatrix of the next slice always overlaps the mmas of this one.
    for (int s = 0; s < steps; ++s) {
#pragma unroll
      for (int ks = 0; ks < KS; ++ks) {
        const int buf = ks % 2, next = (ks + 1) % 2;
        if (ks < KS - 1) load_frags(next, read_off, 16 * (ks + 1));
        if (ks == 0) {
          if (s + STAGES - 1 < steps) issue_stage(write_stage);
          cp_async_commit();
          write_stage = write_stage + 1 == STAGES ? 0 : write_stage + 1;
        }
        if (ks == KS - 1) {
          cp_async_wait<STAGES - 2>();
          __syncthreads();
          read_off = read_off + kStageBytes == STAGES * kStageBytes ? 0 : read_off + kStageBytes;
          if (s + 1 < steps) load_frags(next, read_off, 0);
        }
        mmas(buf);
      }
      if constexpr (KS % 2 == 1) {  // an odd slice count leaves the next step's first slice in buffer 1
#pragma unroll
        for (int i = 0; i < MT; ++i)
#pragma unroll
          for (int e = 0; e < 4; ++e) af[0][i][e] = af[1][i][e];
#pragma unroll
        for (int j = 0; j < NB; ++j)
#pragma unroll
          for (int tp = 0; tp < NT / 2; ++tp)
#pragma unroll
            for (int e = 0; e < 4; ++e) bf[0][j][tp][e] = bf[1][j][tp][e];
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
  return launch_programmatic(kernel, grid, dim3(Config::kThreads), L::kSmemBytes, stream, p, epilogue, partial, splits, k_steps_per_split);
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
  // An operand streamed along an axis its layout hint rules out runs simt (not instantiated).
  constexpr int kHintA = EpilogueAKMajor<Epilogue>::value, kHintB = EpilogueBKMajor<Epilogue>::value;
  int a_axis = detail::vector_axis(p, p.a, p.m);
  int b_axis = detail::vector_axis(p, p.b[0], p.n);
  if (NB == 2 && detail::vector_axis(p, p.b[1], p.n) != b_axis) b_axis = -1;
  if (a_axis >= 0 && !layout_allows(kHintA, a_axis == 1)) a_axis = -1;
  if (b_axis >= 0 && !layout_allows(kHintB, b_axis == 1)) b_axis = -1;
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
  cudaError_t e = cudaErrorNotSupported;
  auto launch = [&](auto ak, auto bk) {  // only the layouts the hints allow (the axes checked above)
    if constexpr (layout_allows(kHintA, ak.value) && layout_allows(kHintB, bk.value))
      e = detail::launch_tensorcore<T, Config, Epilogue, ak.value, bk.value>(p, epilogue, partial, int(splits), int(per_split), grid, stream);
  };
  with_layouts(a_axis == 1, b_axis == 1, launch);
  if (e != cudaSuccess || splits == 1) return e;
  const int64_t blocks = (p.m * p.n + 255) / 256;
  detail::splitk_epilogue_kernel<Epilogue><<<unsigned(blocks < 4096 ? blocks : 4096), 256, 0, stream>>>(partial, p.m, p.n, int(splits), epilogue);
  return cudaGetLastError();
}

}  // namespace kiln::gemm
