#pragma once
// The contraction templates that generated code instantiates (DESIGN.md: hand-written where a
// general schedule cannot reach peak). Generated code builds a Problem (gemm_problem.cuh), prints
// an epilogue functor, and calls one of the entry points below, choosing at run time from the
// bound dims (the default schedule prints the rule and its reason above the call):
//
//   gemv<T, GemvConfig<...>>(problem, epilogue, stream)              small M: streams B once
//   gemm<T, TileConfig<...>>(problem, epilogue, workspace, bytes, stream)  tensor cores
//   gemm_wgmma<T, WgmmaConfig<...>, TileConfig<...>>(problem, epilogue, workspace, bytes, stream)
//                                                 Hopper (sm_90a build, KILN_GEMM_SM90A): wgmma + TMA,
//                                                 the TileConfig's gemm where it cannot run
//   simt<T>(problem, epilogue, stream)                               any operand, fp32 FMA
//   conv<T, TileConfig<...>>(problem, shape, epilogue, [workspace, bytes,] stream)
//                                                 a convolution, implicit GEMM (on Hopper wgmma +
//                                                 TMA when given conv_wgmma_workspace_bytes)
//   attention<T, D>(attention_problem, epilogue, stream)              fused softmax(Q K^T) V
//                                                 (attention.cuh; its own problem and epilogue)
//
// The epilogue type says how many B operands it takes: `static constexpr int kNumB` (1 or 2,
// matching Problem::num_b).
//
// T is __half or __nv_bfloat16 (both operands), accumulation in fp32; float when the user allowed
// TF32 (`kiln compile --tf32`), which runs `simt` until a TF32 tensor-core kernel is written. Every entry point checks
// what its fast path needs (alignment, unit strides) and runs `simt` otherwise: an unsupported
// operand is slower, never wrong. All launch on `stream` only, allocate nothing, never
// synchronize, and return the launch's cudaError_t.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include <type_traits>

#include "attention.cuh"
#include "conv_implicit_gemm.cuh"
#include "conv_patch.cuh"
#include "conv_wgmma.cuh"
#include "gemm_problem.cuh"
#include "gemm_simt.cuh"
#include "gemm_tensorcore.cuh"
#include "gemm_wgmma.cuh"
#include "gemv.cuh"

