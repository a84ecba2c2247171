#pragma once
// Tensor-core GEMM, variant 2: Hopper (sm_90a) warpgroup MMA fed by TMA, fp16/bf16 operands,
// fp32 accumulators. Same contract as variant 1 (gemm_problem.cuh); variant 1 (mma.sync,
// gemm_tensorcore.cuh) runs whatever this one cannot take.
//
// Schedule (WgmmaConfig<BM, BN, STAGES, PINGPONG>): a persistent grid (one CTA per SM) walks the output
// tiles (BM x BN of one flat batch index, grouped 8 tile-rows at a time so that concurrent CTAs
// share A and B in L2) and, when split-K is on, the K splits of each tile. A CTA is three
// warpgroups:
//   - warpgroup 0, the producer (40 registers, setmaxnreg): one thread issues the TMA loads of
//     each k-step (BK = 64) into a ring of STAGES shared-memory stages, each stage guarded by a
//     `full` mbarrier (TMA completes its bytes there) and an `empty` one (the consumers release);
//   - warpgroups 1 and 2, the consumers (232 registers): each owns BM/2 rows of the tile
//     (BM/128 wgmma m64 blocks) by BN columns of fp32 accumulators in registers, issues the
//     wgmmas of a stage straight from shared-memory descriptors, keeps one stage's wgmmas in
//     flight (wait_group 1) and releases the stage before it; then runs the epilogue functor on
//     its accumulators while the producer already loads the next tile: a functor that loads at
//     the row's own index (EpilogueReadsRows, a residual) straight from the registers, any other
//     a few columns at a time through a shared-memory buffer of its own, in row-major order
//     (coalesced stores; a long functor, EpilogueIsLong, from a rolled loop).
//   Ping-pong (PINGPONG = 1): each consumer warpgroup owns whole tiles, every other one of the
//     CTA's sequence; the ring hands out stages in tile order, so one warpgroup's mainloop runs
//     while the other one's epilogue does (what hides the epilogue when K is short).
// Operand tiles land 128-byte swizzled, the layout wgmma reads without bank conflicts: a K-major
// operand (k contiguous) as one box of 64 k x rows; an M/N-major one (the [K, N] weights a
// PyTorch MatMul exports, or A given as [K, M]) as boxes of 64 m/n x 64 k, read through the
// descriptor's transpose bit. TMA zero-fills what lies past M, N or K, so edge tiles need no
// branch but the epilogue's bounds check. Tensor maps are 3-D (contiguous axis, strided axis,
// flat batch), built on the host per call (and cached; tensor_map.cuh): the batch offset must be linear in the
// flat batch index (or 0: a broadcast operand), every stride 16-byte aligned.
//
// Split-K (batch 1, fewer tiles than SMs): the K splits of a tile are one thread-block cluster
// (up to 8 CTAs, one unit each), whose CTAs leave their fp32 partial tiles in their own shared
// memory and add them through distributed shared memory, each CTA running the epilogue on its
// share of the tile (no workspace, no second kernel); or, where such clusters do not fit at
// once (or KILN_GEMM_CLUSTER_SPLIT=0), as in variant 1: fp32 slices in the workspace and the
// reduction kernel that runs the epilogue.
//
// Dual products (Epilogue::kNumB == 2) load both B tiles per stage and share A; accumulators
// double, so BN * BM/128 * kNumB <= 256 (e.g. 128 x 128 dual), or (DUAL_HALVES) a BN-column tile
// holds BN/2 columns of each B (the gate*up of a 128 x 64 output tile from one 128 x 128 wgmma).
//
// Programmatic dependent launch (sm_90; gemm_ptx.cuh's gemm_pdl, KILN_GEMM_PDL=0 launches
// plainly): the grid may be scheduled while the kernel before it on the stream finishes (kiln's
// generated kernels allow it from their first instruction), so its launch and the CTAs' set-up
// (barriers, tensor maps) overlap that kernel's tail; the producer's first load and the consumers
// wait in pdl_wait for its end. The CTAs let the next kernel start only when they exit (no
// pdl_trigger), and no operand is read before pdl_wait: requesting the weights' first stages
// there, or an early trigger, made the models slower (bench/gemm/NOTES.md, session 32).
//
// SWAP_AB tiles run the transposed problem (try_gemm_wgmma): A = the weights, B = the tokens, so
// that the tokens lie on wgmma's N (steps of 8) instead of its M (steps of 64); a dual product's
// two weights are two A tiles sharing the token tile. Their epilogue calls the functor straight
// from the accumulators with (m, n) exchanged back (SwappedEpilogue), no staging buffer.
#include <cooperative_groups.h>
#include <cuda.h>
#include <cudaTypedefs.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "gemm_ptx.cuh"
#include "gemm_sm90_ptx.cuh"
#include "gemm_tensorcore.cuh"
#include "tensor_map.cuh"
#include "wgmma_choice.cuh"

namespace kiln::gemm {

// Hopper tile configuration (schedule data, like TileConfig): BM x BN accumulator tiles, k-steps
// of 64, STAGES shared-memory stages. PINGPONG = 0 (cooperative): both consumer warpgroups share
// a tile, BM/2 rows each (BM 128 or 256). PINGPONG = 1: each consumer warpgroup takes every other
// tile of the CTA whole (BM 64 or 128), so one's epilogue overlaps the other's mainloop.
// DUAL_HALVES = 1 (dual products only): the tile's first BN/2 columns come from B0 and the rest
// from B1, so one set of accumulators (one wgmma per k16) gives a BM x BN/2 output tile of both
// products; else each B has its own BM x BN accumulators.
// SWAP_AB = 1 (a K-major A; try_gemm_wgmma): the kernel computes the output's transpose,
// C^T = B^T A^T, so that the tokens (the call's M) lie on wgmma's N, which comes in steps of 8 where
// its M comes in steps of 64: BM weight rows (the call's N) by BN tokens, BN up to 512 as wgmmas of
// at most 256 columns (272 = 2 x 136: 816 tokens in 3 tiles, none past M, where 128-row tiles
// compute 7 x 128 = 896 rows); 128 x BN cooperative or 64 x BN ping-pong. The epilogue runs
// straight from the accumulators (no staging buffer: the ring keeps all of shared memory).
// BN = 16 is the small-M tile (up to 16 tokens against 128 weight rows, 18 KB a stage: 12 stages
// of weights in flight, what cuBLAS keeps at M <= 16).
// MIN_BLOCKS = 2 (small tiles only: shared memory under 113 KB) compiles the kernel for two CTAs
// per SM: at most 80 registers a thread and no setmaxnreg (the producer's 40 / consumers' 232 split
// is for one CTA an SM). Not for speed from two CTAs at once, but so that the occupancy API counts
// twice the resident clusters: at one CTA per SM an H200 holds only 30 clusters of 4 and 15 of 8,
// which caps a split-K plan at 96 or 112 CTAs for 32 or 16 tiles (bench/gemm/NOTES.md, session 23).
template <int BM_, int BN_, int STAGES_, int PINGPONG_ = 0, int DUAL_HALVES_ = 0, int SWAP_AB_ = 0, int MIN_BLOCKS_ = 1>
struct WgmmaConfig {
  static constexpr int BM = BM_, BN = BN_, BK = 64, STAGES = STAGES_;
  static constexpr bool kPingPong = PINGPONG_ != 0;
  static constexpr bool kDualHalves = DUAL_HALVES_ != 0;
  static constexpr bool kSwapAB = SWAP_AB_ != 0;
  // B's tile as wgmmas of kSubN columns each (one TMA box of kSubN rows each: boxes stop at 256).
  static constexpr int kSubTiles = (BN + 255) / 256, kSubN = BN / kSubTiles;
  static constexpr int kConsumers = 2;
  static constexpr int kConsumersPerTile = kPingPong ? 1 : 2;
  static constexpr int kThreads = 128 * (kConsumers + 1);
  static constexpr int kMinBlocks = MIN_BLOCKS_;
  static_assert(kMinBlocks == 1 || kMinBlocks == 2, "WgmmaConfig: MIN_BLOCKS is 1 or 2");
};

}  // namespace kiln::gemm

