#pragma once
// Small-M contraction (variant 3; see bench/gemm/NOTES.md for 1 and 2): M <= MAX_M rows of A against a B that is streamed from DRAM
// once, on tensor cores: B plays mma's A operand (16 rows of n x 16 k), the rows of A its B
// operand (k x 8 rows of m), so one m16n8k16 covers 16 columns of the output for 8 rows of A.
//
// Schedule (GemvConfig<MAX_M, WARPS, MAX_SPLITS, UNROLL, PREFETCH>). A CTA owns a strip of 32
// output columns for up to MAX_M rows of A and one flat batch index; its WARPS warps split K
// between them (warp w takes 32-wide k-steps w, w + WARPS, ...) and add their fp32 accumulators
// through shared memory at the end, so that a narrow N still puts enough loads in flight. Each
// lane keeps UNROLL x 2 B loads (16 bytes each, bypassing L1) in flight before it multiplies. A
// rows are read through L1 (every strip reads all of A; it stays in L2), one 16-byte load per
// row per k-step, shared by the whole 32-column strip: L1 wavefronts per byte of B, not DRAM,
// limited variant 2 at M = 8..16 (bench/gemm/NOTES.md).
// The host loops over chunks of MAX_M rows of A (each chunk streams B again).
//
// Split K across CTAs (variant 2, sm_90+): when the clusters of 2, 4 or 8 CTAs for all strips
// (x batch) can be resident at once (cudaOccupancyMaxActiveClusters), the largest such `splits`
// CTAs (a thread-block cluster) share a strip,
// their WARPS x splits warps interleaving the k-steps; each CTA reduces its warps in shared
// memory, then the cluster adds the CTAs' partials in rank order through distributed shared
// memory (deterministic, no workspace, no atomics) and each CTA runs the epilogue for 1/splits
// of the strip. So N = 2048 with B [K, N] (64 strips of 32 columns) still loads every SM.
//
// Programmatic dependent launch (sm_90+; KILN_GEMV_PDL=0 launches plainly): a call's blocks may
// start while the kernel before it on the stream finishes. Where Problem::b_early says no earlier
// work writes B (a weight), each warp first asks L2 for its first kPdlRounds rounds of B; every
// block then waits (pdl_wait) before it reads A or runs the epilogue, and lets the next kernel's
// blocks start (pdl_trigger) once it has streamed its part of B, beside its reduction and
// epilogue (triggered right after the wait, a chain of 16384 x 2048 calls ran 8% slower:
// bench/gemm/NOTES.md, run s17b).
//
// k contiguous (B as [N, K], nn.Linear / Gemm transB): lane (g, t) loads 16 bytes of rows g and
// g + 8 of each of the warp's two 16-row tiles at k = 8t..8t+7 of a 32-wide k-step; the k order inside a step is permuted the same way
// for both operands (mma pairs (2t, 2t+1) and (2t+8, 2t+9) read physical k 8t+4h..8t+4h+3 for
// the step's half h), so each 16-byte load of B is two whole mma fragments and the A rows are
// 16-byte loads too.
// n contiguous (B as [K, N], MatMul weights): a 32-wide k-step is 4 loads per lane of 16 bytes
// at n = 8t..8t+7, each of 8 k rows (one per lane group g); movmatrix.trans turns each 32-bit
// word r (n pair 8t+2r, +1 at that k row) into mma fragments (a pair of k rows at n =
// 8(g/2) + 2r + g%2), so the output column of fragment row g in tile r is that permuted n. The
// k rows each lane group loads are permuted (see the kernel) so that the A operand is again one
// 16-byte load per row per step (variant 3; variant 2 read A in 4-byte pieces, 4x the L1
// wavefronts: at M = 16 the L1 pipe, not DRAM, set the pace).
#include <cooperative_groups.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "gemm_ptx.cuh"
#include "gemm_simt.cuh"

namespace kiln::gemm::detail {

__device__ __forceinline__ uint32_t movmatrix_trans(uint32_t x) {
  uint32_t y;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(y) : "r"(x));
  return y;
}

