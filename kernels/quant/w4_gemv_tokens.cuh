#pragma once
// GEMV variant 15, M = 1..4: variant 8's loads (w4_gemv_async.cuh) and variant 7's packed half2
// math (w4_gemv_half2.cuh) for NT = M tokens in one launch.
//
// Why. At M = 2..4 the library ran variant 9 (mma math on variant 8's loads, ~2.9 + 0.125·NT
// thread instructions per weight but 4.3 measured) or variant 5, 1.24x / 1.30x the M = 1 time
// (bench/quant/NOTES.md, sessions 7 and 9). Here one E2M1 decode of a weight pair feeds NT HFMA2
// chains, ~2 + 0.5·NT instructions per weight for the decode and the products, so that M = 4
// streams the same bytes as M = 1 with at most twice its instructions.
//
// Schedule: variant 8's (a CTA per 16 rows, a warp per 1024-k chunk, every weight and scale byte
// of the warp requested by cp.async before griddepcontrol.wait, rows consumed four at a time in
// request order). After the wait the lane loads its 32 k of each token's x, converted to fp16
// with a power-of-two prescale per token and warp (convert_x_f16<T, F, true>), so that tokens of very
// different magnitude keep their precision. Registers: NT x 16 packed x pairs.
// Sums: after each group of 4 rows the lane's 4 x NT fp32 values are folded across lanes (each
// fold halves them: 3 folds for even NT, 2 for odd), and after the last group the values the
// groups left are folded by the remaining lane offsets: 62 shuffles per warp at NT = 4, as one
// transposing reduction of all 64 sums at the end, but with at most 8 sums held across groups. The
// warp's 16 x NT sums meet the other warps' in shared memory, then the epilogue of variant 7 per
// token.
#include "w4_gemv_async.cuh"

namespace kiln::quant::gpu {

constexpr int kGemv15MaxTokens = 4;

// Variant 8's shapes (whole 1024-k chunks, one per warp, at most 16 warps) with 1..4 tokens.
inline bool gemv15_applies(int m, int n, int k) {
  return m >= 1 && m <= kGemv15MaxTokens && n % kGemv7Rows == 0 && k % kGemv7Chunk == 0 &&
         k / kGemv7Chunk <= kGemv8MaxWarps;
}

// x is converted by convert_x_f16<T, F, true> (w4_gemv_half2.cuh): one prescale 2^s for the whole
// warp (its 1024 k of the token) instead of one per lane: the factor 2^-s then multiplies the
// warp's folded sums in the epilogue, not every lane's 16 row sums, and needs no register through
// the main loop. A lane whose values are far below the warp's largest keeps full fp16 precision
// down to 2^-28 of it (fp16 normals; the products x·w·2^-14 then stay >= 2^-43 of the largest
// product, far under the bounds).

// The lane's contributions of one unit (32 k of one row) to NT tokens, each in units of
// 2^-s_t·(format factor) (s_t: the token's prescale), as unit_dot: the pair decodes are shared by
// the tokens.
template <Format F, typename T, int NT>
__device__ __forceinline__ void unit_dot_tokens(const Gemv7Unit<F, T>& u,
                                                const uint32_t (&xh)[NT][16],
                                                const float (&xsum)[NT], float (&d)[NT]) {
  uint32_t h[NT][2];
#pragma unroll
  for (int t = 0; t < NT; ++t) h[t][0] = h[t][1] = 0u;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const uint32_t w = word_of(u.w, i);  // as stored: x is paired to match (pair_x_as_stored)
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const uint32_t pair = decode_pair_f16<F>(w, q);
#pragma unroll
      for (int t = 0; t < NT; ++t) h[t][i >> 1] = hfma2(pair, xh[t][4 * i + q], h[t][i >> 1]);
    }
  }
  if constexpr (F == Format::NvFp4) {
    const float s0 = half_lo((u.s & 0x7fu) << 7);  // E4M3 bits << 7 as fp16 = scale·2^-8 exactly
    const float s1 = half_lo(((u.s >> 8) & 0x7fu) << 7);
#pragma unroll
    for (int t = 0; t < NT; ++t)
      d[t] =
          (half_lo(h[t][0]) + half_hi(h[t][0])) * s0 + (half_lo(h[t][1]) + half_hi(h[t][1])) * s1;
  } else if constexpr (F == Format::MxFp4) {
    const float sc =
        u.s == 0 ? __uint_as_float(0x00400000u) : __uint_as_float(u.s << 23);  // 2^(e-127)
#pragma unroll
    for (int t = 0; t < NT; ++t)
      d[t] = ((half_lo(h[t][0]) + half_hi(h[t][0])) + (half_lo(h[t][1]) + half_hi(h[t][1]))) * sc;
  } else {
    const float sc = bits_to_float<T>(u.s), z = bits_to_float<T>(u.z);
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      d[t] = sc * ((half_lo(h[t][0]) + half_hi(h[t][0])) + (half_lo(h[t][1]) + half_hi(h[t][1])) +
                   (8.0f - z) * xsum[t]);
    }
  }
}

