#pragma once
// Host side: which variant runs for a shape (a pure function of m, n, k, so that the workspace
// formula of a signature can repeat it), and the launches.
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "../gemm/gemm_ptx.cuh"  // device_code_has_pdl
#include "w4_gemm.cuh"
#include "w4_gemm_sm90.cuh"
#include "w4_gemm_sm90_rs.cuh"
#include "w4_gemm_sm90_ss.cuh"
#include "w4_gemv_async.cuh"
#include "w4_gemv_mma.cuh"
#include "w4_gemv_mma8.cuh"
#include "w4_gemv_tokens.cuh"

namespace kiln::quant::gpu {

// Warps of the GPU a launch aims to fill: 132 SMs x 16 warps (H100/H200); smaller GPUs simply
// run more waves. Kept a constant so plans do not depend on the device.
constexpr int kTargetWarps = 132 * 16;
constexpr int kTargetCtas = 2 * 132;

struct LinearPlan {
  enum Kind { Gemv, Gemm } kind = Gemv;
  int gemv_tiles = 1;   // token tiles of 8 per GEMV launch (1 or 2)
  int gemv_warps = 1;   // warps per GEMV CTA (split of K)
  int gemm_split = 1;   // CTAs along K for the GEMM
  // Split-K workspace: per-tile counters (GEMM variant 2), then gemm_split slices of [m, n] fp32
  // (variant 1 uses the first slice only).
  size_t counter_bytes(int m, int n) const {
    return gemm_split > 1 ? (size_t(n / kGemmRows) * ((m + kGemmTokens - 1) / kGemmTokens) * sizeof(unsigned) + 255) / 256 * 256 : 0;
  }
  size_t partial_bytes(int m, int n) const {
    return gemm_split > 1 ? counter_bytes(m, n) + size_t(gemm_split) * m * n * sizeof(float) : 0;
  }
};

inline int largest_divisor_at_most(int value, int cap) {
  cap = std::max(1, std::min(cap, value));
  for (int d = cap; d > 1; --d)
    if (value % d == 0) return d;
  return 1;
}

inline LinearPlan plan_linear(int m, int n, int k) {
  LinearPlan plan;
  const int steps = k / 128;
  if (m > 16 && n % kGemmRows == 0) {
    plan.kind = LinearPlan::Gemm;
    const int ctas = (n / kGemmRows) * ((m + kGemmTokens - 1) / kGemmTokens);
    // Two CTAs per SM keep enough weight bytes in flight; split K until there are that many.
    if (ctas < kTargetCtas) plan.gemm_split = largest_divisor_at_most(steps, (kTargetCtas + ctas - 1) / ctas);
    return plan;
  }
  plan.gemv_tiles = m <= 8 ? 1 : 2;
  const int ctas = n / 16;
  plan.gemv_warps = largest_divisor_at_most(steps, std::min((kTargetWarps + ctas - 1) / ctas, plan.gemv_tiles == 1 ? 16 : 8));
  return plan;
}

// 0: the choice per call of launch_gemv_default (below): variant 8 at M = 1 where gemv8_applies
// (measured faster than 5 and 7 at M = 1 on every shape in session 4's run 2,
// bench/quant/NOTES.md), variant 19 at M = 2..8 where gemv19_default_takes (below), variant 9
// at M = 2..16 where gemv9_default_takes its plan (no cluster, >= 12 x 132 warps: measured faster
// than 5 there in session 7), else 5.
constexpr int kDefaultGemvVariant = 0;

// GEMV variant (w4_gemv.cuh): kDefaultGemvVariant; before variant 4 it was 1, the fastest measured
// (bench/quant/NOTES.md: 11.3 µs against 13.1 for 2 and 16.9 for 3 at 16384x2048, M = 1, H200);
// KILN_QUANT_GEMV_VARIANT=1..19 selects another, so that benchmarks can compare them in one run.
// Variant 7 (w4_gemv_half2.cuh) runs where gemv7_applies (M = 1, K a multiple of 1024 up to 16384)
// and is variant 5 elsewhere; so does variant 8 (w4_gemv_async.cuh: 7 with weights and scales
// through cp.async). Variant 9 (w4_gemv_mma.cuh: 8's loads, 5's mma math, any M <= 16) runs where
// gemv9_plan has a plan (N a multiple of 64, K of 256) and is variant 5 elsewhere. Variants 10, 13,
// 14 (w4_gemv_async.cuh: 8 with a ring of 8 rows per warp; 13 with the early launch of dependents,
// 14 with one-row slots) and 12 (8 with the early launch of dependents) run where gemv8_applies and
// are variant 5 elsewhere. Variant 15 (w4_gemv_tokens.cuh: 8's loads and 7's half2 math for M
// = 1..4 tokens in one launch) runs where gemv15_applies and is variant 5 elsewhere. Variants 16,
// 17, 18 (session 10's test of session 9's suspect, NOTES.md) run at M = 1 where gemv8_applies:
// variant 10 where K >= 16384, elsewhere variant 8 with 4 (16: a8a60df's default again), 2 (17) or
// 1 (18) of its 4 row groups requested before the wait; variant 5 elsewhere. Variant 19
// (w4_gemv_mma8.cuh: 8's grid and loads, 5's mma math, M = 1..8) runs where gemv19_applies and is
// variant 5 elsewhere. (Variant 11, a ring
// of 12 rows, measured slower than 10 everywhere in session 9 and was removed.)
inline int gemv_variant() {
  const char* v = std::getenv("KILN_QUANT_GEMV_VARIANT");
  if (!v || v[0] < '1' || v[0] > '9') return kDefaultGemvVariant;
  const int n = std::atoi(v);
  return n >= 1 && n <= 19 && n != 11 ? n : kDefaultGemvVariant;
}

// Not the default (session 9, bench/quant/NOTES.md): variant 10 at M = 1 measured 7.8 against
// 9.4 µs for 8 on 2048x16384 alone (H200, PDL chain of the same GEMV), and 14 7.2 against 7.7 on
// 16384x2048; but the Gemma MLP x18 chain at M = 1 measured slower with 10 on its 2048x16384 down
// projection (406 against 396 µs, gate/up on 8) and with 14 or 10 on every layer (408 / 413).
// Session 10 measured the chain again with 10 on the down projection and 8 elsewhere (variant 16):
// 404 against 402 µs for 8 on every layer; 8 stays the default at M = 1.

// Variant 19 at M = 2..8 where K = 16384 (the largest K it takes): session 10's call 3 (H200, PDL
// chain of the same GEMV, bench/quant/NOTES.md) measured it faster than the default of the time
// on 2048x16384 (nvfp4 bf16 M = 2 / 3 / 4 / 8: 9.7 / 9.9 / 10.5 / 11.9 against variant 5's 11.8 /
// 12.1 / 12.2 / 12.9 µs) and slower at K <= 4096 (16384x2048: 10.8-11.2 against variant 9's
// 9.4-9.6; 4096x1024 and 1024x4096: 3.4-3.9 against variant 5's 2.6-3.3), where its 107-123
// registers leave no room on an SM for the next kernel's CTAs under programmatic dependent launch.
inline bool gemv19_default_takes(int m, int n, int k) {
  return m >= 2 && k >= 16384 && gemv19_applies(m, n, k);
}

// Programmatic dependent launch: on unless KILN_QUANT_PDL=0 (griddepcontrol.wait then returns at
// once), and only where the device code holds the waits (kernels/gemm/gemm_ptx.cuh: a library
// built for an older architecture and run on sm_90+ through the driver's JIT has none, and its
// kernels must not start early).
inline bool pdl_enabled() {
  const char* pdl = std::getenv("KILN_QUANT_PDL");
  return !(pdl && pdl[0] == '0') && kiln::gemm::detail::device_code_has_pdl();
}

// GEMM variant for M >= 17: 4 (w4_gemm_sm90_rs.cuh, wgmma on weights decoded in registers) where
// plan_wgmma takes the call, else 1 (w4_gemm.cuh); KILN_QUANT_GEMM_VARIANT=1 or 2 selects an
// mma.sync variant (2 is checked but not the default, NOTES.md session 3), 3 the wgmma on weights
// decoded into shared memory (w4_gemm_sm90.cuh, the default until session 11; libkiln_quant only,
// generated code compiles 4), 4 the default, 5 the weight rows as wgmma's N (w4_gemm_sm90_ss.cuh;
// libkiln_quant only).
inline int gemm_variant() {
  const char* v = std::getenv("KILN_QUANT_GEMM_VARIANT");
  return v && (v[0] == '1' || v[0] == '2' || v[0] == '3' || v[0] == '5') ? v[0] - '0' : 4;
}

// Whether this translation unit has GEMM variants 3 and 4's device code (an sm_90a pass) and may launch
// it: KILN_GEMM_SM90A, as kernels/gemm/ (kiln's generated code and libkiln_quant's sm_90a build).
#if defined(KILN_GEMM_SM90A)
constexpr bool kW4WgmmaBuilt = true;
#else
constexpr bool kW4WgmmaBuilt = false;
#endif

// KILN_QUANT_WGMMA_BN=64|128 forces variants 3 and 4's token tile (benchmarks); else plan_wgmma's.
inline int wgmma_bn_override() {
  const char* v = std::getenv("KILN_QUANT_WGMMA_BN");
  return v ? std::atoi(v) : 0;
}

// Variant 3 or 4's plan for this call on this device (use == false: the mma.sync GEMM, and why);
// variant 4 splits K in its 256-k stages.
inline WgmmaPlan wgmma_plan_here(int m, int n, int k, int variant) {
  static const bool sm90 = kW4WgmmaBuilt && kiln::gemm::detail::device_is_sm90();
  return plan_wgmma(m, n, k, kW4WgmmaBuilt, sm90, wgmma_bn_override(), variant == 4 ? 256 : 128);
}

// Split-K bytes variants 3 and 4 need at most for a shape (any token tile): one zeroed [m, n] fp32
// (variant 4 only where its clusters do not fit at once).
inline size_t wgmma_partial_bytes(int m, int n, int k) {
  for (int bn : {64, 128})
    for (int stage_k : {128, 256})
      if (plan_wgmma(m, n, k, true, true, bn, stage_k).split > 1) return size_t(m) * n * sizeof(float);
  return 0;
}

// Which M >= 17 kernel this thread's last GEMM launch ran: "wgmma", or why the mma.sync one ran
// (benchmarks print it, so that a fallback is never mistaken for the new kernel).
inline thread_local const char* last_gemm_path = "";

// Variant 4's split of K: the most warps per 16-row tile (a divisor of the 128-k steps) that
// keeps the grid at <= ~8 warps per SM, so that the whole grid is resident at once (no second
// wave, no tail) with room beside it for the next kernel's first CTAs.
inline int gemv4_warps(int n, int k, int nt) {
  const int ctas = n / 16, steps = k / 128;
  const int max_warps = nt == 1 ? 16 : 8;  // the kernel's kMaxWarps
  return largest_divisor_at_most(steps, std::min(max_warps, std::max(1, 132 * 8 / ctas)));
}

// Whether variant 6 stages x for this launch (else it runs as variant 5): the stage of the first
// token tile fits a CTA without the opt-in attribute, and all CTAs of an SM together.
inline bool gemv6_stages(int m, int n, int k, int nt) {
  const size_t bytes = gemv6_stage_bytes(std::min(8 * nt, m), k);
  const size_t ctas_per_sm = size_t((n / 16 + kTargetWarps / 16 - 1) / (kTargetWarps / 16));
  return bytes <= kGemv6StageMax && bytes * ctas_per_sm <= kGemv6StagePerSm;
}

template <Format F, typename T, int NT, int V, class Ep>
cudaError_t launch_gemv_variant(const LinearParams& p, const Ep& ep, int warps, cudaStream_t stream) {
  constexpr int kMax = NT == 1 ? 16 : 8;
  if constexpr (V == 6) {
    if (!gemv6_stages(p.m, p.n, p.k, NT)) return launch_gemv_variant<F, T, NT, 5>(p, ep, warps, stream);
  }
  auto smem = [](int w) { return V == 3 ? gemv_weight_ring_bytes(w) : V == 2 ? gemv_ring_bytes<NT>(w) : size_t(0); };
  if constexpr (V == 6) {
    // Stated explicitly rather than relying on the default limit (session 3's M = 5 launch failure).
    static const cudaError_t attr6 = cudaFuncSetAttribute(w4_gemv_kernel<F, T, NT, kMax, V, Ep>,
                                                          cudaFuncAttributeMaxDynamicSharedMemorySize, int(kGemv6StageMax));
    if (attr6 != cudaSuccess) return attr6;
  }
  if constexpr (V == 2 || V == 3) {
    static const cudaError_t attr = cudaFuncSetAttribute(w4_gemv_kernel<F, T, NT, kMax, V, Ep>,
                                                         cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem(kMax)));
    if (attr != cudaSuccess) return attr;
  }
  if constexpr (V >= 4) {
    if (V == 4) warps = gemv4_warps(p.n, p.k, NT);  // 5 keeps the plan's (variant 1's) split
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = pdl_enabled() ? 1 : 0;
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = dim3(p.n / 16);
    cfg.blockDim = dim3(warps * 32);
    cfg.dynamicSmemBytes = 0;
    cfg.stream = stream;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    for (int tok = 0; tok < p.m; tok += 8 * NT) {
      if (V == 6) cfg.dynamicSmemBytes = gemv6_stage_bytes(std::min(8 * NT, p.m - tok), p.k);
      if (cudaError_t e = cudaLaunchKernelEx(&cfg, w4_gemv_kernel<F, T, NT, kMax, V, Ep>, p, tok, warps, ep)) return e;
    }
    return cudaGetLastError();
  } else {
    for (int tok = 0; tok < p.m; tok += 8 * NT) {
      w4_gemv_kernel<F, T, NT, kMax, V, Ep><<<p.n / 16, warps * 32, smem(warps), stream>>>(p, tok, warps, ep);
    }
    return cudaGetLastError();
  }
}

