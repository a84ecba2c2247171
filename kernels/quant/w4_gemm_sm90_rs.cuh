#pragma once
// GEMM variant 4, M >= 17 on Hopper (sm_90a): wgmma with the weights decoded in the consumers'
// registers (the A operand of wgmma from registers), the packed weights, their scale bytes and the
// activations streamed into shared memory by one producer warp. Device code only in the sm_90a
// pass (__CUDA_ARCH_FEAT_SM90_ALL); launched from w4_launch.cuh in KILN_GEMM_SM90A builds.
//
// Why. Variant 3 (w4_gemm_sm90.cuh) decodes each 64-k stage into a shared-memory A tile in its
// producer warpgroups and ran ~0.62 us per stage whatever the stage's MMA work or the number of
// decoding warps (session 5). Here nothing decoded goes through shared memory: a consumer thread
// decodes exactly its own fragment of A (rows g and g + 8 of its warp's 16, the pair of k 2t,
// 2t + 1 in each 8-k word) right before the wgmma that reads it, while earlier wgmmas run.
//
// Product. out^T = W · x^T as in variant 3: the weight rows are wgmma's M, the tokens its N
// (BN = 64 or 128 per tile), so the accumulators and the epilogue are variant 3's
// (wgmma_w4_epilogue; rows g and g + 8 of a 16-row group in one thread: the fused gate/up's
// interleave).
//
// Schedule. CTA tile: 128 weight rows x BN tokens, K in stages of 256 (128 bytes of each weight
// row per stage); grid.x walks the token tiles, so the tiles that share a weight row tile run
// together (one DRAM read, the rest from L2). Three warpgroups:
//  - warpgroup 0, the producer: thread r owns row r's scales. It copies the row's scale (and INT4
//    zero) bytes of each stage as aligned 4-byte words (cp.async) into its own slots of a
//    kRsRawSlots-deep ring, then, when the stage is free, expands them (Scale::expand) into the
//    stage's pair multipliers of the row: the consumers read one 32-bit multiplier per row and
//    16-k block instead of expanding the scales of a 32-k unit for its 8 weights of each row
//    (~1.3 instructions per weight in run s11c's profile). Thread 0 also loads the stage's packed
//    weights (one TMA box of 128 rows x 128 bytes, 128-byte swizzle: 16-byte unit u of row r at
//    u ^ (r % 8), so the 8 rows a warp reads at once hit distinct banks) and its activations
//    (boxes of 64 k x BN tokens, 128-byte swizzle, zero-filled past M). A stage's `full`
//    mbarrier: 1 + 128 arrivals and the TMA bytes; its `empty` one: one arrival per consumer
//    warpgroup. Weights and scales of the first stages are requested before griddepcontrol.wait
//    (they are constants), x after it.
//  - warpgroups 1 and 2, the consumers: 64 rows each, BN/2 fp32 accumulators per thread. Per two
//    k16 steps: wait until the group kRsGroups back is done (its A registers are free), decode the
//    8 registers of A (8 pairs: decode_pair and the multipliers; two independent chains per
//    register set), two wgmma m64nBNk16 (A from registers, x from the stage's descriptor), one
//    commit. The previous stage is released once its last wgmma is done (at the next stage's
//    second group).
//  One CTA per SM: the producer warpgroup down to 40 registers, the consumers up to 232.
// K not a multiple of 256: the last stage holds 128 k (the boxes zero-fill the rest, its steps past
// K are skipped). Split-K (grid.z > 1, at most 8), where all of the grid's clusters fit on the GPU
// at once: the CTAs along K are one thread-block cluster and add their sums through distributed
// shared memory, each CTA running the epilogue of its share of the tile, so a split needs no
// workspace, memset or second kernel, and keeps the programmatic dependent launch. Otherwise (or
// forced by KILN_QUANT_RS_SPLIT=partial) as variant 3: atomics into a zeroed `partial`, then
// w4_finish_kernel. The epilogue: variant 3's (wgmma_w4_epilogue).
#include <cooperative_groups.h>

#include "w4_gemm_sm90.cuh"

