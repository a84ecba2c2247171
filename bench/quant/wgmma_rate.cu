// Issue rate of Hopper warpgroup MMA in the shapes the 4-bit GEMMs use, in isolation: each
// consumer warpgroup of one CTA per SM issues `iters` groups of two wgmma m64nNk16 (A from
// registers, as GEMM variant 4, or from shared memory, as variant 3; B from shared memory),
// one commit per group and `wgmma.wait_group 1`, on constant operands (no loads, no barriers).
// Prints cycles per wgmma per warpgroup and the SM's MMA rate against the dense bf16 peak (1024
// FMA per cycle per SM... 2048 on H100/H200: m64n64k16 = 65536 FMA = 32 cycles).
//   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Iinclude -I. bench/quant/wgmma_rate.cu -o wgmma_rate
#include <cuda_runtime.h>

#include <cstdio>

#include "kernels/gemm/gemm_sm90_ptx.cuh"
#include "kernels/quant/w4_device.cuh"

using namespace kiln::gemm::sm90;

// kDecode (A from registers only): before each group the 8 A registers of its two wgmmas are
// written by variant 4's decode (decode_pair + the multiplier) from words that change per group.
template <int N, bool kRegA, bool kDecode = false>
__global__ void __launch_bounds__(384, 1) rate_kernel(int iters, int warpgroups, long long* cycles, float* sink) {
  extern __shared__ __align__(1024) unsigned char smem[];
  const int wg = threadIdx.x / 128;
  if (wg >= warpgroups) return;
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  for (int i = threadIdx.x; i < 49152 / 4; i += blockDim.x) reinterpret_cast<uint32_t*>(smem)[i] = 0x3c003c00u ^ i;
  asm volatile("bar.sync 1, %0;" ::"r"(warpgroups * 128));
  float acc[N / 2];
#pragma unroll
  for (int e = 0; e < N / 2; ++e) acc[e] = 0.0f;
  uint32_t a[4][4];
#pragma unroll
  for (int j = 0; j < 4; ++j)
#pragma unroll
    for (int r = 0; r < 4; ++r) a[j][r] = 0x3c003c00u + threadIdx.x + j + r;
  const uint64_t db = smem_desc(base + 16384, 16, 1024), da = smem_desc(base, 16, 1024);
  const long long t0 = clock64();
  uint32_t word = 0x12345678u + threadIdx.x, mul = 0x3f803f80u;
  const int t = threadIdx.x % 4;
  for (int it = 0; it < iters; it += 2) {
#pragma unroll
    for (int u = 0; u < 2; ++u) {  // (two groups per iteration: every A register set is static)
      wgmma_wait<1>();
      if constexpr (kDecode) {
#pragma unroll
        for (int d = 0; d < 2; ++d)
#pragma unroll
          for (int r = 0; r < 4; ++r)
            a[2 * u + d][r] = kiln::quant::gpu::mul2<true>(
                kiln::quant::gpu::decode_pair<kiln::quant::gpu::Format::NvFp4, true>(word ^ (r * 0x01010101u + d), t), mul);
        word = word * 1664525u + 1013904223u;
      }
      wgmma_fence();
#pragma unroll
      for (int d = 0; d < 2; ++d) {
        if constexpr (kRegA) {
          wgmma_rs<N, __nv_bfloat16>(acc, a[2 * u + d], db + 2 * d, 1);
        } else {
          wgmma<N, 0, 0, __nv_bfloat16>(acc, da + 2 * d, db + 2 * d, 1);
        }
      }
      wgmma_commit();
    }
  }
  wgmma_wait<0>();
  const long long t1 = clock64();
  float s = 0;
#pragma unroll
  for (int e = 0; e < N / 2; ++e) s += acc[e];
  if (threadIdx.x % 128 == 0) cycles[blockIdx.x * 3 + wg] = t1 - t0;
  if (s == 12345.0f) *sink = s;
}

template <int N, bool kRegA, bool kDecode = false>
void run(const char* name) {
  long long* cycles;
  float* sink;
  cudaMalloc(&cycles, 132 * 3 * sizeof(long long));
  cudaMalloc(&sink, 4);
  cudaFuncSetAttribute(rate_kernel<N, kRegA, kDecode>, cudaFuncAttributeMaxDynamicSharedMemorySize, 49152 + 1024);
  const int iters = 4096;
  for (int wgs = 1; wgs <= 3; ++wgs) {
    rate_kernel<N, kRegA, kDecode><<<132, 384, 49152 + 1024>>>(iters, wgs, cycles, sink);
    rate_kernel<N, kRegA, kDecode><<<132, 384, 49152 + 1024>>>(iters, wgs, cycles, sink);
    long long c[3] = {0, 0, 0};
    if (cudaDeviceSynchronize() != cudaSuccess || cudaMemcpy(c, cycles, sizeof(c), cudaMemcpyDeviceToHost) != cudaSuccess) {
      std::printf("%s: CUDA error\n", name);
      return;
    }
    const double per = double(c[0]) / (2.0 * iters);  // cycles per wgmma, warpgroup 0
    const double fma_per_cycle = wgs * 64.0 * N * 16 / per;
    std::printf("| %s | %d | %.1f | %.0f%% |\n", name, wgs, per, 100.0 * fma_per_cycle / 2048.0);
  }
  cudaFree(cycles);
  cudaFree(sink);
}

int main() {
  std::printf("| wgmma (bf16, 2 per commit group, wait_group 1) | warpgroups per SM | cycles per wgmma | of 2048 FMA/cycle/SM |\n|---|---|---|---|\n");
  run<64, true>("m64n64k16, A registers");
  run<64, true, true>("m64n64k16, A registers decoded before each group");
  run<128, true, true>("m64n128k16, A registers decoded before each group");
  run<128, true>("m64n128k16, A registers");
  run<64, false>("m64n64k16, A shared");
  run<128, false>("m64n128k16, A shared");
  run<256, false>("m64n256k16, A shared");
  return 0;
}