// last_gemm_path after a variant-9 launch: its plan, or that variant 5 ran.
inline thread_local char gemv9_path_text[128];
inline void note_gemv9_path() {
  const Gemv9Plan plan = gemv9_last_plan;
  if (plan.warps == 0) {
    std::snprintf(gemv9_path_text, sizeof gemv9_path_text, "GEMV variant 9 has no plan here (last cluster query: %d resident, %d needed): variant 5",
                  gemv9_last_resident[0], gemv9_last_resident[1]);
    last_gemm_path = gemv9_path_text;
  } else {
    std::snprintf(gemv9_path_text, sizeof gemv9_path_text, "GEMV variant 9: %d warps x %d CTAs per cluster", plan.warps, plan.splits);
    last_gemm_path = gemv9_path_text;
  }
}

// The default GEMV without the variant switch (what generated code instantiates: four kernels
// per format and dtype instead of sixteen): 8 at M = 1, 19 at M = 2..8 where gemv19_default_takes,
// 9 at M = 2..16 where gemv9_default_takes its plan, 5 elsewhere.
template <Format F, typename T, int NT, class Ep>
cudaError_t launch_gemv_default(const LinearParams& p, const Ep& ep, int warps, cudaStream_t stream) {
  if (NT == 1 && gemv8_applies(p.m, p.n, p.k)) return launch_gemv8<F, T>(p, ep, pdl_enabled(), stream);
  if (NT == 1 && gemv19_default_takes(p.m, p.n, p.k))
    return launch_gemv19<F, T>(p, ep, pdl_enabled(), stream);
  if (p.m >= 2) {
    const cudaError_t e = launch_gemv9<F, T, NT>(p, ep, pdl_enabled(), stream, /*default_only=*/true);
    note_gemv9_path();
    if (e != cudaErrorNotSupported) return e;
  }
  return launch_gemv_variant<F, T, NT, 5>(p, ep, warps, stream);
}