namespace kiln::gemm::detail {

// What the kernel needs besides the tensor maps (all per call).
struct WgmmaArgs {
  int64_t m = 0, n = 0;
  int tiles_m = 0, tiles_n = 0;
  int k_steps = 0, splits = 1, k_steps_per_split = 0;
  int a_batched = 0, b_batched = 0;  // the operand's tensor map has a batch axis (else broadcast)
  int64_t units = 0;                 // batch * tiles_m * tiles_n * splits
  float* partial = nullptr;          // split-K slices (splits > 1, not cluster_reduce)
  int cluster_reduce = 0;            // (only with splits > 1) a tile's splits are a cluster of one unit each
};

template <typename Config, int kNumB>
struct WgmmaLayout {
  // B operands with their own accumulators (dual halves: one tile of B0 and B1 side by side), and
  // the output tile's width.
  static constexpr int kAccB = Config::kDualHalves ? 1 : kNumB;
  static constexpr int kOutCols = Config::kDualHalves ? Config::BN / 2 : Config::BN;
  static constexpr uint32_t kABytes = Config::BM * Config::BK * 2, kBBytes = Config::BN * Config::BK * 2;
  // SWAP_AB dual products: B (the tokens) is shared, and the two weights are A tiles: A0, B, A1.
  static constexpr uint32_t kStageBytes = Config::kSwapAB ? kNumB * kABytes + kBBytes : kABytes + kAccB * kBBytes;
  // Stages, then a full and an empty barrier per stage; 1024 bytes of slack to align the base.
  static constexpr size_t kRingBytes = 1024 + size_t(Config::STAGES) * kStageBytes + 16 * Config::STAGES;
  // Then one epilogue buffer per consumer warpgroup: its tile rows x kEpiCols fp32 accumulators
  // (per B), each row padded by 8 floats so that the fragment's float2 writes hit distinct banks.
  // kEpiCols is the widest of 64, 32, 16, 8 (at most BN) that fits next to the ring; 0: none does.
  // (SWAP_AB: none; its epilogue runs from the accumulators.)
  static constexpr int kRows = Config::BM / Config::kConsumersPerTile;
  static constexpr size_t epilogue_bytes(int cols) { return Config::kSwapAB ? 0 : size_t(kNumB) * kRows * (cols + 8) * 4; }
  static constexpr int widest_epilogue_cols() {
    for (int cols = 64; cols >= 8; cols /= 2)
      if (cols <= kOutCols && kRingBytes + Config::kConsumers * epilogue_bytes(cols) <= 227 * 1024) return cols;
    return 0;
  }
  static constexpr int kEpiCols = widest_epilogue_cols(), kEpiStride = kEpiCols + 8;
  static constexpr size_t kEpiBytes = epilogue_bytes(kEpiCols);
  static constexpr size_t kSmemBytes = kRingBytes + Config::kConsumers * kEpiBytes;
  // A cluster split's partial tile, kept in the ring once the CTA's only unit is computed: per B,
  // BM rows of kOutCols fp32, each row padded by 8 floats (the fragment's float2 writes).
  static constexpr int kPartialStride = kOutCols + 8;
  static constexpr bool kClusterReduceFits = size_t(kNumB) * Config::BM * kPartialStride * 4 <= size_t(Config::STAGES) * kStageBytes;
  // Two CTAs an SM share its 228 KB, less 1 KB reserved for each.
  static_assert(Config::kMinBlocks == 1 || kSmemBytes <= 113 * 1024, "WgmmaLayout: MIN_BLOCKS = 2 needs at most 113 KB of shared memory");
};

constexpr int kWgmmaGroupRows = 8;  // tile-rows per raster group

// Trace points for bench/gemm/wgmma_probe.cu, which defines the macro before including this
// header (a globaltimer stamp per CTA and point); nothing otherwise.
#ifndef KILN_WGMMA_TRACE
#define KILN_WGMMA_TRACE(point)
#endif
// Per tile of a CTA (its `local` index), consumer warpgroup `cw`: 0 first stage arrived, 1 mainloop
// done, 2 epilogue done (bench/gemm/wgmma_probe.cu's per-tile trace).
#ifndef KILN_WGMMA_TILE_TRACE
#define KILN_WGMMA_TILE_TRACE(local, cw, point)
#endif

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
// The cluster's sum of a SWAP_AB tile's split partials (each CTA's `part`: NB blocks of BM rows of
// STRIDE floats), run by the 256 consumer threads of every rank, each rank on its share; `store(r, c,
// t0, t1)` takes tile element (r, c) for r < rows, c < cols. The tile's rows are the output's
// columns, so consecutive threads take consecutive rows, 4 columns each (a float4 from every split):
// a warp's store then writes 32 neighbours of one output row, 2 sectors, where walking along the
// tile's rows wrote one element in each of 32 output rows, 32 sectors. Splits are added in rank
// order, so the sum does not depend on timing.
template <int BM, int WB, int STRIDE, int NB, typename Store>
__device__ __forceinline__ void cluster_reduce_swapped(cooperative_groups::cluster_group& cluster, const float* part, int rows,
                                                       int64_t cols, int splits, const Store& store) {
  static_assert(WB % 4 == 0 && STRIDE % 4 == 0, "the swapped reduction reads float4 runs");
  const int units = rows * (WB / 4);
  const int share = (units + splits - 1) / splits, u0 = int(cluster.block_rank()) * share;
  const int end = u0 + share < units ? u0 + share : units;
  for (int u = u0 + int(threadIdx.x) - 128; u < end; u += 2 * 128) {
    const int r = u % rows, c = 4 * (u / rows);
    if (c >= cols) continue;
    float t[NB][4];
#pragma unroll
    for (int j = 0; j < NB; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) t[j][e] = 0.0f;
    for (int q = 0; q < splits; ++q) {
      const float* peer = cluster.map_shared_rank(part, q);
#pragma unroll
      for (int j = 0; j < NB; ++j) {
        const float4 v = *reinterpret_cast<const float4*>(peer + (j * BM + r) * STRIDE + c);
        t[j][0] += v.x, t[j][1] += v.y, t[j][2] += v.z, t[j][3] += v.w;
      }
    }
#pragma unroll
    for (int e = 0; e < 4; ++e)
      if (c + e < cols) store(r, c + e, t[0][e], t[NB - 1][e]);
  }
}
#endif

template <typename T, typename Config, typename Epilogue, bool kAk, bool kBk>
__global__ void __launch_bounds__(Config::kThreads, Config::kMinBlocks)
    wgmma_gemm_kernel(const __grid_constant__ CUtensorMap tma_a, const __grid_constant__ CUtensorMap tma_b0,
                      const __grid_constant__ CUtensorMap tma_b1, const WgmmaArgs args, const Epilogue epilogue) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using namespace kiln::gemm::sm90;
  constexpr int NB = Epilogue::kNumB;
  constexpr int BM = Config::BM, BN = Config::BN, BK = Config::BK, S = Config::STAGES;
  constexpr int MI = BM / 64 / Config::kConsumersPerTile;  // m64 blocks per consumer warpgroup
  constexpr bool kPingPong = Config::kPingPong, kDualHalves = Config::kDualHalves, kSwap = Config::kSwapAB;
  constexpr int NH = Config::kSubTiles, SN = Config::kSubN;  // B's wgmmas per k16 and their width
  using L = WgmmaLayout<Config, NB>;
  constexpr int NA = L::kAccB, WB = L::kOutCols, EB = WB / 2;  // accumulator sets, output columns and their accumulators
  extern __shared__ __align__(1024) unsigned char wgmma_smem[];
  const uint32_t base = (smem_addr(wgmma_smem) + 1023u) & ~1023u;
  const uint32_t bars = base + S * L::kStageBytes;
  auto full = [&](int s) { return bars + 8u * uint32_t(s); };
  auto empty = [&](int s) { return bars + 8u * uint32_t(S + s); };
  if (threadIdx.x == 0) {
    KILN_WGMMA_TRACE(0);
    prefetch_tensor_map(&tma_a);
    prefetch_tensor_map(&tma_b0);
    if (NB == 2) prefetch_tensor_map(&tma_b1);
    for (int s = 0; s < S; ++s) {
      mbar_init(full(s), 1);
      mbar_init(empty(s), Config::kConsumersPerTile);
    }
    mbar_init_fence();
  }
  __syncthreads();
  if (threadIdx.x == 0) KILN_WGMMA_TRACE(1);

