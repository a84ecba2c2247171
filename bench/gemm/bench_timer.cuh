#pragma once
// What the kernels/gemm harnesses (gemm_bench.cu, wgmma_probe.cu) share: CHECK_CUDA, and the cold
// timer: the median of `reps` single launches between CUDA events, each after a 256 MB memset that
// flushes L2 (so operands come from DRAM, as in a model whose previous layer evicted them).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK_CUDA(x)                                                                         \
  do {                                                                                        \
    cudaError_t e_ = (x);                                                                     \
    if (e_ != cudaSuccess) {                                                                  \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));    \
      exit(2);                                                                                \
    }                                                                                         \
  } while (0)

struct Timer {
  void* flush = nullptr;
  size_t flush_bytes = size_t(256) << 20;
  cudaEvent_t start, stop;
  int reps = 20;
  Timer() {
    CHECK_CUDA(cudaMalloc(&flush, flush_bytes));
    CHECK_CUDA(cudaEventCreate(&start));
    CHECK_CUDA(cudaEventCreate(&stop));
  }
  template <typename F>
  double median_us(F&& launch) {
    for (int i = 0; i < 2; ++i) launch();
    CHECK_CUDA(cudaDeviceSynchronize());
    std::vector<float> ts;
    for (int i = 0; i < reps; ++i) {
      CHECK_CUDA(cudaMemsetAsync(flush, i & 0xff, flush_bytes, 0));
      CHECK_CUDA(cudaEventRecord(start, 0));
      launch();
      CHECK_CUDA(cudaEventRecord(stop, 0));
      CHECK_CUDA(cudaEventSynchronize(stop));
      float ms;
      CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
      ts.push_back(ms * 1000.0f);
    }
    std::sort(ts.begin(), ts.end());
    return ts[ts.size() / 2];
  }
};