template <Format F, typename T, int NT, class Ep>
cudaError_t launch_gemv(const LinearParams& p, const Ep& ep, int warps, cudaStream_t stream) {
  switch (gemv_variant()) {
    case 2: return launch_gemv_variant<F, T, NT, 2>(p, ep, warps, stream);
    case 3: return launch_gemv_variant<F, T, NT, 3>(p, ep, warps, stream);
    case 4: return launch_gemv_variant<F, T, NT, 4>(p, ep, warps, stream);
    case 5: return launch_gemv_variant<F, T, NT, 5>(p, ep, warps, stream);
    case 6: return launch_gemv_variant<F, T, NT, 6>(p, ep, warps, stream);
    case 7:
      if (NT == 1 && gemv7_applies(p.m, p.n, p.k)) return launch_gemv7<F, T>(p, ep, pdl_enabled(), stream);
      return launch_gemv_variant<F, T, NT, 5>(p, ep, warps, stream);
    case 8:
      if (NT == 1 && gemv8_applies(p.m, p.n, p.k)) return launch_gemv8<F, T>(p, ep, pdl_enabled(), stream);
      return launch_gemv_variant<F, T, NT, 5>(p, ep, warps, stream);
    case 10:
    case 13:
    case 14:
      if (NT == 1 && gemv8_applies(p.m, p.n, p.k)) return launch_gemv10<F, T>(p, ep, gemv_variant(), pdl_enabled(), stream);
      return launch_gemv_variant<F, T, NT, 5>(p, ep, warps, stream);
    case 16:
    case 17:
    case 18:
      if (NT == 1 && gemv8_applies(p.m, p.n, p.k)) {
        if (p.k >= 16384) return launch_gemv10<F, T>(p, ep, 10, pdl_enabled(), stream);
        const int pre = gemv_variant() == 16 ? 4 : gemv_variant() == 17 ? 2 : 1;
        return launch_gemv8<F, T>(p, ep, pdl_enabled(), stream, /*early=*/false, pre);
      }
      return launch_gemv_variant<F, T, NT, 5>(p, ep, warps, stream);
    case 19:
      if (NT == 1 && gemv19_applies(p.m, p.n, p.k))
        return launch_gemv19<F, T>(p, ep, pdl_enabled(), stream);
      return launch_gemv_variant<F, T, NT, 5>(p, ep, warps, stream);
    case 15:
      if (NT == 1 && gemv15_applies(p.m, p.n, p.k))
        return launch_gemv15<F, T>(p, ep, pdl_enabled(), stream);
      return launch_gemv_variant<F, T, NT, 5>(p, ep, warps, stream);
    case 12:
      if (NT == 1 && gemv8_applies(p.m, p.n, p.k)) return launch_gemv8<F, T>(p, ep, pdl_enabled(), stream, /*early=*/true);
      return launch_gemv_variant<F, T, NT, 5>(p, ep, warps, stream);
    case 9: {
      const cudaError_t e = launch_gemv9<F, T, NT>(p, ep, pdl_enabled(), stream);
      note_gemv9_path();
      if (e != cudaErrorNotSupported) return e;
      return launch_gemv_variant<F, T, NT, 5>(p, ep, warps, stream);
    }
    case 1: return launch_gemv_variant<F, T, NT, 1>(p, ep, warps, stream);
    default: return launch_gemv_default<F, T, NT>(p, ep, warps, stream);
  }
}


