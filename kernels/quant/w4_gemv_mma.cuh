#pragma once
// GEMV variant 9, M = 1..16 (tokens in tiles of 8, NT = 1 or 2 tiles per launch): variant 8's
// load structure (w4_gemv_async.cuh: every weight and scale byte of a warp's range requested by
// cp.async before griddepcontrol.wait, x loaded after it, rows consumed in request order) with
// variant 5's mma.sync math (w4_gemv.cuh: one decoded weight fragment feeds every token of a
// tile, so the cost per weight is flat in M up to 8 and adds one mma per 256 weights per tile).
//
// Why. Variant 8's packed half2 math costs ~2 + 0.5·M thread instructions per weight; at M = 4
// that is over the H200's issue budget (~3.7 per weight at full read bandwidth). Variant 5 has
// the mma math but its register ring and per-step x loads ran at 55% of the read ceiling at
// M = 1..4 and 28-32% at M = 16 (bench/quant/NOTES.md, session 5 run 2, H200).
//
// Schedule. A CTA owns 64 weight rows (4 row tiles of 16) x KC = 256·W k; its W warps take one
// 256-k slice each (two 128-k mma steps). Lane (g, t) copies and later reads rows g and g + 8 of
// every row tile at k = 32t..32t+31 of each step (16 bytes per row and step), so each lane reads
// back only what it copied: cp.async.wait_group alone orders it (the scales, copied by all lanes
// of the warp, take one __syncwarp). The x of a lane (token g of each tile, its own 2 x 32 k) is
// loaded once after the wait and reused by all 4 row tiles: x is read from L2 once per 64 rows,
// not per 16 (at M = 16 and 16 rows per CTA, the x reads would be 4x the weight bytes).
// Commit groups: scales, then row tiles 0..3; row tile r is computed after its group arrived.
// Its partial sums then go to its own (consumed) 2 KB of the warp's weight buffer, and the CTA
// adds the warps' partials; with splits > 1 (K larger than one CTA's 256·W, sm_90+) the CTAs of
// a thread-block cluster share the 64 rows and add their sums in rank order through distributed
// shared memory (no workspace, no atomics), each CTA finishing 1/splits of the outputs.
// Shared memory: per warp 8 KB of weights (row r at r·128, unit u of the row at (u ^ 4(r & 1))·16:
// conflict-free 16-byte reads) + 2 KB of scale bytes (row r at 8 KB + 32r: scales, INT4 zeros at
// +16), then 4 KB for the cluster's sums.
#include <cooperative_groups.h>

#include <atomic>
#include <cstdlib>

#include "w4_gemv9_plan.h"
#include "w4_gemv_async.cuh"

namespace kiln::quant::gpu {

struct Gemv9Layout {
  static constexpr int kWeightBytes = kGemv9Rows * kGemv9Slice / 2;  // 8 KB
  static constexpr int kScaleRowBytes = 32;                          // scales at 0, INT4 zeros at 16
  static constexpr int kWarpBytes = kWeightBytes + kGemv9Rows * kScaleRowBytes;
  static constexpr int kClusterBytes = kGemv9Rows * 16 * 4;          // 64 rows x 16 tokens fp32
};
inline size_t gemv9_smem_bytes(int warps) { return size_t(warps) * Gemv9Layout::kWarpBytes + Gemv9Layout::kClusterBytes; }

// The lane's copies of one row tile: rows g, g + 8 of tile `rt`, units t and 4 + t (k 32t and
// 128 + 32t of the slice); the caller commits.
__device__ __forceinline__ void gemv9_issue_tile(const LinearParams& p, uint8_t* buf, int row0, int k0, int lane, int rt) {
  const int g = lane >> 2, t = lane & 3;
  const size_t row_bytes = size_t(p.k) / 2;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = rt * 16 + g + 8 * h;
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      const int u = 4 * s + t;
      cp_async16(buf + r * 128 + ((u ^ ((r & 1) << 2)) << 4), p.weight + size_t(row0 + r) * row_bytes + k0 / 2 + 16 * u, true);
    }
  }
}

