// Check-then-time harness for the contraction templates (kernels/gemm/), llm.c style.
//
// For every (shape, template configuration): fresh random operands (uniform in [-1, 1], padding
// elements set to NaN so that a read past an extent shows), the output poisoned with NaN, one run
// with the epilogue under test, every output element checked to be written and a sample of them
// (all of them for small shapes) checked against an fp64 CPU reference; only then timed. Peers
// measured in the same run: cuBLAS (cublasGemmEx, same dtypes, fp32 compute) and, for the rows
// that stream B, a read-only kernel over the same B bytes (the read ceiling). Timing: CUDA events
// around each launch, L2 flushed (a 256 MB memset) before each, median of the reps.
//
// One dtype per binary (-DBENCH_BF16=0/1), so that run.sh compiles the two in parallel;
// -DBENCH_GEMV_ONLY=1 builds only the small-M paths (and simt) for mode gemv.
// GEMV_QUICK=1 (mode gemv): no edge checks, and only B [K, N] at M = 1 and 8 in the timing.
// GEMV_NK=2048x2048,256x2048 (mode gemv): those N x K shapes timed in place of the Linear shapes.
// Usage: gemm_bench [check|small|time|all|tc|wg|wgsmall|gemv|gemv-small|gemvprofile] [results.md]
//   wg: the Hopper kernel (gemm_wgmma.cuh) checked on the edge shapes and timed at M >= 816 (and M = 16 against the small-M kernel) in both
//   B layouts, with its host cost; wgsmall: only its edge checks under 2M MACs.
//   gemv: the small-M checks (edge shapes, both B layouts, split-K clusters, dual B, fallback),
//   then M = 1, 8, 16 timings at the Linear shapes, each both isolated (L2 flushed) and as
//   back-to-back calls over rotated copies of B (what a model's chain of layers sees).
#include <cublas_v2.h>

#include <algorithm>
#include <array>
#include <cstdarg>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "../../kernels/gemm/kiln_gemm.cuh"
#include "bench_timer.cuh"

#ifndef BENCH_TC_ALL
#define BENCH_TC_ALL 1
#endif
#ifndef BENCH_BF16
#define BENCH_BF16 0
#endif
#ifndef BENCH_GEMV_ONLY
#define BENCH_GEMV_ONLY 0
#endif
#if BENCH_BF16
using T = __nv_bfloat16;
static const char* kDtype = "bf16";
static const double kEpsT = 1.0 / 256;  // one ulp of the stored output, relative
static const cudaDataType kCublasT = CUDA_R_16BF;
#else
using T = __half;
static const char* kDtype = "fp16";
static const double kEpsT = 1.0 / 2048;
static const cudaDataType kCublasT = CUDA_R_16F;
#endif

#define CHECK_CUBLAS(x)                                                              \
  do {                                                                               \
    cublasStatus_t s_ = (x);                                                         \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                               \
      fprintf(stderr, "%s:%d: %s: cublas status %d\n", __FILE__, __LINE__, #x, int(s_)); \
      exit(2);                                                                       \
    }                                                                                \
  } while (0)

namespace kg = kiln::gemm;

__host__ __device__ inline float gelu_tanh(float v) {
  return 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
}
static double gelu_tanh_d(double v) { return 0.5 * v * (1.0 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v))); }

// float <-> T on host and device (overloads on the tag type, so each dtype compiles alone).
__host__ __device__ inline __half from_float(float v, __half) { return __float2half_rn(v); }
__host__ __device__ inline __nv_bfloat16 from_float(float v, __nv_bfloat16) { return __float2bfloat16_rn(v); }
__host__ __device__ inline T to_t(float v) { return from_float(v, T{}); }
inline float t_to_float(__half v) { return __half2float(v); }
inline float t_to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

// ---- epilogues: what generated code prints, in three flavours ----
// kReadsRows / kLong as kiln's generated functors declare them (gemm_problem.cuh): the Hopper
// kernel stages these three through shared memory (the long ones in a rolled loop).
struct StoreEpilogue {  // y = acc, stored as T
  static constexpr int kNumB = 1;
  static constexpr bool kAllPaths = true, kReadsRows = false, kLong = false;
  T* out;
  int64_t m, n;
  __device__ void operator()(int64_t b, int64_t i, int64_t j, float acc) const { out[(b * m + i) * n + j] = to_t(acc); }
};
struct BiasGeluEpilogue {  // y = gelu_tanh(acc + bias[n])
  static constexpr int kNumB = 1;
  static constexpr bool kAllPaths = false, kReadsRows = false, kLong = true;
  T* out;
  const float* bias;
  int64_t m, n;
  __device__ void operator()(int64_t b, int64_t i, int64_t j, float acc) const {
    out[(b * m + i) * n + j] = to_t(gelu_tanh(acc + bias[j]));
  }
};
struct GateUpEpilogue {  // y = gelu_tanh(acc0) * acc1
  static constexpr int kNumB = 2;
  static constexpr bool kAllPaths = false, kReadsRows = false, kLong = true;
  T* out;
  int64_t m, n;
  __device__ void operator()(int64_t b, int64_t i, int64_t j, float g, float u) const {
    out[(b * m + i) * n + j] = to_t(gelu_tanh(g) * u);
  }
};
// y = acc + res[i, j] (a residual: a load at the row's own index), for the A/B of
// run_residual_timing: kReadsRows without prefetch() (called from the accumulators), staged
// without it (kRows false), and as kiln generates it (kReadsRows with prefetch(): staged, each
// chunk's loads prefetched first).
template <bool kRows>
struct ResidualEpilogue {
  static constexpr int kNumB = 1;
  static constexpr bool kAllPaths = false, kReadsRows = kRows, kLong = false;
  T* out;
  const T* res;
  int64_t m, n;
  __device__ void operator()(int64_t b, int64_t i, int64_t j, float acc) const {
    out[(b * m + i) * n + j] = to_t(acc + static_cast<float>(__ldg(&res[(b * m + i) * n + j])));
  }
};
struct ResidualPrefetchEpilogue : ResidualEpilogue<true> {
  __device__ void prefetch(int64_t b, int64_t i, int64_t j) const { kg::prefetch_l1(&res[(b * m + i) * n + j]); }
};
enum class Epi { Store, BiasGelu, GateUp };
static const char* epi_name(Epi e) { return e == Epi::Store ? "store" : e == Epi::BiasGelu ? "bias+gelu" : "gate*up"; }

// ---- template configurations under test (numbered variants, llm.c style) ----
enum Path { kWgPP128x128, kWgPP64x256, kWgPP64x128, kWgPP64x128s8, kWgSwap16, kWgSwap16Dual, kWgSwap16s5, kWgSwap16s5x2, kWgSwapPP64x16, kWg128x256, kWg256x128, kWg128x128, kWgDualHalves, kWg128x128s4, kWgSwap272, kWgSwap208, kWgSwap136, kWgSwapPP64x136, kWg128x256sk, kWg128x128sk, kTc128x128, kTc128x256, kTc64x128, kTc128x128w8, kTc128x128k64, kTc256x128, kTc128x256k64, kTc128x256k64s4, kTc256x128k64, kTc128x128s3, kGemv4, kGemv8, kGemv16, kGemv8s1, kGemv16s1, kGemv8u8, kGemv8pf, kGemv8s2, kGemv16u8, kSimt };
// (push_back into a reserved vector: gcc 13 -O3 warns falsely on vector = {list}.)
static void add_paths(std::vector<Path>& v, std::initializer_list<Path> l) {
  v.reserve(v.size() + l.size() + 4);
  for (Path p : l) v.push_back(p);
}
static const char* path_name(Path p) {
  switch (p) {
    case kWgPP128x128: return "wgmma<128,128,6,pingpong>";
    case kWgPP64x256: return "wgmma<64,256,5,pingpong>";
    case kWgPP64x128: return "wgmma<64,128,5,pingpong>";
    case kWgPP64x128s8: return "wgmma<64,128,8,pingpong>";
    case kWgSwap16: return "wgmma<128,16,12,swapAB>";
    case kWgSwap16Dual: return "wgmma<128,16,6,swapAB>";
    case kWgSwap16s5: return "wgmma<128,16,5,swapAB>";
    case kWgSwap16s5x2: return "wgmma<128,16,5,swapAB,2 CTAs/SM>";
    case kWgSwapPP64x16: return "wgmma<64,16,8,pingpong,swapAB>";
    case kWg128x256: return "wgmma<128,256,4>";
    case kWg256x128: return "wgmma<256,128,4>";
    case kWg128x128: return "wgmma<128,128,6>";
    case kWgDualHalves: return "wgmma<128,128,6,dual halves>";
    case kWg128x128s4: return "wgmma<128,128,4>";
    case kWgSwap272: return "wgmma<128,272,4,swapAB>";
    case kWgSwap208: return "wgmma<128,208,5,swapAB>";
    case kWgSwap136: return "wgmma<128,136,4,swapAB>";
    case kWgSwapPP64x136: return "wgmma<64,136,6,pingpong,swapAB>";
    case kWg128x256sk: return "wgmma<128,256,4>+splitK ws";
    case kWg128x128sk: return "wgmma<128,128,6>+splitK ws";
    case kTc128x128: return "gemm<128,128,32,2,2,4>";
    case kTc128x256: return "gemm<128,256,32,2,4,3>";
    case kTc64x128: return "gemm<64,128,32,2,2,4>";
    case kTc128x128w8: return "gemm<128,128,32,2,4,3>";
    case kTc128x128k64: return "gemm<128,128,64,2,2,3>";
    case kTc256x128: return "gemm<256,128,32,4,2,3>";
    case kTc128x256k64: return "gemm<128,256,64,2,4,3>";
    case kTc128x256k64s4: return "gemm<128,256,64,2,4,4>";
    case kTc256x128k64: return "gemm<256,128,64,4,2,3>";
    case kTc128x128s3: return "gemm<128,128,32,2,2,3>";
    case kGemv4: return "gemv<16,4>";
    case kGemv8: return "gemv<16,8>";
    case kGemv16: return "gemv<16,16>";
    case kGemv8s1: return "gemv<16,8,1> (no split)";
    case kGemv16s1: return "gemv<16,16,1> (no split)";
    case kGemv8u8: return "gemv<16,8,8,8> (unroll 8)";
    case kGemv8pf: return "gemv<16,8,8,4,1> (L2 256B)";
    case kGemv8s2: return "gemv<16,8,2> (split <= 2)";
    case kGemv16u8: return "gemv<16,16,8,8> (unroll 8)";
    case kSimt: return "simt";
  }
  return "?";
}

