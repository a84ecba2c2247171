#pragma once
// GEMM variant 5, few tokens on Hopper (sm_90a): the weight rows are wgmma's N. out = x · Wᵀ with
// x (64 tokens, TMA) as wgmma's A and 256 weight rows decoded into shared memory as its B, so one
// wgmma m64n256k16 does the work of four m64n64k16 and the decoding runs in other warps than the
// MMAs. Device code only in the sm_90a pass; launched from w4_launch.cuh (libkiln_quant,
// KILN_QUANT_GEMM_VARIANT=5; not the default).
//
// Why (bench/quant/NOTES.md, session 11): at 64 tokens variant 4's consumers decode their A
// fragments in the warps that issue the wgmmas, and the two do not overlap (~150 cycles per k16
// step of a warpgroup where the wgmma needs 32). Variant 3 decodes into shared memory in other
// warps but loads x for a stage only once the stage is free, so every stage's round trip holds an
// x load (~0.62 us per 64-k stage).
//
// Schedule. CTA tile: 64 tokens x 256 weight rows, K in stages of 64. Three warpgroups:
//  - warpgroup 0, the consumer: per stage four wgmma m64n256k16 (x and the decoded weights from
//    shared memory, 128 fp32 accumulators per thread), one commit group in flight; its thread 0
//    keeps kSsXStages stages of x requested ahead (TMA, 128-byte swizzle, zero-filled past M),
//    refilling a slot as soon as the wgmmas that read it are done, so x is never on a stage's
//    round trip. A decoded stage is released (`empty`) once its wgmmas are done.
//  - warpgroups 1 and 2, the decoders: thread r owns weight row r of the tile. It keeps
//    kRawSlots stages of the row's packed weights and scale words in flight (cp.async into its
//    own slots, as variant 3's producers), and per stage waits for the decoded stage to be free,
//    decodes the row's 64 k into its 128-byte line (variant 3's decode_slot: 16-byte unit u at
//    u ^ (row % 8), the 128-byte swizzle wgmma's descriptor reads), fences the async proxy and
//    arrives on the stage's `full` (256 arrivals).
// Measured (run s12g profile, bench/quant/NOTES.md): the decoders set the pace, ~1400 cycles per
// stage (~237 instructions per thread at ~6 cycles each: shared-memory and fence latency with two
// decoder warps per scheduler); four decoder warpgroups do not fit (a 640-thread CTA leaves the
// consumer's 128 accumulators 96 registers).
// Split K (grid.z > 1, at most 8): the CTAs along K are one cluster and add their sums through
// distributed shared memory, as variant 4 (each CTA the epilogue of its share of the tile).
// Epilogue: through shared memory, one token per iteration and a row pair per thread (see the
// kernel); a fused gate/up's rows interleave in groups of 16 (8 gate, 8 up).
#include <cooperative_groups.h>

#include "w4_gemm_sm90.cuh"