namespace kiln::quant::gpu {

constexpr int kRsThreads = 384;  // producer warpgroup + two consumer warpgroups
constexpr int kRsStageK = 256;
constexpr int kRsGroups = 2;     // commit groups (of two k16 wgmmas) a consumer keeps in flight
constexpr int kRsRawSlots = 6;   // raw scale slots per producer thread (stages requested ahead)
constexpr int kRsRawRow = 48;    // a raw slot: up to 5 words of scale bytes, then of INT4 zeros at +24
constexpr int kRsMulRow = 80;    // a stage's expanded scales per row: 64 bytes, rows 80 apart (no bank conflicts)

// A stage's expanded scales of one row (Scale::expand's pair multipliers, written by the producer
// warpgroup): NVFP4 16 words, one per 16-k block; MXFP4 8 words, one per 32-k unit; INT4 8 x
// (multiplier, zero) per 32-k unit.
template <int BN>
struct RsLayout {
  static constexpr uint32_t kXBytes = 4 * BN * 128;        // four boxes of 64 k x BN tokens (16-bit)
  static constexpr uint32_t kWBytes = kWgmmaRows * 128;    // 128 rows x 256 k (4-bit)
  static constexpr uint32_t kMulBytes = kWgmmaRows * kRsMulRow;
  static constexpr uint32_t kStageBytes = (kXBytes + kWBytes + kMulBytes + 1023) / 1024 * 1024;
  static constexpr int kStages = BN == 64 ? 3 : 2;         // 58 / 90 KB each
  static constexpr uint32_t kRawOffset = kStages * kStageBytes;
  static constexpr uint32_t kRawBytes = 128 * kRsRawSlots * kRsRawRow;
  static constexpr uint32_t kBarrierOffset = kRawOffset + kRawBytes;
  static constexpr size_t kSmemBytes = 1024 + size_t(kBarrierOffset) + 16 * kStages;
  static_assert(kSmemBytes <= 227 * 1024, "RsLayout: over 227 KB of shared memory");
};

// Trace points for bench/quant/rs_trace.cu, which defines the macro before including this header (a
// globaltimer stamp per CTA, stage and point: 0 the producer's issue of the stage, 1 consumer
// warpgroup 0 past the stage's `full` wait, 2 its last commit of the stage, 3 (stage 0) the CTA's
// start); nothing otherwise.
#ifndef KILN_W4_RS_TRACE
#define KILN_W4_RS_TRACE(point, stage)
#endif

#if defined(KILN_GEMM_SM90A_DEVICE)
namespace sm90rs {

// Bytes of scale bits (the same count of INT4 zero bits) of one row's `kvalid` k from k0.
template <Format F>
__device__ __forceinline__ int scale_bytes(const LinearParams& p, int kvalid) {
  if constexpr (F == Format::NvFp4) return kvalid / 16;
  if constexpr (F == Format::MxFp4) return kvalid / 32;
  return 2 * ((kvalid + p.group - 1) / p.group);
}

// Copies row rr's scale (and INT4 zero) bytes of the stage at k0 as the aligned 4-byte words that
// hold them (at most 5; in bounds: every scale tensor's size is a multiple of 4 bytes). Its bytes
// start at (scale_offset & 3) in the slot.
template <Format F>
__device__ __forceinline__ void copy_scales(const LinearParams& p, uint8_t* dst, size_t rr, int k0, int kvalid) {
  const size_t off = scale_offset<F>(p, rr, k0), first = off & ~size_t(3);
  const int words = int((off + size_t(scale_bytes<F>(p, kvalid)) + 3 - first) / 4);
  const uint8_t* scale = static_cast<const uint8_t*>(p.scale);
  const uint8_t* zero = static_cast<const uint8_t*>(p.zero);
#pragma unroll
  for (int i = 0; i < 5; ++i)
    if (i < words) {
      cp_async4(dst + 4 * i, scale + first + 4 * i);
      if constexpr (F == Format::Int4) cp_async4(dst + 24 + 4 * i, zero + first + 4 * i);
    }
}

// Expands a raw slot (the row's bytes from `at`) into the stage's multipliers of the row (`mul`,
// kRsMulRow bytes): the `units` 32-k units that lie in K.
template <Format F, bool BF16>
__device__ __forceinline__ void expand_scales(const uint8_t* raw, int at, int group, int units, uint32_t* mul) {
#pragma unroll
  for (int u = 0; u < kRsStageK / 32; ++u) {
    if (u >= units) break;
    uint32_t rs, rz = 0;
    if constexpr (F == Format::NvFp4) {
      rs = *reinterpret_cast<const uint16_t*>(raw + at + 2 * u);  // the 2 E4M3 of 2 x 16 k
    } else if constexpr (F == Format::MxFp4) {
      rs = raw[at + u];
    } else {
      const int b = at + 2 * (32 * u / group);
      rs = *reinterpret_cast<const uint16_t*>(raw + b);
      rz = *reinterpret_cast<const uint16_t*>(raw + 24 + b);
    }
    Scale<F, BF16> sc;
    sc.expand(rs, rz);
    if constexpr (F == Format::NvFp4) {
      mul[2 * u] = sc.mul[0], mul[2 * u + 1] = sc.mul[1];
    } else if constexpr (F == Format::MxFp4) {
      mul[u] = sc.mul[0];
    } else {
      mul[2 * u] = sc.mul[0], mul[2 * u + 1] = sc.zero;
    }
  }
}

}  // namespace sm90rs
#endif

// kClusterSplit: launched with grid.z > 1 in clusters of 1 x 1 x grid.z, adding the split's sums
// in the kernel (a separate instantiation: the cluster code in the unsplit kernel cost it 3-9% at
// M = 17..816 in run s12b).
template <Format F, typename T, int BN, class Ep, bool kClusterSplit = false>
__global__ void __launch_bounds__(kRsThreads, 1)
    w4_wgmma_rs_kernel(const __grid_constant__ CUtensorMap tma_x, const __grid_constant__ CUtensorMap tma_w, LinearParams p, Ep ep) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using namespace kiln::gemm::sm90;
  namespace cg = cooperative_groups;
  using L = RsLayout<BN>;
  constexpr int S = L::kStages, R = kRsRawSlots;
  constexpr bool BF16 = IsBf16<T>::value;
  extern __shared__ __align__(1024) uint8_t w4_rs_smem[];
  uint8_t* const smem = align_shared_1024(w4_rs_smem);
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const uint32_t bars = base + L::kBarrierOffset;
  auto full = [&](int s) { return bars + 8u * uint32_t(s); };
  auto empty = [&](int s) { return bars + 8u * uint32_t(S + s); };
  auto stage_offset = [](int s) { return uint32_t(s) * L::kStageBytes; };
  if (threadIdx.x == 0) {
    prefetch_tensor_map(&tma_x);
    prefetch_tensor_map(&tma_w);
    for (int s = 0; s < S; ++s) {
      mbar_init(full(s), 1 + 128);  // thread 0's expect_tx and the producer warpgroup's scales
      mbar_init(empty(s), 2);       // one per consumer warpgroup
    }
    mbar_init_fence();
  }
  __syncthreads();
  if (threadIdx.x == 0) KILN_W4_RS_TRACE(3, 0);

