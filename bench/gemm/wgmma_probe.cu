// Where the Hopper GEMM's time goes at short K (issue 8): the ViT's proj (1576 x 768 x 768) runs
// 78 tiles of 128 x 128, one per SM, in ~30 us where its wgmmas need ~3.5 us. This probe times
// kiln's wgmma kernel on that shape family with three epilogues that differ only in what they do
// per element (nothing but a guarded store, a plain store, a residual add), as K varies and with
// one tile alone, each against cuBLAS in the same run. Every result is checked against an fp64
// reference of a sample of elements before it is timed.
//
//   nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -DKILN_GEMM_SM90A \
//        -I kernels/gemm bench/gemm/wgmma_probe.cu -o wgmma_probe -lcublas && ./wgmma_probe
//   ./wgmma_probe ncu  (one launch of the store epilogue at 1576x768x768, for ncu -k regex:wgmma)
//   ./wgmma_probe small  (checks only, on edge shapes: what compute-sanitizer runs)
//   ./wgmma_probe m816  (the Pi0.5 prefix shapes, null/store/residual epilogues, then each tile's
//                        mainloop, epilogue and switch from the per-tile trace: KILN_WGMMA_TILE_TRACE)
//   ./wgmma_probe ncu816 [0|1]  (one launch, null epilogue, 816x16384x2048: narrow or ping-pong, for ncu)
#include <cublas_v2.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

// Per CTA, a globaltimer stamp at each of the kernel's trace points (gemm_wgmma.cuh): 0 entry,
// 1 barriers initialised, 2 producer done, 3/4/5 consumer 0's first stage arrived / mainloop done /
// epilogue done, 6/7/8 the same for consumer 1.
constexpr int kTracePoints = 9, kTraceCtas = 132;
__device__ unsigned long long g_trace[kTraceCtas * kTracePoints];
__device__ __forceinline__ unsigned long long globaltimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
#define KILN_WGMMA_TRACE(point) (g_trace[blockIdx.x * kTracePoints + (point)] = globaltimer())
// Per CTA, tile (its first kTraceTiles) and consumer: first stage arrived, mainloop done, epilogue done.
constexpr int kTraceTiles = 8;
__device__ unsigned long long g_tile_trace[kTraceCtas * kTraceTiles * 2 * 3];
#define KILN_WGMMA_TILE_TRACE(local, cw, point) \
  ((local) < kTraceTiles ? (void)(g_tile_trace[((blockIdx.x * kTraceTiles + (local)) * 2 + (cw)) * 3 + (point)] = globaltimer()) : (void)0)
#include "bench_timer.cuh"
#include "kiln_gemm.cuh"

namespace kg = kiln::gemm;
using T = __half;

// Stores only an accumulator that is NaN (never, on these inputs): the mainloop cannot be elided,
// the epilogue costs nothing but the call.
struct NullEpilogue {
  static constexpr int kNumB = 1;
  static constexpr bool kReadsRows = false, kLong = false;
  T* out;
  int64_t m, n;
  __device__ void operator()(int64_t b, int64_t i, int64_t j, float acc) const {
    if (acc != acc) out[(b * m + i) * n + j] = __float2half(acc);
  }
};
struct StoreEpilogue {
  static constexpr int kNumB = 1;
  static constexpr bool kReadsRows = false, kLong = false;
  T* out;
  int64_t m, n;
  __device__ void operator()(int64_t b, int64_t i, int64_t j, float acc) const { out[(b * m + i) * n + j] = __float2half(acc); }
};
struct ResidualEpilogue {
  static constexpr int kNumB = 1;
  static constexpr bool kReadsRows = true, kLong = false;
  T* out;
  const T* res;
  int64_t m, n;
  __device__ void operator()(int64_t b, int64_t i, int64_t j, float acc) const {
    out[(b * m + i) * n + j] = __float2half(acc + __half2float(__ldg(&res[(b * m + i) * n + j])));
  }
  __device__ void prefetch(int64_t b, int64_t i, int64_t j) const { kg::prefetch_l1(&res[(b * m + i) * n + j]); }
};