template <Format F, typename T>
cudaError_t launch_linear_unchecked(LinearParams p, void* partial, cudaStream_t stream);

// Runs y = x · dequant(W)ᵀ (+ bias) or the gated variant. `partial` must hold
// plan.partial_bytes(m, n) bytes (zeroed here as needed) when the plan splits K. A failed launch
// is returned and also cleared from the thread's last-error slot, so that it is not reported
// again by the caller's next, unrelated launch check.
template <Format F, typename T>
cudaError_t launch_linear(LinearParams p, void* partial, cudaStream_t stream) {
  const cudaError_t e = launch_linear_unchecked<F, T>(p, partial, stream);
  if (e != cudaSuccess) (void)cudaGetLastError();
  return e;
}

// GEMM variant 1 over `split` slices of K (p.partial zeroed [m, n] fp32 when split > 1), then,
// split, the finishing kernel that runs the epilogue.
template <Format F, typename T, class Ep>
cudaError_t launch_gemm1(const LinearParams& p, const Ep& ep, int split, cudaStream_t stream) {
  static const cudaError_t attr = cudaFuncSetAttribute(w4_gemm_kernel<F, T, 1, Ep>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                       int(GemmStageLayout::kTotal));
  if (attr != cudaSuccess) return attr;
  const dim3 grid(p.n / kGemmRows, (p.m + kGemmTokens - 1) / kGemmTokens, split);
  w4_gemm_kernel<F, T, 1, Ep><<<grid, 128, GemmStageLayout::kTotal, stream>>>(p, ep);
  if (split > 1) {
    const size_t outputs = size_t(p.m) * (p.act != Activation::None ? p.n / 2 : p.n);
    const int blocks = int(std::min<size_t>((outputs + 255) / 256, 4096));
    w4_finish_kernel<F, T, Ep><<<blocks, 256, 0, stream>>>(p, ep);
  }
  return cudaGetLastError();
}

