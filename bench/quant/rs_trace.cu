// Timeline of GEMM variant 4 (kernels/quant/w4_gemm_sm90_rs.cuh) on the GPU: one launch of the
// nvfp4 bf16 kernel for N x K at M tokens after warm-up launches, with a globaltimer stamp per
// CTA, stage and trace point (the kernel's KILN_W4_RS_TRACE): when the producer issued each stage,
// when consumer warpgroup 0 got it (its `full` wait returned) and finished it (last commit). Prints,
// per stage, the median over CTAs of each stamp (us from the first CTA's start) and of the wait
// for `full`. Timing only: the weights and scales are random bytes, the result is not checked
// (bench/quant/run.sh checks the kernel).
//   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -DKILN_GEMM_SM90A -Iinclude -I. \
//     bench/quant/rs_trace.cu -o rs_trace && ./rs_trace [N K M]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

constexpr int kMaxCtas = 1024, kMaxStages = 64, kPoints = 4;
__device__ unsigned long long g_trace[kMaxCtas * kMaxStages * kPoints];
__device__ __forceinline__ unsigned long long globaltimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
#define KILN_W4_RS_TRACE(point, stage)                                                     \
  do {                                                                                      \
    const unsigned cta = blockIdx.y * gridDim.x + blockIdx.x;                               \
    if (cta < kMaxCtas && (stage) < kMaxStages)                                             \
      g_trace[(size_t(cta) * kMaxStages + (stage)) * kPoints + (point)] = globaltimer();   \
  } while (0)
#include "kernels/quant/w4_launch.cuh"

using namespace kiln::quant::gpu;

#define CHECK(x)                                                                    \
  do {                                                                              \
    cudaError_t e_ = (x);                                                           \
    if (e_ != cudaSuccess) {                                                        \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); \
      std::exit(1);                                                                 \
    }                                                                               \
  } while (0)

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 16384, k = argc > 2 ? std::atoi(argv[2]) : 2048, m = argc > 3 ? std::atoi(argv[3]) : 51;
  std::vector<uint8_t> w(size_t(n) * k / 2), sc(size_t(n) * k / 16);
  std::vector<uint16_t> x(size_t(m) * k);
  unsigned seed = 1;
  auto rnd = [&] { return seed = seed * 1664525u + 1013904223u; };
  for (auto& b : w) b = uint8_t(rnd() >> 24);
  for (auto& b : sc) b = uint8_t(0x30 + (rnd() >> 29));  // E4M3 around 1
  for (auto& v : x) v = uint16_t(0x3f80 ^ ((rnd() >> 20) & 0x807f));  // bf16 around +-1
  uint8_t *dw, *dsc;
  void *dx, *dy;
  float* ds2;
  CHECK(cudaMalloc(&dw, w.size()));
  CHECK(cudaMalloc(&dsc, sc.size()));
  CHECK(cudaMalloc(&dx, x.size() * 2));
  CHECK(cudaMalloc(&dy, size_t(m) * n * 2));
  CHECK(cudaMalloc(&ds2, 4));
  const float one = 1.0f;
  CHECK(cudaMemcpy(dw, w.data(), w.size(), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dsc, sc.data(), sc.size(), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dx, x.data(), x.size() * 2, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(ds2, &one, 4, cudaMemcpyHostToDevice));
  LinearParams p{};
  p.x = dx, p.weight = dw, p.scale = dsc, p.scale2 = ds2, p.y = dy, p.m = m, p.n = n, p.k = k, p.group = 16;
  CUtensorMap xmap, wmap;
  if (!wgmma_x_tensor_map<__nv_bfloat16, 64>(p, xmap) || !rs_weight_tensor_map(p, wmap)) return std::fprintf(stderr, "tensor map refused\n"), 1;
  const auto ep = linear_store<__nv_bfloat16>(p);
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  for (int i = 0; i < 5; ++i) CHECK((launch_wgmma_bn<4, Format::NvFp4, __nv_bfloat16, 64>(p, xmap, wmap, ep, 1, nullptr)));
  CHECK(cudaEventRecord(a));
  CHECK((launch_wgmma_bn<4, Format::NvFp4, __nv_bfloat16, 64>(p, xmap, wmap, ep, 1, nullptr)));
  CHECK(cudaEventRecord(b));
  CHECK(cudaDeviceSynchronize());
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, a, b));
  std::vector<unsigned long long> t(size_t(kMaxCtas) * kMaxStages * kPoints);
  CHECK(cudaMemcpyFromSymbol(t.data(), g_trace, t.size() * sizeof(t[0])));
  const int ctas = std::min((m + 63) / 64 * (n / 128), kMaxCtas), stages = std::min((k + 255) / 256, kMaxStages);
  unsigned long long t0 = ~0ull;
  for (int c = 0; c < ctas; ++c) t0 = std::min(t0, t[(size_t(c) * kMaxStages) * kPoints + 3]);
  auto at = [&](int c, int s, int pt) { return (double(t[(size_t(c) * kMaxStages + s) * kPoints + pt]) - double(t0)) / 1e3; };
  auto median = [](std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; };
  std::printf("# GEMM variant 4 trace: nvfp4 bf16 %d x %d, M = %d, %d CTAs x %d stages; launch %.1f us (events)\n", n, k, m, ctas, stages, ms * 1e3);
  std::vector<double> start;
  for (int c = 0; c < ctas; ++c) start.push_back(at(c, 0, 3));
  std::printf("CTA start: median %.2f us, last %.2f us\n", median(start), *std::max_element(start.begin(), start.end()));
  std::printf("| stage | issued (producer) | consumers got it | consumers done | waited for it | issue -> got |\n|---|---|---|---|---|---|\n");
  for (int s = 0; s < stages; ++s) {
    std::vector<double> iss, got, done, wait, lat;
    for (int c = 0; c < ctas; ++c) {
      iss.push_back(at(c, s, 0)), got.push_back(at(c, s, 1)), done.push_back(at(c, s, 2));
      wait.push_back(at(c, s, 1) - (s > 0 ? at(c, s - 1, 2) : at(c, 0, 3)));
      lat.push_back(at(c, s, 1) - at(c, s, 0));
    }
    std::printf("| %d | %.2f | %.2f | %.2f | %.2f | %.2f |\n", s, median(iss), median(got), median(done), median(wait), median(lat));
  }
  std::vector<double> end;
  for (int c = 0; c < ctas; ++c) end.push_back(at(c, stages - 1, 2));
  std::printf("last stage done: median %.2f us, last CTA %.2f us\n", median(end), *std::max_element(end.begin(), end.end()));
  return 0;
}