// 8 elements from p, of which the first `valid` (clamped to 0..8) are read and the rest zero.
template <typename T, bool kStream, bool kPrefetch>
__device__ __forceinline__ uint4 load8(const T* p, int64_t valid) {
  if (valid >= 8) {
    if constexpr (kStream && kPrefetch) {
      uint4 v;
      asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];"
                   : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                   : "l"(p));
      return v;
    } else if constexpr (kStream) {
      return load_stream16(p);
    } else {
      return __ldg(reinterpret_cast<const uint4*>(p));
    }
  }
  union {
    uint4 v;
    unsigned short h[8];
  } u;
  u.v = make_uint4(0, 0, 0, 0);
  const unsigned short* q = reinterpret_cast<const unsigned short*>(p);
  for (int e = 0; e < 8; ++e)
    if (e < valid) u.h[e] = q[e];
  return u.v;
}

// Floats of shared memory gemv_reduce needs for kVals values per lane.
template <int WARPS, int kVals, int NB>
__host__ __device__ constexpr int gemv_red_floats() {
  return (WARPS > NB ? WARPS : NB) * kVals * 32;
}

// The CTA's warps add their accumulators (kVals per lane per B, one B at a time through `red`,
// gemv_red_floats() floats) and call the epilogue; `map` gives (lane, value)'s output m and n.
// With splits > 1 the CTA is one of a cluster of `splits` that share the outputs: its sums go to
// `red` and the cluster adds them (gemv_cluster_reduce).
template <int WARPS, int kVals, int NB, typename Epilogue, typename Map>
__device__ __forceinline__ void gemv_reduce(float (&acc)[NB][kVals], float* red, int splits, int64_t b, const Epilogue& epilogue, Map map) {
  constexpr int kPer = (kVals + WARPS - 1) / WARPS;  // values per thread after the reduction
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  float s[NB][kPer];
#pragma unroll
  for (int j = 0; j < NB; ++j) {
    if (j > 0) __syncthreads();
#pragma unroll
    for (int v = 0; v < kVals; ++v) red[(warp * kVals + v) * 32 + lane] = acc[j][v];
    __syncthreads();
#pragma unroll
    for (int it = 0; it < kPer; ++it) {
      const int v = warp + it * WARPS;  // thread (warp, lane) sums value v of lane `lane`
      s[j][it] = 0.0f;
      if (v < kVals)
        for (int w = 0; w < WARPS; ++w) s[j][it] += red[(w * kVals + v) * 32 + lane];
    }
  }
  if (splits > 1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    namespace cg = cooperative_groups;
    __syncthreads();  // every thread has read `red`
#pragma unroll
    for (int it = 0; it < kPer; ++it) {
      const int v = warp + it * WARPS;
      if (v < kVals)
#pragma unroll
        for (int j = 0; j < NB; ++j) red[(j * kVals + v) * 32 + lane] = s[j][it];
    }
    cg::cluster_group cluster = cg::this_cluster();
    cluster.sync();  // every CTA's partials are in its shared memory
    const int rank = int(cluster.block_rank());
    for (int i = rank + splits * int(threadIdx.x); i < kVals * 32; i += splits * int(blockDim.x)) {
      int64_t m, n;
      if (!map(i % 32, i / 32, m, n)) continue;
      float t[NB];
#pragma unroll
      for (int j = 0; j < NB; ++j) t[j] = 0.0f;
      for (int q = 0; q < splits; ++q) {  // rank order: the sum does not depend on timing
        const float* r = cluster.map_shared_rank(red, q);
#pragma unroll
        for (int j = 0; j < NB; ++j) t[j] += r[j * kVals * 32 + i];
      }
      if constexpr (NB == 2) {
        epilogue(b, m, n, t[0], t[1]);
      } else {
        epilogue(b, m, n, t[0]);
      }
    }
    cluster.sync();  // no CTA leaves while another reads its shared memory
#endif
    return;
  }
#pragma unroll
  for (int it = 0; it < kPer; ++it) {
    const int v = warp + it * WARPS;
    int64_t m, n;
    if (v >= kVals || !map(lane, v, m, n)) continue;
    if constexpr (NB == 2) {
      epilogue(b, m, n, s[0][it], s[1][it]);
    } else {
      epilogue(b, m, n, s[0][it]);
    }
  }
}