// x [m, k] as variants 3 and 4's TMA tensor: boxes of 64 k x BN tokens, 128-byte swizzle. False where
// the driver refuses it (x not 16-byte aligned).
template <typename T, int BN>
bool wgmma_x_tensor_map(const LinearParams& p, CUtensorMap& map) {
  kiln::gemm::detail::TensorMapKey key{};
  key.data = p.x;
  key.dims[0] = uint64_t(p.k), key.dims[1] = uint64_t(p.m), key.dims[2] = 1;
  key.strides[0] = uint64_t(p.k) * 2, key.strides[1] = uint64_t(p.k) * 2 * uint64_t(p.m);
  key.box[0] = 64, key.box[1] = BN;
  key.element = IsBf16<T>::value ? kiln::gemm::detail::kMapBf16 : kiln::gemm::detail::kMapF16;
  return reinterpret_cast<uintptr_t>(p.x) % 16 == 0 && kiln::gemm::detail::encode_tensor_map(key, map);
}

// The packed weights [n, k/2] as variant 4's TMA tensor: boxes of 128 bytes (256 k) x 128 rows,
// 128-byte swizzle. False where the driver refuses it.
inline bool rs_weight_tensor_map(const LinearParams& p, CUtensorMap& map) {
  kiln::gemm::detail::TensorMapKey key{};
  key.data = p.weight;
  key.dims[0] = uint64_t(p.k) / 2, key.dims[1] = uint64_t(p.n), key.dims[2] = 1;
  key.strides[0] = uint64_t(p.k) / 2, key.strides[1] = uint64_t(p.k) / 2 * uint64_t(p.n);
  key.box[0] = 128, key.box[1] = kWgmmaRows;
  key.element = kiln::gemm::detail::kMapU8;
  return reinterpret_cast<uintptr_t>(p.weight) % 16 == 0 && kiln::gemm::detail::encode_tensor_map(key, map);
}

// How many clusters of `split` CTAs along z of `Kernel` (`threads` threads, `smem` bytes of
// dynamic shared memory, its limit already set) this device holds at once (the occupancy API,
// which counts what fits in each GPC); cached per kernel and split; -1 when the query fails.
template <auto Kernel>
int max_clusters_along_z(int split, int threads, size_t smem) {
  static std::atomic<int> cache[kWgmmaMaxSplit + 1];  // count + 1; 0: not asked yet
  int known = cache[split].load(std::memory_order_relaxed) - 1;
  if (known < 0) {
    cudaLaunchAttribute cluster[1];
    cluster[0].id = cudaLaunchAttributeClusterDimension;
    cluster[0].val.clusterDim = {1, 1, unsigned(split)};
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = dim3(1, 1, unsigned(split));
    cfg.blockDim = dim3(unsigned(threads));
    cfg.dynamicSmemBytes = smem;
    cfg.attrs = cluster;
    cfg.numAttrs = 1;
    if (cudaOccupancyMaxActiveClusters(&known, Kernel, &cfg) != cudaSuccess) {
      (void)cudaGetLastError();
      return -1;  // (not cached)
    }
    cache[split].store(known + 1, std::memory_order_relaxed);
  }
  return known;
}

// Variant 4's cluster instantiation: max_clusters_along_z, after setting its shared-memory limit.
template <Format F, typename T, int BN, class Ep>
int rs_max_clusters(int split) {
  static const cudaError_t attr = cudaFuncSetAttribute(w4_wgmma_rs_kernel<F, T, BN, Ep, true>,
                                                       cudaFuncAttributeMaxDynamicSharedMemorySize, int(RsLayout<BN>::kSmemBytes));
  if (attr != cudaSuccess) return -1;
  return max_clusters_along_z<w4_wgmma_rs_kernel<F, T, BN, Ep, true>>(split, kRsThreads, RsLayout<BN>::kSmemBytes);
}

// KILN_QUANT_RS_SPLIT=partial or =cluster forces variant 4's way of splitting K (benchmarks); else
// a cluster where the grid's clusters all fit at once.
inline int rs_split_override() {
  const char* v = std::getenv("KILN_QUANT_RS_SPLIT");
  return !v ? 0 : std::string(v) == "partial" ? 1 : std::string(v) == "cluster" ? 2 : 0;
}

inline thread_local char wgmma_path_text[128];