  const int tok0 = blockIdx.x * BN, row_tile = blockIdx.y * kWgmmaRows;
  // This CTA's stages: the split's share of ceil(k / 256) (the plan makes the shares equal).
  const int total = (p.k + kRsStageK - 1) / kRsStageK, stages = total / int(gridDim.z);
  const int kbase = int(blockIdx.z) * stages * kRsStageK;
  auto valid_k = [&](int k0) { return p.k - k0 < kRsStageK ? p.k - k0 : kRsStageK; };  // 256, or 128 at the end
  const int wg = threadIdx.x / 128;

  if (wg == 0) {
    // ---- producer warpgroup: thread r expands row r's scales; thread 0 also loads W and x ----
    setmaxnreg_dec<40>();
    const int r = threadIdx.x;
    const size_t rr = size_t(row_tile + r);
    uint8_t* const raw = smem + L::kRawOffset + r * R * kRsRawRow;
    auto issue_raw = [&](int s) {
      const int k0 = kbase + kRsStageK * s;
      sm90rs::copy_scales<F>(p, raw + (s % R) * kRsRawRow, rr, k0, valid_k(k0));
    };
    auto issue_w = [&](int s) {  // the stage's weights and expected bytes
      const int stage = s % S, k0 = kbase + kRsStageK * s;
      mbar_expect_tx(full(stage), L::kWBytes + uint32_t(valid_k(k0) / 64) * (BN * 128));
      tma_load_3d(base + stage_offset(stage) + L::kXBytes, &tma_w, full(stage), k0 / 2, row_tile, 0);
    };
    auto issue_x = [&](int s) {  // the stage's boxes of 64 k that lie in K
      const int stage = s % S, k0 = kbase + kRsStageK * s, kv = valid_k(k0);
      const uint32_t st = base + stage_offset(stage);
      for (int b = 0; b < kv / 64; ++b) tma_load_3d(st + uint32_t(b) * (BN * 128), &tma_x, full(stage), k0 + 64 * b, tok0, 0);
    };
    const int first = stages < S ? stages : S;
    for (int n = 0; n < R - 1; ++n) {  // weights and scales are constants: requested before the wait
      if (n < stages) issue_raw(n);
      cp_async_commit();
    }
    if (r == 0)
      for (int s = 0; s < first; ++s) {
        KILN_W4_RS_TRACE(0, s);
        issue_w(s);  // the ring is empty: no wait
      }
    pdl_wait();  // x belongs to the previous kernel until here
    pdl_trigger();
    if (r == 0)
      for (int s = 0; s < first; ++s) issue_x(s);
    for (int s = 0; s < stages; ++s) {
      if (s + R - 1 < stages) issue_raw(s + R - 1);
      cp_async_commit();
      cp_async_wait<R - 1>();  // this thread's raw slot of stage s has landed
      const int stage = s % S, k0 = kbase + kRsStageK * s;
      if (s >= S) {
        mbar_wait(empty(stage), ((s / S) & 1) ^ 1u);
        if (r == 0) {
          KILN_W4_RS_TRACE(0, s);
          issue_w(s), issue_x(s);
        }
      }
      sm90rs::expand_scales<F, BF16>(raw + (s % R) * kRsRawRow, int(scale_offset<F>(p, rr, k0) & 3), p.group, valid_k(k0) / 32,
                                     reinterpret_cast<uint32_t*>(smem + stage_offset(stage) + L::kXBytes + L::kWBytes + r * kRsMulRow));
      mbar_arrive(full(stage));  // (release: the multipliers are visible to the consumers' acquire)
    }
    cp_async_wait<0>();
    if constexpr (kClusterSplit) {  // the cluster's reduction below: every thread takes part
      cg::this_cluster().sync();
      cg::this_cluster().sync();
    }
    return;
  }