namespace kiln::gemm {

// Workspace a gemm<> call may use (split-K partial sums), as a function of the problem: the
// signature of a generated function reserves this much; given less, the template splits less.
__host__ __device__ inline int64_t split_k_workspace_bytes(int64_t m, int64_t n) {
  return m <= 256 ? 8 * m * n * 4 + 4096 : 0;
}

// Tensor-core tile configuration (schedule data: ContractionTemplate in schedule/Schedule.h).
template <int BM_, int BN_, int BK_, int WARPS_M_, int WARPS_N_, int STAGES_>
struct TileConfig {
  static constexpr int BM = BM_, BN = BN_, BK = BK_, WARPS_M = WARPS_M_, WARPS_N = WARPS_N_, STAGES = STAGES_;
  static constexpr int kThreads = 32 * WARPS_M * WARPS_N;
};

// Small-M configuration: up to MAX_M rows of A per launch, WARPS warps per block, up to
// MAX_SPLITS blocks (a cluster, sm_90+) splitting K for one strip of outputs, UNROLL k-steps of
// B loads in flight per lane, PREFETCH: B loads ask L2 for the whole 256-byte block.
template <int MAX_M_, int WARPS_, int MAX_SPLITS_ = 8, int UNROLL_ = 4, int PREFETCH_ = 0>
struct GemvConfig {
  static constexpr int MAX_M = MAX_M_, WARPS = WARPS_, MAX_SPLITS = MAX_SPLITS_, UNROLL = UNROLL_, PREFETCH = PREFETCH_;
};

// Tensor cores (gemm_tensorcore.cuh): mma.sync with a cp.async pipeline; split-K into the
// workspace when the output tiles fill less than the GPU.
template <typename T, typename Config, typename Epilogue>
cudaError_t gemm(const Problem& p, const Epilogue& epilogue, void* workspace, int64_t workspace_bytes, cudaStream_t stream) {
  if constexpr (std::is_same<T, float>::value) {
    return simt<T>(p, epilogue, stream);
  } else {
    return gemm_tensorcore<T, Config>(p, epilogue, workspace, workspace_bytes, stream);
  }
}

// Small M (gemv.cuh): streams B once per MAX_M rows of A.
template <typename T, typename Config, typename Epilogue>
cudaError_t gemv(const Problem& p, const Epilogue& epilogue, cudaStream_t stream) {
  if constexpr (std::is_same<T, float>::value) {
    return simt<T>(p, epilogue, stream);
  } else {
    return gemv_tensorcore<T, Config>(p, epilogue, stream);
  }
}

namespace detail {
// Small-M calls may take the Hopper kernel where the weight is split over K (small_m_takes_wgmma,
// and small_m_takes_swap16's N <= 2048 case) unless KILN_GEMV_WGMMA=0 (benchmarks compare the two
// in one process).
inline bool small_m_wgmma_enabled() {
  static const bool on = env_switch_on("KILN_GEMV_WGMMA");
  return on;
}
// Small-M calls may take the 16-token SWAP_AB tile (small_m_takes_swap16) unless KILN_GEMV_SWAP16=0.
inline bool small_m_swap16_enabled() {
  static const bool on = env_switch_on("KILN_GEMV_SWAP16");
  return on;
}
}  // namespace detail

// Whether a small-M call runs the Hopper kernel's 16-token SWAP_AB tile (128 weight rows x 16
// tokens; 5 stages, 6 for dual products) before small_m_takes_wgmma and gemv.cuh:
//  - where its weight tiles alone fill at least 3/4 of the SMs, so K is not split. Measured on an
//    H200 (bench/gemm/NOTES.md, run s22a, graph replay, fp16): Gemma's dual gate/up 16384 x 2048 at
//    M = 1 42.4 us against gemv.cuh's 50.2, the Gemma block 59.4 against 62.7 (M = 1) and 60.5
//    against 66.3 (M = 16); single 16384 x 2048 at M = 16 19.1 against 21.7;
//  - single products from M = 9 with N <= 2048, where K is split across a cluster of CTAs. Run s23b
//    (harness, fp16, weights rotated, back to back): 16 x 2048 x 16384 22.5 us against the ping-pong
//    tile's 24.4 and gemv.cuh's 24.5. Not at N = 4096 (16 x 4096 x 4096: 14.9 against gemv.cuh's
//    13.6; below).
// Five stages ran as fast as twelve on 16384 x 2048 at M = 8 and 16 (20.1-20.3 us) and faster where
// K is split (22.5 against 23.8 above), so single products take five, compiled for two CTAs per SM
// (WgmmaConfig's MIN_BLOCKS): the occupancy API then counts 30 resident clusters of 8, so 2048 x
// 16384 splits 8 ways over 128 CTAs, not 6 over 96. Run s24a (harness, fp16, rotated, back to
// back): 16 x 2048 x 16384 22.9 / 22.8 us (B [K,N] / [N,K]) against 23.8 / 24.0 on one CTA per SM;
// 16384 x 2048 (no split) unchanged at 20.1-20.4; 16 x 4096 x 4096 14.9 either way (4 splits over
// 128 CTAs ran no faster than 3 over 96), so N = 4096 stays on gemv.cuh (13.7 / 12.8).
inline bool small_m_takes_swap16(const Problem& p) {
  if (p.m > 16 || !detail::small_m_swap16_enabled()) return false;
  const int64_t tiles = p.batch() * ((p.n + 127) / 128);
  if (tiles * 4 >= int64_t(detail::device_sm_count()) * 3) return true;
  return p.num_b == 1 && p.m >= 9 && p.n <= 2048 && detail::small_m_wgmma_enabled();
}

// Whether a small-M dual product (gate and up) that small_m_takes_swap16 leaves runs the Hopper
// kernel's 64 x 128 ping-pong tiles rather than gemv.cuh: from M = 9 (gemv.cuh runs up to 8 rows
// with one row tile per warp, its cheaper instantiation). Measured at M = 16 on an H200 (run s9c,
// graph replay): Gemma's dual gate/up 16384 x 2048 39.5 us against 50.0. Single products keep
// gemv.cuh here since run s23b (16 x 4096 x 4096: 13.6 us against the ping-pong tile's 16.1).
inline bool small_m_takes_wgmma(const Problem& p) {
  return p.m >= 9 && p.num_b == 2 && detail::small_m_wgmma_enabled();
}

// Small M with the call's workspace: on sm_90 builds the Hopper kernel's 16-token SWAP_AB tile where
// small_m_takes_swap16; else where small_m_takes_wgmma, the Hopper kernel with 64 x 128 ping-pong
// tiles (TMA streams B; the tile's rows past M are zero-filled, not read); both split K (a cluster
// per tile, or the workspace) when their tiles leave SMs idle; otherwise (and on other devices, or
// for operands TMA cannot read) gemv.cuh.
template <typename T, typename Config, typename Epilogue>
cudaError_t gemv(const Problem& p, const Epilogue& epilogue, void* workspace, int64_t workspace_bytes, cudaStream_t stream) {
  if constexpr (!std::is_same<T, float>::value && kWgmmaBuilt) {
    cudaError_t e;
    using Swap16 = std::conditional_t<Epilogue::kNumB == 2, WgmmaConfig<128, 16, 6, 0, 0, 1>, WgmmaConfig<128, 16, 5, 0, 0, 1, 2>>;
    if (small_m_takes_swap16(p) && detail::try_gemm_wgmma<T, Swap16>(p, epilogue, workspace, workspace_bytes, stream, e))
      return e;
    if constexpr (Epilogue::kNumB == 2) {
      if (small_m_takes_wgmma(p) &&
          detail::try_gemm_wgmma<T, WgmmaConfig<64, 128, 5, 1>>(p, epilogue, workspace, workspace_bytes, stream, e))
        return e;
    }
  }
  return gemv<T, Config>(p, epilogue, stream);
}

// A 1-D/2-D convolution over an NCHW image as an implicit GEMM on tensor cores (conv_wgmma.cuh
// where it runs, given a workspace of conv_wgmma_workspace_bytes(problem, shape) for the repacked
// weight and the NHWC image;
// else conv_patch.cuh where it applies, else conv_implicit_gemm.cuh): m = output channels,
// n = output pixels, k = C * KH * KW.
template <typename T, typename Config, typename Epilogue>
cudaError_t conv(const Problem& p, const ConvShape& shape, const Epilogue& epilogue, void* workspace, int64_t workspace_bytes,
                 cudaStream_t stream) {
  return conv_auto<T, Config>(p, shape, epilogue, workspace, workspace_bytes, stream);
}
template <typename T, typename Config, typename Epilogue>
cudaError_t conv(const Problem& p, const ConvShape& shape, const Epilogue& epilogue, cudaStream_t stream) {
  return conv_auto<T, Config>(p, shape, epilogue, stream);
}

}  // namespace kiln::gemm
