#pragma once
// GEMV variant 19, M = 1..8: variant 8's grid and loads (w4_gemv_async.cuh: a CTA per 16 rows, a
// warp per 1024-k chunk, every weight and scale byte of the warp requested by cp.async before
// griddepcontrol.wait) with variant 5's mma.sync math (w4_gemv.cuh: one decoded fragment feeds
// the 8 tokens of the mma's n, so the instructions per weight do not grow with M up to 8).
//
// Why. Variant 15 (half2 math for M tokens) measured ~1.25 more thread instructions per weight
// for each token and ran issue-limited (bench/quant/NOTES.md, session 10); variant 9 has the mma
// math but its own grid (64-row CTAs, 256-k slices per warp) ran 1.22x variant 8's M = 1 time
// chained, and 1.10x in isolated ncu launches.
//
// Schedule. The warp's 16 rows x 1024 k arrive in 4 commit groups by k: in group j lane l copies
// unit 8j + (l & 7) (32 k) of rows (l >> 3) + 4i, i = 0..3 (8 lanes read 128 contiguous bytes of a
// row). Thread (g, t) computes rows g and g + 8 at units 8j + t and 8j + t + 4 of group j, i.e. it
// reads units other lanes copied (one __syncwarp after each group's wait). Its x is token g's 32 k
// at each of those units, loaded from global memory (L1/L2) one group ahead into registers: the
// mma's k may map to any physical k as long as A and B agree per thread column t (variant 5).
// Shared memory: variant 8's (row r's units at r·512, unit u at slot u ^ 4(r & 1): the 8 rows a
// 16-byte load phase reads hit distinct banks; scale bytes as variant 8). After the loop the
// thread's fp32 accumulators are whole-warp sums (the mma adds over the thread columns): the warps'
// sums meet in shared memory, and the epilogue of variant 9 (row_factor) runs per token.
#include "w4_gemv_async.cuh"

namespace kiln::quant::gpu {

constexpr int kGemv19MaxTokens = 8;

// Variant 8's shapes (whole 1024-k chunks, one per warp, at most 16 warps) with 1..8 tokens.
inline bool gemv19_applies(int m, int n, int k) {
  return m >= 1 && m <= kGemv19MaxTokens && n % kGemv7Rows == 0 && k % kGemv7Chunk == 0 &&
         k / kGemv7Chunk <= kGemv8MaxWarps;
}

// Byte offset of row r's unit u in a warp's weight buffer.
__device__ __forceinline__ int gemv19_unit(int r, int u) {
  return (r * 32 + (u ^ ((r & 1) << 2))) * 16;
}

// Group j of the lane's copies: unit 8j + (lane & 7) of rows (lane >> 3) + 4i; the caller commits.
__device__ __forceinline__ void gemv19_issue_group(const LinearParams& p, uint8_t* buf, int row0,
                                                   int chunk, int lane, int j) {
  const size_t row_bytes = size_t(p.k) / 2;
  const int u = 8 * j + (lane & 7);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int r = (lane >> 3) + 4 * i;
    cp_async16(buf + gemv19_unit(r, u),
               p.weight + size_t(row0 + r) * row_bytes + size_t(chunk) * 512 + 16 * u, true);
  }
}

// Rows g and g + 8 at unit u as variant 5's WeightStep.
template <Format F>
__device__ __forceinline__ WeightStep<F> gemv19_read_step(const uint8_t* buf, int g, int u,
                                                          int group) {
  WeightStep<F> ws;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = g + 8 * h;
    ws.w[h] = *reinterpret_cast<const uint4*>(buf + gemv19_unit(r, u));
    const uint8_t* sc = buf + Gemv8Layout::kWeightBytes + r * Gemv8Layout::kScaleRowBytes;
    staged_unit_scales<F>(ws, h, sc, u, group, 64);
  }
  return ws;
}