namespace kiln::quant::gpu {

constexpr int kSsThreads = 384;  // consumer warpgroup + two decoder warpgroups
constexpr int kSsRows = 256;     // weight rows of a CTA tile (wgmma N)
constexpr int kSsTokens = 64;    // tokens of a CTA tile (wgmma M)

struct SsLayout {
  static constexpr int kBStages = 4;    // decoded 64-k stages of the 256 rows
  static constexpr int kXStages = 6;    // 64-k stages of x requested ahead
  static constexpr int kRawSlots = 4;   // a decoder thread's 64-k slots of packed weights
  static constexpr uint32_t kBBytes = kSsRows * 128;   // 256 rows x 64 k, 16-bit
  static constexpr uint32_t kXBytes = kSsTokens * 128;  // 64 tokens x 64 k, 16-bit
  static constexpr uint32_t kRawThread = 48;            // variant 3's raw slot
  static constexpr uint32_t kXOffset = kBStages * kBBytes;
  static constexpr uint32_t kRawOffset = kXOffset + kXStages * kXBytes;
  static constexpr uint32_t kBarrierOffset = kRawOffset + kSsRows * kRawSlots * kRawThread;
  static constexpr size_t kSmemBytes = 1024 + size_t(kBarrierOffset) + 8 * (2 * kBStages + kXStages);
  // The epilogue's sums: [128 accumulators][128 consumer threads, padded to 129] over the stages.
  static constexpr int kRedPitch = 129;
  static_assert(kSmemBytes <= 227 * 1024, "SsLayout: over 227 KB of shared memory");
  static_assert(kBStages * kBBytes >= 128 * kRedPitch * 4, "SsLayout: the sums do not fit the decoded stages");
};

template <Format F, typename T, class Ep, bool kClusterSplit = false>
__global__ void __launch_bounds__(kSsThreads, 1)
    w4_wgmma_ss_kernel(const __grid_constant__ CUtensorMap tma_x, LinearParams p, Ep ep) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using namespace kiln::gemm::sm90;
  namespace cg = cooperative_groups;
  using L = SsLayout;
  constexpr int SB = L::kBStages, SX = L::kXStages, R = L::kRawSlots;
  constexpr bool BF16 = IsBf16<T>::value;
  extern __shared__ __align__(1024) uint8_t w4_ss_smem[];
  uint8_t* const smem = align_shared_1024(w4_ss_smem);
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const uint32_t bars = base + L::kBarrierOffset;
  auto full = [&](int s) { return bars + 8u * uint32_t(s); };
  auto empty = [&](int s) { return bars + 8u * uint32_t(SB + s); };
  auto xfull = [&](int s) { return bars + 8u * uint32_t(2 * SB + s); };
  auto b_tile = [&](int s) { return base + uint32_t(s) * L::kBBytes; };
  auto x_tile = [&](int s) { return base + L::kXOffset + uint32_t(s) * L::kXBytes; };
  if (threadIdx.x == 0) {
    prefetch_tensor_map(&tma_x);
    for (int s = 0; s < SB; ++s) {
      mbar_init(full(s), 256);  // the decoder threads
      mbar_init(empty(s), 1);  // the consumer's thread 0
    }
    for (int s = 0; s < SX; ++s) mbar_init(xfull(s), 1);  // expect_tx
    mbar_init_fence();
  }
  __syncthreads();

  const int row_tile = blockIdx.x * kSsRows, tok0 = blockIdx.y * kSsTokens;
  const int stages = p.k / 64 / int(gridDim.z);  // 64-k stages of this CTA
  const int kbase = int(blockIdx.z) * stages * 64;
  const int wg = threadIdx.x / 128;

  if (wg > 0) {
    // ---- decoders: thread r decodes row r of the tile ----
    setmaxnreg_dec<96>();
    const int r = threadIdx.x - 128;
    const size_t rr = size_t(row_tile + r);
    uint8_t* const raw = smem + L::kRawOffset + r * R * L::kRawThread;
    auto slot = [&](int n) { return raw + (n % R) * L::kRawThread; };
#pragma unroll
    for (int n = 0; n < R - 1; ++n) {  // weights are constants: no grid dependency wait
      if (n < stages) sm90w4::issue_raw_slot<F>(p, slot(n), rr, kbase + 64 * n);
      cp_async_commit();
    }
    for (int n = 0; n < stages; ++n) {
      if (n + R - 1 < stages) sm90w4::issue_raw_slot<F>(p, slot(n + R - 1), rr, kbase + 64 * (n + R - 1));
      cp_async_commit();
      cp_async_wait<R - 1>();  // this thread's slot n has landed
      const int stage = n % SB;
      mbar_wait(empty(stage), ((n / SB) & 1) ^ 1u);
      sm90w4::decode_slot<F, BF16>(p, slot(n), rr, kbase + 64 * n, b_tile(stage) + uint32_t(r) * 128u, r);
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // st.shared -> wgmma's reads
      mbar_arrive(full(stage));
    }
    cp_async_wait<0>();
    if constexpr (kClusterSplit) {  // the consumer's reduction below: every thread takes part
      cg::this_cluster().sync();
      cg::this_cluster().sync();
    }
    return;
  }