  // Work unit u -> (batch, tile row, tile column, split), in 32-bit arithmetic when the units fit
  // (64-bit divisions are emulated: the tile switch at 816 x 16384 x 2048 went 0.77 -> 0.51 us).
  const int64_t per_batch = int64_t(args.tiles_m) * args.tiles_n;
  auto decode_as = [&](auto u, auto unit, int& b, int& tm, int& tn, int& split) {
    using I = decltype(unit);
    split = int(u % I(args.splits));
    u /= I(args.splits);
    b = int(u / I(per_batch));
    const I r = u % I(per_batch), group = I(kWgmmaGroupRows) * I(args.tiles_n);
    const int first = int(r / group) * kWgmmaGroupRows;
    const int rows = args.tiles_m - first < kWgmmaGroupRows ? args.tiles_m - first : kWgmmaGroupRows;
    const I in = r % group;
    tm = first + int(in % I(rows));
    tn = int(in / I(rows));
  };
  auto decode = [&](int64_t u, int& b, int& tm, int& tn, int& split) {
    if (args.units <= int64_t(UINT32_MAX)) {
      decode_as(uint32_t(u), uint32_t(0), b, tm, tn, split);
    } else {
      decode_as(u, int64_t(0), b, tm, tn, split);
    }
  };
  auto k_range = [&](int split, int& ks0, int& ks1) {
    ks0 = split * args.k_steps_per_split;
    ks1 = ks0 + args.k_steps_per_split < args.k_steps ? ks0 + args.k_steps_per_split : args.k_steps;
  };

  const int wg = int(threadIdx.x) / 128;
  if (wg == 0) {
    if constexpr (Config::kMinBlocks == 1) setmaxnreg_dec<40>();
    if (threadIdx.x == 0) {
      pdl_wait();  // (launch_wgmma) A, and under SWAP_AB B, may be the previous kernel's outputs
      int stage = 0;
      uint32_t phase = 0;
      for (int64_t u = blockIdx.x; u < args.units; u += gridDim.x) {
        int b, tm, tn, split, ks0, ks1;
        decode(u, b, tm, tn, split);
        k_range(split, ks0, ks1);
        const int ba = args.a_batched ? b : 0, bb = args.b_batched ? b : 0;
        for (int ks = ks0; ks < ks1; ++ks) {
          mbar_wait(empty(stage), phase ^ 1u);
          mbar_expect_tx(full(stage), L::kStageBytes);
          const uint32_t st = base + uint32_t(stage) * L::kStageBytes;
          const int kc = ks * BK;
#pragma unroll
          for (int j = 0; j < (kSwap ? NB : 1); ++j) {  // (SWAP_AB dual: A1 after B, from the second map)
            const void* map = j == 0 ? &tma_a : &tma_b1;
            const uint32_t dst = st + uint32_t(j) * (L::kABytes + L::kBBytes);
            if constexpr (kAk) {
              tma_load_3d(dst, map, full(stage), kc, tm * BM, ba);
            } else {
#pragma unroll
              for (int c = 0; c < BM / 64; ++c) tma_load_3d(dst + 8192u * c, map, full(stage), tm * BM + 64 * c, kc, ba);
            }
          }
#pragma unroll
          for (int j = 0; j < (kSwap ? 1 : NB); ++j) {
            // B j's WB columns: its own BN-column tile, or (dual halves) half of the shared one
            const void* map = j == 0 ? &tma_b0 : &tma_b1;
            const uint32_t dst = st + L::kABytes + uint32_t(j) * (kDualHalves ? uint32_t(WB) * 128u : L::kBBytes);
            if constexpr (kBk) {
#pragma unroll
              for (int h = 0; h < NH; ++h) tma_load_3d(dst + uint32_t(h * SN) * 128u, map, full(stage), kc, tn * WB + h * SN, bb);
            } else {
#pragma unroll
              for (int c = 0; c < WB / 64; ++c) tma_load_3d(dst + 8192u * c, map, full(stage), tn * WB + 64 * c, kc, bb);
            }
          }
          if (++stage == S) stage = 0, phase ^= 1u;
        }
      }
      KILN_WGMMA_TRACE(2);
    }
  } else {
    if constexpr (Config::kMinBlocks == 1) setmaxnreg_inc<232>();
    pdl_wait();  // the epilogue reads and writes what earlier kernels may still use
    const int cw = wg - 1, tid = int(threadIdx.x) % 128, warp = tid / 32, lane = tid % 32;
    const int row0 = kPingPong ? 0 : cw * MI;  // this warpgroup's first m64 block in the tile
    int stage = 0;
    uint32_t phase = 0;
    float acc[NA][MI][BN / 2];
    // The operands' shared-memory descriptors for stage 0's first k16 slice, as their low words
    // (sm90::smem_desc_lo): a stage or a k16 slice further is a constant added to them, and the high
    // word (SBO 1024) is the same for all. No per-wgmma address arithmetic.
    constexpr uint32_t kDescHi = smem_desc_hi(1024);
    uint32_t a_desc0[MI], b_desc0[NA];
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) a_desc0[mi] = smem_desc_lo(base + 8192u * uint32_t(row0 + mi), kAk ? 16u : 8192u);
#pragma unroll
    for (int j = 0; j < NA; ++j) b_desc0[j] = smem_desc_lo(base + L::kABytes + uint32_t(j) * L::kBBytes, kBk ? 16u : 8192u);