// A workspace large enough for split-K at any timed shape (the "+splitK ws" paths: what a larger
// split_k_workspace_bytes contract would give the Hopper kernel above M = 256).
static void* g_big_ws = nullptr;
static const int64_t kBigWsBytes = int64_t(64) << 20;

// Which paths an epilogue is instantiated with (keeps the harness's compile time down).
template <typename E>
cudaError_t run_path(Path path, const kg::Problem& p, const E& e, void* ws, int64_t ws_bytes, cudaStream_t s) {
  switch (path) {
#if !BENCH_GEMV_ONLY
    // Hopper (gemm_wgmma.cuh): falls back to variant 1 with the named TileConfig where it cannot run.
    case kWgPP128x128:
      if constexpr (E::kNumB == 1) return kg::gemm_wgmma<T, kg::WgmmaConfig<128, 128, 6, 1>, kg::TileConfig<128, 128, 64, 2, 2, 3>>(p, e, ws, ws_bytes, s);
      break;
    case kWgPP64x256:
      if constexpr (E::kAllPaths) return kg::gemm_wgmma<T, kg::WgmmaConfig<64, 256, 5, 1>, kg::TileConfig<128, 128, 64, 2, 2, 3>>(p, e, ws, ws_bytes, s);
      break;
    case kWgPP64x128:  // ping-pong for dual products (64 x 128 x 2 accumulators per warpgroup)
      if constexpr (E::kAllPaths || E::kNumB == 2) return kg::gemm_wgmma<T, kg::WgmmaConfig<64, 128, 5, 1>, kg::TileConfig<128, 128, 32, 2, 4, 3>>(p, e, ws, ws_bytes, s);
      break;
    case kWgSwap16:  // the small-M SWAP_AB tile: 16 tokens against 128 weight rows, 12 stages
      if constexpr (E::kNumB == 1) return kg::gemm_wgmma<T, kg::WgmmaConfig<128, 16, 12, 0, 0, 1>, kg::TileConfig<128, 128, 32, 2, 4, 3>>(p, e, ws, ws_bytes, s);
      break;
    case kWgSwap16Dual:  // its dual products: two weight tiles and the token tile, 6 stages
      if constexpr (E::kNumB == 2) return kg::gemm_wgmma<T, kg::WgmmaConfig<128, 16, 6, 0, 0, 1>, kg::TileConfig<128, 128, 32, 2, 4, 3>>(p, e, ws, ws_bytes, s);
      break;
    case kWgSwap16s5:  // the 16-token SWAP_AB tile with 5 stages (kiln_gemm.cuh's single-product choice since run s23b)
      if constexpr (E::kNumB == 1) return kg::gemm_wgmma<T, kg::WgmmaConfig<128, 16, 5, 0, 0, 1>, kg::TileConfig<128, 128, 32, 2, 4, 3>>(p, e, ws, ws_bytes, s);
      break;
    case kWgSwap16s5x2:  // the same compiled for two CTAs per SM (80 registers, no setmaxnreg): twice the resident clusters
      if constexpr (E::kNumB == 1) return kg::gemm_wgmma<T, kg::WgmmaConfig<128, 16, 5, 0, 0, 1, 2>, kg::TileConfig<128, 128, 32, 2, 4, 3>>(p, e, ws, ws_bytes, s);
      break;
    case kWgSwapPP64x16:  // 64 weight rows x 16 tokens per tile (twice the tiles of 128 rows), 8 stages; timed in mode gemv only
                        // (run s23e: racecheck over it took over 150 s at the first wgsmall shape)
      if constexpr (E::kNumB == 1) return kg::gemm_wgmma<T, kg::WgmmaConfig<64, 16, 8, 1, 0, 1>, kg::TileConfig<128, 128, 32, 2, 4, 3>>(p, e, ws, ws_bytes, s);
      break;
    case kWgPP64x128s8:  // the small-M tile with 8 stages of B in flight (single products)
      if constexpr (E::kNumB == 1) return kg::gemm_wgmma<T, kg::WgmmaConfig<64, 128, 8, 1>, kg::TileConfig<128, 128, 32, 2, 4, 3>>(p, e, ws, ws_bytes, s);
      break;
    case kWg128x256:
      if constexpr (E::kNumB == 1) return kg::gemm_wgmma<T, kg::WgmmaConfig<128, 256, 4>, kg::TileConfig<128, 128, 64, 2, 2, 3>>(p, e, ws, ws_bytes, s);
      break;
    case kWg256x128:
      if constexpr (E::kAllPaths) return kg::gemm_wgmma<T, kg::WgmmaConfig<256, 128, 4>, kg::TileConfig<128, 128, 64, 2, 2, 3>>(p, e, ws, ws_bytes, s);
      break;
    case kWg128x128:
      if constexpr (E::kNumB == 1) return kg::gemm_wgmma<T, kg::WgmmaConfig<128, 128, 6>, kg::TileConfig<128, 128, 64, 2, 2, 3>>(p, e, ws, ws_bytes, s);
      break;
    case kWgDualHalves:  // dual products as one 128 x 128 accumulator tile: 64 columns of each B
      if constexpr (E::kNumB == 2) return kg::gemm_wgmma<T, kg::WgmmaConfig<128, 128, 6, 0, 1>, kg::TileConfig<128, 128, 32, 2, 4, 3>>(p, e, ws, ws_bytes, s);
      break;
    case kWg128x128s4:  // the dual (gate*up) configuration
      if constexpr (E::kAllPaths || E::kNumB == 2) return kg::gemm_wgmma<T, kg::WgmmaConfig<128, 128, 4>, kg::TileConfig<128, 128, 32, 2, 4, 3>>(p, e, ws, ws_bytes, s);
      break;
    case kWgSwap272:  // tokens on wgmma's N (two n136 wgmmas): 816 = 3 x 272
      if constexpr (E::kNumB == 1) return kg::gemm_wgmma<T, kg::WgmmaConfig<128, 272, 4, 0, 0, 1>, kg::TileConfig<128, 128, 64, 2, 2, 3>>(p, e, ws, ws_bytes, s);
      break;
    case kWgSwap208:  // 816 tokens in 4 x 208 = 832
      if constexpr (E::kNumB == 1) return kg::gemm_wgmma<T, kg::WgmmaConfig<128, 208, 5, 0, 0, 1>, kg::TileConfig<128, 128, 64, 2, 2, 3>>(p, e, ws, ws_bytes, s);
      break;
    case kWgSwap136:  // dual products: 128 rows of each weight, 136 tokens (816 = 6 x 136)
      if constexpr (E::kNumB == 2) return kg::gemm_wgmma<T, kg::WgmmaConfig<128, 136, 4, 0, 0, 1>, kg::TileConfig<128, 128, 32, 2, 4, 3>>(p, e, ws, ws_bytes, s);
      break;
    case kWgSwapPP64x136:  // dual products, ping-pong: each warpgroup 64 rows of each weight x 136 tokens
      if constexpr (E::kNumB == 2) return kg::gemm_wgmma<T, kg::WgmmaConfig<64, 136, 6, 1, 0, 1>, kg::TileConfig<128, 128, 32, 2, 4, 3>>(p, e, ws, ws_bytes, s);
      break;
    case kWg128x256sk:
      if constexpr (E::kAllPaths) return kg::gemm_wgmma<T, kg::WgmmaConfig<128, 256, 4>, kg::TileConfig<128, 128, 64, 2, 2, 3>>(p, e, g_big_ws, kBigWsBytes, s);
      break;
    case kWg128x128sk:
      if constexpr (E::kAllPaths) return kg::gemm_wgmma<T, kg::WgmmaConfig<128, 128, 6>, kg::TileConfig<128, 128, 64, 2, 2, 3>>(p, e, g_big_ws, kBigWsBytes, s);
      break;
    case kTc128x128k64:
      if constexpr (E::kAllPaths) return kg::gemm<T, kg::TileConfig<128, 128, 64, 2, 2, 3>>(p, e, ws, ws_bytes, s);
      break;
    case kTc128x256k64:
      if constexpr (E::kAllPaths) return kg::gemm<T, kg::TileConfig<128, 256, 64, 2, 4, 3>>(p, e, ws, ws_bytes, s);
      break;
    case kTc128x128w8:
      if constexpr (E::kAllPaths || E::kNumB == 2) return kg::gemm<T, kg::TileConfig<128, 128, 32, 2, 4, 3>>(p, e, ws, ws_bytes, s);
      break;
#if BENCH_TC_ALL  // the other variant-1 configurations (bench/gemm/run.sh: GEMM_TC_ALL=0 leaves them out)
    case kTc128x128:
      if constexpr (E::kNumB == 1) return kg::gemm<T, kg::TileConfig<128, 128, 32, 2, 2, 4>>(p, e, ws, ws_bytes, s);
      break;
    case kTc128x256:
      if constexpr (E::kAllPaths) return kg::gemm<T, kg::TileConfig<128, 256, 32, 2, 4, 3>>(p, e, ws, ws_bytes, s);
      break;
    case kTc64x128:
      if constexpr (E::kNumB == 1) return kg::gemm<T, kg::TileConfig<64, 128, 32, 2, 2, 4>>(p, e, ws, ws_bytes, s);
      break;
    case kTc256x128:
      if constexpr (E::kAllPaths) return kg::gemm<T, kg::TileConfig<256, 128, 32, 4, 2, 3>>(p, e, ws, ws_bytes, s);
      break;
    case kTc128x256k64s4:
      if constexpr (E::kAllPaths) return kg::gemm<T, kg::TileConfig<128, 256, 64, 2, 4, 4>>(p, e, ws, ws_bytes, s);
      break;
    case kTc256x128k64:
      if constexpr (E::kAllPaths) return kg::gemm<T, kg::TileConfig<256, 128, 64, 4, 2, 3>>(p, e, ws, ws_bytes, s);
      break;
    case kTc128x128s3:  // kiln's default schedule, single and dual B (dual: the non-pipelined mainloop)
      if constexpr (E::kAllPaths || E::kNumB == 2) return kg::gemm<T, kg::TileConfig<128, 128, 32, 2, 2, 3>>(p, e, ws, ws_bytes, s);
      break;
#endif
#endif
    case kGemv4:
      if constexpr (E::kAllPaths) return kg::gemv<T, kg::GemvConfig<16, 4>>(p, e, s);
      break;
    case kGemv8:
      return kg::gemv<T, kg::GemvConfig<16, 8>>(p, e, s);
    case kGemv16:
      if constexpr (E::kAllPaths || E::kNumB == 2) return kg::gemv<T, kg::GemvConfig<16, 16>>(p, e, s);
      break;
    case kGemv8s1:
      if constexpr (E::kAllPaths) return kg::gemv<T, kg::GemvConfig<16, 8, 1>>(p, e, s);
      break;
    case kGemv16s1:
      if constexpr (E::kAllPaths) return kg::gemv<T, kg::GemvConfig<16, 16, 1>>(p, e, s);
      break;
    case kGemv8u8:
      if constexpr (E::kAllPaths) return kg::gemv<T, kg::GemvConfig<16, 8, 8, 8>>(p, e, s);
      break;
    case kGemv8pf:
      if constexpr (E::kAllPaths) return kg::gemv<T, kg::GemvConfig<16, 8, 8, 4, 1>>(p, e, s);
      break;
    case kGemv8s2:
      if constexpr (E::kAllPaths) return kg::gemv<T, kg::GemvConfig<16, 8, 2>>(p, e, s);
      break;
    case kGemv16u8:
      if constexpr (E::kAllPaths) return kg::gemv<T, kg::GemvConfig<16, 16, 8, 8>>(p, e, s);
      break;
    case kSimt:
      return kg::simt<T>(p, e, s);
    default:
      break;
  }
  return cudaErrorNotSupported;
}