  // ---- consumers: warpgroup 1 + c owns rows 64c..64c+63 of the tile ----
  setmaxnreg_inc<232>();
  pdl_wait();  // the epilogue may read what the previous kernel wrote
  const int c = wg - 1, tid = threadIdx.x % 128, warp = tid / 32, lane = tid % 32;
  const int t = lane % 4;
  const int r0 = 64 * c + 16 * warp + lane / 4;  // the thread's rows r0 and r0 + 8 of the tile
  float acc[BN / 2];
#pragma unroll
  for (int e = 0; e < BN / 2; ++e) acc[e] = 0.0f;
  uint32_t a[2 * kRsGroups][4];  // A of the k16 steps in flight (read by their wgmmas until done)
  for (int s = 0; s < stages; ++s) {
    const int stage = s % S, steps = valid_k(kbase + kRsStageK * s) / 16;
    mbar_wait(full(stage), (s / S) & 1);
    if (threadIdx.x == 128) KILN_W4_RS_TRACE(1, s);
    const uint8_t* st = smem + stage_offset(stage);
    auto load_unit = [&](int u, uint4 (&w)[2]) {  // 16 bytes (32 k) of rows r0, r0 + 8
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = r0 + 8 * h;
        w[h] = *reinterpret_cast<const uint4*>(st + L::kXBytes + r * 128 + ((u ^ (r & 7)) * 16));
      }
    };
#pragma unroll
    for (int half = 0; half < 2; ++half) {  // 128 k at a time: 4 units of 32 k
      if (half == 1 && steps <= 8) break;
      uint32_t m[8][2];  // [16-k block][row]: NVFP4 the block's multiplier; MXFP4 and INT4 per unit:
                         // [2i] multiplier, [2i + 1] INT4 zero
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint32_t* mul = reinterpret_cast<const uint32_t*>(st + L::kXBytes + L::kWBytes + (r0 + 8 * h) * kRsMulRow);
        if constexpr (F == Format::MxFp4) {
          const uint4 v = *reinterpret_cast<const uint4*>(mul + 4 * half);
#pragma unroll
          for (int i = 0; i < 4; ++i) m[2 * i][h] = word_of(v, i);
        } else {
#pragma unroll
          for (int j = 0; j < 2; ++j) {
            const uint4 v = *reinterpret_cast<const uint4*>(mul + 8 * half + 4 * j);
#pragma unroll
            for (int i = 0; i < 4; ++i) m[4 * j + i][h] = word_of(v, i);
          }
        }
      }
      uint4 w[2], w_next[2];  // unit i's words, and unit i + 1's (read one unit ahead)
      load_unit(4 * half, w);
#pragma unroll
      for (int q = 0; q < 8; q += 2) {  // k16 steps kk and kk + 1 (kk = 8 half + q): unit q / 2
        const int kk = 8 * half + q, i = q / 2;
        if (i < 3) load_unit(4 * half + i + 1, w_next);
        wgmma_wait<kRsGroups - 1>();  // the group kRsGroups back is done: its A registers are free
        // At kk = 2 that is the previous stage's last one (with it every warp's reads of the stage).
        if (kk == 2 && s > 0 && tid == 0) mbar_arrive(empty((s - 1) % S));
#pragma unroll
        for (int d = 0; d < 2; ++d) {
          uint32_t(&A)[4] = a[(kk + d) % (2 * kRsGroups)];
#pragma unroll
          for (int j = 0; j < 2; ++j)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              const int word = 2 * d + j;  // of unit i
              const uint32_t pair = decode_pair_at<F, BF16>(stored_pair<F == Format::Int4>(word_of(w[h], word), t));
              if constexpr (F == Format::NvFp4) {
                A[h + 2 * j] = mul2<BF16>(pair, m[q + d][h]);
              } else if constexpr (F == Format::MxFp4) {
                A[h + 2 * j] = mul2<BF16>(pair, m[2 * i][h]);
              } else {
                A[h + 2 * j] = mul2<BF16>(sub2<BF16>(pair, m[2 * i + 1][h]), m[2 * i][h]);
              }
            }
        }
        wgmma_fence();  // A written by this thread before the wgmmas read it
#pragma unroll
        for (int d = 0; d < 2; ++d) {
          const int k16 = kk + d;
          const uint32_t xb = base + stage_offset(stage) + uint32_t(k16 / 4) * (BN * 128) + 32u * uint32_t(k16 % 4);
          wgmma_rs<BN, T>(acc, a[k16 % (2 * kRsGroups)], smem_desc(xb, 16, 1024), 1);
        }
        wgmma_commit();
        if (i < 3) w[0] = w_next[0], w[1] = w_next[1];
      }
    }
    if (threadIdx.x == 128) KILN_W4_RS_TRACE(2, s);
  }
  wgmma_wait<0>();
