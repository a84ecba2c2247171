#pragma once
// How GEMV variant 9 (w4_gemv_mma.cuh) splits a shape: warps per CTA and CTAs per 64-row tile (a
// thread-block cluster along K). Plain C++ (no CUDA), so that host tests check it without a GPU.
#include <initializer_list>

namespace kiln::quant::gpu {

constexpr int kGemv9Rows = 64;      // 4 row tiles of 16 per CTA
constexpr int kGemv9Slice = 256;    // k per warp: two 128-k mma steps
constexpr int kGemv9MaxWarps = 16;  // 512 threads, <= 128 registers each
constexpr int kGemv9MaxSplits = 8;  // a portable cluster
constexpr int kGemv9EnoughCtas = 120;

// warps == 0: variant 9 does not take the shape (the caller runs variant 5).
struct Gemv9Plan {
  int warps = 0;
  int splits = 0;
};

// K = 256 * warps * splits. The first of W = 8, 16, 4, 2, 1 warps whose grid (N / 64 * splits
// CTAs) has >= kGemv9EnoughCtas CTAs; else the valid one with the most CTAs. `resident(w, s)` says
// whether all clusters of s CTAs of w warps are resident at once (a second wave of clusters would
// double the time); splits > 1 only where clusters exist (sm_90+). forced_warps > 0 considers only
// that W (benchmarks: KILN_QUANT_GEMV9_WARPS).
template <class Resident>
Gemv9Plan gemv9_plan(int n, int k, bool clusters, Resident resident, int forced_warps = 0) {
  Gemv9Plan best;
  if (n <= 0 || k <= 0 || n % kGemv9Rows != 0 || k % kGemv9Slice != 0) return best;
  const int tiles = n / kGemv9Rows, slices = k / kGemv9Slice;
  for (int w : {8, 16, 4, 2, 1}) {
    if (slices % w != 0 || (forced_warps > 0 && w != forced_warps)) continue;
    const int splits = slices / w;
    if (splits > (clusters ? kGemv9MaxSplits : 1)) continue;
    if (splits > 1 && !resident(w, splits)) continue;
    if (tiles * splits >= kGemv9EnoughCtas) return Gemv9Plan{w, splits};
    if (best.warps == 0 || splits > best.splits) best = Gemv9Plan{w, splits};
  }
  return best;
}

// Whether the library's default runs a plan (else variant 5): one CTA per 64-row tile (no cluster)
// and a grid of at least kGemv9DefaultMinWarps warps (12 per SM of an H200). Session 7 (bench/quant/
// NOTES.md, H200): 2048 warps without clusters (16384x2048) ran faster than variant 5 at M = 2..16;
// 256-512-warp grids (4096x1024, 1024x4096, the action expert's 8192x1024) slower, each warp's serial
// work then being the time; 2048x16384 in clusters of 8 (or 4 of 16 warps) slower than variant 5.
constexpr int kGemv9DefaultMinWarps = 12 * 132;
inline bool gemv9_default_takes(Gemv9Plan plan, int n) {
  return plan.warps > 0 && plan.splits == 1 && (n / kGemv9Rows) * plan.warps >= kGemv9DefaultMinWarps;
}

}  // namespace kiln::quant::gpu