// Rounds of B loads per warp prefetched into L2 before pdl_wait() when B may be read early.
constexpr int kPdlRounds = 2;

// A warp's share of the k-steps (first, first + stride, ... below `steps`), a round at a time:
// load(s0, w, x) issues a round's loads into registers, multiply(s0, w, x) runs its mmas. Between
// pdl_wait() (A and the epilogue's operands may be the previous kernel's outputs) and pdl_trigger()
// (B is streamed: the next kernel's blocks may start, and prefetch, beside the reduction).
template <typename WRound, typename XRound, typename Load, typename Multiply>
__device__ __forceinline__ void gemv_rounds(int64_t first, int64_t steps, int64_t stride, Load& load, Multiply& multiply) {
  pdl_wait();
  for (int64_t s0 = first; s0 < steps; s0 += stride) {
    WRound w;
    XRound x;
    load(s0, w, x);
    multiply(s0, w, x);
  }
  pdl_trigger();
}

// B with k contiguous. CTA: 32 output columns (two 16-column tiles per warp, sharing the A
// loads); k-step: 32.
template <typename T, int MAX_M, int WARPS, int UNROLL, bool PREFETCH, typename Epilogue>
__global__ void __launch_bounds__(WARPS * 32) gemv_k_kernel(Problem p, Epilogue epilogue, int64_t m_begin, int splits) {
  constexpr int NB = Epilogue::kNumB, JT = (MAX_M + 7) / 8, kTiles = 2;
  constexpr int kSteps = UNROLL > 1 ? UNROLL / 2 : 1;  // steps per round: UNROLL x 2 B loads per lane
  __shared__ float red[gemv_red_floats<WARPS, kTiles * JT * 4, NB>()];
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  const int g = lane / 4, t = lane % 4;
  const int64_t b = blockIdx.y;
  const int64_t n0 = int64_t(blockIdx.x / unsigned(splits)) * 16 * kTiles;
  const int64_t warps = int64_t(WARPS) * splits, first = int64_t(blockIdx.x % unsigned(splits)) * WARPS + warp;
  const int64_t rows = p.m - m_begin < MAX_M ? p.m - m_begin : MAX_M;
  const int jt = int((rows + 7) / 8);

  const T* a_base = static_cast<const T*>(p.a.data) + p.batch_offset(p.a, b);
  const T* x_row[JT];
#pragma unroll
  for (int j = 0; j < JT; ++j) {
    const int64_t m = m_begin + (8 * j + g < rows ? 8 * j + g : rows - 1);
    x_row[j] = a_base + m * p.a.stride_mn;
  }
  const T* w_row[NB][kTiles][2];
#pragma unroll
  for (int j = 0; j < NB; ++j) {
    const T* base = static_cast<const T*>(p.b[j].data) + p.batch_offset(p.b[j], b);
#pragma unroll
    for (int s = 0; s < kTiles; ++s)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int64_t n = n0 + 16 * s + 8 * h + g < p.n ? n0 + 16 * s + 8 * h + g : p.n - 1;
        w_row[j][s][h] = base + n * p.b[j].stride_mn;
      }
  }

  float acc[NB][kTiles * JT * 4];
#pragma unroll
  for (int j = 0; j < NB; ++j)
