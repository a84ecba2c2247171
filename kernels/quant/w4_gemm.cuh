#pragma once
// Variant 2, M >= 17: tensor-core GEMM with the 4-bit decode in the main loop.
//
// Schedule. CTA tile: 128 weight rows x 64 tokens, 4 warps; warp w owns rows 32w..32w+31 (two
// 16-row tiles) against all 64 tokens (8 n8 tiles): 64 fp32 accumulators per thread. K advances
// in steps of 128. A step's activations (64 x 128, 16 KB, shared by the 4 warps) and each warp's
// own weights and scale words (3 KB) go through shared memory by cp.async, kGemmStages deep, so
// that DRAM latency is covered without holding prefetched weights in registers. The
// thread/k mapping is the GEMV's (w4_gemv.cuh): a thread's 32 physical k of a row form its A
// fragments; B fragments are read with one 16-byte shared load per (word, token tile),
// conflict-free thanks to the swizzle below. Each decoded fragment feeds 8 mmas.
// Split-K (grid.z > 1, for grids too small to fill the GPU):
//  variant 1: raw fp32 sums added into a zeroed `partial` with atomics; w4_finish_kernel then
//    applies scales, bias and the activation (a memset, atomics and a second kernel).
//  variant 2 (KILN_QUANT_GEMM_VARIANT=2; the default stays 1 until timed): each split stores its
//    raw sums into its own slice of `partial`; the last CTA of a tile to finish (per-tile counter) adds the
//    slices in split order (deterministic) and runs the epilogue itself. Variant 2 also skips the
//    token tiles of a CTA that lie wholly past M (M = 51: 7 of 8) and requests its first weight
//    stages before pdl_wait() (programmatic dependent launch, as GEMV variant 4+).
#include "w4_gemv.cuh"

namespace kiln::quant::gpu {

constexpr int kGemmRows = 128, kGemmTokens = 64, kGemmStages = 3;  // 3 x 28 KB: two CTAs per SM

// One pipeline stage in shared memory: the CTA's activations of a k-step, then per warp its
// weights (2 row tiles x rows g, g+8 x 32 lanes x 16 B) and the 4-byte words holding each
// thread's scale (and INT4 zero) bits.
struct GemmStageLayout {
  static constexpr size_t kAct = size_t(kGemmTokens) * 128 * 2;
  static constexpr size_t kWarpW = 4 * 32 * 16, kWarpS = 4 * 32 * 4;
  static constexpr size_t kWarp = kWarpW + 2 * kWarpS;
  static constexpr size_t kStage = kAct + 4 * kWarp;
  static constexpr size_t kTotal = kStage * kGemmStages;
};

template <Format F, typename T>
__device__ __forceinline__ void issue_weight_stage(const LinearParams& p, uint8_t* warp_stage, int row0, int g, int lane, int k0) {
  uint4* w = reinterpret_cast<uint4*>(warp_stage);
  uint32_t* sc = reinterpret_cast<uint32_t*>(warp_stage + GemmStageLayout::kWarpW);
  uint32_t* zs = sc + 4 * 32;
  const size_t row_bytes = size_t(p.k) / 2;
#pragma unroll
  for (int q = 0; q < 4; ++q) {  // q = 2 * row tile + half
    const size_t rr = size_t(row0 + 16 * (q >> 1) + 8 * (q & 1) + g);
    cp_async16(w + q * 32 + lane, p.weight + rr * row_bytes + k0 / 2, true);
    const size_t off = scale_offset<F>(p, rr, k0) & ~size_t(3);
    cp_async4(sc + q * 32 + lane, static_cast<const uint8_t*>(p.scale) + off);
    if constexpr (F == Format::Int4) cp_async4(zs + q * 32 + lane, static_cast<const uint8_t*>(p.zero) + off);
  }
}

template <Format F, typename T>
__device__ __forceinline__ void read_weight_stage(const LinearParams& p, const uint8_t* warp_stage, int row0, int g, int lane,
                                                  int k0, WeightStep<F> (&cur)[2]) {
  const uint4* w = reinterpret_cast<const uint4*>(warp_stage);
  const uint32_t* sc = reinterpret_cast<const uint32_t*>(warp_stage + GemmStageLayout::kWarpW);
  const uint32_t* zs = sc + 4 * 32;
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const size_t rr = size_t(row0 + 16 * (q >> 1) + 8 * (q & 1) + g);
    const int shift = int(scale_offset<F>(p, rr, k0) & 3) * 8;
    const uint32_t mask = F == Format::MxFp4 ? 0xffu : 0xffffu;
    WeightStep<F>& c = cur[q >> 1];
    c.w[q & 1] = w[q * 32 + lane];
    c.s[q & 1] = (sc[q * 32 + lane] >> shift) & mask;
    c.z[q & 1] = F == Format::Int4 ? (zs[q * 32 + lane] >> shift) & mask : 0u;
  }
}