  // ---- consumer ----
  setmaxnreg_inc<232>();
  pdl_wait();  // x, and what the epilogue reads, belong to the previous kernel until here
  pdl_trigger();
  const int tid = threadIdx.x;
  auto issue_x = [&](int s) {
    mbar_expect_tx(xfull(s % SX), L::kXBytes);
    tma_load_3d(x_tile(s % SX), &tma_x, xfull(s % SX), kbase + 64 * s, tok0, 0);
  };
  if (tid == 0)
    for (int s = 0; s < SX && s < stages; ++s) issue_x(s);
  float acc[kSsRows / 2];
#pragma unroll
  for (int e = 0; e < kSsRows / 2; ++e) acc[e] = 0.0f;
  for (int s = 0; s < stages; ++s) {
    mbar_wait(xfull(s % SX), (s / SX) & 1);
    mbar_wait(full(s % SB), (s / SB) & 1);
    const uint32_t a = x_tile(s % SX), b = b_tile(s % SB);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)
      wgmma<kSsRows, 0, 0, T>(acc, smem_desc(a + 32u * kk, 16, 1024), smem_desc(b + 32u * kk, 16, 1024), 1);
    wgmma_commit();
    wgmma_wait<1>();  // stage s - 1's wgmmas are done: release its decoded stage, refill its x slot
    if (s > 0 && tid == 0) {
      mbar_arrive(empty((s - 1) % SB));
      if (s - 1 + SX < stages) issue_x(s - 1 + SX);
    }
  }
  wgmma_wait<0>();
#pragma unroll
  for (int e = 0; e < kSsRows / 2; ++e) fence_operand(acc[e]);

  // Epilogue through shared memory (over the decoded stages, all consumed): element e of thread
  // tid (token 16 (tid/32) + (tid%32)/4 + 8 ((e%4)/2), row 8 (e/4) + 2 (tid%4) + e%2) at
  // red[e * kRedPitch + tid]. Then thread tid takes row pair tid (gate row 16 (tid/8) + tid%8, up
  // row + 8: a fused gate/up's interleave) of one token per iteration, so a warp's stores cover
  // 32 consecutive outputs. Split K: the CTAs of the cluster add every CTA's sums (rank order)
  // for the tokens t with t % split == rank.
  float* const red = reinterpret_cast<float*>(smem);
#pragma unroll
  for (int e = 0; e < kSsRows / 2; ++e) red[e * L::kRedPitch + tid] = acc[e];
  int split = 1, rank = 0;
  if constexpr (kClusterSplit) {
    cg::this_cluster().sync();
    split = int(gridDim.z), rank = int(cg::this_cluster().block_rank());
  } else {
    named_barrier_sync(1, 128);
  }
  const float f0 = row_factor<T, F>(p, 0), f1 = row_factor<T, F>(p, 8);  // gate / up (row & 8)
  const bool gated = p.act != Activation::None;
  const int j = tid / 8, within = tid % 8;
  const int gate_row = 16 * j + within;                   // tile rows gate_row, gate_row + 8
  const int eg = 4 * (gate_row / 8) + (gate_row & 1);     // element of the gate row (+ 4: up)
  const int tg = (gate_row & 7) / 2;                      // lane % 4 of its holder
#pragma unroll 2
  for (int tl = rank; tl < kSsTokens; tl += split) {
    const int tok = tok0 + tl;
    if (tok >= p.m) break;
    const int holder = 32 * (tl / 16) + 4 * (tl % 8) + tg, e = eg + 2 * ((tl / 8) & 1);
    float v = 0.0f, u = 0.0f;
    for (int q = 0; q < split; ++q) {
      const float* from = kClusterSplit ? cg::this_cluster().map_shared_rank(red, q) : red;
      v += from[e * L::kRedPitch + holder];
      u += from[(e + 4) * L::kRedPitch + holder];
    }
    v *= f0, u *= f1;
    if (gated) {
      static_cast<T*>(p.y)[size_t(tok) * (p.n / 2) + row_tile / 2 + 8 * j + within] = from_float<T>(activate(v, p.act) * u);
    } else {
      ep(0, tok, row_tile + gate_row, v);
      ep(0, tok, row_tile + gate_row + 8, u);
    }
  }
  if constexpr (kClusterSplit) cg::this_cluster().sync();  // no CTA leaves while another reads its shared memory
#endif
}

}  // namespace kiln::quant::gpu