#pragma unroll
    for (int v = 0; v < kTiles * JT * 4; ++v) acc[j][v] = 0.0f;

  // A round: kSteps k-steps of this warp, all their loads (B and the A rows) first, then the mmas.
  using WRound = uint4[kSteps][NB][kTiles][2];
  using XRound = uint4[kSteps][JT];
  auto load = [&](int64_t s0, WRound& w, XRound& xs) {
#pragma unroll
    for (int u = 0; u < kSteps; ++u) {
      const int64_t k = (s0 + u * warps) * 32 + 8 * t, valid = p.k - k;
#pragma unroll
      for (int j = 0; j < NB; ++j)
#pragma unroll
        for (int s = 0; s < kTiles; ++s)
#pragma unroll
          for (int h = 0; h < 2; ++h) w[u][j][s][h] = load8<T, true, PREFETCH>(w_row[j][s][h] + k, valid);
#pragma unroll
      for (int jj = 0; jj < JT; ++jj) xs[u][jj] = load8<T, false, false>(x_row[jj] + k, jj < jt ? valid : 0);
    }
  };
  auto multiply = [&](int64_t s0, const WRound& w, const XRound& xs) {
#pragma unroll
    for (int u = 0; u < kSteps; ++u) {
      if ((s0 + u * warps) * 32 >= p.k) break;  // this step is past K
#pragma unroll
      for (int jj = 0; jj < JT; ++jj) {
        if (jj >= jt) break;
        const uint4 x = xs[u][jj];
#pragma unroll
        for (int j = 0; j < NB; ++j)
#pragma unroll
          for (int s = 0; s < kTiles; ++s) {
            const int o = (s * JT + jj) * 4;
            float c[4] = {acc[j][o], acc[j][o + 1], acc[j][o + 2], acc[j][o + 3]};
            const uint32_t a0[4] = {w[u][j][s][0].x, w[u][j][s][1].x, w[u][j][s][0].y, w[u][j][s][1].y};
            const uint32_t a1[4] = {w[u][j][s][0].z, w[u][j][s][1].z, w[u][j][s][0].w, w[u][j][s][1].w};
            mma16816<T>(c, a0, x.x, x.y);
            mma16816<T>(c, a1, x.z, x.w);
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[j][o + e] = c[e];
          }
      }
    }
  };
  const int64_t steps = (p.k + 31) / 32;
  if (p.b_early) {  // B is a weight: ask L2 for this warp's first rounds while the previous kernel runs
    for (int64_t s0 = first; s0 < steps && s0 < first + kPdlRounds * warps * kSteps; s0 += warps)
#pragma unroll
      for (int j = 0; j < NB; ++j)
#pragma unroll
        for (int s = 0; s < kTiles; ++s)
#pragma unroll
          for (int h = 0; h < 2; ++h)
            if (s0 * 32 + 8 * t < p.k) prefetch_l2(w_row[j][s][h] + s0 * 32 + 8 * t);
  }
  gemv_rounds<WRound, XRound>(first, steps, warps * kSteps, load, multiply);

  // acc[j][(s JT + jj) 4 + e]: e = 0, 1: column n0 + 16s + g, rows 8jj + 2t, +1; e = 2, 3: column
  // n0 + 16s + g + 8.
  gemv_reduce<WARPS, kTiles * JT * 4, NB>(acc, red, splits, b, epilogue, [&](int l, int v, int64_t& m, int64_t& n) {
    const int lg = l / 4, lt = l % 4, s = v / (JT * 4), jj = (v / 4) % JT, e = v % 4;
    const int64_t row = 8 * jj + 2 * lt + (e % 2);
    m = m_begin + row;
    n = n0 + 16 * s + lg + 8 * (e / 2);
    return row < rows && n < p.n;
  });
}

