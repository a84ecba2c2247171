#pragma once
// GEMM variant 3, M >= 17 on Hopper (sm_90a): warpgroup MMA (wgmma) on weights decoded into
// shared memory. Device code only in the sm_90a pass (__CUDA_ARCH_FEAT_SM90_ALL); the launch only
// in builds that define KILN_GEMM_SM90A (w4_launch.cuh falls back to w4_gemm.cuh elsewhere).
//
// Product. out^T = W · x^T: the weight rows are wgmma's M (A operand), the tokens its N (B
// operand), so a token tile can be 64 or 128 wide (M = 51 pads to 64, not to 128) and the
// accumulator layout puts rows g and g + 8 of a 16-row group in one thread, as in the mma.sync
// kernels (the fused gate/up's interleave, w4_params.cuh's row_factor).
//
// Schedule. CTA tile: 128 weight rows x BN tokens, K in stages of 64, five warpgroups:
//  - warpgroups 0..2, the producers; producer p makes stages p, p + 3, p + 6, ... Its thread r
//    owns row r of the tile: it copies the row's packed weights and scale word of each of its
//    stages (32 + 4 bytes) with cp.async into its own slots of a kRawSlots-deep ring (it alone
//    reads them back, so no barrier: cp.async.wait_group), then decodes the stage's 64 weights
//    (w4_device.cuh's decode_word and Scale, as the mma.sync kernels do) into the row's 128
//    bytes of the stage's A tile, 16-byte units placed with the 128-byte swizzle wgmma's
//    descriptor reads (unit u of row r at u ^ (r % 8)). Its thread 0 also loads the stage's
//    activations, a box of 64 k x BN tokens, by TMA (128-byte swizzle; rows past M are
//    zero-filled). Each stage has a `full` mbarrier (128 producer arrivals + the TMA bytes) and
//    an `empty` one (one arrival per consumer warpgroup).
//  - warpgroups 3 and 4, the consumers: 64 rows each, BN/2 fp32 accumulators per thread; per
//    stage 4 wgmma m64nBNk16 straight from the two shared tiles, one stage kept in flight.
//  Weights are constants: the producers request their first slots before griddepcontrol.wait
//  (programmatic dependent launch), x only after it.
// Split-K (grid.z > 1): raw fp32 sums added into a zeroed [m, n] `partial` (atomics);
// w4_finish_kernel then applies the scales and the epilogue, as GEMM variant 1.
// Epilogue: the fp32 sum times row_factor (format power of two, NVFP4 tensor scale), then the
// epilogue functor per element, or the fused gate/up's act(gate) * up.
#include <cuda.h>
#include <cudaTypedefs.h>

#include "../gemm/gemm_wgmma.cuh"
#include "w4_gemm.cuh"
#include "w4_wgmma_plan.h"