// GEMM variant V (3: w4_gemm_sm90.cuh, 4: w4_gemm_sm90_rs.cuh) with `split` CTAs along K. With
// p.partial ([m, n] fp32) and split > 1, `partial` is zeroed first and w4_finish_kernel runs the
// epilogue after, and the launch is a plain one (after a memset there is no kernel to overlap).
// Variant 4 without p.partial: the split's CTAs are a cluster that adds its sums in the kernel,
// under programmatic dependent launch like an unsplit one. `wmap`: variant 4's weight tensor map.
template <int V, Format F, typename T, int BN, class Ep>
cudaError_t launch_wgmma_bn(LinearParams p, const CUtensorMap& map, const CUtensorMap& wmap, const Ep& ep, int split,
                            cudaStream_t stream) {
  const bool finish = p.partial != nullptr;  // split K through `partial` and w4_finish_kernel
  if (finish && split > 1) {
    if (cudaError_t e = cudaMemsetAsync(p.partial, 0, size_t(p.m) * p.n * sizeof(float), stream)) return e;
  } else {
    p.partial = nullptr;
  }
  constexpr size_t kSmem = V == 4 ? RsLayout<BN>::kSmemBytes : WgmmaW4Layout<BN>::kSmemBytes;
  const bool cluster = V == 4 && !finish && split > 1;
  static const cudaError_t attr = [] {
    if constexpr (V == 4) {
      return cudaFuncSetAttribute(w4_wgmma_rs_kernel<F, T, BN, Ep>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kSmem));
    } else {
      return cudaFuncSetAttribute(w4_wgmma_kernel<F, T, BN, Ep>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kSmem));
    }
  }();
  if (attr != cudaSuccess) return attr;
  cudaLaunchAttribute attrs[2];
  attrs[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attrs[0].val.programmaticStreamSerializationAllowed = (split == 1 || !finish) && pdl_enabled() ? 1 : 0;
  attrs[1].id = cudaLaunchAttributeClusterDimension;
  attrs[1].val.clusterDim = {1, 1, unsigned(split)};
  cudaLaunchConfig_t cfg{};
  // variant 4: token tiles along x (the tiles of a weight row tile run together), variant 3: row tiles
  cfg.gridDim = V == 4 ? dim3((p.m + BN - 1) / BN, p.n / kWgmmaRows, split) : dim3(p.n / kWgmmaRows, (p.m + BN - 1) / BN, split);
  cfg.blockDim = dim3(V == 4 ? kRsThreads : kWgmmaThreads);
  cfg.dynamicSmemBytes = kSmem;
  cfg.stream = stream;
  cfg.attrs = attrs;
  cfg.numAttrs = cluster ? 2 : 1;
  if constexpr (V == 4) {
    // (the cluster instantiation's shared-memory limit was set by rs_max_clusters)
    if (cudaError_t e = cluster ? cudaLaunchKernelEx(&cfg, w4_wgmma_rs_kernel<F, T, BN, Ep, true>, map, wmap, p, ep)
                                : cudaLaunchKernelEx(&cfg, w4_wgmma_rs_kernel<F, T, BN, Ep>, map, wmap, p, ep)) {
      return e;
    }
  } else {
    if (cudaError_t e = cudaLaunchKernelEx(&cfg, w4_wgmma_kernel<F, T, BN, Ep>, map, p, ep)) return e;
  }
  if (finish && split > 1) {
    const size_t outputs = size_t(p.m) * (p.act != Activation::None ? p.n / 2 : p.n);
    const int blocks = int(std::min<size_t>((outputs + 255) / 256, 4096));
    w4_finish_kernel<F, T, Ep><<<blocks, 256, 0, stream>>>(p, ep);
  }
  return cudaGetLastError();
}

template <int V, Format F, typename T, int BN, class Ep>
bool try_launch_wgmma_bn(const LinearParams& p, const Ep& ep, int split, cudaStream_t stream, cudaError_t& e) {
  CUtensorMap map, wmap{};
  if (!wgmma_x_tensor_map<T, BN>(p, map)) {
    last_gemm_path = "x is not a TMA tensor (16-byte aligned address and rows)";
    return false;
  }
  if (V == 4 && !rs_weight_tensor_map(p, wmap)) {
    last_gemm_path = "the packed weights are not a TMA tensor (16-byte aligned address)";
    return false;
  }
  e = launch_wgmma_bn<V, F, T, BN>(p, map, wmap, ep, split, stream);
  last_gemm_path = V == 4 ? "wgmma rs" : "wgmma";
  return true;
}

