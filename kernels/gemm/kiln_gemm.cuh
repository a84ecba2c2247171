#pragma once
// The contraction templates that generated code instantiates (DESIGN.md: hand-written where a
// general schedule cannot reach peak). Generated code builds a Problem (gemm_problem.cuh), prints
// an epilogue functor, and calls one of the entry points below, choosing at run time from the
// bound dims (the default schedule prints the rule and its reason above the call):
//
//   gemv<T, GemvConfig<...>>(problem, epilogue, stream)              small M: streams B once
//   gemm<T, TileConfig<...>>(problem, epilogue, workspace, bytes, stream)  tensor cores
//   simt<T>(problem, epilogue, stream)                               any operand, fp32 FMA
//
// The epilogue type says how many B operands it takes: `static constexpr int kNumB` (1 or 2,
// matching Problem::num_b).
//
// T is __half or __nv_bfloat16 (both operands), or float when the user allowed TF32 (`kiln compile
// --tf32`), accumulation in fp32. Every entry point checks
// what its fast path needs (alignment, unit strides) and runs `simt` otherwise: an unsupported
// operand is slower, never wrong. All launch on `stream` only, allocate nothing, never
// synchronize, and return the launch's cudaError_t.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "gemm_problem.cuh"

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

// Small-M configuration: up to MAX_M rows of A per launch, WARPS warps per block.
template <int MAX_M_, int WARPS_>
struct GemvConfig {
  static constexpr int MAX_M = MAX_M_, WARPS = WARPS_;
};

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

// Until the tensor-core and small-M kernels land (kernels/gemm/ is being written), both entry
// points run the fallback: correct, slow.
template <typename T, typename Config, typename Epilogue>
cudaError_t gemm(const Problem& p, const Epilogue& epilogue, void* /*workspace*/, int64_t /*workspace_bytes*/,
                 cudaStream_t stream) {
  return simt<T>(p, epilogue, stream);
}

template <typename T, typename Config, typename Epilogue>
cudaError_t gemv(const Problem& p, const Epilogue& epilogue, cudaStream_t stream) {
  return simt<T>(p, epilogue, stream);
}

}  // namespace kiln::gemm
