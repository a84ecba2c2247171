#pragma once
// The reference and fallback contraction: one thread per output element, fp32 accumulation over
// k in order, any strides, any alignment. Every fast entry point runs it for operands its fast
// path cannot read.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "gemm_problem.cuh"

namespace kiln::gemm {

namespace detail {

__device__ inline float as_float(float f) { return f; }
__device__ inline float as_float(__half h) { return __half2float(h); }
__device__ inline float as_float(__nv_bfloat16 h) { return __bfloat162float(h); }

// One thread per output element, fp32 accumulation over k in order. The reference and the
// fallback: any strides, any alignment.
template <typename T, typename Epilogue>
__global__ void __launch_bounds__(256) simt_kernel(Problem p, Epilogue epilogue) {
  const int64_t total = p.batch() * p.m * p.n;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t n = i % p.n, m = (i / p.n) % p.m, b = i / (p.n * p.m);
    const T* a = static_cast<const T*>(p.a.data) + p.batch_offset(p.a, b) + m * p.a.stride_mn;
    const T* b0 = static_cast<const T*>(p.b[0].data) + p.batch_offset(p.b[0], b) + n * p.b[0].stride_mn;
    float acc0 = 0.f;
    if constexpr (Epilogue::kNumB == 2) {
      const T* b1 = static_cast<const T*>(p.b[1].data) + p.batch_offset(p.b[1], b) + n * p.b[1].stride_mn;
      float acc1 = 0.f;
      for (int64_t k = 0; k < p.k; ++k) {
        const float x = as_float(a[k * p.a.stride_k]);
        acc0 += x * as_float(b0[k * p.b[0].stride_k]);
        acc1 += x * as_float(b1[k * p.b[1].stride_k]);
      }
      epilogue(b, m, n, acc0, acc1);
    } else {
      for (int64_t k = 0; k < p.k; ++k) acc0 += as_float(a[k * p.a.stride_k]) * as_float(b0[k * p.b[0].stride_k]);
      epilogue(b, m, n, acc0);
    }
  }
}

}  // namespace detail

template <typename T, typename Epilogue>
cudaError_t simt(const Problem& p, const Epilogue& epilogue, cudaStream_t stream) {
  const int64_t total = p.batch() * p.m * p.n;
  if (total == 0) return cudaSuccess;
  const int64_t blocks = (total + 255) / 256;
  detail::simt_kernel<T, Epilogue><<<unsigned(blocks < 65535 ? blocks : 65535), 256, 0, stream>>>(p, epilogue);
  return cudaGetLastError();
}

}  // namespace kiln::gemm
