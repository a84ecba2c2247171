// The mma.sync ceiling of this GPU: every warp issues independent m16n8k16 mmas (fp16 and bf16
// operands from registers, fp32 accumulators), nothing else. The tensor-core GEMM's mainloop
// cannot beat this; compare cuBLAS (wgmma on sm_90) against it to see how far mma.sync can go.
//   nvcc -O3 -std=c++17 -gencode arch=compute_90,code=sm_90 mma_peak.cu -o mma_peak && ./mma_peak
#include <cstdio>

#include "../../kernels/gemm/gemm_ptx.cuh"

template <typename T>
__global__ void __launch_bounds__(256) mma_loop(float* out, int iters, uint32_t seed) {
  uint32_t a[4] = {seed, seed ^ 1u, seed ^ 2u, seed ^ 3u};
  const uint32_t b0 = seed * 3u, b1 = seed * 5u;
  float acc[8][4] = {};
  for (int it = 0; it < iters; ++it)
#pragma unroll
    for (int t = 0; t < 8; ++t) kiln::gemm::detail::mma16816<T>(acc[t], a, b0, b1);
  float s = 0;
#pragma unroll
  for (int t = 0; t < 8; ++t) s += acc[t][0] + acc[t][1] + acc[t][2] + acc[t][3];
  if (s == 12345.0f) out[threadIdx.x] = s;  // keeps the mmas live
}

template <typename T>
static void run(const char* name, int sms, float* out) {
  const int iters = 20000;
  for (int warps_per_sm : {4, 8, 16}) {
    const int blocks = sms * warps_per_sm / 8;
    mma_loop<T><<<blocks, 256>>>(out, 100, 0x3c003c00u);
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    cudaEventRecord(e0);
    mma_loop<T><<<blocks, 256>>>(out, iters, 0x3c003c00u);
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    const double flops = double(blocks) * 8 * iters * 8 * (2.0 * 16 * 8 * 16);
    printf("| %s | %d warps/SM | %.1f TFLOP/s |\n", name, warps_per_sm, flops / (ms * 1e-3) * 1e-12);
  }
}

int main() {
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  float* out;
  cudaMalloc(&out, 1024);
  printf("| operands | warps | mma.sync m16n8k16 |\n|---|---|---|\n");
  run<__half>("fp16", sms, out);
  run<__nv_bfloat16>("bf16", sms, out);
  const cudaError_t e = cudaDeviceSynchronize();
  printf("%s\n", cudaGetErrorString(e));
  return e != cudaSuccess;
}