// Scale (and INT4 zero) bytes of the warp's 64 rows x 256 k, in 4-byte pieces spread over the
// lanes (NVFP4 16 bytes per row, MXFP4 8, INT4 512/group each); the caller commits.
template <Format F>
__device__ __forceinline__ void gemv9_issue_scales(const LinearParams& p, uint8_t* buf, int row0, int k0, int lane) {
  const int bytes = F == Format::NvFp4 ? 16 : F == Format::MxFp4 ? 8 : 2 * kGemv9Slice / p.group;
  const int pieces = bytes / 4, tensors = F == Format::Int4 ? 2 : 1;
  const size_t stride = row_scale_bytes<F>(p);
  const size_t koff = size_t(k0 / kGemv9Slice) * bytes;
  uint8_t* dst = buf + Gemv9Layout::kWeightBytes;
  for (int q = lane; q < kGemv9Rows * pieces * tensors; q += 32) {
    const int tensor = q / (kGemv9Rows * pieces), rem = q - tensor * kGemv9Rows * pieces;
    const int r = rem / pieces, part = rem - r * pieces;
    const uint8_t* base = static_cast<const uint8_t*>(tensor == 0 ? p.scale : p.zero);
    cp_async4(dst + r * Gemv9Layout::kScaleRowBytes + 16 * tensor + 4 * part, base + size_t(row0 + r) * stride + koff + 4 * part);
  }
}

// Rows g, g + 8 of row tile `rt`, step s, as variant 5's WeightStep (the same decode and math).
template <Format F>
__device__ __forceinline__ WeightStep<F> gemv9_read_step(const uint8_t* buf, int lane, int rt, int s, int group) {
  const int g = lane >> 2, t = lane & 3, u = 4 * s + t;
  WeightStep<F> ws;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = rt * 16 + g + 8 * h;
    ws.w[h] = *reinterpret_cast<const uint4*>(buf + r * 128 + ((u ^ ((r & 1) << 2)) << 4));
    const uint8_t* sc = buf + Gemv9Layout::kWeightBytes + r * Gemv9Layout::kScaleRowBytes;
    staged_unit_scales<F>(ws, h, sc, u, group, 16);
  }
  return ws;
}

// Where value e (0..3) of token tile j of lane `lane` sits in a row tile's partials (floats), and
// which row (0..15) and token (0..8·NT) of the tile it holds (the m16n8 C fragment).
__device__ __forceinline__ int gemv9_part(int j, int e, int lane) { return (j * 4 + e) * 32 + lane; }

template <Format F, typename T, int NT, class Ep>
__global__ void __launch_bounds__(kGemv9MaxWarps * 32, 1) w4_gemv9_kernel(LinearParams p, int tok_base, int splits, Ep ep) {
  extern __shared__ __align__(16) uint8_t gemv9_smem[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int split = int(blockIdx.x) % splits, tile = int(blockIdx.x) / splits;
  const int row0 = tile * kGemv9Rows;
  const int k0 = (split * warps + warp) * kGemv9Slice;
  uint8_t* buf = gemv9_smem + size_t(warp) * Gemv9Layout::kWarpBytes;

  gemv9_issue_scales<F>(p, buf, row0, k0, lane);
  cp_async_commit();
#pragma unroll
  for (int rt = 0; rt < 4; ++rt) {
    gemv9_issue_tile(p, buf, row0, k0, lane, rt);
    cp_async_commit();
  }
  // As variant 8: the wait, the launch of dependents and the x loads in a block of their own
  // behind a branch that is never false at run time, so that ptxas keeps the x loads above the
  // first cp.async wait.
  ActStep<NT> xs[2];
#pragma unroll
  for (int s = 0; s < 2; ++s)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i) xs[s].x[j][i] = make_uint4(0, 0, 0, 0);
  if (p.m > 0) {
    pdl_wait();    // x (and y) belong to the previous kernel until here
    pdl_trigger();  // the next kernel may start and request its weights
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      const int tok = tok_base + 8 * j + g;
      if (tok < p.m) {
        const T* src = static_cast<const T*>(p.x) + size_t(tok) * p.k + k0 + 32 * t;
#pragma unroll
        for (int s = 0; s < 2; ++s)
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            uint4& v = xs[s].x[j][i];
            asm volatile("ld.global.nc.v4.u32 {%0,%1,%2,%3}, [%4];"
                         : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                         : "l"(src + 128 * s + 8 * i));
          }
      }
    }
  }
