#pragma once
// Variant 2, M >= 17: tensor-core GEMM with the 4-bit decode in the main loop.
//
// Schedule. CTA tile: 128 weight rows x 64 tokens, 4 warps; warp w owns rows 32w..32w+31 (two
// 16-row tiles) against all 64 tokens (8 n8 tiles): 64 fp32 accumulators per thread. K advances
// in steps of 128. Activations of a step (64 x 128, 16 KB) are staged through shared memory by
// cp.async, 3 stages deep; weights go straight from global memory to registers (each warp has
// its own rows, so shared memory would only add traffic), prefetched one step ahead. The
// thread/k mapping is the GEMV's (w4_gemv.cuh): a thread's 32 physical k of a row form its A
// fragments; B fragments are read with one 16-byte shared load per (word, token tile),
// conflict-free thanks to the swizzle below. Each decoded fragment feeds 8 mmas.
// Split-K (grid.z > 1, for grids too small to fill the GPU) adds raw fp32 sums into
// `partial` with atomics; w4_finish_kernel then applies scales, bias and the activation.
#include "w4_gemv.cuh"

namespace kiln::quant::gpu {

constexpr int kGemmRows = 128, kGemmTokens = 64, kGemmStages = 3;

// 16-byte unit u (8 k) of token row `tok` in a stage: swizzled so that the 8 lanes of a
// shared-load phase (2 tokens x 4 threads, units i, 4+i, 8+i, 12+i) hit 8 distinct bank groups.
__device__ __forceinline__ int swizzle_unit(int u, int tok) {
  return (u & 8) | ((u & 7) ^ (((u >> 3) & 1) << 1) ^ (tok & 1));
}

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool valid) {
  const uint32_t dst = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(gmem), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N));
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
    cp_async16(stage + tok * 128 + 8 * swizzle_unit(u, tok), src, valid);
  }
}

template <Format F, typename T>
__global__ void __launch_bounds__(128) w4_gemm_kernel(LinearParams p) {
  constexpr bool BF16 = IsBf16<T>::value;
  __shared__ __align__(16) T xs[kGemmStages][kGemmTokens * 128];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int row0 = blockIdx.x * kGemmRows + warp * 32;
  const int tok0 = blockIdx.y * kGemmTokens;
  const int steps = p.k / 128 / gridDim.z;
  const int step0 = blockIdx.z * steps;

  float acc[2][8][4];
#pragma unroll
  for (int r = 0; r < 2; ++r)
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[r][j][0] = acc[r][j][1] = acc[r][j][2] = acc[r][j][3] = 0.0f;

#pragma unroll
  for (int s = 0; s < kGemmStages - 1; ++s) {
    if (s < steps) stage_activations<T>(p, xs[s], tok0, (step0 + s) * 128);
    cp_async_commit();
  }
  WeightStep<F> cur[2];
  const int kt = step0 * 128 + 32 * t;
  cur[0] = load_weight_step<F, T>(p, row0 + g, kt);
  cur[1] = load_weight_step<F, T>(p, row0 + 16 + g, kt);

  for (int s = 0; s < steps; ++s) {
    cp_async_wait<kGemmStages - 2>();
    __syncthreads();
    if (s + kGemmStages - 1 < steps) {
      stage_activations<T>(p, xs[(s + kGemmStages - 1) % kGemmStages], tok0, (step0 + s + kGemmStages - 1) * 128);
    }
    cp_async_commit();
    WeightStep<F> nxt[2];
    if (s + 1 < steps) {
      nxt[0] = load_weight_step<F, T>(p, row0 + g, kt + 128 * (s + 1));
      nxt[1] = load_weight_step<F, T>(p, row0 + 16 + g, kt + 128 * (s + 1));
    }
    const T* stage = xs[s % kGemmStages];
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
        const int tok = 8 * j + g;
        const uint4 b = *reinterpret_cast<const uint4*>(stage + tok * 128 + 8 * swizzle_unit(4 * t + i, tok));
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          mma16816<BF16>(acc[r][j], a[r][0], b.x, b.y);
          mma16816<BF16>(acc[r][j], a[r][1], b.z, b.w);
        }
      }
    }
    if (s + 1 < steps) {
      cur[0] = nxt[0];
      cur[1] = nxt[1];
    }
  }
  cp_async_wait<0>();

  // C fragment: c0,c1 = (row g, tokens 2t, 2t+1), c2,c3 = (row g+8, same tokens).
  const bool gated = p.act != Activation::None;
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
        if (p.partial) {
          atomicAdd(p.partial + size_t(tok) * p.n + rg, v);
          atomicAdd(p.partial + size_t(tok) * p.n + rg + 8, u);
          continue;
        }
        v *= row_factor<T, F>(p, g);
        u *= row_factor<T, F>(p, g + 8);
        if (gated) {
          static_cast<T*>(p.y)[size_t(tok) * (p.n / 2) + (rg - g) / 2 + g] = from_float<T>(activate(v, p.act) * u);
        } else {
          if (p.bias) {
            v += static_cast<float>(static_cast<const T*>(p.bias)[rg]);
            u += static_cast<float>(static_cast<const T*>(p.bias)[rg + 8]);
          }
          static_cast<T*>(p.y)[size_t(tok) * p.n + rg] = from_float<T>(v);
          static_cast<T*>(p.y)[size_t(tok) * p.n + rg + 8] = from_float<T>(u);
        }
      }
    }
  }
}

// After split-K: partial [m, n] fp32 -> y, applying scales, bias and the gated activation.
template <Format F, typename T>
__global__ void w4_finish_kernel(LinearParams p) {
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
      float v = p.partial[m * p.n + c] * row_factor<T, F>(p, c);
      if (p.bias) v += static_cast<float>(static_cast<const T*>(p.bias)[c]);
      static_cast<T*>(p.y)[idx] = from_float<T>(v);
    }
  }
}

}  // namespace kiln::quant::gpu