template <typename T>
__device__ __forceinline__ void stage_activations(const LinearParams& p, T* stage, int tok0, int k0) {
  // 64 tokens x 16 units per stage; 128 threads x 8 units.
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int idx = threadIdx.x + 128 * i;
    const int tok = idx >> 4, u = idx & 15;
    const bool valid = tok0 + tok < p.m;
    const T* src = static_cast<const T*>(p.x) + size_t(valid ? tok0 + tok : 0) * p.k + k0 + 8 * u;
    cp_async16<true>(stage + tok * 128 + 8 * swizzle_unit(u, tok), src, valid);
  }
}

template <Format F, typename T, int kVariant, class Ep>
__global__ void __launch_bounds__(128) w4_gemm_kernel(LinearParams p, Ep ep) {
  constexpr bool BF16 = IsBf16<T>::value;
  extern __shared__ __align__(16) uint8_t gemm_smem[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int row0 = blockIdx.x * kGemmRows + warp * 32;
  const int tok0 = blockIdx.y * kGemmTokens;
  const int steps = p.k / 128 / gridDim.z;
  const int step0 = blockIdx.z * steps;
  auto act_stage = [&](int st) { return reinterpret_cast<T*>(gemm_smem + st * GemmStageLayout::kStage); };
  auto warp_stage = [&](int st) { return gemm_smem + st * GemmStageLayout::kStage + GemmStageLayout::kAct + warp * GemmStageLayout::kWarp; };

  float acc[2][8][4];
#pragma unroll
  for (int r = 0; r < 2; ++r)
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[r][j][0] = acc[r][j][1] = acc[r][j][2] = acc[r][j][3] = 0.0f;

  const int kt = step0 * 128 + 32 * t;
  // Token tiles of 8 that hold a valid token (variant 1 computes all 8).
  const int jt = kVariant == 1 ? 8 : min(8, (p.m - tok0 + 7) / 8);
  if constexpr (kVariant == 2) {
    // Weights first (constants), then wait for the previous kernel before touching x. The
    // first commit group then holds weight stages 0..S-2 and x stage 0: waits stay conservative.
#pragma unroll
    for (int s = 0; s < kGemmStages - 1; ++s)
      if (s < steps) issue_weight_stage<F, T>(p, warp_stage(s), row0, g, lane, kt + 128 * s);
    pdl_wait();
    pdl_trigger();
#pragma unroll
    for (int s = 0; s < kGemmStages - 1; ++s) {
      if (s < steps) stage_activations<T>(p, act_stage(s), tok0, (step0 + s) * 128);
      cp_async_commit();
    }
  } else {
#pragma unroll
    for (int s = 0; s < kGemmStages - 1; ++s) {
      if (s < steps) {
        stage_activations<T>(p, act_stage(s), tok0, (step0 + s) * 128);
        issue_weight_stage<F, T>(p, warp_stage(s), row0, g, lane, kt + 128 * s);
      }
      cp_async_commit();
    }
  }

  for (int s = 0; s < steps; ++s) {
    cp_async_wait<kGemmStages - 2>();
    __syncthreads();
    if (s + kGemmStages - 1 < steps) {
      const int st = (s + kGemmStages - 1) % kGemmStages;
      stage_activations<T>(p, act_stage(st), tok0, (step0 + s + kGemmStages - 1) * 128);
      issue_weight_stage<F, T>(p, warp_stage(st), row0, g, lane, kt + 128 * (s + kGemmStages - 1));
    }
    cp_async_commit();
    WeightStep<F> cur[2];
    read_weight_stage<F, T>(p, warp_stage(s % kGemmStages), row0, g, lane, kt + 128 * s, cur);
    const T* stage = act_stage(s % kGemmStages);
    Scale<F, BF16> sc[2][2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      sc[r][0].expand(cur[r].s[0], cur[r].z[0]);
      sc[r][1].expand(cur[r].s[1], cur[r].z[1]);
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      uint32_t a[2][2][4];  // [row tile][h][fragment]
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        uint32_t d0[4], d1[4];
        decode_word<F, BF16>(word_of(cur[r].w[0], i), d0);
        decode_word<F, BF16>(word_of(cur[r].w[1], i), d1);
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          d0[q] = sc[r][0].apply(d0[q], i);
          d1[q] = sc[r][1].apply(d1[q], i);
        }
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          a[r][h][0] = d0[2 * h];
          a[r][h][1] = d1[2 * h];
          a[r][h][2] = d0[2 * h + 1];
          a[r][h][3] = d1[2 * h + 1];
        }
      }
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        if (j >= jt) continue;
        const int tok = 8 * j + g;
        const uint4 b = *reinterpret_cast<const uint4*>(stage + tok * 128 + 8 * swizzle_unit(4 * t + i, tok));
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          mma16816<BF16>(acc[r][j], a[r][0], b.x, b.y);
          mma16816<BF16>(acc[r][j], a[r][1], b.z, b.w);
        }
      }
    }
  }
  cp_async_wait<0>();

  if (kVariant == 2 && p.partial) {
    // Split-K, variant 2: own slice, then the tile's last CTA sums the slices.
    const size_t slice = size_t(p.m) * p.n;
    float* mine = p.partial + blockIdx.z * slice;
#pragma unroll
    for (int r = 0; r < 2; ++r)
#pragma unroll
      for (int j = 0; j < 8; ++j)
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          const int tok = tok0 + 8 * j + 2 * t + c;
          if (tok >= p.m) continue;
          const int rg = row0 + 16 * r + g;
          __stcg(mine + size_t(tok) * p.n + rg, acc[r][j][c]);
          __stcg(mine + size_t(tok) * p.n + rg + 8, acc[r][j][c + 2]);
        }
    __threadfence();
    __syncthreads();
    __shared__ unsigned last;
    if (threadIdx.x == 0) last = atomicAdd(p.tile_counter + blockIdx.y * gridDim.x + blockIdx.x, 1u) == gridDim.z - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