template <Format F, typename T, int NT, class Ep>
__global__ void __launch_bounds__(kGemv8MaxWarps * 32) w4_gemv15_kernel(LinearParams p, Ep ep) {
  extern __shared__ __align__(16) uint8_t gemv8_smem[];
  __shared__ float red[kGemv8MaxWarps][kGemv7Rows][NT];
  __shared__ float warp_factor[kGemv8MaxWarps][NT];  // 2^-s of each warp's x prescale per token
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const int row0 = blockIdx.x * kGemv7Rows;
  uint8_t* mine = gemv8_smem + size_t(warp) * Gemv8Layout::kChunkBytes;
  // Groups, oldest first: the scales, then rows 0-3, 4-7, 8-11, 12-15 (variant 8's order).
  issue_chunk_scales<F>(p, mine, row0, warp, lane);
  cp_async_commit();
#pragma unroll
  for (int g = 0; g < 4; ++g) {
    issue_chunk_rows(p, mine, row0, warp, lane, g);
    cp_async_commit();
  }
  uint4 xraw[NT][4];
#pragma unroll
  for (int t = 0; t < NT; ++t)
#pragma unroll
    for (int i = 0; i < 4; ++i) xraw[t][i] = make_uint4(0, 0, 0, 0);
  if (p.m > 0) {  // never false: keeps the wait and the x loads in a block of their own (variant 8)
    pdl_wait();  // x (and y, below) belong to the previous kernel until here
    pdl_trigger();
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      const T* src = static_cast<const T*>(p.x) + size_t(t) * p.k + warp * kGemv7Chunk + 32 * lane;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        asm volatile("ld.global.nc.v4.u32 {%0,%1,%2,%3}, [%4];"
                     : "=r"(xraw[t][i].x), "=r"(xraw[t][i].y), "=r"(xraw[t][i].z),
                       "=r"(xraw[t][i].w)
                     : "l"(src + 8 * i));
      }
    }
  }
  uint32_t xh[NT][16];
  float xsum[NT];
#pragma unroll
  for (int t = 0; t < NT; ++t) {
    const float f =
        pow2(-convert_x_f16<T, F, true>(xraw[t], xh[t], &xsum[t]));  // 2^gemv7_shift: epilogue
    if (lane == 0) warp_factor[warp][t] = f;
  }
  // Even NT: each group's 4 x NT values are folded by offsets 16, 8 and 4 (NT/2 left: row
  // 4g + 2·bit3 + bit4, token bit2·NT/2 + i), the 4 groups' 2·NT after the last by offsets 2, 1
  // (group 2·bit1 + bit0). Odd NT (no halving by 4): offsets 16, 8 per group (NT left), then 4, 2
  // (group 2·bit2 + bit1) and 1 (all NT summed; the lanes of both bit0 values keep them).
  constexpr bool kEven = NT % 2 == 0;
  constexpr int kPerGroup = kEven ? NT / 2 : NT;
  float held[4 * kPerGroup];  // held[g * kPerGroup + i]
#pragma unroll
  for (int g = 0; g < 4; ++g) {
    cp_async_wait_upto7(3 - g);
    if (g == 0) __syncwarp();  // the scale pieces other lanes copied
    // Rows 4g + j·2 + (0, 1) as v[j·NT + t] after a fold by 16 each (row 4g + 2j + bit4), so that
    // at most 3·NT sums are live here.
    float v[2 * NT];
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      float pair_rows[2 * NT];  // [i·NT + t]: row 4g + 2j + i, token t
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        float d[NT];
        unit_dot_tokens<F, T, NT>(read_unit<F, T>(mine, 4 * g + 2 * j + i, lane, p.group), xh, xsum,
                                  d);
#pragma unroll
        for (int t = 0; t < NT; ++t) pair_rows[i * NT + t] = d[t];
      }
      fold_lanes<2 * NT>(pair_rows, lane, 16);