// B with n contiguous. CTA: 32 output columns; k-step: 32.
template <typename T, int MAX_M, int WARPS, int UNROLL, bool PREFETCH, typename Epilogue>
__global__ void __launch_bounds__(WARPS * 32) gemv_n_kernel(Problem p, Epilogue epilogue, int64_t m_begin, int splits) {
  constexpr int NB = Epilogue::kNumB, JT = (MAX_M + 7) / 8;
  __shared__ float red[gemv_red_floats<WARPS, 2 * JT * 4, NB>()];
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  const int g = lane / 4, t = lane % 4;
  const int64_t b = blockIdx.y;
  const int64_t n0 = int64_t(blockIdx.x / unsigned(splits)) * 32;
  const int64_t warps = int64_t(WARPS) * splits, first = int64_t(blockIdx.x % unsigned(splits)) * WARPS + warp;
  const int64_t rows = p.m - m_begin < MAX_M ? p.m - m_begin : MAX_M;
  const int jt = int((rows + 7) / 8);

  const T* a_base = static_cast<const T*>(p.a.data) + p.batch_offset(p.a, b);
  const T* x_row[JT];
#pragma unroll
  for (int j = 0; j < JT; ++j) {
    const int64_t m = m_begin + (8 * j + g < rows ? 8 * j + g : rows - 1);
    x_row[j] = a_base + m * p.a.stride_mn;
  }
  const T* w_col[NB];
#pragma unroll
  for (int j = 0; j < NB; ++j) w_col[j] = static_cast<const T*>(p.b[j].data) + p.batch_offset(p.b[j], b) + n0 + 8 * t;
  const int64_t n_valid = p.n - (n0 + 8 * t);

  // acc[j][2 q + jj..]: n-tile q (0: words 0, 1; 1: words 2, 3), rows 8jj...
  float acc[NB][2 * JT * 4];
#pragma unroll
  for (int j = 0; j < NB; ++j)
#pragma unroll
    for (int v = 0; v < 2 * JT * 4; ++v) acc[j][v] = 0.0f;

  // A k-step is 32 k: two mma halves h. Logical k-slots of half h map to physical k so that
  // lane t's A operand is the 8 k at 8t..8t+7 (one 16-byte load per row per step): slots
  // 2t + e -> 8t + 4h + e and 2t + 8 + e -> 8t + 4h + 2 + e (e = 0, 1). B's loads follow: group
  // gg of half h (fragments a0/a1 for gg = 0, a2/a3 for gg = 1) loads at lane group g the k row
  // 8(g/2) + 4h + 2gg + g%2, whose transposed pairs (rows 2t, 2t + 1) are exactly those slots.
  constexpr int kSteps = UNROLL > 1 ? UNROLL / 2 : 1;  // 32-k steps per round (UNROLL counts 16-k ones)
  int64_t b_off[2][2];  // [h][gg]: k row offset in the step of this lane's B loads
#pragma unroll
  for (int h = 0; h < 2; ++h)
#pragma unroll
    for (int gg = 0; gg < 2; ++gg) b_off[h][gg] = 8 * (g / 2) + 4 * h + 2 * gg + g % 2;
  using WRound = uint4[kSteps][NB][2][2];
  using XRound = uint4[kSteps][JT];
  auto load = [&](int64_t s0, WRound& w, XRound& xs) {
#pragma unroll
    for (int u = 0; u < kSteps; ++u) {
      const int64_t k0 = (s0 + u * warps) * 32;
#pragma unroll
      for (int j = 0; j < NB; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
          for (int gg = 0; gg < 2; ++gg) {
            const int64_t kr = k0 + b_off[h][gg];
            w[u][j][h][gg] = load8<T, true, PREFETCH>(w_col[j] + (kr < p.k ? kr : 0) * p.b[j].stride_k, kr < p.k ? n_valid : 0);
          }
    }
#pragma unroll
    for (int u = 0; u < kSteps; ++u) {
      const int64_t k = (s0 + u * warps) * 32 + 8 * t;
#pragma unroll
      for (int jj = 0; jj < JT; ++jj) xs[u][jj] = load8<T, false, false>(x_row[jj] + (k < p.k ? k : 0), jj < jt ? p.k - k : 0);
    }
  };
  auto multiply = [&](int64_t s0, const WRound& w, const XRound& xs) {
#pragma unroll
    for (int u = 0; u < kSteps; ++u) {
      if ((s0 + u * warps) * 32 >= p.k) break;
#pragma unroll
      for (int j = 0; j < NB; ++j) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          uint32_t f[2][4];  // [gg][word]
#pragma unroll
          for (int gg = 0; gg < 2; ++gg) {
            f[gg][0] = movmatrix_trans(w[u][j][h][gg].x);
            f[gg][1] = movmatrix_trans(w[u][j][h][gg].y);
            f[gg][2] = movmatrix_trans(w[u][j][h][gg].z);
            f[gg][3] = movmatrix_trans(w[u][j][h][gg].w);
          }
#pragma unroll
          for (int q = 0; q < 2; ++q) {
            const uint32_t a[4] = {f[0][2 * q], f[0][2 * q + 1], f[1][2 * q], f[1][2 * q + 1]};
#pragma unroll
            for (int jj = 0; jj < JT; ++jj) {
              if (jj >= jt) break;
              const uint4& x = xs[u][jj];
              const int o = (q * JT + jj) * 4;
              float c[4] = {acc[j][o], acc[j][o + 1], acc[j][o + 2], acc[j][o + 3]};
              mma16816<T>(c, a, h == 0 ? x.x : x.z, h == 0 ? x.y : x.w);
#pragma unroll
              for (int e = 0; e < 4; ++e) acc[j][o + e] = c[e];
            }
          }
        }
      }
    }
  };
  const int64_t steps = (p.k + 31) / 32;
  if (p.b_early) {  // B is a weight: ask L2 for this warp's first rounds while the previous kernel runs
    for (int64_t s0 = first; s0 < steps && s0 < first + kPdlRounds * warps * kSteps; s0 += warps)
#pragma unroll
      for (int j = 0; j < NB; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
          for (int gg = 0; gg < 2; ++gg) {
            const int64_t kr = s0 * 32 + b_off[h][gg];
            if (kr < p.k && n_valid > 0) prefetch_l2(w_col[j] + kr * p.b[j].stride_k);
          }
  }
  gemv_rounds<WRound, XRound>(first, steps, warps * kSteps, load, multiply);

  // Tile q, fragment row g -> word 2q (rows 0-7) or 2q + 1 (rows 8-15) of the lanes that loaded
  // n = 8(g/2) + 2 word + g%2.
  gemv_reduce<WARPS, 2 * JT * 4, NB>(acc, red, splits, b, epilogue, [&](int l, int v, int64_t& m, int64_t& n) {
    const int lg = l / 4, lt = l % 4, q = v / (JT * 4), jj = (v / 4) % JT, e = v % 4;
    const int word = 2 * q + e / 2;
    const int64_t row = 8 * jj + 2 * lt + (e % 2);
    m = m_begin + row;
    n = n0 + 8 * (lg / 2) + 2 * word + lg % 2;
    return row < rows && n < p.n;
  });
}

