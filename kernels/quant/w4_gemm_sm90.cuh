#pragma once
// GEMM variant 3, M >= 17 on Hopper (sm_90a): warpgroup MMA (wgmma) on weights decoded into
// shared memory. Device code only in the sm_90a pass (__CUDA_ARCH_FEAT_SM90_ALL); the launch only
// in builds that define KILN_GEMM_SM90A (w4_launch.cuh falls back to w4_gemm.cuh elsewhere).
//
// Product. out^T = W · x^T: the weight rows are wgmma's M (A operand), the tokens its N (B
// operand), so a token tile can be 64, 128 or 256 wide (M = 51 pads to 64, not to 128) and the
// accumulator layout puts rows g and g + 8 of a 16-row group in one thread, as in the mma.sync
// kernels (the fused gate/up's interleave, w4_params.cuh's row_factor).
//
// Schedule. CTA tile: 128 weight rows x BN tokens, K in stages of 64, three warpgroups:
//  - warpgroup 0, the producer. Thread r owns row r of the tile: it copies the row's packed
//    weights and scale words (64 bytes + scales per 128 k) with cp.async into its own slots of
//    a kRawSlots-deep ring (it alone reads them back, so no barrier: cp.async.wait_group), then
//    per stage decodes 64 weights (w4_device.cuh's decode_word and Scale, as the mma.sync kernels
//    do) into the row's 128 bytes of the stage's A tile, 16-byte units placed with the 128-byte
//    swizzle wgmma's descriptor reads (unit u of row r at u ^ (r % 8)). Thread 0 also loads the
//    stage's activations, a box of 64 k x BN tokens, by TMA (128-byte swizzle; rows past M are
//    zero-filled). Each stage has a `full` mbarrier (128 producer arrivals + the TMA bytes) and
//    an `empty` one (one arrival per consumer warpgroup).
//  - warpgroups 1 and 2, the consumers: 64 rows each, BN/2 fp32 accumulators per thread; per
//    stage 4 wgmma m64nBNk16 straight from the two shared tiles, one stage kept in flight.
//  Weights are constants: the producer requests its first kRawSlots - 1 slots before
//  griddepcontrol.wait (programmatic dependent launch), x only after it.
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

// Shared memory of one CTA. BN = 64 (small M, weight-bandwidth bound) keeps to ~100 KB, so that
// two CTAs share an SM (two producers decoding; plan_wgmma counts on it); the wider tiles take
// one CTA per SM with deeper rings.
template <int BN>
struct WgmmaW4Layout {
  static constexpr int kStages = BN == 128 ? 4 : 3;  // 64-k stages of decoded weights + x
  static constexpr int kRawSlots =
      BN == 64 ? 3 : 4;  // 128-k slots of packed weights per producer thread
  static constexpr uint32_t kABytes = kWgmmaRows * 128;  // 128 rows x 64 k, 16-bit
  static constexpr uint32_t kBBytes = BN * 128;          // BN tokens x 64 k
  static constexpr uint32_t kStageBytes = kABytes + kBBytes;
  // A producer thread's raw slot: 64 bytes of weights (128 k), 8 of scale words, 8 of zeros.
  static constexpr uint32_t kRawThread = 80;
  static constexpr uint32_t kRawBytes = kRawSlots * kWgmmaRows * kRawThread;
  static constexpr uint32_t kBarrierOffset = kStages * kStageBytes + kRawBytes;
  static constexpr size_t kSmemBytes = 1024 + size_t(kBarrierOffset) + 16 * kStages;
};