    // Accumulator layout of wgmma m64nN (per warp as mma.sync's C fragment): element 4i + e of a
    // thread is row 16 warp + lane/4 + 8 (e/2), column 8i + 2 (lane%4) + e%2. at(v, j, mi, e): B
    // j's element e of m64 block mi (kDualHalves: B0's columns are the first BN/2 of the tile).
    auto at = [](float(&v)[NA][MI][BN / 2], int j, int mi, int e) -> float& {
      if constexpr (kDualHalves) {
        return v[0][mi][j * EB + e];
      } else {
        return v[j][mi][e];
      }
    };
    constexpr int R = L::kRows;
    constexpr bool kPrefetch = EpilogueHasPrefetch<Epilogue>::value;
    // The epilogue runs kEpiCols (CN) columns at a time: a functor that loads at the row's own
    // index (EpilogueReadsRows, a residual), on a whole tile, straight from the accumulators
    // (every element of the chunk unrolled and unchecked, one basic block, so that all of its
    // loads are in flight at once); any other through this warpgroup's buffer, walked row-major
    // (consecutive threads, consecutive columns: coalesced stores and loads), a per-row reader
    // with prefetch() having the chunk's loads prefetched before its calls. A long functor runs
    // in a rolled loop over the chunks (straight-line code for every accumulator overflows the
    // instruction cache); after each chunk the accumulators shift down by one chunk, since
    // registers cannot be indexed at run time.
    constexpr int CN = L::kEpiCols, CS = L::kEpiStride, CH = CN / 2;  // CH: per m64 block and B
    constexpr int kChunks = WB / CN;
    constexpr int kChunkUnroll = EpilogueIsLong<Epilogue>::value ? 1 : kChunks;
    constexpr int kChunkElements = R * CN / 128;  // per thread and chunk
    constexpr int kEdgeBlock = EpilogueIsLong<Epilogue>::value || kChunkElements < 4 ? 1 : 4;
    float* const buf = reinterpret_cast<float*>(wgmma_smem + (base - smem_addr(wgmma_smem)) + S * L::kStageBytes + 16 * S +
                                                size_t(cw) * L::kEpiBytes);
    // Columns [chunk CN, chunk CN + CN) of the tile whose first element of this warpgroup is
    // (b, m0, n0), from the first CH accumulators of `v` per m64 block and B; then the shift.
    auto epilogue_chunk = [&](float(&v)[NA][MI][BN / 2], int b, int64_t m0, int64_t n0, int chunk) {
      const int64_t nc = n0 + int64_t(chunk) * CN;
      if (EpilogueReadsRows<Epilogue>::value && !kPrefetch && m0 + R <= args.m && n0 + WB <= args.n) {
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int64_t m = m0 + 64 * mi + 16 * warp + lane / 4 + 8 * h;
#pragma unroll
            for (int q = 0; q < CN / 8; ++q)
#pragma unroll
              for (int c = 0; c < 2; ++c) {
                const int64_t n = nc + 8 * q + 2 * (lane % 4) + c;
                if constexpr (NB == 2) {
                  epilogue(b, m, n, at(v, 0, mi, 4 * q + 2 * h + c), at(v, 1, mi, 4 * q + 2 * h + c));
                } else {
                  epilogue(b, m, n, at(v, 0, mi, 4 * q + 2 * h + c));
                }
              }
          }
      } else {
        named_barrier_sync(3 + cw, 128);  // every thread of the warpgroup has read the buffer's last use
#pragma unroll
        for (int j = 0; j < NB; ++j)
#pragma unroll
          for (int mi = 0; mi < MI; ++mi)
#pragma unroll
            for (int h = 0; h < 2; ++h)
#pragma unroll
              for (int q = 0; q < CN / 8; ++q) {
                const int r = 64 * mi + 16 * warp + lane / 4 + 8 * h, c = 8 * q + 2 * (lane % 4);
                *reinterpret_cast<float2*>(buf + (j * R + r) * CS + c) = make_float2(at(v, j, mi, 4 * q + 2 * h), at(v, j, mi, 4 * q + 2 * h + 1));
              }
        named_barrier_sync(3 + cw, 128);
        auto element = [&](int t) {
          const int idx = tid + 128 * t, r = idx / CN, c = idx % CN;
          if constexpr (NB == 2) {
            epilogue(b, m0 + r, nc + c, buf[r * CS + c], buf[(R + r) * CS + c]);
          } else {
            epilogue(b, m0 + r, nc + c, buf[r * CS + c]);
          }
        };
        if (m0 + R <= args.m && nc + CN <= args.n) {  // a whole chunk: unrolled, unchecked, one basic block
          if constexpr (kPrefetch) {  // every per-row load of the chunk in flight before the first call
#pragma unroll
            for (int t = 0; t < kChunkElements; ++t) {
              const int idx = tid + 128 * t;
              epilogue.prefetch(b, m0 + idx / CN, nc + idx % CN);
            }
          }
#pragma unroll
          for (int t = 0; t < kChunkElements; ++t) element(t);
        } else {
          // A chunk cut by M or N. A thread's column (idx % CN) is the same for every t and its row
          // steps by 128 / CN, so its elements inside the output are a prefix t < t_end: blocks of
          // kEdgeBlock elements that lie wholly inside run unrolled and unchecked (their loads in
          // flight together), the rest one at a time; the per-row loads prefetched first. (A call's
          // loads cannot be issued ahead of a bounds test before it: one call per test costs a
          // memory latency each, 20 us on the last tile row of a 1576-row residual GEMM.)
          constexpr int kRowStep = 128 / CN;
          const int64_t rows_left = args.m - m0 - tid / CN;
          int t_end = rows_left <= 0 ? 0 : rows_left >= int64_t(kRowStep) * kChunkElements ? kChunkElements : int((rows_left + kRowStep - 1) / kRowStep);
          if (nc + tid % CN >= args.n) t_end = 0;
          if constexpr (kPrefetch) {
#pragma unroll
            for (int t = 0; t < kChunkElements; ++t) {
              const int idx = tid + 128 * t;
              if (t < t_end) epilogue.prefetch(b, m0 + idx / CN, nc + idx % CN);
            }
          }
          if constexpr (kEdgeBlock == 1) {  // a long functor: its code once
#pragma unroll 1
            for (int t = 0; t < t_end; ++t) element(t);
          } else {
#pragma unroll
            for (int t0 = 0; t0 < kChunkElements; t0 += kEdgeBlock) {
              if (t0 + kEdgeBlock <= t_end) {
#pragma unroll
                for (int t = t0; t < t0 + kEdgeBlock; ++t) element(t);
              } else {
#pragma unroll 1
                for (int t = t0; t < t_end; ++t) element(t);
              }
            }
          }
        }
      }
#pragma unroll
      for (int j = 0; j < NB; ++j)
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
#pragma unroll
          for (int e = 0; e + CH < EB; ++e) at(v, j, mi, e) = at(v, j, mi, e + CH);
    };

    int64_t local = 0;  // the CTA's units in order; ping-pong: warpgroup cw takes those with local % 2 == cw
    for (int64_t u = blockIdx.x; u < args.units; u += gridDim.x, ++local) {
      int b, tm, tn, split, ks0, ks1;
      decode(u, b, tm, tn, split);
      k_range(split, ks0, ks1);
      if (kPingPong && local % 2 != cw) {  // the other warpgroup's unit: skip its stages in the ring
        const int skip = ks1 - ks0;
        stage += skip % S;
        phase ^= uint32_t((skip / S) & 1);
        if (stage >= S) stage -= S, phase ^= 1u;
        continue;
      }
      // A cooperative dual tile with an accumulator set per B whose rows of this warpgroup all lie
      // past M (at M = 816 the last tile row is rows 768..895, and rows 832..895 are the second
      // warpgroup's) has nothing to compute here: the warpgroup passes each stage on once it has
      // landed (so that its release counts for this use of the stage) and skips the epilogue,
      // leaving the tensor cores to the other warpgroup's two chains of wgmmas (bench/gemm/NOTES.md,
      // session 19: 2-4% faster at 816 x 16384 x 2048; tiles with one accumulator set ran 2-16%
      // slower that way, so they compute such rows as before). The release waits for all four
      // warps (a named barrier; elsewhere the warpgroup's wgmmas keep its warps together): a warp
      // still waiting when the stage is refilled would wait for the wrong phase (a hang in run
      // s19a), or run ahead into the next tile's stages on a parity that already matches.
      if constexpr (!kPingPong && NA == 2) {
        if (int64_t(tm) * BM + 64 * row0 >= args.m) {
          for (int ks = ks0; ks < ks1; ++ks) {
            mbar_wait(full(stage), phase);
            named_barrier_sync(3 + cw, 128);  // (the epilogue's barrier of this warpgroup)
            if (tid == 0) mbar_arrive(empty(stage));
            if (++stage == S) stage = 0, phase ^= 1u;
          }
          if (args.cluster_reduce) named_barrier_arrive(5, 256);  // (the partial's barrier, below)
          continue;
        }
      }
      // Ping-pong order: this warpgroup's mainloop starts once the other one has waited on every
      // stage of its previous unit. (An mbarrier parity wait can tell only the current phase from
      // the one before, so no warpgroup may wait on a stage two phases ahead.)
      if (kPingPong && local > 0) named_barrier_sync(1 + cw, 256);
      int prev = -1;
      for (int ks = ks0; ks < ks1; ++ks) {
        mbar_wait(full(stage), phase);
        if (ks == ks0 && tid == 0 && local < 2) KILN_WGMMA_TRACE(3 + 3 * cw);
        if (ks == ks0 && tid == 0) KILN_WGMMA_TILE_TRACE(local, cw, 0);
        const uint32_t st16 = uint32_t(stage) * (L::kStageBytes >> 4);  // the stage's offset, in 16-byte units
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BK / 16; ++kk) {
#pragma unroll
          for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
            for (int j = 0; j < NA; ++j) {
              // k16 slice kk: 32 bytes further along a K-major row, 2048 (16 rows of 128) MN-major;
              // SWAP_AB dual: A j (its own tile), B shared
              const uint32_t a_j = kSwap ? uint32_t(j) * ((L::kABytes + L::kBBytes) >> 4) : 0u;
              const uint64_t da = (uint64_t(kDescHi) << 32) | (a_desc0[mi] + a_j + st16 + uint32_t(kk) * (kAk ? 2u : 128u));
#pragma unroll
              for (int h = 0; h < NH; ++h) {  // (NH > 1: K-major B, h's rows SN * 128 bytes further)
                const uint64_t db =
                    (uint64_t(kDescHi) << 32) | (b_desc0[kSwap ? 0 : j] + st16 + uint32_t(kk) * (kBk ? 2u : 128u) + uint32_t(h * SN * 8));
                wgmma<SN, kAk ? 0 : 1, kBk ? 0 : 1, T>(*reinterpret_cast<float(*)[SN / 2]>(&acc[j][mi][h * SN / 2]), da, db,
                                                       (ks > ks0 || kk > 0) ? 1 : 0);
              }
            }
          }
        }
        wgmma_commit();
        wgmma_wait<1>();  // the previous stage's wgmmas are done: release it
        if (prev >= 0 && tid == 0) mbar_arrive(empty(prev));
        prev = stage;
        if (++stage == S) stage = 0, phase ^= 1u;
      }
      if (kPingPong) named_barrier_arrive(2 - cw, 256);  // the other warpgroup's turn
      wgmma_wait<0>();