// ---- operands ----
static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static inline uint64_t next_rand() {
  g_rng ^= g_rng >> 12;
  g_rng ^= g_rng << 25;
  g_rng ^= g_rng >> 27;
  return g_rng * 2685821657736338717ull;
}
static inline float rand_unit() { return float(int64_t(next_rand() >> 40) - (int64_t(1) << 23)) / float(1 << 23); }
static inline T float_to_t(float v) { return to_t(v); }
static inline T nan_t() {
  uint16_t bits = 0x7fff;  // NaN in fp16 and in bf16
  T v;
  std::memcpy(&v, &bits, 2);
  return v;
}
static int64_t round8(int64_t x) { return (x + 7) / 8 * 8; }

struct Shape {
  int64_t m, n, k;
  bool a_k = true;      // A: k contiguous ([M, K]) or m contiguous ([K, M])
  bool b_k = true;      // B: k contiguous ([N, K]) or n contiguous ([K, N])
  int64_t batch0 = 0;   // > 0: batch (batch0, batch1), B broadcast along batch0
  int64_t batch1 = 1;
  int b_batch = 0;      // B along the batch: 0 broadcast along batch0, 1 broadcast along both, 2 batched like A
  bool tight = false;   // rows not padded to 8 elements (unaligned: the fallback runs)
};
static std::string shape_str(const Shape& s) {
  char buf[160];
  static const char* kBBatch[] = {"", " (B bcast all)", " (B batched)"};
  snprintf(buf, sizeof buf, "%s%ldx%ldx%ld A:%s B:%s%s%s", s.batch0 ? (std::to_string(s.batch0) + "x" + std::to_string(s.batch1) + "x ").c_str() : "",
           long(s.m), long(s.n), long(s.k), s.a_k ? "[M,K]" : "[K,M]", s.b_k ? "[N,K]" : "[K,N]", s.batch0 ? kBBatch[s.b_batch] : "",
           s.tight ? " unpadded" : "");
  return buf;
}

// One operand: host copy, device copy, its Operand; rows x ld per batch entry, `cols` of each
// row valid (the rest NaN).
struct Tensor {
  std::vector<T> host;
  T* dev = nullptr;
  kg::Operand op;
  void make(int64_t count, int64_t rows, int64_t cols, int64_t ld, bool fill_random) {
    host.resize(size_t(count * rows * ld));
    for (int64_t c = 0; c < count; ++c)
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t i = 0; i < ld; ++i) host[size_t((c * rows + r) * ld + i)] = i < cols && fill_random ? float_to_t(rand_unit()) : nan_t();
    CHECK_CUDA(cudaMalloc(&dev, host.size() * sizeof(T)));
    CHECK_CUDA(cudaMemcpy(dev, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
    op.data = dev;
  }
  void release() {
    if (dev) CHECK_CUDA(cudaFree(dev));
    dev = nullptr;
    host.clear();
  }
};

struct Operands {
  Shape s;
  kg::Problem p;
  Tensor a, b[2];
  float* bias = nullptr;
  std::vector<float> hbias;
  int64_t batch = 1;

  void make(const Shape& shape, int num_b) {
    s = shape;
    p = kg::Problem{};
    p.m = s.m, p.n = s.n, p.k = s.k, p.num_b = num_b;
    if (s.batch0) {
      p.batch_rank = 2;
      p.batch_extent[0] = s.batch0, p.batch_extent[1] = s.batch1;
    }
    batch = p.batch();
    const int64_t lda = s.tight ? (s.a_k ? s.k : s.m) : round8(s.a_k ? s.k : s.m);
    const int64_t a_rows = s.a_k ? s.m : s.k;
    a.make(batch, a_rows, s.a_k ? s.k : s.m, lda, true);
    a.op.stride_mn = s.a_k ? lda : 1;
    a.op.stride_k = s.a_k ? 1 : lda;
    if (s.batch0) a.op.batch_stride[0] = s.batch1 * a_rows * lda, a.op.batch_stride[1] = a_rows * lda;
    for (int j = 0; j < num_b; ++j) {
      const int64_t ldb = s.tight ? (s.b_k ? s.k : s.n) : round8(s.b_k ? s.k : s.n);
      const int64_t b_rows = s.b_k ? s.n : s.k;
      const int64_t b_count = !s.batch0 || s.b_batch == 1 ? 1 : s.b_batch == 2 ? batch : s.batch1;
      b[j].make(b_count, b_rows, s.b_k ? s.k : s.n, ldb, true);
      b[j].op.stride_mn = s.b_k ? ldb : 1;
      b[j].op.stride_k = s.b_k ? 1 : ldb;
      if (s.batch0 && s.b_batch == 0) b[j].op.batch_stride[0] = 0, b[j].op.batch_stride[1] = b_rows * ldb;  // broadcast over batch0
      if (s.batch0 && s.b_batch == 2) b[j].op.batch_stride[0] = s.batch1 * b_rows * ldb, b[j].op.batch_stride[1] = b_rows * ldb;
      p.b[j] = b[j].op;
    }
    p.a = a.op;
    hbias.resize(size_t(s.n));
    for (auto& v : hbias) v = rand_unit();
    CHECK_CUDA(cudaMalloc(&bias, hbias.size() * sizeof(float)));
    CHECK_CUDA(cudaMemcpy(bias, hbias.data(), hbias.size() * sizeof(float), cudaMemcpyHostToDevice));
  }
  void release() {
    a.release();
    b[0].release();
    b[1].release();
    if (bias) CHECK_CUDA(cudaFree(bias));
    bias = nullptr;
  }
  static double at(const Tensor& t, const kg::Problem& p, int64_t bi, int64_t mn, int64_t k) {
    return t_to_float(t.host[size_t(p.batch_offset(t.op, bi) + mn * t.op.stride_mn + k * t.op.stride_k)]);
  }
  // fp64 reference sum and sum of |products| of output (bi, i, j) for B operand jb.
  void reference(int jb, int64_t bi, int64_t i, int64_t j, double& sum, double& sumabs) const {
    sum = 0, sumabs = 0;
    for (int64_t k = 0; k < s.k; ++k) {
      const double v = at(a, p, bi, i, k) * at(b[jb], p, bi, j, k);
      sum += v;
      sumabs += std::fabs(v);
    }
  }
};

// ---- the check ----
struct CheckResult {
  bool ok = true;
  int64_t checked = 0, unwritten = 0, wrong = 0;
  double worst = 0;  // max |err| / tol
};

// Run by check() just before the path's launch (the PDL-order checks: a kernel that writes A).
static std::function<void(Operands&)> g_before_launch;
static cudaStream_t g_check_stream = 0;  // check()'s stream

// The PDL-order check's writer: lets the next kernel start at once (as kiln's generated kernels
// do), sleeps `ns` nanoseconds (200 us: a first launch of the next kernel may take tens), then writes A's true values over the NaNs the check left there. A
// kernel launched after it with programmatic dependent launch that read A before its pdl_wait
// would see NaNs.
__global__ void late_writer_kernel(T* dst, const T* src, int64_t count, unsigned long long ns) {
  kg::detail::pdl_trigger();
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    __nanosleep(1000);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x) dst[i] = src[i];
}