#if defined(KILN_GEMM_SM90A_DEVICE)
namespace sm90w4 {

// The 4-byte aligned scale (or INT4 zero) words of row rr for 128 k at k0, as cp.async copies
// them: NVFP4 8 bytes (8 E4M3), MXFP4 the word holding its 4 E8M0 bytes, INT4 the word(s)
// holding its 1..4 16-bit values.
template <Format F>
__device__ __forceinline__ void issue_raw_slot(const LinearParams& p, uint8_t* slot, size_t rr,
                                               int k0) {
  const uint8_t* w = p.weight + rr * (size_t(p.k) / 2) + k0 / 2;
#pragma unroll
  for (int i = 0; i < 4; ++i) cp_async16(slot + 16 * i, w + 16 * i, true);
  const size_t off = scale_offset<F>(p, rr, k0) & ~size_t(3);
  const uint8_t* s = static_cast<const uint8_t*>(p.scale) + off;
  cp_async4(slot + 64, s);
  if constexpr (F == Format::NvFp4) cp_async4(slot + 68, s + 4);
  if constexpr (F == Format::Int4) {
    const uint8_t* z = static_cast<const uint8_t*>(p.zero) + off;
    cp_async4(slot + 72, z);
    if (p.group == 32) {
      cp_async4(slot + 68, s + 4);
      cp_async4(slot + 76, z + 4);
    }
  }
}

// Raw scale (and zero) bits of the 32 k at k0 + 32 q (q = 0..3) of row rr, in Scale::expand's
// form, from the slot's words.
template <Format F>
__device__ __forceinline__ void raw_scale(const LinearParams& p, const uint8_t* slot, size_t rr,
                                          int k0, int q, uint32_t& s, uint32_t& z) {
  const uint32_t* words = reinterpret_cast<const uint32_t*>(slot + 64);
  z = 0;
  if constexpr (F == Format::NvFp4) {
    s = (words[q >> 1] >> (16 * (q & 1))) & 0xffffu;  // 2 E4M3 bytes per 32 k
  } else if constexpr (F == Format::MxFp4) {
    const int shift = int(scale_offset<F>(p, rr, k0) & 3) * 8;
    s = (words[0] >> (shift + 8 * q)) & 0xffu;
  } else {
    // 16-bit values: group 32 -> 4 values over two words; 64 -> 2 in one word; 128 -> 1.
    const int first = int(scale_offset<F>(p, rr, k0) & 3) / 2;  // value index in the first word
    const int v = first + q * 32 / p.group;
    const uint32_t* zw = reinterpret_cast<const uint32_t*>(slot + 72);
    s = (words[v >> 1] >> (16 * (v & 1))) & 0xffffu;
    z = (zw[v >> 1] >> (16 * (v & 1))) & 0xffffu;
  }
}

// Decodes 64 k (half h of the slot's 128) of the thread's row into the row's 128-byte line of
// the A tile at `line` (shared address), 16-byte unit u at u ^ (row % 8).
template <Format F, bool BF16>
__device__ __forceinline__ void decode_half(const LinearParams& p, const uint8_t* slot, size_t rr,
                                            int k0, int h, uint32_t line, int row) {
#pragma unroll
  for (int qq = 0; qq < 2; ++qq) {  // 32 k: one 16-byte weight unit, one Scale
    const int q = 2 * h + qq;
    uint32_t s, z;
    raw_scale<F>(p, slot, rr, k0, q, s, z);
    Scale<F, BF16> sc;
    sc.expand(s, z);
    const uint4 w = *reinterpret_cast<const uint4*>(slot + 16 * q);
#pragma unroll
    for (int i = 0; i < 4; ++i) {  // word i: 8 k = one 16-byte unit of the A line
      uint32_t d[4];
      decode_word<F, BF16>(word_of(w, i), d);
#pragma unroll
      for (int e = 0; e < 4; ++e) d[e] = sc.apply(d[e], i);
      const int u = 4 * qq + i;
      const uint32_t addr = line + uint32_t((u ^ (row & 7)) * 16);
      asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(d[0]), "r"(d[1]),
                   "r"(d[2]), "r"(d[3])
                   : "memory");
    }
  }
}

}  // namespace sm90w4
#endif