// The device's SM count and compute capability (major), looked up once per device.
inline void gemv_device(int& sms, int& major) {
  static std::atomic<int> cache[64][2];
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0) dev = 0;
  if (dev < 64 && cache[dev][0].load(std::memory_order_relaxed) > 0) {
    sms = cache[dev][0].load(std::memory_order_relaxed);
    major = cache[dev][1].load(std::memory_order_relaxed);
    return;
  }
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || sms <= 0) sms = 1;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) major = 0;
  if (dev < 64) {
    cache[dev][1].store(major, std::memory_order_relaxed);
    cache[dev][0].store(sms, std::memory_order_relaxed);
  }
}

// Whether gemv launches use programmatic dependent launch: unless KILN_GEMV_PDL=0 (benchmarks
// compare the two in one process), where the device code was compiled for sm_90+ and so holds the
// kernels' pdl_wait (device_code_has_pdl: a library built for an older architecture and run here
// through the driver's JIT has none, and its kernels must not start early).
inline bool gemv_pdl() {
  static const bool on = env_switch_on("KILN_GEMV_PDL");
  return on && device_code_has_pdl();
}

// How many clusters of `splits` CTAs of one gemv kernel instantiation can be resident at once
// (the occupancy API: SMs x CTAs per SM for splits = 1; for clusters it also counts what fits
// in each GPC, which on H100/H200 is far less than slots / splits for some sizes), looked up
// once per size. Run 1 of bench/gemm/NOTES.md's gemv section: 256 CTAs of 8 warps in clusters
// of 4, though "one wave" by CTA slots, ran at ~0.7x the speed of 128 CTAs of 16 warps in
// clusters of 2 doing the same work.
// The kernel for B with k contiguous (gemv_k_kernel) or n contiguous (gemv_n_kernel), only that one
// instantiated.
template <bool K_CONTIGUOUS, typename T, int MAX_M, int WARPS, int UNROLL, bool PREFETCH, typename Epilogue>
constexpr auto gemv_kernel() {
  if constexpr (K_CONTIGUOUS) {
    return gemv_k_kernel<T, MAX_M, WARPS, UNROLL, PREFETCH, Epilogue>;
  } else {
    return gemv_n_kernel<T, MAX_M, WARPS, UNROLL, PREFETCH, Epilogue>;
  }
}