#pragma unroll
      for (int j = 0; j < NA; ++j)
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
#pragma unroll
          for (int e = 0; e < BN / 2; ++e) fence_operand(acc[j][mi][e]);
      if (prev >= 0 && tid == 0) mbar_arrive(empty(prev));
      if (tid == 0 && local < 2) KILN_WGMMA_TRACE(4 + 3 * cw);
      if (tid == 0) KILN_WGMMA_TILE_TRACE(local, cw, 1);

      if (args.cluster_reduce) {
        // This split's partial tile, rows inside M, into the ring (free: the CTA's only unit is
        // done, once both warpgroups of a cooperative tile have finished their wgmmas); the cluster
        // adds the partials after the loop.
        if constexpr (L::kClusterReduceFits) {
          if constexpr (!kPingPong) named_barrier_sync(5, 256);
          float* const part = reinterpret_cast<float*>(wgmma_smem + (base - smem_addr(wgmma_smem)));
#pragma unroll
          for (int mi = 0; mi < MI; ++mi)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              const int r = 64 * (row0 + mi) + 16 * warp + lane / 4 + 8 * h;
              if (int64_t(tm) * BM + r >= args.m) continue;
#pragma unroll
              for (int i = 0; i < WB / 8; ++i)
#pragma unroll
                for (int j = 0; j < NB; ++j)
                  *reinterpret_cast<float2*>(part + (j * BM + r) * L::kPartialStride + 8 * i + 2 * (lane % 4)) =
                      make_float2(at(acc, j, mi, 4 * i + 2 * h), at(acc, j, mi, 4 * i + 2 * h + 1));
            }
        }
        continue;
      }
      if (args.splits > 1) {
        const int64_t slice = args.m * args.n;
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int64_t m = int64_t(tm) * BM + 64 * (row0 + mi) + 16 * warp + lane / 4 + 8 * h;
            if (m >= args.m) continue;
#pragma unroll
            for (int i = 0; i < WB / 8; ++i)
#pragma unroll
              for (int c = 0; c < 2; ++c) {
                const int64_t n = int64_t(tn) * WB + 8 * i + 2 * (lane % 4) + c;
                if (n >= args.n) continue;
#pragma unroll
                for (int j = 0; j < NB; ++j)
                  __stcg(args.partial + (int64_t(split) * NB + j) * slice + m * args.n + n, at(acc, j, mi, 4 * i + 2 * h + c));
              }
          }
        continue;
      }
      const int64_t m0 = int64_t(tm) * BM + 64 * row0, n0 = int64_t(tn) * WB;
      if constexpr (kSwap) {
        // Straight from the accumulators, every element unrolled (a long functor only with at most
        // 68 accumulators per B: try_gemm_wgmma), checked only on edge tiles. Element e of m64 block mi is row 16 warp + lane/4 + 8 ((e/2) % 2),
        // column 8 (e/4) + 2 (lane%4) + e%2: for one e the warp's lanes cover 8 consecutive rows
        // (the output's columns: 16-byte runs) of 4 columns (its rows).
        const bool whole = m0 + R <= args.m && n0 + WB <= args.n;
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
#pragma unroll
          for (int e = 0; e < BN / 2; ++e) {
            const int64_t m = m0 + 64 * mi + 16 * warp + lane / 4 + 8 * ((e / 2) % 2), n = n0 + 8 * (e / 4) + 2 * (lane % 4) + e % 2;
            if (whole || (m < args.m && n < args.n)) {
              if constexpr (NB == 2) {
                epilogue(b, m, n, acc[0][mi][e], acc[1][mi][e]);
              } else {
                epilogue(b, m, n, acc[0][mi][e]);
              }
            }
          }
      } else {
#pragma unroll kChunkUnroll
        for (int chunk = 0; chunk < kChunks; ++chunk) epilogue_chunk(acc, b, m0, n0, chunk);
      }
      if (tid == 0) KILN_WGMMA_TILE_TRACE(local, cw, 2);
    }
    if (tid == 0) KILN_WGMMA_TRACE(5 + 3 * cw);
  }
  if constexpr (L::kClusterReduceFits) {
    if (args.cluster_reduce) {
      // The tile's splits (cluster ranks, one unit each) add their partials in rank order, so the sum
      // does not depend on timing; rank q runs the epilogue on the q-th share of the tile's elements
      // inside M, the two consumer warpgroups together. Every thread of the cluster takes part in
      // both barriers.
      namespace cg = cooperative_groups;
      cg::cluster_group cluster = cg::this_cluster();
      cluster.sync();  // every split's partial is in its CTA's shared memory
      if (wg > 0) {
        int b, tm, tn, split;
        decode(int64_t(blockIdx.x), b, tm, tn, split);
        const int64_t m0 = int64_t(tm) * BM, n0 = int64_t(tn) * WB;
        const int rows = args.m - m0 < BM ? int(args.m - m0) : BM;
        const float* const part = reinterpret_cast<const float*>(wgmma_smem + (base - smem_addr(wgmma_smem)));
        if constexpr (kSwap) {
          cluster_reduce_swapped<BM, WB, L::kPartialStride, NB>(cluster, part, rows, args.n - n0, args.splits,
                                                                [&](int r, int c, float t0, float t1) {
                                                                  if constexpr (NB == 2) {
                                                                    epilogue(b, m0 + r, n0 + c, t0, t1);
                                                                  } else {
                                                                    epilogue(b, m0 + r, n0 + c, t0);
                                                                  }
                                                                });
        } else {
          const int total = rows * WB;
          const int share = (total + args.splits - 1) / args.splits, q0 = int(cluster.block_rank()) * share;
          const int end = q0 + share < total ? q0 + share : total;
          for (int i = q0 + int(threadIdx.x) - 128; i < end; i += 2 * 128) {
            const int r = i / WB, c = i % WB;
            if (n0 + c >= args.n) continue;
            float t[NB];
#pragma unroll
            for (int j = 0; j < NB; ++j) t[j] = 0.0f;
            for (int q = 0; q < args.splits; ++q) {
              const float* peer = cluster.map_shared_rank(part, q);
#pragma unroll
              for (int j = 0; j < NB; ++j) t[j] += peer[(j * BM + r) * L::kPartialStride + c];
            }
            if constexpr (NB == 2) {
              epilogue(b, m0 + r, n0 + c, t[0], t[1]);
            } else {
              epilogue(b, m0 + r, n0 + c, t[0]);
            }
          }
        }
      }
      cluster.sync();  // no CTA leaves while another reads its shared memory
    }
  }