// gelu_tanh(gate) * up, a dual product's epilogue (the Gemma MLP's gate and up).
struct GateUpEpilogue {
  static constexpr int kNumB = 2;
  static constexpr bool kReadsRows = false, kLong = true;
  T* out;
  int64_t m, n;
  __device__ void operator()(int64_t b, int64_t i, int64_t j, float g, float u) const {
    const float gelu = 0.5f * g * (1.0f + tanhf(0.7978845608f * (g + 0.044715f * g * g * g)));
    out[(b * m + i) * n + j] = __float2half(gelu * u);
  }
};

enum Config { kPingPong128, kCoop128, kCoop128x256, kDualPingPong64, kDualCoop128 };
static const char* config_name(Config c) {
  switch (c) {
    case kPingPong128: return "wgmma<128,128,6,pingpong>";
    case kCoop128: return "wgmma<128,128,6>";
    case kCoop128x256: return "wgmma<128,256,4>";
    case kDualPingPong64: return "wgmma<64,128,5,pingpong> (dual)";
    case kDualCoop128: return "wgmma<128,128,4> (dual)";
  }
  return "?";
}
template <typename E>
static cudaError_t run(Config c, const kg::Problem& p, const E& e) {
  using Fallback = kg::TileConfig<128, 128, 64, 2, 2, 3>;
  switch (c) {
    case kPingPong128:
      if constexpr (E::kNumB == 1) return kg::gemm_wgmma<T, kg::WgmmaConfig<128, 128, 6, 1>, Fallback>(p, e, nullptr, 0, 0);
      break;
    case kCoop128:
      if constexpr (E::kNumB == 1) return kg::gemm_wgmma<T, kg::WgmmaConfig<128, 128, 6>, Fallback>(p, e, nullptr, 0, 0);
      break;

    case kCoop128x256:
      if constexpr (E::kNumB == 1) return kg::gemm_wgmma<T, kg::WgmmaConfig<128, 256, 4>, Fallback>(p, e, nullptr, 0, 0);
      break;
    case kDualPingPong64:
      if constexpr (E::kNumB == 2) return kg::gemm_wgmma<T, kg::WgmmaConfig<64, 128, 5, 1>, kg::TileConfig<128, 128, 32, 2, 4, 3>>(p, e, nullptr, 0, 0);
      break;
    case kDualCoop128:
      if constexpr (E::kNumB == 2) return kg::gemm_wgmma<T, kg::WgmmaConfig<128, 128, 4>, kg::TileConfig<128, 128, 32, 2, 4, 3>>(p, e, nullptr, 0, 0);
      break;
  }
  return cudaErrorInvalidValue;
}

// Cold: the median of 20 single launches after an L2 flush (bench_timer.cuh); warm: the mean of 50
// back-to-back launches (what a model's chain of calls sees).
template <typename F>
static void time_cold_warm(Timer& timer, F&& launch, double& cold_us, double& warm_us) {
  cold_us = timer.median_us(launch);
  CHECK_CUDA(cudaEventRecord(timer.start, 0));
  for (int i = 0; i < 50; ++i) launch();
  CHECK_CUDA(cudaEventRecord(timer.stop, 0));
  CHECK_CUDA(cudaEventSynchronize(timer.stop));
  float ms;
  CHECK_CUDA(cudaEventElapsedTime(&ms, timer.start, timer.stop));
  warm_us = ms * 1000.0f / 50;
}

static float rand_unit() { return float(std::rand()) / float(RAND_MAX) * 2.0f - 1.0f; }

struct Case {
  int64_t m, n, k;
  const char* what;
};