template <typename T, int MAX_M, int WARPS, int UNROLL, bool PREFETCH, typename Epilogue, bool K_CONTIGUOUS>
int64_t gemv_resident(int splits) {
  static std::atomic<int64_t> cache[4];  // splits 1, 2, 4, 8
  const int slot = splits >= 8 ? 3 : splits >= 4 ? 2 : splits >= 2 ? 1 : 0;
  int64_t resident = cache[slot].load(std::memory_order_relaxed);
  if (resident > 0) return resident;
  auto kernel = gemv_kernel<K_CONTIGUOUS, T, MAX_M, WARPS, UNROLL, PREFETCH, Epilogue>();
  int sms = 1, major = 0;
  gemv_device(sms, major);
  int count = 0;
  if (splits == 1) {
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&count, kernel, WARPS * 32, 0) != cudaSuccess) count = 0;
    count *= sms;
  } else {
    count = max_active_clusters(kernel, splits, WARPS * 32, 0);
  }
  if (count <= 0) {
    (void)cudaGetLastError();
    return 0;  // unknown: not cached, and no split is chosen on it
  }
  cache[slot].store(count, std::memory_order_relaxed);
  return count;
}

// How many CTAs (a cluster) share one strip of outputs: the largest of 2, 4, 8 (up to
// max_splits) whose clusters for all `units` strips are resident at once (one wave) and leave
// every warp at least one full round of `steps_per_round` k-steps; 1 if none (or before sm_90).
// `resident(s)` is gemv_resident for the kernel.
template <typename Resident>
int gemv_splits(Resident resident, int warps, int steps_per_round, int max_splits, int64_t units, int64_t steps) {
  int sms = 1, major = 0;
  gemv_device(sms, major);
  if (major < 9) return 1;
  int best = 1;
  for (int s = 2; s <= max_splits; s *= 2) {
    if (steps < int64_t(s) * warps * steps_per_round) break;
    if (units <= resident(s)) best = s;
  }
  return best;
}

// Launches gemv_tensorcore's kernels for B with k contiguous (K_CONTIGUOUS) or n contiguous, in
// chunks of up to M16 rows. Only that layout's kernels are instantiated, and none for a layout the
// epilogue's hint rules out (gemv_tensorcore sends no such call here).
template <bool K_CONTIGUOUS, typename T, int M16, int M8, int W, int U, bool PF, int MAX_SPLITS, typename Epilogue>
cudaError_t launch_gemv(const Problem& p, const Epilogue& epilogue, int64_t blocks, cudaStream_t stream) {
  if constexpr (!layout_allows(EpilogueBKMajor<Epilogue>::value, K_CONTIGUOUS)) {
    return cudaErrorNotSupported;
  } else {
    const int64_t batch = p.batch();
    // A chunk of at most 8 rows runs the one-row-tile instantiation (fewer registers).
    auto kernel16 = gemv_kernel<K_CONTIGUOUS, T, M16, W, U, PF, Epilogue>();
    auto kernel8 = gemv_kernel<K_CONTIGUOUS, T, M8, W, U, PF, Epilogue>();
    const int64_t steps = (p.k + 31) / 32;
    for (int64_t m = 0; m < p.m; m += M16) {
      const bool small = p.m - m <= M8;
      auto kernel = small ? kernel8 : kernel16;
      auto resident = [&](int splits) {
        return small ? gemv_resident<T, M8, W, U, PF, Epilogue, K_CONTIGUOUS>(splits)
                     : gemv_resident<T, M16, W, U, PF, Epilogue, K_CONTIGUOUS>(splits);
      };
      const int splits = gemv_splits(resident, W, U > 1 ? U / 2 : 1, MAX_SPLITS, blocks * batch, steps);
      cudaLaunchConfig_t config = {};
      config.gridDim = dim3(unsigned(blocks * splits), unsigned(batch), 1u);
      config.blockDim = dim3(W * 32, 1, 1);
      config.stream = stream;
      cudaLaunchAttribute attrs[2];
      config.attrs = attrs;
      if (splits > 1) attrs[config.numAttrs++] = cluster_attribute(splits);
      if (gemv_pdl()) attrs[config.numAttrs++] = programmatic_attribute();
      const cudaError_t e = cudaLaunchKernelEx(&config, kernel, p, epilogue, m, splits);
      if (e != cudaSuccess) return e;
    }
    return cudaSuccess;
  }
}

}  // namespace kiln::gemm::detail