#pragma unroll
    for (int r = 0; r < 2; ++r)
#pragma unroll
      for (int j = 0; j < 8; ++j)
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          const int tok = tok0 + 8 * j + 2 * t + c;
          if (tok >= p.m) continue;
          const int rg = row0 + 16 * r + g;
          float v = 0.0f, u = 0.0f;
          for (unsigned z = 0; z < gridDim.z; ++z) {
            const float* sl = p.partial + z * slice + size_t(tok) * p.n + rg;
            v += z == blockIdx.z ? acc[r][j][c] : __ldcg(sl);
            u += z == blockIdx.z ? acc[r][j][c + 2] : __ldcg(sl + 8);
          }
          acc[r][j][c] = v;
          acc[r][j][c + 2] = u;
        }
  }

  // C fragment: c0,c1 = (row g, tokens 2t, 2t+1), c2,c3 = (row g+8, same tokens).
  const bool gated = p.act != Activation::None;
  const bool atomic_partial = kVariant == 1 && p.partial;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int rg = row0 + 16 * r + g;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const int tok = tok0 + 8 * j + 2 * t + c;
        if (tok >= p.m) continue;
        float v = acc[r][j][c], u = acc[r][j][c + 2];
        if (atomic_partial) {
          atomicAdd(p.partial + size_t(tok) * p.n + rg, v);
          atomicAdd(p.partial + size_t(tok) * p.n + rg + 8, u);
          continue;
        }
        v *= row_factor<T, F>(p, g);
        u *= row_factor<T, F>(p, g + 8);
        if (gated) {
          static_cast<T*>(p.y)[size_t(tok) * (p.n / 2) + (rg - g) / 2 + g] = from_float<T>(activate(v, p.act) * u);
        } else {
          ep(0, tok, rg, v);
          ep(0, tok, rg + 8, u);
        }
      }
    }
  }
}

// After split-K: partial [m, n] fp32 -> y, applying scales, bias and the gated activation.
template <Format F, typename T, class Ep>
__global__ void w4_finish_kernel(LinearParams p, Ep ep) {
  const bool gated = p.act != Activation::None;
  const int cols = gated ? p.n / 2 : p.n;
  const size_t total = size_t(p.m) * cols;
  for (size_t idx = blockIdx.x * size_t(blockDim.x) + threadIdx.x; idx < total; idx += size_t(gridDim.x) * blockDim.x) {
    const size_t m = idx / cols;
    const int c = int(idx % cols);
    if (gated) {
      const int gate_row = (c / 8) * 16 + c % 8;
      const float v = p.partial[m * p.n + gate_row] * row_factor<T, F>(p, gate_row);
      const float u = p.partial[m * p.n + gate_row + 8] * row_factor<T, F>(p, gate_row + 8);
      static_cast<T*>(p.y)[idx] = from_float<T>(activate(v, p.act) * u);
    } else {
      ep(0, int64_t(m), c, p.partial[m * p.n + c] * row_factor<T, F>(p, c));
    }
  }
}

}  // namespace kiln::quant::gpu