#pragma unroll
  for (int rt = 0; rt < 4; ++rt) {
    cp_async_wait_upto7(3 - rt);
    if (rt == 0) __syncwarp();  // the scale pieces other lanes copied
    float acc[NT][4];
#pragma unroll
    for (int j = 0; j < NT; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
#pragma unroll
    for (int s = 0; s < 2; ++s) mma_step<F, T, NT>(gemv9_read_step<F>(buf, lane, rt, s, p.group), xs[s], acc);
    // The tile's 2 KB of weights are consumed: its partials go there (other lanes may still be
    // reading their own units of it until the __syncwarp).
    __syncwarp();
    float* part = reinterpret_cast<float*>(buf + rt * 2048);
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) part[gemv9_part(j, e, lane)] = acc[j][e];
  }
  __syncthreads();

  // The CTA's sum of value `off` (gemv9_part's index) of row tile rt over its warps.
  auto cta_sum = [&](int rt, int off) {
    float v = 0.0f;
    for (int w = 0; w < warps; ++w)
      v += reinterpret_cast<const float*>(gemv9_smem + size_t(w) * Gemv9Layout::kWarpBytes + rt * 2048)[off];
    return v;
  };
  const bool gated = p.act != Activation::None;
  // Output of value `off` of row tile rt from the K-complete sums v (and, gated, u of row + 8).
  auto finish = [&](int rt, int off, float v, float u) {
    const int j = off >> 7, e = (off >> 5) & 3, l = off & 31;
    const int r = rt * 16 + (l >> 2) + 8 * (e >> 1);
    const int tok = tok_base + 8 * j + 2 * (l & 3) + (e & 1);
    if (tok >= p.m) return;
    v *= row_factor<T, F>(p, r);
    if (gated) {
      u *= row_factor<T, F>(p, r + 8);
      static_cast<T*>(p.y)[size_t(tok) * (p.n / 2) + (row0 + rt * 16) / 2 + (l >> 2)] = from_float<T>(activate(v, p.act) * u);
    } else {
      ep(0, int64_t(tok), int64_t(row0 + r), v);
    }
  };
  constexpr int kPerTile = NT * 128;  // partials per row tile
  if (splits == 1) {
    for (int idx = threadIdx.x; idx < 4 * kPerTile; idx += blockDim.x) {
      const int rt = idx / kPerTile, off = idx - rt * kPerTile;
      const int e = (off >> 5) & 3;
      if (gated && e >= 2) continue;  // rows 8..15 of a tile are the up rows of rows 0..7
      finish(rt, off, cta_sum(rt, off), gated ? cta_sum(rt, off + 64) : 0.0f);
    }
    return;
  }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  float* red = reinterpret_cast<float*>(gemv9_smem + size_t(warps) * Gemv9Layout::kWarpBytes);
  for (int idx = threadIdx.x; idx < 4 * kPerTile; idx += blockDim.x) {
    const int rt = idx / kPerTile;
    red[idx] = cta_sum(rt, idx - rt * kPerTile);
  }
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();  // every CTA's sums are in its shared memory
  const int rank = int(cluster.block_rank());
  for (int idx = rank + splits * int(threadIdx.x); idx < 4 * kPerTile; idx += splits * int(blockDim.x)) {
    const int rt = idx / kPerTile, off = idx - rt * kPerTile;
    const int e = (off >> 5) & 3;
    if (gated && e >= 2) continue;
    float v = 0.0f, u = 0.0f;
    for (int q = 0; q < splits; ++q) {  // rank order: the sum does not depend on timing
      const float* r = cluster.map_shared_rank(red, q);
      v += r[idx];
      if (gated) u += r[idx + 64];
    }
    finish(rt, off, v, u);
  }
  cluster.sync();  // no CTA leaves while another reads its shared memory
#endif
}

// Whether clusters of `splits` CTAs of `warps` warps of this kernel can all be resident at once
// for a grid of `ctas` CTAs (the occupancy API, which also counts what fits in each GPC).
// The last residency query's answer (clusters resident at once, clusters needed), for the
// benchmarks' note of why a shape has no plan.
inline thread_local int gemv9_last_resident[2] = {0, 0};