namespace kiln::quant::gpu {

// Warpgroups of a CTA: kWgmmaProducers decoding (each every kWgmmaProducers-th stage), then the
// two consumers. With one producer (run 1 of session 5) every tile took ~0.7-0.9 us per 64-k stage
// whatever its width, M = 51 and M = 816 alike, i.e. ~300 decode instructions per thread and
// stage issued by one warp per SM sub-partition; three producers give each stage three times as
// long to decode.
constexpr int kWgmmaProducers = 3;
constexpr int kWgmmaThreads = 128 * (kWgmmaProducers + 2);

template <int BN>
struct WgmmaW4Layout {
  static constexpr int kStages = 4;    // 64-k stages of decoded weights + x
  static constexpr int kRawSlots = 4;  // 64-k slots of packed weights per producer thread
  static constexpr uint32_t kABytes = kWgmmaRows * 128;  // 128 rows x 64 k, 16-bit
  static constexpr uint32_t kBBytes = BN * 128;          // BN tokens x 64 k
  static constexpr uint32_t kStageBytes = kABytes + kBBytes;
  // A producer thread's raw slot: 32 bytes of weights (64 k), the scale word, the INT4 zero word.
  static constexpr uint32_t kRawThread = 48;
  static constexpr uint32_t kRawBytes = kWgmmaProducers * 128 * kRawSlots * kRawThread;
  static constexpr uint32_t kBarrierOffset = kStages * kStageBytes + kRawBytes;
  static constexpr size_t kSmemBytes = 1024 + size_t(kBarrierOffset) + 16 * kStages;
  // Stage s's ring entry is s % kStages whichever producer made it: an mbarrier parity wait tells
  // only a phase from the one before, so no producer may run kStages stages past a release;
  // producer p's previous stage (s - kWgmmaProducers) bounds it while kWgmmaProducers <= kStages.
  static_assert(kWgmmaProducers <= kStages, "a producer could wait two phases ahead");
};

#if defined(KILN_GEMM_SM90A_DEVICE)
namespace sm90w4 {

// Row rr's packed weights of the 64 k at k0 (32 bytes) and the aligned 4-byte word holding their
// scale bits (NVFP4: 4 E4M3; MXFP4: 2 E8M0; INT4: 1 or 2 16-bit values), and the INT4 zero word.
template <Format F>
__device__ __forceinline__ void issue_raw_slot(const LinearParams& p, uint8_t* slot, size_t rr,
                                               int k0) {
  const uint8_t* w = p.weight + rr * (size_t(p.k) / 2) + k0 / 2;
  cp_async16(slot, w, true);
  cp_async16(slot + 16, w + 16, true);
  const size_t off = scale_offset<F>(p, rr, k0) & ~size_t(3);
  cp_async4(slot + 32, static_cast<const uint8_t*>(p.scale) + off);
  if constexpr (F == Format::Int4) cp_async4(slot + 36, static_cast<const uint8_t*>(p.zero) + off);
}

// Raw scale (and zero) bits of the 32 k at k0 + 32 q (q = 0, 1) of row rr, in Scale::expand's
// form, from the slot's words (the scale word at kScaleAt, the INT4 zero word 4 bytes after).
template <Format F, int kScaleAt = 32>
__device__ __forceinline__ void raw_scale(const LinearParams& p, const uint8_t* slot, size_t rr,
                                          int k0, int q, uint32_t& s, uint32_t& z) {
  const uint32_t word = *reinterpret_cast<const uint32_t*>(slot + kScaleAt);
  const int shift = int(scale_offset<F>(p, rr, k0) & 3) * 8;
  z = 0;
  if constexpr (F == Format::NvFp4) {
    s = (word >> (16 * q)) & 0xffffu;  // 2 E4M3 bytes per 32 k
  } else if constexpr (F == Format::MxFp4) {
    s = (word >> (shift + 8 * q)) & 0xffu;
  } else {
    // 16-bit values: group 32 -> both of the word's values; 64 or 128 -> the one at `shift`.
    const int at = p.group == 32 ? 16 * q : shift;
    s = (word >> at) & 0xffffu;
    z = (*reinterpret_cast<const uint32_t*>(slot + kScaleAt + 4) >> at) & 0xffffu;
  }
}

// Decodes the 32 k at k0 + 32 q of row rr (the 16 weight bytes at slot + kWeightAt, the scale
// word at kScaleAt) into 16-byte units 4q..4q+3 of the row's 128-byte line at `line` (shared
// address), unit u at u ^ (row % 8): the 128-byte swizzle.
template <Format F, bool BF16, int kWeightAt, int kScaleAt>
__device__ __forceinline__ void decode_unit(const LinearParams& p, const uint8_t* slot, size_t rr, int k0, int q,
                                            uint32_t line, int row) {
  uint32_t s, z;
  raw_scale<F, kScaleAt>(p, slot, rr, k0, q, s, z);
  Scale<F, BF16> sc;
  sc.expand(s, z);
  const uint4 w = *reinterpret_cast<const uint4*>(slot + kWeightAt);
#pragma unroll
  for (int i = 0; i < 4; ++i) {  // word i: 8 k = one 16-byte unit of the line
    uint32_t d[4];
    decode_word<F, BF16>(word_of(w, i), d);
#pragma unroll
    for (int e = 0; e < 4; ++e) d[e] = sc.apply(d[e], i);
    const int u = 4 * q + i;
    const uint32_t addr = line + uint32_t((u ^ (row & 7)) * 16);
    asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(d[0]), "r"(d[1]),
                 "r"(d[2]), "r"(d[3])
                 : "memory");
  }
}

// Decodes row rr's 64 k at k0 (a slot of issue_raw_slot) into the row's 128-byte line.
template <Format F, bool BF16>
__device__ __forceinline__ void decode_slot(const LinearParams& p, const uint8_t* slot, size_t rr,
                                            int k0, uint32_t line, int row) {
  decode_unit<F, BF16, 0, 32>(p, slot, rr, k0, 0, line, row);
  decode_unit<F, BF16, 16, 32>(p, slot, rr, k0, 1, line, row);
}

}  // namespace sm90w4
#endif