template <Format F, typename T, int BN, class Ep>
__global__ void __launch_bounds__(384, 1)
    w4_wgmma_kernel(const __grid_constant__ CUtensorMap tma_x, LinearParams p, Ep ep) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using namespace kiln::gemm::sm90;
  using L = WgmmaW4Layout<BN>;
  constexpr int S = L::kStages;
  constexpr bool BF16 = IsBf16<T>::value;
  extern __shared__ __align__(1024) uint8_t w4_wgmma_smem[];
  uint8_t* const smem = reinterpret_cast<uint8_t*>(
      (reinterpret_cast<uintptr_t>(w4_wgmma_smem) + 1023) & ~uintptr_t(1023));
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const uint32_t bars = base + L::kBarrierOffset;
  auto full = [&](int s) { return bars + 8u * uint32_t(s); };
  auto empty = [&](int s) { return bars + 8u * uint32_t(S + s); };
  auto a_tile = [&](int s) { return base + uint32_t(s) * L::kStageBytes; };
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      mbar_init(full(s), 128 + 1);  // the producer threads + thread 0's expect_tx
      mbar_init(empty(s), 2);       // one per consumer warpgroup
    }
    mbar_init_fence();
  }
  __syncthreads();

  const int row_tile = blockIdx.x * kWgmmaRows, tok0 = blockIdx.y * BN;
  const int steps = p.k / 128 / int(gridDim.z);  // 128-k steps of this CTA
  const int step0 = int(blockIdx.z) * steps;
  const int wg = threadIdx.x / 128;

  if (wg == 0) {
    // ---- producer ----
    const int r = threadIdx.x;  // row of the tile
    const size_t rr = size_t(row_tile + r);
    uint8_t* raw = smem + S * L::kStageBytes + r * L::kRawThread;
    auto slot = [&](int j) { return raw + (j % L::kRawSlots) * (kWgmmaRows * L::kRawThread); };
#pragma unroll
    for (int j = 0; j < L::kRawSlots - 1; ++j) {
      if (j < steps) sm90w4::issue_raw_slot<F>(p, slot(j), rr, (step0 + j) * 128);
      cp_async_commit();
    }
    grid_dependency_wait();  // x belongs to the previous kernel until here
    grid_launch_dependents();
    int stage = 0;
    uint32_t phase = 0;
    for (int j = 0; j < steps; ++j) {
      if (j + L::kRawSlots - 1 < steps)
        sm90w4::issue_raw_slot<F>(p, slot(j + L::kRawSlots - 1), rr,
                                  (step0 + j + L::kRawSlots - 1) * 128);
      cp_async_commit();
      cp_async_wait<L::kRawSlots - 1>();  // this thread's slot j has landed
      const int k0 = (step0 + j) * 128;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        mbar_wait(empty(stage), phase ^ 1u);
        if (r == 0) {
          mbar_expect_tx(full(stage), L::kBBytes);
          tma_load_3d(a_tile(stage) + L::kABytes, &tma_x, full(stage), k0 + 64 * h, tok0, 0);
        }
        sm90w4::decode_half<F, BF16>(p, slot(j), rr, k0, h, a_tile(stage) + uint32_t(r) * 128u, r);
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // st.shared -> wgmma's reads
        mbar_arrive(full(stage));
        if (++stage == S) stage = 0, phase ^= 1u;
      }
    }
    cp_async_wait<0>();
    return;
  }

  // ---- consumers: warpgroup c = wg - 1 owns rows 64c..64c+63 of the tile ----
  grid_dependency_wait();  // the epilogue may read what the previous kernel wrote
  const int c = wg - 1, tid = threadIdx.x % 128, warp = tid / 32, lane = tid % 32;
  float acc[BN / 2];
#pragma unroll
  for (int e = 0; e < BN / 2; ++e) acc[e] = 0.0f;
  int stage = 0;
  uint32_t phase = 0;
  int prev = -1;
  for (int s = 0; s < 2 * steps; ++s) {
    mbar_wait(full(stage), phase);
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
    if (++stage == S) stage = 0, phase ^= 1u;
  }
  wgmma_wait<0>();
#pragma unroll
  for (int e = 0; e < BN / 2; ++e) fence_operand(acc[e]);

  // Accumulator element 4i + e: row 16 warp + lane/4 + 8 (e/2), token 8i + 2 (lane%4) + e%2.
  const int g = lane / 4, t = lane % 4;
  const int rg = row_tile + 64 * c + 16 * warp + g;  // rows rg (gate when fused) and rg + 8 (up)
  const bool gated = p.act != Activation::None;
  const float f0 = row_factor<T, F>(p, g), f1 = row_factor<T, F>(p, g + 8);
#pragma unroll
  for (int i = 0; i < BN / 8; ++i) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int tok = tok0 + 8 * i + 2 * t + e;
      if (tok >= p.m) continue;
      const float v = acc[4 * i + e], u = acc[4 * i + 2 + e];
      if (p.partial) {
        atomicAdd(p.partial + size_t(tok) * p.n + rg, v);
        atomicAdd(p.partial + size_t(tok) * p.n + rg + 8, u);
      } else if (gated) {
        static_cast<T*>(p.y)[size_t(tok) * (p.n / 2) + (rg - g) / 2 + g] =
            from_float<T>(activate(v * f0, p.act) * (u * f1));
      } else {
        ep(0, tok, rg, v * f0);
        ep(0, tok, rg + 8, u * f1);
      }
    }
  }
#endif
}

}  // namespace kiln::quant::gpu