namespace kiln::gemm {

// Needs A with k contiguous and both readable in 16-byte vectors, B in either layout (all B's
// the same); anything else runs simt.
template <typename T, typename Config, typename Epilogue>
cudaError_t gemv_tensorcore(const Problem& p, const Epilogue& epilogue, cudaStream_t stream) {
  static_assert(std::is_same<T, __half>::value || std::is_same<T, __nv_bfloat16>::value, "gemv<T>: T is __half or __nv_bfloat16");
  static_assert(Config::MAX_M >= 1 && Config::WARPS >= 1 && Config::WARPS <= 16 && Config::MAX_M <= 16,
                "GemvConfig: MAX_M 1..16, 1..16 warps");
  static_assert(Config::MAX_SPLITS == 1 || Config::MAX_SPLITS == 2 || Config::MAX_SPLITS == 4 || Config::MAX_SPLITS == 8,
                "GemvConfig: MAX_SPLITS 1, 2, 4 or 8 (a portable cluster)");
  static_assert(Config::UNROLL >= 1 && Config::UNROLL <= 8, "GemvConfig: UNROLL 1..8");
  constexpr int NB = Epilogue::kNumB;
  static_assert(NB == 1 || NB == 2, "Epilogue::kNumB is 1 or 2");
  const int64_t batch = p.batch();
  if (p.m <= 0 || p.n <= 0 || batch <= 0) return cudaSuccess;
  int b_axis = detail::vector_axis(p, p.b[0], p.n);
  if (NB == 2 && detail::vector_axis(p, p.b[1], p.n) != b_axis) b_axis = -1;
  // B streamed along an axis its layout hint rules out runs simt (that kernel is not instantiated).
  constexpr int kHintB = EpilogueBKMajor<Epilogue>::value;
  if (b_axis >= 0 && !layout_allows(kHintB, b_axis == 1)) b_axis = -1;
  const int64_t cols = 32;  // both kernels
  const int64_t blocks = (p.n + cols - 1) / cols;
  if (p.k <= 0 || p.num_b != NB || detail::vector_axis(p, p.a, p.m) != 1 || b_axis < 0 || batch > 65535 || blocks > 2147483647)
    return simt<T>(p, epilogue, stream);
  constexpr int W = Config::WARPS, U = Config::UNROLL, M16 = Config::MAX_M, M8 = M16 < 8 ? M16 : 8;
  constexpr bool PF = Config::PREFETCH != 0;
  return b_axis == 1 ? detail::launch_gemv<true, T, M16, M8, W, U, PF, Config::MAX_SPLITS>(p, epilogue, blocks, stream)
                     : detail::launch_gemv<false, T, M16, M8, W, U, PF, Config::MAX_SPLITS>(p, epilogue, blocks, stream);
}

}  // namespace kiln::gemm