// The dynamic shared memory of variants 3 and 4 from its first 1024-byte boundary (the swizzled TMA
// boxes' alignment), as an offset from the __shared__ array itself, so that every access through
// the result compiles to a shared-memory instruction (a pointer rounded through an integer is
// generic: run s11e's profile counted such reads as L1TEX waits).
__device__ __forceinline__ uint8_t* align_shared_1024(uint8_t* smem) {
  return smem + ((1024u - static_cast<uint32_t>(__cvta_generic_to_shared(smem))) & 1023u);
}

// The epilogue of variants 3 and 4: warp `warp` of the consumer warpgroup whose 64 rows start at
// `row0` holds, per thread, BN/2 fp32 sums of wgmma m64nBN's accumulator layout (element 4i + e:
// row 16 warp + lane/4 + 8 (e/2), token tok0 + 8i + 2 (lane%4) + e%2). Split-K (p.partial): raw
// sums added with atomics; else the sums times row_factor (format power of two, NVFP4 tensor
// scale), through the epilogue functor (its prefetch() first where it has one) or the fused
// gate/up's act(gate) * up. Only the chunks i (8 tokens each) with i % chunk_step == chunk_first:
// variant 4's split of K gives each CTA of a cluster its share of the tile's chunks.
template <Format F, typename T, int BN, class Ep>
__device__ __forceinline__ void wgmma_w4_epilogue(const LinearParams& p, const Ep& ep, const float (&acc)[BN / 2], int row0,
                                                  int tok0, int warp, int lane, int chunk_first = 0, int chunk_step = 1) {
  const int g = lane / 4, t = lane % 4;
  const int rg = row0 + 16 * warp + g;  // rows rg (gate when fused) and rg + 8 (up)
  const bool gated = p.act != Activation::None;
  const float f0 = row_factor<T, F>(p, g), f1 = row_factor<T, F>(p, g + 8);
  if constexpr (kiln::gemm::EpilogueHasPrefetch<Ep>::value) {
    // A functor that loads per element (a generated epilogue reading another tensor): every load
    // of the thread's elements in flight before the first call, instead of one memory latency per
    // call behind its bounds test.
    if (!p.partial && !gated) {
#pragma unroll
      for (int i = 0; i < BN / 8; ++i)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int tok = tok0 + 8 * i + 2 * t + e;
          if (i % chunk_step == chunk_first && tok < p.m) ep.prefetch(0, tok, rg), ep.prefetch(0, tok, rg + 8);
        }
    }
  }
#pragma unroll
  for (int i = 0; i < BN / 8; ++i) {
    if (i % chunk_step != chunk_first) continue;
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int tok = tok0 + 8 * i + 2 * t + e;
      if (tok >= p.m) continue;
      const float v = acc[4 * i + e], u = acc[4 * i + 2 + e];
      if (p.partial) {
        atomicAdd(p.partial + size_t(tok) * p.n + rg, v);
        atomicAdd(p.partial + size_t(tok) * p.n + rg + 8, u);
      } else if (gated) {
        static_cast<T*>(p.y)[size_t(tok) * (p.n / 2) + (rg - g) / 2 + g] = from_float<T>(activate(v * f0, p.act) * (u * f1));
      } else {
        ep(0, tok, rg, v * f0);
        ep(0, tok, rg + 8, u * f1);
      }
    }
  }
}