// The control of the PDL-order check: copies A's first element without pdl_wait, launched
// programmatically after the writer; it sees a NaN iff the writer's early trigger let it start
// before the writer wrote A (otherwise the check could not fail).
__global__ void early_reader_kernel(const T* a, float* seen) { *seen = static_cast<float>(a[0]); }

static CheckResult check(Operands& o, Path path, Epi epi, void* ws, int64_t ws_bytes, bool verbose) {
  const int64_t total = o.batch * o.s.m * o.s.n;
  T* out;
  CHECK_CUDA(cudaMalloc(&out, size_t(total) * sizeof(T)));
  CHECK_CUDA(cudaMemset(out, 0xff, size_t(total) * sizeof(T)));  // NaN poison
  if (ws) CHECK_CUDA(cudaMemset(ws, 0xff, size_t(ws_bytes)));    // workspace garbage too
  if (g_before_launch) {
    CHECK_CUDA(cudaDeviceSynchronize());  // the memsets above (legacy stream) before the check's stream
    g_before_launch(o);
  }
  cudaError_t e;
  if (epi == Epi::Store) {
    e = run_path(path, o.p, StoreEpilogue{out, o.s.m, o.s.n}, ws, ws_bytes, g_check_stream);
  } else if (epi == Epi::BiasGelu) {
    e = run_path(path, o.p, BiasGeluEpilogue{out, o.bias, o.s.m, o.s.n}, ws, ws_bytes, g_check_stream);
  } else {
    e = run_path(path, o.p, GateUpEpilogue{out, o.s.m, o.s.n}, ws, ws_bytes, g_check_stream);
  }
  if (e == cudaErrorNotSupported) {  // this path is not instantiated for this epilogue: a harness bug, not a kernel one
    printf("    NOT INSTANTIATED %s %s %s\n", shape_str(o.s).c_str(), path_name(path), epi_name(epi));
    CHECK_CUDA(cudaFree(out));
    CheckResult r;
    r.ok = false;
    return r;
  }
  CHECK_CUDA(e);
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<T> got(static_cast<size_t>(total));
  CHECK_CUDA(cudaMemcpy(got.data(), out, got.size() * sizeof(T), cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaFree(out));

  CheckResult r;
  for (int64_t i = 0; i < total; ++i)
    if (std::isnan(t_to_float(got[size_t(i)]))) ++r.unwritten;
  std::vector<int64_t> idx;
  if (total <= 20000) {
    idx.reserve(size_t(total));
    for (int64_t i = 0; i < total; ++i) idx.push_back(i);
  } else {
    idx.reserve(3004);
    for (int64_t i : {int64_t(0), total - 1, o.s.n - 1, total - o.s.n}) idx.push_back(i);
    for (int i = 0; i < 3000; ++i) idx.push_back(int64_t(next_rand() % uint64_t(total)));
  }
  for (int64_t flat : idx) {
    const int64_t j = flat % o.s.n, i = (flat / o.s.n) % o.s.m, bi = flat / (o.s.n * o.s.m);
    double s0, a0, expect, tol;
    o.reference(0, bi, i, j, s0, a0);
    const double acc_tol = 2e-5 * a0 + 1e-6;  // fp32 accumulation of exact products
    if (epi == Epi::Store) {
      expect = s0;
      tol = acc_tol + kEpsT * std::fabs(expect);
    } else if (epi == Epi::BiasGelu) {
      expect = gelu_tanh_d(s0 + o.hbias[size_t(j)]);
      tol = 1.2 * acc_tol + kEpsT * std::fabs(expect) + 1e-6;
    } else {
      double s1, a1;
      o.reference(1, bi, i, j, s1, a1);
      expect = gelu_tanh_d(s0) * s1;
      tol = 1.2 * acc_tol * std::fabs(s1) + (std::fabs(gelu_tanh_d(s0)) + 1.2 * acc_tol) * (2e-5 * a1 + 1e-6) +
            kEpsT * std::fabs(expect) + 1e-6;
    }
    const double v = t_to_float(got[size_t(flat)]);
    const double err = std::fabs(v - expect);
    ++r.checked;
    if (!(err <= tol)) {
      if (verbose && r.wrong < 5)
        printf("    MISMATCH %s %s %s: (b %ld, m %ld, n %ld) got %.6g expected %.6g tol %.3g\n", shape_str(o.s).c_str(),
               path_name(path), epi_name(epi), long(bi), long(i), long(j), v, expect, tol);
      ++r.wrong;
    } else {
      r.worst = std::max(r.worst, err / tol);
    }
  }
  r.ok = r.unwritten == 0 && r.wrong == 0;
  if (verbose && r.unwritten)
    printf("    UNWRITTEN %s %s %s: %ld of %ld outputs still poisoned\n", shape_str(o.s).c_str(), path_name(path), epi_name(epi),
           long(r.unwritten), long(total));
  return r;
}

// ---- timing: Timer (bench_timer.cuh) ----

// The read ceiling: every 16 bytes of `bytes` read once (no L1), folded so it cannot be elided.
__global__ void __launch_bounds__(256) read_kernel(const uint4* p, int64_t n16, unsigned* sink) {
  unsigned x = 0;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n16; i += 8 * stride) {
    uint4 v[8];
#pragma unroll
    for (int u = 0; u < 8; ++u)
      v[u] = i + u * stride < n16 ? kiln::gemm::detail::load_stream16(p + i + u * stride) : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int u = 0; u < 8; ++u) x ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  if (x == 0x9e3779b9u) sink[0] = x;
}