// Variant 5 (w4_gemm_sm90_ss.cuh): tiles of 256 weight rows x 64 tokens; K split in clusters (at
// most 8 CTAs, each at least 4 stages of 64 k) while the tiles fill at most half the SMs and all
// of the grid's clusters fit at once. Returns false (nothing launched, last_gemm_path says why)
// where the shape or x does not fit it.
template <Format F, typename T, class Ep>
bool try_launch_ss(LinearParams p, const Ep& ep, cudaStream_t stream, cudaError_t& e) {
  if (p.n % kSsRows != 0) {
    last_gemm_path = "variant 5: N is not a multiple of 256";
    return false;
  }
  CUtensorMap map;
  if (!wgmma_x_tensor_map<T, kSsTokens>(p, map)) {
    last_gemm_path = "x is not a TMA tensor (16-byte aligned address and rows)";
    return false;
  }
  static const cudaError_t attr = [] {
    const int bytes = int(SsLayout::kSmemBytes);
    cudaError_t a = cudaFuncSetAttribute(w4_wgmma_ss_kernel<F, T, Ep>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
    cudaError_t b = cudaFuncSetAttribute(w4_wgmma_ss_kernel<F, T, Ep, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
    return a != cudaSuccess ? a : b;
  }();
  if (attr != cudaSuccess) {
    e = attr;
    return true;
  }
  const int tiles = (p.n / kSsRows) * ((p.m + kSsTokens - 1) / kSsTokens), stages = p.k / 64;
  int split = 1, fit = -1;
  if (2 * tiles <= kWgmmaSms) {
    for (int d = std::min({stages / 4, kWgmmaSms / tiles, kWgmmaMaxSplit}); d >= 2; --d) {
      if (stages % d != 0) continue;
      fit = max_clusters_along_z<w4_wgmma_ss_kernel<F, T, Ep, true>>(d, kSsThreads, SsLayout::kSmemBytes);
      if (fit >= tiles) {
        split = d;
        break;
      }
    }
  }
  cudaLaunchAttribute attrs[2];
  attrs[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attrs[0].val.programmaticStreamSerializationAllowed = pdl_enabled() ? 1 : 0;
  attrs[1].id = cudaLaunchAttributeClusterDimension;
  attrs[1].val.clusterDim = {1, 1, unsigned(split)};
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(p.n / kSsRows, (p.m + kSsTokens - 1) / kSsTokens, split);
  cfg.blockDim = dim3(kSsThreads);
  cfg.dynamicSmemBytes = SsLayout::kSmemBytes;
  cfg.stream = stream;
  cfg.attrs = attrs;
  cfg.numAttrs = split > 1 ? 2 : 1;
  p.partial = nullptr;
  e = split > 1 ? cudaLaunchKernelEx(&cfg, w4_wgmma_ss_kernel<F, T, Ep, true>, map, p, ep)
                : cudaLaunchKernelEx(&cfg, w4_wgmma_ss_kernel<F, T, Ep>, map, p, ep);
  if (e == cudaSuccess) e = cudaGetLastError();
  std::snprintf(wgmma_path_text, sizeof wgmma_path_text, "wgmma ss, split %d (clusters: %d fit, %d needed)", split, fit, tiles);
  last_gemm_path = wgmma_path_text;
  return true;
}

// Runs GEMM variant 4 (or 3 or 5) when the call may (gemm_variant() == 3, 4 or 5, plan_wgmma on this
// device, x a TMA tensor; split-K through `partial` only where it holds m * n floats) and returns true
// with the launch's status in `e`; returns false (nothing launched, last_gemm_path says why)
// otherwise.
// kWithVariant3 = false (generated code): variants 3 and 5 are not compiled, and a request for either runs 4.
template <Format F, typename T, class Ep, bool kWithVariant3 = true>
bool try_launch_wgmma(LinearParams p, const Ep& ep, void* partial, size_t partial_bytes, cudaStream_t stream, cudaError_t& e) {
  int variant = gemm_variant();
  if (!kWithVariant3 && (variant == 3 || variant == 5)) variant = 4;
  if (variant != 3 && variant != 4 && variant != 5) {
    last_gemm_path = "KILN_QUANT_GEMM_VARIANT selects an mma.sync GEMM";
    return false;
  }
  if constexpr (!kW4WgmmaBuilt) {
    last_gemm_path = plan_wgmma(p.m, p.n, p.k, false, false).reason;
    return false;
  } else {
    const WgmmaPlan plan = wgmma_plan_here(p.m, p.n, p.k, variant);
    if (!plan.use) {
      last_gemm_path = plan.reason;
      return false;
    }
    int split = plan.split;
    p.tile_counter = nullptr;
    if constexpr (kWithVariant3) {
      if (variant == 5) return try_launch_ss<F, T>(p, ep, stream, e);
      if (variant == 3) {
        if (split > 1 && (partial == nullptr || partial_bytes < size_t(p.m) * p.n * sizeof(float))) split = 1;
        p.partial = static_cast<float*>(partial);
        return plan.bn == 64 ? try_launch_wgmma_bn<3, F, T, 64>(p, ep, split, stream, e)
                             : try_launch_wgmma_bn<3, F, T, 128>(p, ep, split, stream, e);
      }
    }
    // Variant 4 splits K in clusters where all of them fit on the GPU at once (a cluster that waits
    // for a second wave doubles the time: run s12a), else through `partial`, else not at all.
    p.partial = nullptr;
    const char* how = "";
    if (split > 1) {
      const int tiles = (p.n / kWgmmaRows) * ((p.m + plan.bn - 1) / plan.bn), force = rs_split_override();
      const int fit = plan.bn == 64 ? rs_max_clusters<F, T, 64, Ep>(split) : rs_max_clusters<F, T, 128, Ep>(split);
      const bool workspace = partial != nullptr && partial_bytes >= size_t(p.m) * p.n * sizeof(float);
      if (force != 1 && (force == 2 || fit >= tiles)) {
        how = "in clusters";
      } else if (workspace) {
        p.partial = static_cast<float*>(partial);
        how = "through partial";
      } else {
        split = 1;
        how = "not split (no workspace)";
      }
      std::snprintf(wgmma_path_text, sizeof wgmma_path_text, "wgmma rs, split %d %s (clusters: %d fit, %d needed)", plan.split, how, fit, tiles);
    }
    const bool launched = plan.bn == 64 ? try_launch_wgmma_bn<4, F, T, 64>(p, ep, split, stream, e)
                                        : try_launch_wgmma_bn<4, F, T, 128>(p, ep, split, stream, e);
    if (launched && plan.split > 1) last_gemm_path = wgmma_path_text;
    return launched;
  }
}

// Split-K workspace a linear layer of this shape needs at most (either GEMM; a pure function of
// the shape, as the kernel contract's workspace formula must be).
inline size_t linear_partial_bytes(int m, int n, int k) {
  return std::max(plan_linear(m, n, k).partial_bytes(m, n), wgmma_partial_bytes(m, n, k));
}

template <Format F, typename T>
cudaError_t launch_linear_unchecked(LinearParams p, void* partial, cudaStream_t stream) {
  const LinearPlan plan = plan_linear(p.m, p.n, p.k);
  if (p.m == 0) return cudaSuccess;
  const LinearStore<T> ep = linear_store<T>(p);
  if (plan.kind == LinearPlan::Gemv) {
    last_gemm_path = "GEMV (M <= 16, or N not a multiple of 128)";
    return plan.gemv_tiles == 1 ? launch_gemv<F, T, 1>(p, ep, plan.gemv_warps, stream)
                                : launch_gemv<F, T, 2>(p, ep, plan.gemv_warps, stream);
  }
  cudaError_t wgmma_status = cudaSuccess;
  if (try_launch_wgmma<F, T>(p, ep, partial, linear_partial_bytes(p.m, p.n, p.k), stream, wgmma_status)) return wgmma_status;
  p.partial = nullptr;
  p.tile_counter = nullptr;
  const int variant = gemm_variant() == 2 ? 2 : 1;
  const size_t counters = plan.counter_bytes(p.m, p.n);
  if (plan.gemm_split > 1) {
    p.tile_counter = static_cast<unsigned*>(partial);
    p.partial = reinterpret_cast<float*>(static_cast<uint8_t*>(partial) + counters);
    if (cudaError_t e = variant == 1 ? cudaMemsetAsync(p.partial, 0, size_t(p.m) * p.n * sizeof(float), stream)
                                     : cudaMemsetAsync(partial, 0, counters, stream)) {
      return e;
    }
  }
  if (variant == 2) {
    static const cudaError_t attr2 = cudaFuncSetAttribute(w4_gemm_kernel<F, T, 2, LinearStore<T>>,
                                                          cudaFuncAttributeMaxDynamicSharedMemorySize, int(GemmStageLayout::kTotal));
    if (attr2 != cudaSuccess) return attr2;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = pdl_enabled() ? 1 : 0;
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = dim3(p.n / kGemmRows, (p.m + kGemmTokens - 1) / kGemmTokens, plan.gemm_split);
    cfg.blockDim = dim3(128);
    cfg.dynamicSmemBytes = GemmStageLayout::kTotal;
    cfg.stream = stream;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    if (cudaError_t e = cudaLaunchKernelEx(&cfg, w4_gemm_kernel<F, T, 2, LinearStore<T>>, p, ep)) return e;
    return cudaGetLastError();
  }
  return launch_gemm1<F, T>(p, ep, plan.gemm_split, stream);
}

// Split-K partials launch_linear_epilogue uses at most, in floats, for any m and n: the GEMM
// splits K only while its grid has fewer than kTargetCtas tiles of kGemmRows x kGemmTokens, so
// then m * n < kTargetCtas * kGemmRows * kGemmTokens (variant 1 adds all slices into one [m, n]).
constexpr int64_t kEpilogueSplitFloats = int64_t(kTargetCtas) * kGemmRows * kGemmTokens;

// y = x · dequant(W)ᵀ (not gated) with each output element handed to `ep` (LinearStore's call
// operator) instead of stored: the path generated code takes (kiln.QuantLinear, its consumers
// folded into `ep`). Only the default variants (GEMV 8 at M = 1 where it applies, 19 at M = 2..8
// where gemv19_default_takes, 9 where gemv9_default_takes, 5 up to M = 16, GEMM 4 above in sm_90a
// builds on sm_90 devices, else GEMM 1), so that a generated library instantiates few kernels.
// Split-K partials go to `workspace` (min(m * n, kEpilogueSplitFloats) floats suffice; with fewer
// bytes K is not split). A failed launch is returned and cleared from the thread's last-error slot.
template <Format F, typename T, class Ep>
cudaError_t launch_linear_epilogue(LinearParams p, const Ep& ep, void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  if (p.m == 0) return cudaSuccess;
  p.act = Activation::None;
  p.partial = nullptr;
  p.tile_counter = nullptr;
  const LinearPlan plan = plan_linear(p.m, p.n, p.k);
  cudaError_t e = cudaSuccess;
  if (plan.kind == LinearPlan::Gemv) {
    e = plan.gemv_tiles == 1 ? launch_gemv_default<F, T, 1>(p, ep, plan.gemv_warps, stream)
                             : launch_gemv_default<F, T, 2>(p, ep, plan.gemv_warps, stream);
  } else if (!try_launch_wgmma<F, T, Ep, false>(p, ep, workspace, workspace_bytes, stream, e)) {
    int split = plan.gemm_split;
    const size_t partial_bytes = size_t(p.m) * p.n * sizeof(float);
    if (split > 1 && (workspace == nullptr || workspace_bytes < partial_bytes)) split = 1;
    if (split > 1) {
      p.partial = static_cast<float*>(workspace);
      e = cudaMemsetAsync(p.partial, 0, partial_bytes, stream);
    }
    if (e == cudaSuccess) e = launch_gemm1<F, T>(p, ep, split, stream);
  }
  if (e != cudaSuccess) (void)cudaGetLastError();
  return e;
}

}  // namespace kiln::quant::gpu