template <Format F, typename T, int BN, class Ep>
__global__ void __launch_bounds__(kWgmmaThreads, 1)
    w4_wgmma_kernel(const __grid_constant__ CUtensorMap tma_x, LinearParams p, Ep ep) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using namespace kiln::gemm::sm90;
  using L = WgmmaW4Layout<BN>;
  constexpr int S = L::kStages, R = L::kRawSlots, P = kWgmmaProducers;
  constexpr bool BF16 = IsBf16<T>::value;
  extern __shared__ __align__(1024) uint8_t w4_wgmma_smem[];
  uint8_t* const smem = align_shared_1024(w4_wgmma_smem);
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const uint32_t bars = base + L::kBarrierOffset;
  auto full = [&](int s) { return bars + 8u * uint32_t(s); };
  auto empty = [&](int s) { return bars + 8u * uint32_t(S + s); };
  auto a_tile = [&](int s) { return base + uint32_t(s) * L::kStageBytes; };
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      mbar_init(full(s), 128 + 1);  // the producer warpgroup's threads + its thread 0's expect_tx
      mbar_init(empty(s), 2);       // one per consumer warpgroup
    }
    mbar_init_fence();
  }
  __syncthreads();

  const int row_tile = blockIdx.x * kWgmmaRows, tok0 = blockIdx.y * BN;
  const int stages = 2 * (p.k / 128 / int(gridDim.z));  // 64-k stages of this CTA
  const int kbase = int(blockIdx.z) * stages * 64;
  const int wg = threadIdx.x / 128;

  if (wg < P) {
    // ---- producer wg: stages wg, wg + P, ...; thread r decodes row r ----
    const int r = threadIdx.x % 128;
    const size_t rr = size_t(row_tile + r);
    uint8_t* raw = smem + S * L::kStageBytes + (wg * 128 + r) * R * L::kRawThread;
    auto slot = [&](int n) { return raw + (n % R) * L::kRawThread; };
    const int mine = (stages - wg + P - 1) / P;  // stages this producer makes
#pragma unroll
    for (int n = 0; n < R - 1; ++n) {
      if (n < mine) sm90w4::issue_raw_slot<F>(p, slot(n), rr, kbase + 64 * (wg + P * n));
      cp_async_commit();
    }
    pdl_wait();  // x belongs to the previous kernel until here
    pdl_trigger();
    for (int n = 0; n < mine; ++n) {
      if (n + R - 1 < mine)
        sm90w4::issue_raw_slot<F>(p, slot(n + R - 1), rr, kbase + 64 * (wg + P * (n + R - 1)));
      cp_async_commit();
      cp_async_wait<R - 1>();  // this thread's slot n has landed
      const int s = wg + P * n, stage = s % S, k0 = kbase + 64 * s;
      mbar_wait(empty(stage), ((s / S) & 1) ^ 1u);
      if (r == 0) {
        mbar_expect_tx(full(stage), L::kBBytes);
        tma_load_3d(a_tile(stage) + L::kABytes, &tma_x, full(stage), k0, tok0, 0);
      }
      sm90w4::decode_slot<F, BF16>(p, slot(n), rr, k0, a_tile(stage) + uint32_t(r) * 128u, r);
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // st.shared -> wgmma's reads
      mbar_arrive(full(stage));
    }
    cp_async_wait<0>();
    return;
  }

  // ---- consumers: warpgroup c owns rows 64c..64c+63 of the tile ----
  pdl_wait();  // the epilogue may read what the previous kernel wrote
  const int c = wg - P, tid = threadIdx.x % 128, warp = tid / 32, lane = tid % 32;
  float acc[BN / 2];
#pragma unroll
  for (int e = 0; e < BN / 2; ++e) acc[e] = 0.0f;
  int prev = -1;
  for (int s = 0; s < stages; ++s) {
    const int stage = s % S;
    mbar_wait(full(stage), (s / S) & 1);
    const uint32_t a = a_tile(stage) + 8192u * uint32_t(c), b = a_tile(stage) + L::kABytes;
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      wgmma<BN, 0, 0, T>(acc, smem_desc(a + 32u * kk, 16, 1024), smem_desc(b + 32u * kk, 16, 1024),
                         1);
    }
    wgmma_commit();
    wgmma_wait<1>();  // the previous stage's wgmmas are done: release it
    if (prev >= 0 && tid == 0) mbar_arrive(empty(prev));
    prev = stage;
  }
  wgmma_wait<0>();
#pragma unroll
  for (int e = 0; e < BN / 2; ++e) fence_operand(acc[e]);

  wgmma_w4_epilogue<F, T, BN>(p, ep, acc, row_tile + 64 * c, tok0, warp, lane);
#endif
}

}  // namespace kiln::quant::gpu