// Operands of one shape: A [M, K] row-major, B [K, N] row-major (a MatMul's weight), out [M, N].
struct Operands {
  Case c;
  std::vector<T> ha, hb, hb1, hr;
  T *a = nullptr, *b = nullptr, *b1 = nullptr, *out = nullptr, *res = nullptr, *cub = nullptr;
  kg::Problem p, dual;
  explicit Operands(const Case& shape) : c(shape) {
    ha.resize(size_t(c.m * c.k)), hb.resize(size_t(c.k * c.n)), hb1.resize(size_t(c.k * c.n)), hr.resize(size_t(c.m * c.n));
    for (auto* h : {&ha, &hb, &hb1, &hr})
      for (auto& v : *h) v = __float2half(rand_unit());
    for (T** d : {&a, &b, &b1, &out, &res, &cub}) CHECK_CUDA(cudaMalloc(d, std::max(std::max(ha.size(), hb.size()), hr.size()) * 2 * (d == &cub ? 2 : 1)));
    CHECK_CUDA(cudaMemcpy(a, ha.data(), ha.size() * 2, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(b, hb.data(), hb.size() * 2, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(b1, hb1.data(), hb1.size() * 2, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(res, hr.data(), hr.size() * 2, cudaMemcpyHostToDevice));
    p.m = c.m, p.n = c.n, p.k = c.k;
    p.a.data = a, p.a.stride_mn = c.k, p.a.stride_k = 1;
    p.b[0].data = b, p.b[0].stride_mn = 1, p.b[0].stride_k = c.n;
    dual = p;
    dual.num_b = 2;
    dual.b[1] = p.b[0];
    dual.b[1].data = b1;
  }
  ~Operands() {
    for (T* d : {a, b, b1, out, res, cub}) cudaFree(d);
  }
  void launch(Config cfg, int epi) const {
    if (epi == 0) CHECK_CUDA(run(cfg, p, NullEpilogue{out, c.m, c.n}));
    if (epi == 1) CHECK_CUDA(run(cfg, p, StoreEpilogue{out, c.m, c.n}));
    if (epi == 2) CHECK_CUDA(run(cfg, p, ResidualEpilogue{out, res, c.m, c.n}));
    if (epi == 3) CHECK_CUDA(run(cfg, dual, GateUpEpilogue{out, c.m, c.n}));
  }
  // A sample of elements against an fp64 reference (the null epilogue: that it wrote nothing).
  bool check(Config cfg, int epi) const {
    CHECK_CUDA(cudaMemset(out, 0x7c, hr.size() * 2));  // 0x7c7c: a finite fp16 no result equals
    launch(cfg, epi);
    CHECK_CUDA(cudaDeviceSynchronize());
    std::vector<T> got(hr.size());
    CHECK_CUDA(cudaMemcpy(got.data(), out, got.size() * 2, cudaMemcpyDeviceToHost));
    for (int s = 0; s < 4096; ++s) {
      const int64_t i = (s * 7919) % c.m, j = (s * 104729) % c.n;
      double want = 0, mag = 0, up = 0, up_mag = 0;
      for (int64_t kk = 0; kk < c.k; ++kk) {
        const double x = __half2float(ha[size_t(i * c.k + kk)]);
        const double t = x * __half2float(hb[size_t(kk * c.n + j)]), u = x * __half2float(hb1[size_t(kk * c.n + j)]);
        want += t, mag += std::fabs(t), up += u, up_mag += std::fabs(u);
      }
      if (epi == 3) {  // gelu_tanh(g) * u: |d/dg| <= 1.13 |u|, |d/du| <= |g|; fp16 output
        const double g = want, gelu = 0.5 * g * (1.0 + std::tanh(0.7978845608 * (g + 0.044715 * g * g * g)));
        const double bound = 1e-3 * (1.13 * std::fabs(up) * mag + std::fabs(g) * up_mag) + std::fabs(gelu * up) * 0x1p-10 + 1e-5;
        want = gelu * up, mag = bound / 1e-3;
      }
      if (epi == 2) want += __half2float(hr[size_t(i * c.n + j)]), mag += std::fabs(__half2float(hr[size_t(i * c.n + j)]));
      const uint16_t raw = reinterpret_cast<const uint16_t&>(got[size_t(i * c.n + j)]);
      const double v = __half2float(got[size_t(i * c.n + j)]);
      if (!(epi == 0 ? raw == 0x7c7c : std::fabs(v - want) <= 1e-3 * mag + std::fabs(want) * 0x1p-10 + 1e-6)) return false;
    }
    return true;
  }
};
static const char* epi_name(int epi) { return epi == 0 ? "null" : epi == 1 ? "store" : epi == 2 ? "residual" : "gelu(gate)*up"; }

// One cold launch (after an L2 flush) with the trace points on: where the time between the
// events goes, in us from the first CTA's entry (median and max over the CTAs).
static void trace(Timer& timer, const Operands& o, Config cfg, int epi) {
  std::vector<unsigned long long> zero(kTraceCtas * kTracePoints, 0), t(zero.size());
  std::vector<unsigned long long> tile_zero(kTraceCtas * kTraceTiles * 6, 0), tt(tile_zero.size());
  CHECK_CUDA(cudaMemcpyToSymbol(g_trace, zero.data(), zero.size() * 8));
  CHECK_CUDA(cudaMemcpyToSymbol(g_tile_trace, tile_zero.data(), tile_zero.size() * 8));
  CHECK_CUDA(cudaMemsetAsync(timer.flush, 1, timer.flush_bytes, 0));
  CHECK_CUDA(cudaEventRecord(timer.start, 0));
  o.launch(cfg, epi);
  CHECK_CUDA(cudaEventRecord(timer.stop, 0));
  CHECK_CUDA(cudaEventSynchronize(timer.stop));
  float ms;
  CHECK_CUDA(cudaEventElapsedTime(&ms, timer.start, timer.stop));
  CHECK_CUDA(cudaMemcpyFromSymbol(t.data(), g_trace, t.size() * 8));
  CHECK_CUDA(cudaMemcpyFromSymbol(tt.data(), g_tile_trace, tt.size() * 8));
  unsigned long long t0 = ~0ull;
  int ctas = 0;
  for (int b = 0; b < kTraceCtas; ++b)
    if (t[b * kTracePoints]) t0 = std::min(t0, t[b * kTracePoints]), ++ctas;
  std::printf("| %lldx%lldx%lld | %s | %s | %.1f | %d |", (long long)o.c.m, (long long)o.c.n, (long long)o.c.k, config_name(cfg),
              epi_name(epi), ms * 1000.0, ctas);
  for (int point = 0; point < kTracePoints; ++point) {
    std::vector<double> v;
    for (int b = 0; b < kTraceCtas; ++b)
      if (t[b * kTracePoints] && t[b * kTracePoints + point]) v.push_back((t[b * kTracePoints + point] - t0) * 1e-3);
    std::sort(v.begin(), v.end());
    if (v.empty()) std::printf(" - |");
    else std::printf(" %.2f / %.2f |", v[v.size() / 2], v.back());
  }
  std::printf("\n");
  // Per tile of the CTA (whichever consumer ran it): medians over the CTAs of its first stage,
  // mainloop done and epilogue done, and of the mainloop's length, the switch (the previous tile's
  // epilogue done -> this first stage) and the gap after the previous tile's mainloop (ping-pong:
  // the other warpgroup's).
  std::printf("\n  per tile (median over CTAs, us): tile: first stage / mainloop done / epilogue done; mainloop, switch, gap after the previous mainloop\n");
  auto tile_row = [&](int b, int tile) -> const unsigned long long* {
    const unsigned long long* r0 = &tt[((b * kTraceTiles + tile) * 2) * 3];
    return r0[0] ? r0 : r0 + 3;
  };
  for (int tile = 0; tile < kTraceTiles; ++tile) {
    std::vector<double> first, done, epi, loop, sw, gap;
    for (int b = 0; b < kTraceCtas; ++b) {
      const unsigned long long* r = tile_row(b, tile);
      if (!t[b * kTracePoints] || !r[0] || !r[1] || !r[2]) continue;
      first.push_back((r[0] - t0) * 1e-3), done.push_back((r[1] - t0) * 1e-3), epi.push_back((r[2] - t0) * 1e-3);
      loop.push_back((r[1] - r[0]) * 1e-3);
      const unsigned long long prev = tile ? tile_row(b, tile - 1)[2] : t[b * kTracePoints + 1];
      if (prev) sw.push_back((double(r[0]) - double(prev)) * 1e-3);
      if (tile) gap.push_back((double(r[0]) - double(tile_row(b, tile - 1)[1])) * 1e-3);
    }
    if (first.empty()) break;
    for (auto* v : {&first, &done, &epi, &loop, &sw, &gap}) std::sort(v->begin(), v->end());
    std::printf("  tile %d (%zu CTAs): %.2f / %.2f / %.2f; mainloop %.2f (max %.2f), switch %.2f (max %.2f), gap %.2f\n", tile, first.size(),
                first[first.size() / 2], done[done.size() / 2], epi[epi.size() / 2], loop[loop.size() / 2], loop.back(),
                sw.empty() ? 0.0 : sw[sw.size() / 2], sw.empty() ? 0.0 : sw.back(), gap.empty() ? 0.0 : gap[gap.size() / 2]);
  }
}

int main(int argc, char** argv) {
  const bool ncu = argc > 1 && std::strcmp(argv[1], "ncu") == 0;
  cublasHandle_t handle;
  if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) return 1;
  Timer timer;
  if (argc > 1 && std::strcmp(argv[1], "small") == 0) {  // checks only, edge shapes: for compute-sanitizer
    int failures = 0;
    for (const Case& c : std::vector<Case>{{1000, 640, 520, ""}, {300, 100, 200, ""}, {200, 72, 40, ""}, {1576, 768, 768, ""}, {129, 264, 136, ""}}) {
      Operands o(c);
      for (Config cfg : {kPingPong128, kCoop128, kCoop128x256, kDualPingPong64, kDualCoop128}) {
        const bool dual = cfg == kDualPingPong64 || cfg == kDualCoop128;
        for (int epi : dual ? std::vector<int>{3} : std::vector<int>{0, 1, 2}) {
          const bool ok = o.check(cfg, epi);
          failures += !ok;
          std::printf("%lldx%lldx%lld %s %s: %s\n", (long long)c.m, (long long)c.n, (long long)c.k, config_name(cfg), epi_name(epi), ok ? "ok" : "FAIL");
        }
      }
    }
    std::printf("failures: %d\n", failures);
    return failures ? 1 : 0;
  }
  if (ncu) {
    Operands o({1576, 768, 768, "ViT proj"});
    o.launch(kCoop128, 1);
    CHECK_CUDA(cudaDeviceSynchronize());
    return 0;
  }
  if (argc > 1 && std::strcmp(argv[1], "ncu816") == 0) {  // one launch, null epilogue, 816x16384x2048 (argv[2]: 0 narrow, 1 ping-pong)
    Operands o({816, 16384, 2048, "Linear M=816"});
    o.launch(argc > 2 && argv[2][0] == '1' ? kPingPong128 : kCoop128, 0);
    CHECK_CUDA(cudaDeviceSynchronize());
    return 0;
  }
  int failures = 0;
  const float one = 1.0f, zero = 0.0f;
  const bool m816 = argc > 1 && std::strcmp(argv[1], "m816") == 0;
  auto cublas = [&](const Operands& o, int gemms) {
    return [&o, gemms, &handle, &one, &zero] {
      for (int g = 0; g < gemms; ++g)
        cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, int(o.c.n), int(o.c.m), int(o.c.k), &one, g ? o.b1 : o.b, CUDA_R_16F, int(o.c.n), o.a,
                     CUDA_R_16F, int(o.c.k), &zero, o.cub + g * o.c.m * o.c.n, CUDA_R_16F, int(o.c.n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    };
  };
  // 1. The ViT's and the Linear benchmark's shapes on each tile, store and residual epilogues; dual
  //    products (gelu(gate)*up, vs two cuBLAS calls) on the dual tiles.
  std::printf("## Tiles x epilogues (cold: L2 flushed, median of 20; warm: mean of 50 back-to-back)\n\n"
              "| shape | what | config | epilogue | check | cold us | warm us | cuBLAS cold | cuBLAS warm | cold vs cuBLAS |\n|---|---|---|---|---|---|---|---|---|---|\n");
  const std::vector<Case> shapes{{1576, 768, 768, "ViT proj"},     {1576, 768, 3072, "ViT fc2"},      {1576, 2304, 768, "ViT qkv"},
                                 {1576, 3072, 768, "ViT fc1"},     {816, 16384, 2048, "Linear M=816"}, {816, 4096, 4096, "Linear M=816"},
                                 {816, 2048, 16384, "Linear M=816"}, {816, 16384, 2048, "Gemma gate*up M=816"},
                                 {4096, 4096, 4096, "4096^3"},      {1000, 640, 520, "edges, odd tile columns"},
                                 {300, 100, 200, "edges, one tile column"}, {1000, 640, 520, "edges gate*up, odd tile columns"}};
  // ./wgmma_probe m816: the Pi0.5 prefix shapes only, every single-product tile with the null
  // epilogue as well (the mainloop and tile switches without the stores), then their traces.
  const std::vector<Case> m816_shapes{{816, 16384, 2048, "Linear M=816"}, {816, 4096, 4096, "Linear M=816"}, {3264, 16384, 2048, "M=4x816"}};
  for (const Case& c : m816 ? m816_shapes : shapes) {
    const bool is_dual = std::strstr(c.what, "gate") != nullptr;
    Operands o(c);
    double cc, cw;
    time_cold_warm(timer, cublas(o, is_dual ? 2 : 1), cc, cw);
    const std::vector<Config> single = m816 ? std::vector<Config>{kCoop128, kCoop128x256, kPingPong128}
                                            : std::vector<Config>{kPingPong128, kCoop128, kCoop128x256};
    for (Config cfg : is_dual ? std::vector<Config>{kDualPingPong64, kDualCoop128} : single)
      for (int epi : is_dual ? std::vector<int>{3} : m816 ? std::vector<int>{0, 1, 2} : std::vector<int>{1, 2}) {
        const bool ok = o.check(cfg, epi);
        failures += !ok;
        double cold = 0, warm = 0;
        if (ok) time_cold_warm(timer, [&] { o.launch(cfg, epi); }, cold, warm);
        std::printf("| %lldx%lldx%lld | %s | %s | %s | %s | %.1f | %.1f | %.1f | %.1f | %.2f |\n", (long long)c.m, (long long)c.n, (long long)c.k, c.what,
                    config_name(cfg), epi_name(epi), ok ? "ok" : "FAIL", cold, warm, cc, cw, cold > 0 ? cc / cold : 0.0);
        std::fflush(stdout);
      }
  }
  // 2. Trace points, one cold launch each: median / max over the CTAs, us from the first entry.
  std::printf("\n## Trace (one cold launch; each point: median / max over CTAs, us after the first CTA's entry)\n\n"
              "| shape | config | epilogue | events us | CTAs | 0 entry | 1 barriers | 2 producer done | 3 c0 first stage | 4 c0 mainloop done | 5 c0 done | 6 c1 first stage | 7 c1 mainloop done | 8 c1 done |\n"
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const Case& c : m816 ? std::vector<Case>{{816, 16384, 2048, ""}} : std::vector<Case>{{1576, 768, 768, ""}, {1576, 3072, 768, ""}}) {
    Operands o(c);
    for (Config cfg : {kCoop128, kPingPong128})
      for (int epi : m816 ? std::vector<int>{0, 1} : std::vector<int>{1, 2}) {
        if (!o.check(cfg, epi)) {
          ++failures;
          std::printf("| %lldx%lldx%lld | %s | %s | FAIL |\n", (long long)c.m, (long long)c.n, (long long)c.k, config_name(cfg), epi_name(epi));
          continue;
        }
        for (int i = 0; i < 2; ++i) o.launch(cfg, epi);
        trace(timer, o, cfg, epi);
      }
  }
  std::printf("\nfailures: %d\n", failures);
  return failures ? 1 : 0;
}