#endif
}

// Launches of the Hopper kernel by this thread (lets a harness tell it from the fallback), and the
// last one's grid and K splits, through a cluster or partial sums (a harness prints how a call ran).
inline thread_local int64_t wgmma_launches = 0;
struct WgmmaLaunchShape {
  int grid = 0, splits = 0, cluster_reduce = 0;
};
inline thread_local WgmmaLaunchShape wgmma_last_launch;

template <typename T, typename Config, typename Epilogue, bool kAk, bool kBk>
cudaError_t launch_wgmma(const CUtensorMap& a, const CUtensorMap& b0, const CUtensorMap& b1, const WgmmaArgs& args, int grid,
                         const Epilogue& epilogue, cudaStream_t stream) {
  using L = WgmmaLayout<Config, Epilogue::kNumB>;
  auto kernel = wgmma_gemm_kernel<T, Config, Epilogue, kAk, kBk>;
  cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(L::kSmemBytes));
  if (e != cudaSuccess) return e;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(unsigned(grid), 1, 1);
  config.blockDim = dim3(Config::kThreads, 1, 1);
  config.dynamicSmemBytes = L::kSmemBytes;
  config.stream = stream;
  cudaLaunchAttribute attrs[2];
  config.attrs = attrs;
  if (args.cluster_reduce) attrs[config.numAttrs++] = cluster_attribute(args.splits);
  if (gemm_pdl()) attrs[config.numAttrs++] = programmatic_attribute();
  e = cudaLaunchKernelEx(&config, kernel, a, b0, b1, args, epilogue);
  ++wgmma_launches;
  wgmma_last_launch = WgmmaLaunchShape{grid, args.splits, args.cluster_reduce};
  return e;
}