// Token g's x at units u0 and u0 + 4 (32 k each) of the warp's chunk, zero past M.
template <typename T>
__device__ __forceinline__ void gemv19_load_x(const LinearParams& p, int g, int chunk, int u0,
                                              ActStep<1> (&xs)[2]) {
#pragma unroll
  for (int s = 0; s < 2; ++s)
#pragma unroll
    for (int i = 0; i < 4; ++i) xs[s].x[0][i] = make_uint4(0, 0, 0, 0);
  if (g < p.m) {
    const T* src =
        static_cast<const T*>(p.x) + size_t(g) * p.k + size_t(chunk) * kGemv7Chunk + 32 * u0;
#pragma unroll
    for (int s = 0; s < 2; ++s)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        uint4& v = xs[s].x[0][i];
        asm volatile("ld.global.nc.v4.u32 {%0,%1,%2,%3}, [%4];"
                     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                     : "l"(src + 128 * s + 8 * i));
      }
  }
}

template <Format F, typename T, class Ep>
__global__ void __launch_bounds__(kGemv8MaxWarps * 32) w4_gemv19_kernel(LinearParams p, Ep ep) {
  extern __shared__ __align__(16) uint8_t gemv8_smem[];
  __shared__ float red[kGemv8MaxWarps][kGemv7Rows][kGemv19MaxTokens];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int row0 = blockIdx.x * kGemv7Rows;
  uint8_t* buf = gemv8_smem + size_t(warp) * Gemv8Layout::kChunkBytes;
  issue_chunk_scales<F>(p, buf, row0, warp, lane);
  cp_async_commit();
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    gemv19_issue_group(p, buf, row0, warp, lane, j);
    cp_async_commit();
  }
  // x of groups 0 and 1 (two units each), after the wait in a block of its own (variant 8).
  ActStep<1> xs[2][2];
#pragma unroll
  for (int b = 0; b < 2; ++b)
#pragma unroll
    for (int s = 0; s < 2; ++s)
#pragma unroll
      for (int i = 0; i < 4; ++i) xs[b][s].x[0][i] = make_uint4(0, 0, 0, 0);
  if (p.m > 0) {
    pdl_wait();  // x (and y, below) belong to the previous kernel until here
    pdl_trigger();
    gemv19_load_x<T>(p, g, warp, t, xs[0]);
    gemv19_load_x<T>(p, g, warp, 8 + t, xs[1]);
  }
  float acc[2][1][4] = {};  // two mma chains (words 0, 2 and 1, 3 of each unit)
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    cp_async_wait_upto7(3 - j);
    __syncwarp();  // units (and, j = 0, scales) other lanes copied
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      mma_step_chains<F, T, 1, 2>(gemv19_read_step<F>(buf, g, 8 * j + t + 4 * s, p.group),
                                  xs[j & 1][s], acc);
    }
    if (j + 2 < 4) gemv19_load_x<T>(p, g, warp, 8 * (j + 2) + t, xs[j & 1]);
  }
#pragma unroll
  for (int e = 0; e < 4; ++e)
    red[warp][g + 8 * (e >> 1)][2 * t + (e & 1)] = acc[0][0][e] + acc[1][0][e];
  __syncthreads();

  const bool gated = p.act != Activation::None;
  for (int idx = threadIdx.x; idx < (gated ? 8 : kGemv7Rows) * p.m; idx += blockDim.x) {
    const int r = gated ? idx & 7 : idx & 15, tok = gated ? idx >> 3 : idx >> 4;
    float v = 0.0f, u = 0.0f;
    for (int w = 0; w < warps; ++w) {
      v += red[w][r][tok];
      if (gated) u += red[w][r + 8][tok];
    }
    v *= row_factor<T, F>(p, r);
    if (gated) {
      // rows 0..7 gate, 8..15 up of the same 8 features (Prepack.h)
      u *= row_factor<T, F>(p, r + 8);
      static_cast<T*>(p.y)[size_t(tok) * (p.n / 2) + blockIdx.x * 8 + r] =
          from_float<T>(activate(v, p.act) * u);
    } else {
      ep(0, tok, row0 + r, v);
    }
  }
}

// Variant 19 where gemv19_applies: one launch for all M <= 8 tokens, on variant 8's grid.
template <Format F, typename T, class Ep>
cudaError_t launch_gemv19(const LinearParams& p, const Ep& ep, bool pdl, cudaStream_t stream) {
  return launch_on_gemv8_grid<w4_gemv19_kernel<F, T, Ep>>(
      gemv8_smem_bytes(p.k), gemv8_smem_bytes(kGemv8MaxWarps * kGemv7Chunk), p, ep, pdl, stream);
}

}  // namespace kiln::quant::gpu