template <Format F, typename T, int NT, class Ep>
bool gemv9_resident(int warps, int splits, int ctas) {
  const char* any = std::getenv("KILN_QUANT_GEMV9_ANY_CLUSTER");  // benchmarks: skip the check
  if (any && any[0] == '1') return true;
  static std::atomic<int> cache[5][4];  // warps 1..16, splits 1..8 (log2): max active clusters + 1
  int wi = 0, si = 0;
  while ((1 << wi) < warps) ++wi;
  while ((1 << si) < splits) ++si;
  int count = cache[wi][si].load(std::memory_order_relaxed) - 1;
  if (count < 0) {
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = dim3(unsigned(splits) * 256u);
    cfg.blockDim = dim3(unsigned(warps) * 32u);
    cfg.dynamicSmemBytes = gemv9_smem_bytes(warps);
    cudaLaunchAttribute cluster[1];
    cluster[0].id = cudaLaunchAttributeClusterDimension;
    cluster[0].val.clusterDim.x = unsigned(splits);
    cluster[0].val.clusterDim.y = 1;
    cluster[0].val.clusterDim.z = 1;
    cfg.attrs = cluster;
    cfg.numAttrs = 1;
    if (cudaOccupancyMaxActiveClusters(&count, w4_gemv9_kernel<F, T, NT, Ep>, &cfg) != cudaSuccess) {
      (void)cudaGetLastError();
      gemv9_last_resident[0] = -1;  // the query failed
      gemv9_last_resident[1] = ctas / splits;
      return false;  // unknown: no split on it (not cached)
    }
    cache[wi][si].store(count + 1, std::memory_order_relaxed);
  }
  gemv9_last_resident[0] = count;
  gemv9_last_resident[1] = ctas / splits;
  return int64_t(count) * splits >= ctas;
}

inline int gemv9_device_major() {
  static const int major = [] {
    int dev = 0, m = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&m, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) {
      (void)cudaGetLastError();
      return 0;
    }
    return m;
  }();
  return major;
}

template <Format F, typename T, int NT, class Ep>
Gemv9Plan gemv9_plan_here(int n, int k) {
  static const cudaError_t attr = cudaFuncSetAttribute(w4_gemv9_kernel<F, T, NT, Ep>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                       int(gemv9_smem_bytes(kGemv9MaxWarps)));
  if (attr != cudaSuccess) return Gemv9Plan{};
  const int tiles = n / kGemv9Rows;
  const char* forced = std::getenv("KILN_QUANT_GEMV9_WARPS");  // benchmarks: 1, 2, 4, 8 or 16
  return gemv9_plan(n, k, gemv9_device_major() >= 9,
                    [&](int w, int s) { return gemv9_resident<F, T, NT, Ep>(w, s, tiles * s); }, forced ? std::atoi(forced) : 0);
}

// The plan of this thread's last variant-9 launch (benchmarks print it).
inline thread_local Gemv9Plan gemv9_last_plan;

// Launches variant 9 for tokens [0, m) in tiles of 8·NT (one launch per tile); returns
// cudaErrorNotSupported, launching nothing, where the shape has no plan, or with default_only
// where gemv9_default_takes refuses the plan (the caller runs 5).
template <Format F, typename T, int NT, class Ep>
cudaError_t launch_gemv9(const LinearParams& p, const Ep& ep, bool pdl, cudaStream_t stream, bool default_only = false) {
  // A lane's 32 k of a step lie in one INT4 group, and a slice holds whole groups.
  if (F == Format::Int4 && (p.group < 32 || p.group > 128 || kGemv9Slice % p.group != 0)) {
    gemv9_last_plan = Gemv9Plan{};
    return cudaErrorNotSupported;
  }
  const Gemv9Plan plan = gemv9_plan_here<F, T, NT, Ep>(p.n, p.k);
  gemv9_last_plan = plan;
  if (plan.warps == 0 || (default_only && !gemv9_default_takes(plan, p.n))) return cudaErrorNotSupported;
  cudaLaunchAttribute attr[2];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = pdl ? 1 : 0;
  attr[1].id = cudaLaunchAttributeClusterDimension;
  attr[1].val.clusterDim.x = unsigned(plan.splits);
  attr[1].val.clusterDim.y = 1;
  attr[1].val.clusterDim.z = 1;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(unsigned(p.n / kGemv9Rows * plan.splits));
  cfg.blockDim = dim3(unsigned(plan.warps * 32));
  cfg.dynamicSmemBytes = gemv9_smem_bytes(plan.warps);
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = plan.splits > 1 ? 2 : 1;
  for (int tok = 0; tok < p.m; tok += 8 * NT) {
    if (cudaError_t e = cudaLaunchKernelEx(&cfg, w4_gemv9_kernel<F, T, NT, Ep>, p, tok, plan.splits, ep)) return e;
  }
  return cudaGetLastError();
}

}  // namespace kiln::quant::gpu