// How many clusters of `splits` CTAs of the kernel can be resident at once (the occupancy API,
// which counts what fits in each GPC), looked up once per size; 0 where unknown.
template <typename T, typename Config, typename Epilogue>
int64_t wgmma_resident_clusters(int splits) {
  using L = WgmmaLayout<Config, Epilogue::kNumB>;
  static std::atomic<int64_t> cache[9];
  int64_t resident = cache[splits].load(std::memory_order_relaxed);
  if (resident > 0) return resident;
  // (every instantiation has the same resources: the one the layout hints allow)
  auto kernel = wgmma_gemm_kernel<T, Config, Epilogue, EpilogueAKMajor<Epilogue>::value != 0, EpilogueBKMajor<Epilogue>::value != 0>;
  int count = 0;
  if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(L::kSmemBytes)) == cudaSuccess)
    count = max_active_clusters(kernel, splits, Config::kThreads, L::kSmemBytes);
  if (count <= 0) {
    (void)cudaGetLastError();
    return 0;
  }
  cache[splits].store(count, std::memory_order_relaxed);
  return count;
}

}  // namespace kiln::gemm::detail

namespace kiln::gemm {

// Whether this translation unit was built with the Hopper kernel (sm_90a device code and
// KILN_GEMM_SM90A defined for the host pass; kiln's build does both for target sm_90).
#if defined(KILN_GEMM_SM90A)
constexpr bool kWgmmaBuilt = true;
#else
constexpr bool kWgmmaBuilt = false;
#endif

namespace detail {

// The epilogue of a SWAP_AB call: the kernel's (m, n) is the output's (n, m).
template <typename Epilogue>
struct SwappedEpilogue {
  static constexpr int kNumB = Epilogue::kNumB;
  static constexpr bool kReadsRows = false, kLong = false;
  // The transpose's A is the call's B and its B the call's A (try_gemm_wgmma).
  static constexpr int kAKMajor = EpilogueBKMajor<Epilogue>::value, kBKMajor = EpilogueAKMajor<Epilogue>::value;
  Epilogue inner;
  __device__ void operator()(int64_t b, int64_t m, int64_t n, float acc) const { inner(b, n, m, acc); }
  __device__ void operator()(int64_t b, int64_t m, int64_t n, float acc0, float acc1) const { inner(b, n, m, acc0, acc1); }
};

// Runs the Hopper kernel when the device is sm_90, the build has it, and every operand is a TMA
// tensor (16-byte aligned base and strides, a unit-stride axis, a batch offset linear in the flat
// batch index): returns true and the launch's cudaError_t in `result`. Returns false (nothing
// launched) otherwise. The problem as the kernel sees it (try_gemm_wgmma: for SWAP_AB already
// transposed).
template <typename T, typename Config, typename Epilogue>
bool try_gemm_wgmma_tiles(const Problem& p, const Epilogue& epilogue, void* workspace, int64_t workspace_bytes, cudaStream_t stream,
                          cudaError_t& result) {
  static_assert(std::is_same<T, __half>::value || std::is_same<T, __nv_bfloat16>::value, "gemm_wgmma<T>: T is __half or __nv_bfloat16");
  constexpr int NB = Epilogue::kNumB;
  static_assert(NB == 1 || NB == 2, "Epilogue::kNumB is 1 or 2");
  constexpr int64_t WB = detail::WgmmaLayout<Config, NB>::kOutCols;  // output columns per tile
  constexpr bool kSwap = Config::kSwapAB;
  static_assert(Config::BM % (64 * Config::kConsumersPerTile) == 0 && Config::BM <= 256 &&
                    (Config::BN == 64 || Config::BN == 128 || Config::BN == 256 || (kSwap && Config::BN == 16) ||
                     (kSwap && (Config::kSubN == 136 || Config::kSubN == 208) && Config::BN % Config::kSubN == 0)),
                "WgmmaConfig: BM 128 or 256 (ping-pong: 64 or 128), BN 64, 128 or 256 (SWAP_AB: also 16, 136, 208, 272 or 416)");
  static_assert(!Config::kDualHalves || (NB == 2 && Config::BN % 128 == 0), "WgmmaConfig: DUAL_HALVES for dual products, BN 128 or 256");
  static_assert(!kSwap || (!Config::kDualHalves && Config::BM == (Config::kPingPong ? 64 : 128)),
                "WgmmaConfig: SWAP_AB tiles are 128 x BN cooperative or 64 x BN ping-pong");
  static_assert(Config::BM / 64 / Config::kConsumersPerTile * Config::BN / 2 * detail::WgmmaLayout<Config, NB>::kAccB <= (kSwap ? 136 : 128),
                "WgmmaConfig: at most 128 accumulators per consumer thread (SWAP_AB: 136)");
  static_assert(detail::WgmmaLayout<Config, NB>::kEpiCols > 0, "WgmmaConfig: stages leave no shared memory for the epilogue buffers");
  // B's tile in more than one box, or of a width that is no multiple of 64, needs B K-major.
  constexpr bool kBKMajorOnly = Config::kSubTiles > 1 || WB % 64 != 0;
  if constexpr (kWgmmaBuilt) {
    static const int sm90 = detail::device_is_sm90();
    const int64_t batch = p.batch();
    if (sm90 && p.m > 0 && p.n > 0 && p.k > 0 && batch > 0 && batch < (int64_t(1) << 31) && p.num_b == NB) {
      const bool bf16 = std::is_same<T, __nv_bfloat16>::value;
      const bool a_k = p.a.stride_k == 1 && (p.m == 1 || p.a.stride_mn != 1);
      bool b_k = p.b[0].stride_k == 1 && (p.n == 1 || p.b[0].stride_mn != 1);
      constexpr int kHintA = EpilogueAKMajor<Epilogue>::value, kHintB = EpilogueBKMajor<Epilogue>::value;
      if (!layout_allows(kHintA, a_k) || !layout_allows(kHintB, b_k)) return false;  // not instantiated
      CUtensorMap ma, mb[2];
      bool a_batched = false, b_batched[2] = {false, false};
      bool ok = (b_k || !kBKMajorOnly) &&
                detail::operand_tensor_map(p, p.a, p.m, a_k, Config::BM, bf16, batch, a_batched, ma);
      for (int j = 0; j < NB && ok; ++j) {
        if (kSwap && j == 1) {  // the second weight, read as A is (try_gemm_wgmma)
          ok = detail::operand_tensor_map(p, p.b[1], p.m, a_k, Config::BM, bf16, batch, b_batched[1], mb[1]);
          if (b_batched[1] != a_batched || (p.b[1].stride_k == 1) != (p.a.stride_k == 1)) ok = false;
          continue;
        }
        ok = detail::operand_tensor_map(p, p.b[j], p.n, b_k, int(WB) / Config::kSubTiles, bf16, batch, b_batched[j], mb[j]);
        if (j == 1 && (b_batched[1] != b_batched[0] || (p.b[1].stride_k == 1) != (p.b[0].stride_k == 1))) ok = false;
      }
      const int64_t tiles_m = (p.m + Config::BM - 1) / Config::BM, tiles_n = (p.n + WB - 1) / WB;
      const int64_t k_steps = (p.k + Config::BK - 1) / Config::BK;
      if (ok && tiles_m * Config::BM < (int64_t(1) << 31) && tiles_n * WB < (int64_t(1) << 31) && p.k < (int64_t(1) << 31)) {
        detail::WgmmaArgs args;
        args.m = p.m, args.n = p.n;
        args.tiles_m = int(tiles_m), args.tiles_n = int(tiles_n), args.k_steps = int(k_steps);
        args.a_batched = a_batched, args.b_batched = b_batched[0];
        const int64_t sms = detail::device_sm_count(), tiles = tiles_m * tiles_n;
        int64_t splits = 1;
        const int64_t slice_bytes = int64_t(NB) * p.m * p.n * 4;
        if (detail::WgmmaLayout<Config, NB>::kClusterReduceFits && batch == 1 && tiles < sms && detail::cluster_split_enabled()) {
          // The splits of a tile as one cluster (one unit per CTA: tiles x splits <= SMs), as many as
          // fill the GPU, at most 8 (portable clusters) and no fewer than 4 k-steps each, with every
          // tile's cluster resident at once.
          splits = wgmma_planned_splits(tiles, k_steps);
          while (splits >= 2 && tiles > detail::wgmma_resident_clusters<T, Config, Epilogue>(int(splits))) --splits;
          if (splits >= 2) {
            const int64_t per = (k_steps + splits - 1) / splits;
            if ((k_steps + per - 1) / per == splits) args.cluster_reduce = 1;
          }
          if (!args.cluster_reduce) splits = 1;
        }
        if (!args.cluster_reduce && batch == 1 && workspace != nullptr && reinterpret_cast<uintptr_t>(workspace) % 16 == 0 &&
            workspace_bytes >= 2 * slice_bytes && tiles < sms) {
          splits = wgmma_planned_splits(tiles, k_steps);
          if (splits > workspace_bytes / slice_bytes) splits = workspace_bytes / slice_bytes;
          if (splits < 1) splits = 1;
        }
        const int64_t per_split = (k_steps + splits - 1) / splits;
        splits = (k_steps + per_split - 1) / per_split;
        args.splits = int(splits), args.k_steps_per_split = int(per_split);
        args.partial = splits > 1 && !args.cluster_reduce ? static_cast<float*>(workspace) : nullptr;
        args.units = batch * tiles * splits;
        const int grid = int(args.units < sms ? args.units : sms);
        const CUtensorMap& mb1 = NB == 2 ? mb[1] : mb[0];
        // The instantiation of the operands' layouts: only those the hints allow and, where B's tile
        // needs it, B K-major (b_k and the hints checked above, so no call reaches the others).
        cudaError_t e = cudaErrorNotSupported;
        auto launch = [&](auto ak, auto bk) {
          if constexpr (layout_allows(kHintA, ak.value) && layout_allows(kHintB, bk.value) && (bk.value || !kBKMajorOnly))
            e = detail::launch_wgmma<T, Config, Epilogue, ak.value, bk.value>(ma, mb[0], mb1, args, grid, epilogue, stream);
        };
        with_layouts(a_k, b_k, launch);
        if (e != cudaSuccess || splits == 1 || args.cluster_reduce) return result = e, true;
        const int64_t blocks = (p.m * p.n + 255) / 256;
        detail::splitk_epilogue_kernel<Epilogue>
            <<<unsigned(blocks < 4096 ? blocks : 4096), 256, 0, stream>>>(args.partial, p.m, p.n, int(splits), epilogue);
        return result = cudaGetLastError(), true;
      }
    }
  }
  return false;
}

// try_gemm_wgmma_tiles on the problem as given or, for SWAP_AB configurations, on its transpose
// (B^T A^T, the epilogue's (m, n) exchanged; a dual product's second B is the transpose's second A)
// where A is K-major (the tokens, B of the transpose) and the epilogue's code, unrolled over every
// accumulator, stays short: a long functor only with at most 68 accumulators per B. False
// (nothing launched) for any other.
template <typename T, typename Config, typename Epilogue>
bool try_gemm_wgmma(const Problem& p, const Epilogue& epilogue, void* workspace, int64_t workspace_bytes, cudaStream_t stream,
                    cudaError_t& result) {
  if constexpr (Config::kSwapAB) {
    if constexpr (EpilogueIsLong<Epilogue>::value && Config::BN / 2 > 68) {
      return false;
    } else {
      const bool a_k = p.a.stride_k == 1 && (p.m == 1 || p.a.stride_mn != 1);
      if (!a_k || p.num_b != Epilogue::kNumB) return false;
      Problem q = p;
      q.m = p.n, q.n = p.m;
      q.a = p.b[0], q.b[0] = p.a, q.b[1] = p.b[1];
      return try_gemm_wgmma_tiles<T, Config>(q, SwappedEpilogue<Epilogue>{epilogue}, workspace, workspace_bytes, stream, result);
    }
  } else {
    return try_gemm_wgmma_tiles<T, Config>(p, epilogue, workspace, workspace_bytes, stream, result);
  }
}

}  // namespace detail

// The Hopper kernel where it runs (detail::try_gemm_wgmma); otherwise variant 1 with `Fallback`
// (a TileConfig), which itself falls back to simt. Returns the launch's cudaError_t.
template <typename T, typename Config, typename Fallback, typename Epilogue>
cudaError_t gemm_wgmma(const Problem& p, const Epilogue& epilogue, void* workspace, int64_t workspace_bytes, cudaStream_t stream) {
  cudaError_t e;
  if (detail::try_gemm_wgmma<T, Config>(p, epilogue, workspace, workspace_bytes, stream, e)) return e;
  return gemm_tensorcore<T, Fallback>(p, epilogue, workspace, workspace_bytes, stream);
}

}  // namespace kiln::gemm