static FILE* g_results = nullptr;
static void emit(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
static void emit(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  if (g_results) {
    va_start(ap, fmt);
    vfprintf(g_results, fmt, ap);
    va_end(ap);
  }
  fflush(stdout);
}

static int g_failures = 0;
static bool g_small_only = false;  // mode "small": the edge checks under 2M MACs (for compute-sanitizer)
static bool g_tc_only = false;     // mode "tc": checks, then only the tensor-core timings (M >= 816)
static bool g_wg_only = false;     // mode "wg": the Hopper kernel's checks and M >= 816 timings (both B layouts)

// A Hopper path that fell back to variant 1 (operands TMA cannot read, or no sm_90a build) says so.
static bool is_wgmma_path(Path p) { return p <= kWg128x128sk; }
static const char* ran_as(Path p, int64_t launches_before) {
  if (!is_wgmma_path(p)) return "";
  return kg::detail::wgmma_launches > launches_before ? "" : " (fell back)";
}

// How the last Hopper launch ran: CTAs and K splits (a cluster per tile, or partial sums).
static std::string wgmma_launch_text() {
  const auto& l = kg::detail::wgmma_last_launch;
  return " [grid " + std::to_string(l.grid) + ", split " + std::to_string(l.splits) +
         (l.splits > 1 ? (l.cluster_reduce ? " cluster" : " partial") : "") + "]";
}

// The Hopper paths launched programmatically right after a kernel that writes A late (the writer
// lets them start at once, as kiln's generated kernels do), with B marked a weight (b_early, as
// generated code marks it): A holds NaNs until the writer's last step, 200 us in, so a read of A
// before pdl_wait, or an epilogue write before it, shows in the check. The first row of a shape
// is the control: a programmatic kernel without pdl_wait, which must see the NaNs (else the writer
// did not overlap the next launch and the rows prove nothing).
static void check_pdl_order(Operands& o, const std::vector<Path>& paths, Epi epi, void* ws, int64_t ws_bytes) {
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  T* truth;
  const size_t count = o.a.host.size();
  CHECK_CUDA(cudaMalloc(&truth, count * sizeof(T)));
  CHECK_CUDA(cudaMemcpy(truth, o.a.host.data(), count * sizeof(T), cudaMemcpyHostToDevice));
  float* seen;
  CHECK_CUDA(cudaMalloc(&seen, sizeof(float)));
  auto writer = [&](Operands& op) {
    CHECK_CUDA(cudaMemsetAsync(op.a.dev, 0xff, count * sizeof(T), stream));
    late_writer_kernel<<<132, 256, 0, stream>>>(op.a.dev, truth, int64_t(count), 200000ull);
    CHECK_CUDA(cudaGetLastError());
  };
  early_reader_kernel<<<1, 1, 0, stream>>>(static_cast<const T*>(o.a.dev), seen);  // loaded before it is timed against the writer
  writer(o);
  CHECK_CUDA(kg::detail::launch_maybe_programmatic(true, early_reader_kernel, dim3(1), dim3(1), 0, stream,
                                                   static_cast<const T*>(o.a.dev), seen));
  float got = 0;
  CHECK_CUDA(cudaMemcpyAsync(&got, seen, sizeof(float), cudaMemcpyDeviceToHost, stream));
  CHECK_CUDA(cudaStreamSynchronize(stream));
  const bool overlapped = std::isnan(got);
  if (!overlapped) ++g_failures;
  emit("| %s | PDL control: a kernel without pdl_wait %s | %s | 1 | - | %s |\n", shape_str(o.s).c_str(),
       overlapped ? "read A before the writer wrote it" : "did not start early", epi_name(epi), overlapped ? "ok" : "FAIL");
  o.p.b_early = true;
  g_before_launch = writer;
  g_check_stream = stream;
  for (Path path : paths) {
    if (!is_wgmma_path(path)) continue;
    const int64_t launches = kg::detail::wgmma_launches;
    const CheckResult r = check(o, path, epi, ws, ws_bytes, true);
    if (!r.ok) ++g_failures;
    emit("| %s | %s%s, after a late writer, b_early | %s | %ld | %.3f | %s |\n", shape_str(o.s).c_str(), path_name(path),
         ran_as(path, launches), epi_name(epi), long(r.checked), r.worst, r.ok ? "ok" : "FAIL");
  }
  g_before_launch = nullptr;
  g_check_stream = 0;
  o.p.b_early = false;
  CHECK_CUDA(cudaStreamSynchronize(stream));
  CHECK_CUDA(cudaFree(seen));
  CHECK_CUDA(cudaFree(truth));
  CHECK_CUDA(cudaStreamDestroy(stream));
}

// ---- correctness over edge shapes (every path that can run them) ----
static void run_checks() {
  emit("\n### %s: correctness (fp64 CPU reference; all outputs written, sampled/all values within tolerance)\n\n", kDtype);
  emit("| shape | path | epilogue | checked | worst err/tol | result |\n|---|---|---|---|---|---|\n");
  std::vector<Shape> shapes;
  const int64_t mnk[][3] = {{1, 13, 7}, {2, 200, 100}, {17, 33, 257}, {100, 130, 31}, {129, 257, 64}, {300, 72, 1000}, {51, 2048, 4096}};
  for (auto& d : mnk)
    for (int lay = 0; lay < 4; ++lay) {
      Shape s{d[0], d[1], d[2]};
      s.a_k = lay / 2 == 0;
      s.b_k = lay % 2 == 0;
      if (d[0] == 51 && lay != 0 && lay != 1) continue;
      shapes.push_back(s);
    }
  {
    Shape s{17, 40, 72};
    s.batch0 = 2, s.batch1 = 3;
    shapes.push_back(s);
    s.b_k = false;
    shapes.push_back(s);
    Shape t{1, 64, 4096};
    t.batch0 = 3, t.batch1 = 2;
    shapes.push_back(t);
    for (int bb : {1, 2})  // B shared by every batch entry (a weight), or batched (attention's K/V)
      for (bool bk : {true, false}) {
        Shape u{130, 72, 200};
        u.batch0 = 2, u.batch1 = 3, u.b_batch = bb, u.b_k = bk;
        shapes.push_back(u);
      }
  }
  {
    Shape s{33, 50, 37};
    s.tight = true;  // odd K, unpadded rows: the fast paths must refuse and run simt
    shapes.push_back(s);
  }
  // Above M = 256 (the Hopper tiles): a last tile row of 1 row, few tiles with a long K, an N edge,
  // several waves (2560 x 1920: 300 tiles of 128 x 128), a batch. (Session 9 added them to check
  // a stream-K variant, measured slower and not kept: bench/gemm/NOTES.md.)
  for (const auto& d : std::vector<std::array<int64_t, 3>>{{257, 8, 512}, {1000, 136, 520}, {2560, 1920, 1024}})
    for (bool bk : {true, false}) {
      Shape s{d[0], d[1], d[2]};
      s.b_k = bk;
      shapes.push_back(s);
    }
  {
    Shape s{300, 200, 640};
    s.batch0 = 2, s.batch1 = 3, s.b_batch = 2;
    shapes.push_back(s);
  }
  for (const Shape& s : shapes) {
    if (g_small_only && s.m * s.n * s.k > (int64_t(2) << 20)) continue;
    for (Epi epi : {Epi::Store, Epi::BiasGelu, Epi::GateUp}) {
      Operands o;
      o.make(s, epi == Epi::GateUp ? 2 : 1);
      std::vector<Path> paths;
      if (g_wg_only) {
        if (epi == Epi::GateUp) {
          add_paths(paths, {kWg128x128s4, kWgPP64x128, kWgDualHalves, kWgSwap136, kWgSwapPP64x136, kWgSwap16Dual, kSimt});
        } else if (epi == Epi::BiasGelu) {
          add_paths(paths, {kWg128x256, kWgPP128x128, kWg128x128});
        } else {
          add_paths(paths, {kWg128x256, kWg128x128, kWgPP128x128, kWgPP64x256, kWgPP64x128, kWg128x128sk, kWgSwap272, kWgSwap208, kWgSwap16, kWgSwap16s5,
                            kWgSwap16s5x2, kSimt});
        }
      } else if (epi == Epi::GateUp) {
        add_paths(paths, {kTc128x128w8, kTc128x128s3, kSimt, kWg128x128s4, kWgSwap136, kWgSwapPP64x136});
      } else if (epi == Epi::BiasGelu) {
        add_paths(paths, {kTc128x128, kTc64x128});
      } else {
        add_paths(paths, {kTc128x128, kTc128x256, kTc64x128, kTc128x128w8, kTc128x128k64, kTc256x128, kTc128x256k64, kTc128x256k64s4,
                          kTc256x128k64, kTc128x128s3, kSimt, kWg128x256, kWg256x128, kWg128x128, kWg128x256sk, kWgSwap272});
      }
      if (s.a_k && s.m <= 51 && !g_wg_only) {
        if (epi == Epi::Store) {
          paths.push_back(kGemv4);
          paths.push_back(kGemv16);
        }
        paths.push_back(kGemv8);
      }
      const int64_t ws_bytes = kg::split_k_workspace_bytes(s.m, s.n);
      void* ws = nullptr;
      if (ws_bytes) CHECK_CUDA(cudaMalloc(&ws, size_t(ws_bytes)));
      for (Path path : paths) {
        const int64_t launches = kg::detail::wgmma_launches;
        const CheckResult r = check(o, path, epi, ws, ws_bytes, true);
        if (!r.ok) ++g_failures;
        emit("| %s | %s%s | %s | %ld | %.3f | %s |\n", shape_str(s).c_str(), path_name(path), ran_as(path, launches), epi_name(epi),
             long(r.checked), r.worst, r.ok ? "ok" : "FAIL");
      }
      if (g_wg_only && s.batch0 == 0) check_pdl_order(o, paths, epi, ws, ws_bytes);
      if (ws) CHECK_CUDA(cudaFree(ws));
      o.release();
    }
  }
}

// ---- the timed shapes: check, then time against cuBLAS and the read ceiling ----
static void run_timing(cublasHandle_t handle, Timer& timer, unsigned* sink, int sms) {
  emit("\n### %s: timing (median of %d, L2 flushed; B GB/s = weight bytes / time; vs read = read-ceiling time / time)\n\n", kDtype,
       timer.reps);
  emit("| shape | path | check | µs | TFLOP/s | B GB/s | cuBLAS µs | vs cuBLAS | read µs | vs read |\n|---|---|---|---|---|---|---|---|---|---|\n");
  std::vector<Shape> shapes;
  const int64_t nk[][2] = {{16384, 2048}, {2048, 16384}, {4096, 4096}};
  for (auto& d : nk)
    for (int64_t m : {1, 16, 51, 816, 4096}) {
      shapes.push_back(Shape{m, d[0], d[1]});
      if (g_wg_only && (m >= 816 || m == 16)) {  // the weights as a PyTorch MatMul exports them: [K, N]
        Shape t{m, d[0], d[1]};
        t.b_k = false;
        shapes.push_back(t);
      }
    }
  if (!g_wg_only) {  // (mode wg has every [K, N] shape above)
    Shape s{4096, 4096, 4096};
    s.b_k = false;  // MatMul: [K, N] weights
    shapes.push_back(s);
  }
  {
    Shape s{16, 2048, 16384};
    s.b_k = false;
    shapes.push_back(s);
  }
  const float alpha = 1.0f, beta = 0.0f;
  for (const Shape& s : shapes) {
    if (g_tc_only && s.m < 816) continue;
    if (g_wg_only && s.m < 816 && s.m != 16) continue;  // M = 16: the Hopper kernel against the small-M kernel
    Operands o;
    o.make(s, 1);
    const int64_t ws_bytes = kg::split_k_workspace_bytes(s.m, s.n);
    void* ws = nullptr;
    if (ws_bytes) CHECK_CUDA(cudaMalloc(&ws, size_t(ws_bytes)));
    T* out;
    CHECK_CUDA(cudaMalloc(&out, size_t(s.m * s.n) * sizeof(T)));
    const double flops = 2.0 * s.m * s.n * s.k, b_bytes = 2.0 * s.n * s.k;

    const double cublas_us = timer.median_us([&] {
      if (s.b_k) {
        CHECK_CUBLAS(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, int(s.n), int(s.m), int(s.k), &alpha, o.b[0].dev, kCublasT, int(s.k),
                                  o.a.dev, kCublasT, int(s.k), &beta, out, kCublasT, int(s.n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
      } else {
        CHECK_CUBLAS(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, int(s.n), int(s.m), int(s.k), &alpha, o.b[0].dev, kCublasT, int(s.n),
                                  o.a.dev, kCublasT, int(s.k), &beta, out, kCublasT, int(s.n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
      }
    });
    double read_us = 0;
    if (s.m <= 51) {
      const int64_t n16 = int64_t(b_bytes) / 16;
      read_us = timer.median_us([&] { read_kernel<<<sms * 4, 256>>>(reinterpret_cast<const uint4*>(o.b[0].dev), n16, sink); });
    }
    std::vector<Path> paths;
    if (s.m <= 16 && g_wg_only) {
      add_paths(paths, {kGemv4, kGemv16, kWgPP64x128, kWgPP64x128s8, kWgSwap16});
    } else if (s.m <= 16) {
      add_paths(paths, {kGemv4, kGemv8, kGemv16});
    } else if (s.m <= 51) {
      add_paths(paths, {kTc64x128, kTc128x128});
    } else if (g_wg_only) {
      add_paths(paths, {kWg128x256, kWg128x128, kWgPP128x128, kWgPP64x256, kWgSwap272, kWgSwap208});
      if (s.m <= 1024) add_paths(paths, {kWg128x128sk});
    } else {
      add_paths(paths, {kTc128x128, kTc128x256, kTc128x128w8, kTc128x128k64, kTc256x128, kTc128x256k64, kTc128x256k64s4, kTc256x128k64,
                        kWg128x256, kWg256x128, kWg128x128});
    }
    for (Path path : paths) {
      const int64_t launches = kg::detail::wgmma_launches;
      const CheckResult r = check(o, path, Epi::Store, ws, ws_bytes, true);
      std::string name = std::string(path_name(path)) + ran_as(path, launches);
      if (is_wgmma_path(path) && kg::detail::wgmma_launches > launches) name += wgmma_launch_text();
      if (!r.ok) {
        ++g_failures;
        emit("| %s | %s | FAIL | | | | %.1f | | | |\n", shape_str(s).c_str(), name.c_str(), cublas_us);
        continue;
      }
      const StoreEpilogue e{out, s.m, s.n};
      const double us = timer.median_us([&] { CHECK_CUDA(run_path(path, o.p, e, ws, ws_bytes, 0)); });
      char read_cols[64] = " | ";
      if (read_us > 0) snprintf(read_cols, sizeof read_cols, "%.1f | %.2f", read_us, read_us / us);
      emit("| %s | %s | ok | %.1f | %.1f | %.0f | %.1f | %.2f | %s |\n", shape_str(s).c_str(), name.c_str(), us, flops / us * 1e-6,
           b_bytes / us * 1e-3, cublas_us, cublas_us / us, read_cols);
    }
    CHECK_CUDA(cudaFree(out));
    if (ws) CHECK_CUDA(cudaFree(ws));
    o.release();
  }
}

// Host cost of the Hopper path per call: encoding a tensor map (a cache miss), finding one in the
// cache, and a whole gemm_wgmma call (3 maps, launch) vs a variant-1 call, on a tiny problem.
static void measure_host_cost() {
  Operands o;
  o.make(Shape{256, 256, 256}, 1);
  T* out;
  CHECK_CUDA(cudaMalloc(&out, size_t(256) * 256 * sizeof(T)));
  auto now_us = [] {
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec * 1e-3;
  };
  kg::detail::TensorMapKey key{};
  key.data = o.a.dev, key.dims[0] = 4096, key.dims[1] = 4096, key.dims[2] = 1;
  key.strides[0] = 8192, key.strides[1] = 8192ull * 4096, key.box[0] = 64, key.box[1] = 128, key.element = BENCH_BF16 ? kiln::gemm::detail::kMapBf16 : kiln::gemm::detail::kMapF16;
  CUtensorMap map;
  const int kMiss = 2000, kHit = 100000, kCalls = 2000;
  double t0 = now_us();
  for (int i = 0; i < kMiss; ++i) {  // a new pointer each time: every call encodes
    key.data = reinterpret_cast<const char*>(o.a.dev) + 16 * (i % 4096);
    if (!kg::detail::encode_tensor_map(key, map)) {
      emit("host cost: cuTensorMapEncodeTiled refused the map\n");
      break;
    }
  }
  const double miss = (now_us() - t0) / kMiss;
  t0 = now_us();
  for (int i = 0; i < kHit; ++i) kg::detail::encode_tensor_map(key, map);
  const double hit = (now_us() - t0) / kHit;
  const StoreEpilogue e{out, 256, 256};
  // Host time per call, and the GPU's (events around the same calls): where they match, the host
  // waited for a full launch queue and the GPU time is what limits.
  double call[2], gpu[2];
  cudaEvent_t ev[2];
  for (auto& x : ev) CHECK_CUDA(cudaEventCreate(&x));
  for (int v = 0; v < 2; ++v) {
    // Warm-up first: the first call of a kernel pays one-time costs (loading the module, the
    // shared-memory attribute) that are not the per-call cost (run s22a: 24-35 us a call over 2000
    // calls without it, 6.2 us host / 8.5 us GPU in bench/gemm/host_cost.cu with 20 warm-up calls).
    for (int i = 0; i < 20; ++i) CHECK_CUDA(run_path(v == 0 ? kWg128x128 : kTc128x128k64, o.p, e, nullptr, 0, 0));
    CHECK_CUDA(cudaDeviceSynchronize());
    CHECK_CUDA(cudaEventRecord(ev[0], 0));
    t0 = now_us();
    for (int i = 0; i < kCalls; ++i) CHECK_CUDA(run_path(v == 0 ? kWg128x128 : kTc128x128k64, o.p, e, nullptr, 0, 0));
    call[v] = (now_us() - t0) / kCalls;
    CHECK_CUDA(cudaEventRecord(ev[1], 0));
    CHECK_CUDA(cudaEventSynchronize(ev[1]));
    float ms;
    CHECK_CUDA(cudaEventElapsedTime(&ms, ev[0], ev[1]));
    gpu[v] = ms * 1000.0 / kCalls;
  }
  for (auto& x : ev) CHECK_CUDA(cudaEventDestroy(x));
  emit("\n%s host cost per call: tensor map encode %.2f µs (cache miss), cached lookup %.3f µs; whole call (256^3, host side / GPU "
       "side) wgmma<128,128,6> %.2f / %.2f µs vs gemm<128,128,64,2,2,3> %.2f / %.2f µs\n", kDtype, miss, hit, call[0], gpu[0], call[1], gpu[1]);
  CHECK_CUDA(cudaFree(out));
  o.release();
}

// The gated MLP's gate*up product (one dual call) at M = 816, 16384 x 2048, B [K, N] and [N, K],
// checked then timed against two cuBLAS calls (gate and up; the activation is not counted for them).
static void run_dual_timing(cublasHandle_t handle, Timer& timer) {
  emit("\n### %s: gate*up dual product (vs 2 cuBLAS calls)\n\n| shape | path | check | µs | TFLOP/s | 2x cuBLAS µs | vs cuBLAS |\n"
       "|---|---|---|---|---|---|---|\n", kDtype);
  const float alpha = 1.0f, beta = 0.0f;
  for (int64_t m : {int64_t(816), int64_t(1), int64_t(16)})
  for (bool bk : {false, true}) {
    Shape s{m, 16384, 2048};
    s.b_k = bk;
    Operands o;
    o.make(s, 2);
    T* out;
    CHECK_CUDA(cudaMalloc(&out, size_t(s.m * s.n) * sizeof(T) * 2));
    const double cublas_us = timer.median_us([&] {
      for (int j = 0; j < 2; ++j)
        CHECK_CUBLAS(cublasGemmEx(handle, bk ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, int(s.n), int(s.m), int(s.k), &alpha, o.b[j].dev, kCublasT,
                                  int(bk ? s.k : s.n), o.a.dev, kCublasT, int(s.k), &beta, out + j * s.m * s.n, kCublasT, int(s.n),
                                  CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    });
    const std::vector<Path> paths = m > 16 ? std::vector<Path>{kWg128x128s4, kWgPP64x128, kWgDualHalves, kWgSwap136, kWgSwapPP64x136, kTc128x128w8}
                                           : std::vector<Path>{kGemv8, kWgPP64x128, kWgSwap16Dual};
    for (Path path : paths) {
      const int64_t launches = kg::detail::wgmma_launches;
      const CheckResult r = check(o, path, Epi::GateUp, nullptr, 0, true);
      const std::string name = std::string(path_name(path)) + ran_as(path, launches);
      if (!r.ok) ++g_failures;
      double us = 0;
      if (r.ok) {
        const GateUpEpilogue e{out, s.m, s.n};
        us = timer.median_us([&] { CHECK_CUDA(run_path(path, o.p, e, nullptr, 0, 0)); });
      }
      emit("| %s | %s | %s | %.1f | %.1f | %.1f | %.2f |\n", shape_str(s).c_str(), name.c_str(), r.ok ? "ok" : "FAIL", us,
           us > 0 ? 4.0 * s.m * s.n * s.k / us * 1e-6 : 0.0, cublas_us, us > 0 ? cublas_us / us : 0.0);
    }
    CHECK_CUDA(cudaFree(out));
    o.release();
  }
}

// The ViT's proj and fc2 (M = 1576, N = 768, K = 768 / 3072, B [K, N]) with a residual epilogue,
// on kiln's default tile: called from the accumulators (kReadsRows) vs staged through shared memory.
// Each checked against the store epilogue's output plus the residual, then timed.
static void run_residual_timing(Timer& timer) {
  emit("\n### %s: residual epilogue, from the accumulators vs staged vs staged + prefetch (wgmma<128,128,6,pingpong>)\n\n"
       "| shape | epilogue | check | µs | TFLOP/s |\n|---|---|---|---|---|\n", kDtype);
  for (int64_t k : {int64_t(768), int64_t(3072)}) {
    Shape s{1576, 768, k};
    s.b_k = false;
    Operands o;
    o.make(s, 1);
    const int64_t total = s.m * s.n;
    T *acc_out, *out, *res;
    CHECK_CUDA(cudaMalloc(&acc_out, size_t(total) * sizeof(T)));
    CHECK_CUDA(cudaMalloc(&out, size_t(total) * sizeof(T)));
    CHECK_CUDA(cudaMalloc(&res, size_t(total) * sizeof(T)));
    std::vector<T> res_host(static_cast<size_t>(total));
    for (auto& v : res_host) v = float_to_t(float(std::rand()) / RAND_MAX * 2.0f - 1.0f);
    CHECK_CUDA(cudaMemcpy(res, res_host.data(), res_host.size() * sizeof(T), cudaMemcpyHostToDevice));
    CHECK_CUDA(run_path(kWgPP128x128, o.p, StoreEpilogue{acc_out, s.m, s.n}, nullptr, 0, 0));
    std::vector<T> acc_host(static_cast<size_t>(total)), got(static_cast<size_t>(total));
    CHECK_CUDA(cudaMemcpy(acc_host.data(), acc_out, acc_host.size() * sizeof(T), cudaMemcpyDeviceToHost));
    for (int variant = 0; variant < 3; ++variant) {
      CHECK_CUDA(cudaMemset(out, 0xff, size_t(total) * sizeof(T)));
      auto run = [&] {
        ResidualPrefetchEpilogue with_prefetch;
        with_prefetch.out = out, with_prefetch.res = res, with_prefetch.m = s.m, with_prefetch.n = s.n;
        return variant == 0   ? run_path(kWgPP128x128, o.p, ResidualEpilogue<true>{out, res, s.m, s.n}, nullptr, 0, 0)
               : variant == 1 ? run_path(kWgPP128x128, o.p, ResidualEpilogue<false>{out, res, s.m, s.n}, nullptr, 0, 0)
                              : run_path(kWgPP128x128, o.p, with_prefetch, nullptr, 0, 0);
      };
      CHECK_CUDA(run());
      CHECK_CUDA(cudaDeviceSynchronize());
      CHECK_CUDA(cudaMemcpy(got.data(), out, got.size() * sizeof(T), cudaMemcpyDeviceToHost));
      // The reference rounds the accumulator to T before adding the residual; the kernel rounds only
      // the sum: they differ by at most half a unit of T's last place of each (u = 2^-8 bf16, 2^-11
      // fp16), of |acc| and of |acc + res| (the bound relative to |acc + res| alone fails for bf16
      // where the two nearly cancel).
      int64_t wrong = 0;
      const double u = BENCH_BF16 ? 0x1p-8 : 0x1p-11;
      for (int64_t i = 0; i < total; ++i) {
        const double acc = t_to_float(acc_host[size_t(i)]), want = acc + t_to_float(res_host[size_t(i)]);
        const double err = std::fabs(double(t_to_float(got[size_t(i)])) - want);
        if (!(err <= 1.01 * u * (std::fabs(acc) + std::fabs(want)) + 1e-6)) ++wrong;
      }
      if (wrong) ++g_failures;
      const double us = wrong ? 0.0 : timer.median_us([&] { CHECK_CUDA(run()); });
      emit("| %s | %s | %s | %.1f | %.1f |\n", shape_str(s).c_str(),
           variant == 0 ? "from accumulators (kReadsRows)" : variant == 1 ? "staged" : "staged, prefetched (kiln's)",
           wrong ? "FAIL" : "ok", us, us > 0 ? 2.0 * s.m * s.n * s.k / us * 1e-6 : 0.0);
    }
    CHECK_CUDA(cudaFree(acc_out));
    CHECK_CUDA(cudaFree(out));
    CHECK_CUDA(cudaFree(res));
    o.release();
  }
}

// ---- mode gemv: the small-M kernel alone ----
static void run_gemv_checks() {
  emit("\n### %s: small-M correctness (fp64 CPU reference; all outputs written, sampled/all values within tolerance)\n\n", kDtype);
  emit("| shape | path | epilogue | checked | worst err/tol | result |\n|---|---|---|---|---|---|\n");
  std::vector<Shape> shapes;
  // Edge tiles (N, K not multiples of the strips and k-steps, odd K), M = 1, 2, 15, 16, narrow N
  // with long K (the CTAs of a strip split K as a cluster), the Linear shapes sampled.
  const int64_t mnk[][3] = {{1, 13, 7},      {2, 200, 100},   {15, 33, 257},   {16, 130, 31},   {1, 40, 5000},
                            {2, 72, 20001},  {15, 100, 3001}, {16, 64, 16384}, {16, 2047, 4099}, {3, 4096, 4096},
                            {1, 2048, 16384}, {16, 2048, 16384}};
  for (auto& d : mnk)
    for (int lay = 0; lay < 2; ++lay) {
      Shape s{d[0], d[1], d[2]};
      s.b_k = lay == 0;
      shapes.push_back(s);
    }
  {
    Shape s{5, 40, 72};
    s.batch0 = 2, s.batch1 = 3;
    shapes.push_back(s);
    s.b_k = false;
    shapes.push_back(s);
    Shape t{1, 64, 4096};
    t.batch0 = 3, t.batch1 = 2;
    shapes.push_back(t);
    Shape u{16, 50, 37};
    u.tight = true;  // odd K, unpadded rows: gemv must refuse and run simt
    shapes.push_back(u);
    u.b_k = false;
    shapes.push_back(u);
  }
  for (const Shape& s : shapes) {
    if (g_small_only && s.m * s.n * s.k > (int64_t(2) << 20)) continue;
    for (Epi epi : {Epi::Store, Epi::BiasGelu, Epi::GateUp}) {
      Operands o;
      o.make(s, epi == Epi::GateUp ? 2 : 1);
      std::vector<Path> paths;
      if (epi == Epi::Store) {
        add_paths(paths, {kGemv4, kGemv8, kGemv16, kGemv8s1, kGemv16s1, kGemv8u8, kGemv8pf, kGemv8s2, kGemv16u8});
#if !BENCH_GEMV_ONLY
        add_paths(paths, {kWgPP64x128, kWgSwap16, kWgSwap16s5, kWgSwap16s5x2, kWgSwapPP64x16});
#endif
      } else if (epi == Epi::BiasGelu) {
        add_paths(paths, {kGemv8});
      } else {
        add_paths(paths, {kGemv8, kGemv16});
      }
      for (Path path : paths) {
        const CheckResult r = check(o, path, epi, nullptr, 0, true);
        if (!r.ok) ++g_failures;
        emit("| %s | %s | %s | %ld | %.3f | %s |\n", shape_str(s).c_str(), path_name(path), epi_name(epi), long(r.checked), r.worst,
             r.ok ? "ok" : "FAIL");
      }
      // B prefetched into L2 before pdl_wait (what generated code asks for when B is a weight).
      o.p.b_early = true;
      for (Path path : epi == Epi::Store ? std::vector<Path>{kGemv4, kGemv16} : std::vector<Path>{kGemv8}) {
        const CheckResult r = check(o, path, epi, nullptr, 0, true);
        if (!r.ok) ++g_failures;
        emit("| %s | %s, b_early | %s | %ld | %.3f | %s |\n", shape_str(s).c_str(), path_name(path), epi_name(epi), long(r.checked),
             r.worst, r.ok ? "ok" : "FAIL");
      }
      o.release();
    }
  }
}

// Per-call time of `calls` back-to-back launches, copy c % copies each (median of 5 batches).
template <typename F>
static double back_to_back_us(Timer& timer, int copies, F&& launch) {
  const int calls = 30;
  for (int i = 0; i < copies; ++i) launch(i);
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<float> ts;
  for (int r = 0; r < 5; ++r) {
    CHECK_CUDA(cudaEventRecord(timer.start, 0));
    for (int i = 0; i < calls; ++i) launch(i % copies);
    CHECK_CUDA(cudaEventRecord(timer.stop, 0));
    CHECK_CUDA(cudaEventSynchronize(timer.stop));
    float ms;
    CHECK_CUDA(cudaEventElapsedTime(&ms, timer.start, timer.stop));
    ts.push_back(ms * 1000.0f / calls);
  }
  std::sort(ts.begin(), ts.end());
  return ts[ts.size() / 2];
}

// GEMV_QUICK=1: mode gemv without its edge checks, timing B [K, N] at M = 1 and 8 only (each path is
// still checked at each shape before it is timed).
static bool gemv_quick() {
  const char* v = std::getenv("GEMV_QUICK");
  return v != nullptr && std::string(v) == "1";
}

static void run_gemv_timing(cublasHandle_t handle, Timer& timer, unsigned* sink, int sms) {
  emit("\n### %s: small-M timing (iso: one call after a 256 MB L2 flush, median of %d; b2b: per call of 30 back-to-back calls "
       "over rotated copies of B (>= 256 MB), median of 5; vs read = read-kernel time of the same bytes, measured the same way / time)\n\n",
       kDtype, timer.reps);
  emit("| shape | path | check | iso µs | iso vs read | b2b µs | b2b GB/s | b2b vs read | b2b cuBLAS µs | b2b vs cuBLAS |\n"
       "|---|---|---|---|---|---|---|---|---|---|\n");
  // GEMV_NK="2048x2048,256x2048": other N x K shapes (Gemma's attention projections), in place of
  // the Linear shapes.
  std::vector<std::array<int64_t, 2>> nk = {{16384, 2048}, {2048, 16384}, {4096, 4096}};
  if (const char* v = std::getenv("GEMV_NK")) {
    nk.clear();
    for (const char* q = v; *q;) {
      long long n = 0, k = 0;
      int used = 0;
      if (std::sscanf(q, "%lldx%lld%n", &n, &k, &used) != 2 || n < 1 || k < 1) {
        std::fprintf(stderr, "GEMV_NK=%s: expected NxK[,NxK...]\n", v);
        std::exit(2);
      }
      nk.push_back({n, k});
      q += used;
      if (*q == ',') ++q;
    }
  }
  const float alpha = 1.0f, beta = 0.0f;
  const bool quick = gemv_quick();
  for (int lay = 0; lay < (quick ? 1 : 2); ++lay)
    for (auto& d : nk) {
      double read_iso = 0, read_b2b = 0;
      for (int64_t m : {1, 8, 16}) {
        if (quick && m == 16) continue;
        Shape s{m, d[0], d[1]};
        s.b_k = lay == 1;  // [K, N] (MatMul, the benchmark's layout) first
        Operands o;
        o.make(s, 1);
        const double b_bytes = 2.0 * s.n * s.k;
        const int copies = int(std::max(2.0, std::ceil(double(size_t(256) << 20) / b_bytes)));
        std::vector<T*> bs{o.b[0].dev};
        for (int c = 1; c < copies; ++c) {
          T* q;
          CHECK_CUDA(cudaMalloc(&q, o.b[0].host.size() * sizeof(T)));
          CHECK_CUDA(cudaMemcpy(q, o.b[0].dev, o.b[0].host.size() * sizeof(T), cudaMemcpyDeviceToDevice));
          bs.push_back(q);
        }
        T* out;
        CHECK_CUDA(cudaMalloc(&out, size_t(s.m * s.n) * sizeof(T)));
        const int64_t n16 = int64_t(b_bytes) / 16;
        if (m == 1) {  // the read ceiling depends on the bytes only
          read_iso = timer.median_us([&] { read_kernel<<<sms * 4, 256>>>(reinterpret_cast<const uint4*>(o.b[0].dev), n16, sink); });
          read_b2b = back_to_back_us(timer, copies, [&](int c) {
            read_kernel<<<sms * 4, 256>>>(reinterpret_cast<const uint4*>(bs[size_t(c)]), n16, sink);
          });
          emit("| %s | read kernel | | %.1f | | %.1f | %.0f | | | |\n", shape_str(s).c_str(), read_iso, read_b2b, b_bytes / read_b2b * 1e-3);
        }
        const double cublas_b2b = back_to_back_us(timer, copies, [&](int c) {
          if (s.b_k) {
            CHECK_CUBLAS(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, int(s.n), int(s.m), int(s.k), &alpha, bs[size_t(c)], kCublasT,
                                      int(s.k), o.a.dev, kCublasT, int(s.k), &beta, out, kCublasT, int(s.n), CUBLAS_COMPUTE_32F,
                                      CUBLAS_GEMM_DEFAULT));
          } else {
            CHECK_CUBLAS(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, int(s.n), int(s.m), int(s.k), &alpha, bs[size_t(c)], kCublasT,
                                      int(s.n), o.a.dev, kCublasT, int(s.k), &beta, out, kCublasT, int(s.n), CUBLAS_COMPUTE_32F,
                                      CUBLAS_GEMM_DEFAULT));
          }
        });
        std::vector<Path> paths;
        add_paths(paths, {kGemv4, kGemv8, kGemv16, kGemv16u8});
#if !BENCH_GEMV_ONLY
        add_paths(paths, {kWgSwap16s5, kWgSwap16s5x2});  // (M = 1 too: 4096 x 4096 sits at the 80% line on gemv.cuh)
        if (m > 1) add_paths(paths, {kWgPP64x128, kWgSwap16, kWgSwapPP64x16});
#endif
        for (Path path : paths) {
          const CheckResult r = check(o, path, Epi::Store, nullptr, 0, true);
          if (!r.ok) {
            ++g_failures;
            emit("| %s | %s | FAIL | | | | | | | |\n", shape_str(s).c_str(), path_name(path));
            continue;
          }
          const StoreEpilogue e{out, s.m, s.n};
          const double iso = timer.median_us([&] { CHECK_CUDA(run_path(path, o.p, e, nullptr, 0, 0)); });
          kg::Problem p = o.p;
          const double b2b = back_to_back_us(timer, copies, [&](int c) {
            p.b[0].data = bs[size_t(c)];
            CHECK_CUDA(run_path(path, p, e, nullptr, 0, 0));
          });
          std::string name = path_name(path);
          if (is_wgmma_path(path)) name += wgmma_launch_text();
          emit("| %s | %s | ok | %.1f | %.2f | %.1f | %.0f | %.2f | %.1f | %.2f |\n", shape_str(s).c_str(), name.c_str(), iso,
               read_iso / iso, b2b, b_bytes / b2b * 1e-3, read_b2b / b2b, cublas_b2b, cublas_b2b / b2b);
        }
        for (size_t c = 1; c < bs.size(); ++c) CHECK_CUDA(cudaFree(bs[c]));
        CHECK_CUDA(cudaFree(out));
        o.release();
      }
    }
}

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "all";
  if (argc > 2) g_results = fopen(argv[2], "a");
  int dev = 0, sms = 0;
  CHECK_CUDA(cudaGetDevice(&dev));
  CHECK_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  g_small_only = mode == "small" || mode == "wgsmall";
  g_tc_only = mode == "tc";
  g_wg_only = mode == "wg" || mode == "wgsmall";
  CHECK_CUDA(cudaMalloc(&g_big_ws, size_t(kBigWsBytes)));
  emit("\n%s: Hopper kernel built: %s\n", kDtype, kg::kWgmmaBuilt ? "yes (KILN_GEMM_SM90A)" : "no (its paths run variant 1)");
  if (mode == "wg") measure_host_cost();
  if (mode == "wgprofile") {  // unchecked wgmma<128,256,4>, twice at 4096^3 with B [K, N] (for ncu)
    Operands o;
    Shape sh{4096, 4096, 4096};
    sh.b_k = false;
    o.make(sh, 1);
    T* out;
    CHECK_CUDA(cudaMalloc(&out, size_t(4096) * 4096 * sizeof(T)));
    const StoreEpilogue e{out, 4096, 4096};
    for (int i = 0; i < 2; ++i) CHECK_CUDA(run_path(kWg128x256, o.p, e, nullptr, 0, 0));
    CHECK_CUDA(cudaDeviceSynchronize());
    return 0;
  }
  if (mode == "profile") {  // unchecked gemm<128,128,32,2,2,4>, then gemm<128,256,64,2,4,3>, twice each at 4096^3 (for ncu)
    Operands o;
    o.make(Shape{4096, 4096, 4096}, 1);
    T* out;
    CHECK_CUDA(cudaMalloc(&out, size_t(4096) * 4096 * sizeof(T)));
    const StoreEpilogue e{out, 4096, 4096};
    for (Path path : {kTc128x128, kTc128x256k64})
      for (int i = 0; i < 2; ++i) CHECK_CUDA(run_path(path, o.p, e, nullptr, 0, 0));
    CHECK_CUDA(cudaDeviceSynchronize());
    return 0;
  }
  if (mode == "gemvprofile") {  // unchecked, for ncu (gemv_ncu.sh): per shape the read kernel then the default gemv;
                                // M from GEMV_PROFILE_M (default 1, at most 16), B from GEMV_PROFILE_B (kn, the default, or nk)
    const char* m_env = std::getenv("GEMV_PROFILE_M");
    const char* b_env = std::getenv("GEMV_PROFILE_B");
    const int64_t m = m_env ? std::atoll(m_env) : 1;
    if (m < 1 || m > 16) {
      std::fprintf(stderr, "gemvprofile: GEMV_PROFILE_M=%s is not in 1..16\n", m_env);
      return 2;
    }
    const bool b_nk = b_env != nullptr && std::strcmp(b_env, "nk") == 0;
    if (b_env != nullptr && !b_nk && std::strcmp(b_env, "kn") != 0) {
      std::fprintf(stderr, "gemvprofile: GEMV_PROFILE_B=%s is neither kn nor nk\n", b_env);
      return 2;
    }
    unsigned* sink;
    CHECK_CUDA(cudaMalloc(&sink, 4));
    const int64_t nk[][2] = {{16384, 2048}, {2048, 16384}, {4096, 4096}};
    for (auto& d : nk) {
      Shape sh{m, d[0], d[1]};
      sh.b_k = b_nk;
      Operands o;
      o.make(sh, 1);
      T* out;
      CHECK_CUDA(cudaMalloc(&out, size_t(sh.m * sh.n) * sizeof(T)));
      const StoreEpilogue e{out, sh.m, sh.n};
      const int64_t n16 = 2 * sh.n * sh.k / 16;
      for (int i = 0; i < 2; ++i) read_kernel<<<sms * 4, 256>>>(reinterpret_cast<const uint4*>(o.b[0].dev), n16, sink);
      for (int i = 0; i < 2; ++i) CHECK_CUDA(run_path(sh.n > 4096 ? kGemv4 : kGemv16, o.p, e, nullptr, 0, 0));
      CHECK_CUDA(cudaDeviceSynchronize());
      CHECK_CUDA(cudaFree(out));
      o.release();
    }
    return 0;
  }
  if (mode == "gemv-small") {  // the small-M edge checks under 2M MACs (for compute-sanitizer)
    g_small_only = true;
    run_gemv_checks();
    emit("\n%s: %d check failure(s)\n", kDtype, g_failures);
    return g_failures ? 1 : 0;
  }
  if (mode == "gemv") {
    if (!gemv_quick()) run_gemv_checks();
    cublasHandle_t handle;
    CHECK_CUBLAS(cublasCreate(&handle));
    Timer timer;
    unsigned* sink;
    CHECK_CUDA(cudaMalloc(&sink, 4));
    run_gemv_timing(handle, timer, sink, sms);
    CHECK_CUBLAS(cublasDestroy(handle));
    emit("\n%s: %d check failure(s)\n", kDtype, g_failures);
    if (g_results) fclose(g_results);
    return g_failures ? 1 : 0;
  }
#if BENCH_GEMV_ONLY
  fprintf(stderr, "built with BENCH_GEMV_ONLY: only mode gemv\n");
  return 2;
#endif
  if (!BENCH_TC_ALL && !g_wg_only && mode != "wgprofile") {
    fprintf(stderr, "built with BENCH_TC_ALL=0: only the modes wg and wgsmall\n");
    return 2;
  }
  if (mode == "check" || mode == "small" || mode == "all" || mode == "tc" || mode == "wg" || mode == "wgsmall") run_checks();
  if (mode == "time" || mode == "all" || mode == "tc" || mode == "wg") {
    cublasHandle_t handle;
    CHECK_CUBLAS(cublasCreate(&handle));
    Timer timer;
    unsigned* sink;
    CHECK_CUDA(cudaMalloc(&sink, 4));
    if (g_wg_only) run_dual_timing(handle, timer);
    if (g_wg_only) run_residual_timing(timer);
    run_timing(handle, timer, sink, sms);
    CHECK_CUBLAS(cublasDestroy(handle));
  }
  emit("\n%s: %d check failure(s)\n", kDtype, g_failures);
  if (g_results) fclose(g_results);
  return g_failures ? 1 : 0;
}