#pragma unroll
      for (int t = 0; t < NT; ++t) v[j * NT + t] = pair_rows[t];
    }
    fold_lanes<2 * NT>(v, lane, 8);                   // v[t]: row 4g + 2·bit3 + bit4, token t
    if constexpr (kEven) fold_lanes<NT>(v, lane, 4);  // v[i]: token bit2·NT/2 + i
#pragma unroll
    for (int i = 0; i < kPerGroup; ++i) held[g * kPerGroup + i] = v[i];
  }
  int row, t0;
  if constexpr (kEven) {
    fold_lanes<4 * kPerGroup>(held, lane, 2);
    fold_lanes<2 * kPerGroup>(held, lane, 1);
    row = 4 * (2 * ((lane >> 1) & 1) + (lane & 1)) + 2 * ((lane >> 3) & 1) + ((lane >> 4) & 1);
    t0 = ((lane >> 2) & 1) * kPerGroup;
  } else {
    fold_lanes<4 * kPerGroup>(held, lane, 4);
    fold_lanes<2 * kPerGroup>(held, lane, 2);
    fold_lanes<kPerGroup>(held, lane, 1);
    row =
        4 * (2 * ((lane >> 2) & 1) + ((lane >> 1) & 1)) + 2 * ((lane >> 3) & 1) + ((lane >> 4) & 1);
    t0 = 0;
  }
  if (kEven || (lane & 1) == 0) {
#pragma unroll
    for (int i = 0; i < kPerGroup; ++i) red[warp][row][t0 + i] = held[i];
  }
  __syncthreads();

  const bool gated = p.act != Activation::None;
  for (int idx = threadIdx.x; idx < (gated ? 8 : kGemv7Rows) * NT; idx += blockDim.x) {
    const int r = gated ? idx & 7 : idx & 15, t = gated ? idx >> 3 : idx >> 4;
    float v = 0.0f, u = 0.0f;
    for (int w = 0; w < warps; ++w) {
      v = fmaf(red[w][r][t], warp_factor[w][t], v);
      if (gated) u = fmaf(red[w][r + 8][t], warp_factor[w][t], u);
    }
    float s_gate = 1.0f, s_up = 1.0f;
    if constexpr (F == Format::NvFp4) {
      if (p.scale2) {
        s_gate = p.scale2[0];
        s_up = p.scale2[gated ? 1 : 0];
      }
    }
    constexpr float kShift = float(1 << gemv7_shift<F>());
    v *= s_gate * kShift;
    if (gated) {
      // rows 0..7 gate, 8..15 up of the same 8 features (Prepack.h)
      u *= s_up * kShift;
      static_cast<T*>(p.y)[size_t(t) * (p.n / 2) + blockIdx.x * 8 + r] =
          from_float<T>(activate(v, p.act) * u);
    } else {
      ep(0, t, row0 + r, v);
    }
  }
}

// Variant 15 where gemv15_applies: one launch for all M = NT tokens, on variant 8's grid.
template <Format F, typename T, class Ep>
cudaError_t launch_gemv15(const LinearParams& p, const Ep& ep, bool pdl, cudaStream_t stream) {
  const size_t smem = gemv8_smem_bytes(p.k),
               max_smem = gemv8_smem_bytes(kGemv8MaxWarps * kGemv7Chunk);
  switch (p.m) {
    case 1:
      return launch_on_gemv8_grid<w4_gemv15_kernel<F, T, 1, Ep>>(smem, max_smem, p, ep, pdl,
                                                                 stream);
    case 2:
      return launch_on_gemv8_grid<w4_gemv15_kernel<F, T, 2, Ep>>(smem, max_smem, p, ep, pdl,
                                                                 stream);
    case 3:
      return launch_on_gemv8_grid<w4_gemv15_kernel<F, T, 3, Ep>>(smem, max_smem, p, ep, pdl,
                                                                 stream);
    default:
      return launch_on_gemv8_grid<w4_gemv15_kernel<F, T, 4, Ep>>(smem, max_smem, p, ep, pdl,
                                                                 stream);
  }
}

}  // namespace kiln::quant::gpu