#pragma unroll
  for (int e = 0; e < BN / 2; ++e) fence_operand(acc[e]);
  if constexpr (!kClusterSplit) {  // (split K through p.partial: atomics, w4_finish_kernel after)
    wgmma_w4_epilogue<F, T, BN>(p, ep, acc, row_tile + 64 * c, tok0, warp, lane);
    return;
  }
  // Split K in a cluster: the CTAs along K form one cluster (1 x 1 x split). Each writes its raw
  // sums to its own shared memory (over the ring's stages, which both consumer warpgroups are done
  // with), and CTA `rank` adds, in rank order (the result does not depend on timing), the chunks i
  // of 8 tokens with i % split == rank from every CTA's shared memory, then runs their epilogue.
  named_barrier_sync(1, 256);  // both consumer warpgroups' last wgmmas have read the stages
  float* const red = reinterpret_cast<float*>(smem);  // [BN / 2][256 consumer threads]
  const int ct = threadIdx.x - 128;
#pragma unroll
  for (int e = 0; e < BN / 2; ++e) red[e * 256 + ct] = acc[e];
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();  // every CTA's sums are in its shared memory
  const int split = int(gridDim.z), rank = int(cluster.block_rank());
  for (int q = 0; q < split; ++q) {
    const float* remote = cluster.map_shared_rank(red, q);
#pragma unroll
    for (int i = 0; i < BN / 8; ++i) {
      if (i % split != rank) continue;
#pragma unroll
      for (int e = 4 * i; e < 4 * i + 4; ++e) acc[e] = (q == 0 ? 0.0f : acc[e]) + remote[e * 256 + ct];
    }
  }
  wgmma_w4_epilogue<F, T, BN>(p, ep, acc, row_tile + 64 * c, tok0, warp, lane, rank, split);
  cluster.sync();  // no CTA leaves while another reads its shared memory
#endif
}

}  // namespace kiln::quant::gpu
