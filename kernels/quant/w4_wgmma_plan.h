#pragma once
// Which M >= 17 kernel a 4-bit linear layer runs, and its tile: GEMM variant 4 (w4_gemm_sm90_rs.cuh;
// or 3, w4_gemm_sm90.cuh: Hopper wgmma, sm_90a builds on sm_90 devices) or the mma.sync GEMM
// (w4_gemm.cuh, every other case). Plain C++ (no CUDA), so that host tests check the selection
// without a GPU.
#include <algorithm>

namespace kiln::quant::gpu {

// Variants 3 and 4's tile: kWgmmaRows weight rows (two consumer warpgroups of 64) x bn tokens.
constexpr int kWgmmaRows = 128;
constexpr int kWgmmaSms = 132;  // H100/H200 SMs a grid aims to fill (one CTA per SM)
constexpr int kWgmmaMaxSplit = 8;  // CTAs along K: variant 4's cluster, at most the portable 8

struct WgmmaPlan {
  bool use = false;
  const char* reason = "";  // why not (use == false)
  int bn = 64;              // tokens per tile: 64 or 128
  int split = 1;            // CTAs along K (each a whole number of stages)
};

// bn_override: 64 or 128 forces the token tile (benchmarks), 0 lets the plan choose. stage_k: the
// k of the kernel's stages (variant 3: 128, variant 4: 256; a last stage of 128 when K is not a
// multiple of 256), which a split of K keeps whole.
inline WgmmaPlan plan_wgmma(int m, int n, int k, bool built, bool sm90_device,
                            int bn_override = 0, int stage_k = 128) {
  WgmmaPlan plan;
  auto refuse = [&](const char* why) {
    plan.reason = why;
    return plan;
  };
  if (!built) return refuse("not an sm_90a build (KILN_GEMM_SM90A undefined)");
  if (!sm90_device) return refuse("the device is not sm_90");
  if (m < 17) return refuse("M <= 16 runs the GEMV");
  if (n % kWgmmaRows != 0) return refuse("N is not a multiple of 128");
  if (k % 128 != 0 || k <= 0) return refuse("K is not a multiple of 128");
  // 64 tokens up to M = 64, else 128 (wider tiles do not fit the registers of a CTA with three
  // producer warpgroups, w4_gemm_sm90.cuh).
  plan.bn = bn_override == 64 || bn_override == 128 ? bn_override : m <= 64 ? 64 : 128;
  // Split K while the tiles fill at most half the SMs (one CTA each): the largest divisor of the
  // stages that keeps tiles x split within one wave, leaves each split at least two stages and
  // is at most kWgmmaMaxSplit. (Variant 3's split costs a memset, atomics and a second kernel,
  // variant 4's a reduction in a cluster of the split's CTAs.)
  const int tiles = (n / kWgmmaRows) * ((m + plan.bn - 1) / plan.bn), steps = (k + stage_k - 1) / stage_k;
  if (2 * tiles <= kWgmmaSms) {
    for (int d = std::min({steps / 2, kWgmmaSms / tiles, kWgmmaMaxSplit}); d >= 1; --d)
      if (steps % d == 0) {
        plan.split = d;
        break;
      }
  }
  plan.use = true;
  return plan;
}

}  // namespace kiln::quant::gpu
