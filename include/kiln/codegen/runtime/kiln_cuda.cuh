// Helper code for generated CUDA: half types from cuda_fp16.h / cuda_bf16.h (math in float),
// the portable operations of kiln_common.h, and the cross-thread reductions that row schedules
// use. Copied next to every generated source.
#ifndef KILN_CUDA_CUH_
#define KILN_CUDA_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#define KILN_HD __host__ __device__

namespace kiln {

KILN_HD inline float to_float(__half h) { return __half2float(h); }
KILN_HD inline float to_float(__nv_bfloat16 b) { return __bfloat162float(b); }
template <typename T>
KILN_HD T from_float(float f);
template <>
KILN_HD inline __half from_float<__half>(float f) {
  return __float2half_rn(f);
}
template <>
KILN_HD inline __nv_bfloat16 from_float<__nv_bfloat16>(float f) {
  return __float2bfloat16_rn(f);
}

}  // namespace kiln

#include "kiln_common.h"

namespace kiln {

template <>
struct is_half_like<__half> : std::true_type {};
template <>
struct is_half_like<__nv_bfloat16> : std::true_type {};

// e^x as 2^(x log2 e): one multiply and the exp2 unit, where expf spends several FMAs per element
// on range reduction (it shows in bf16 softmax, two elements per 4 bytes moved). Relative error
// under 1e-5 for |x| < 88 (the multiply's rounding scaled by |x log2 e|, plus exp2f's 2 ulp),
// well inside float32's conformance tolerance (rtol 1e-4).
__device__ inline float exp_via_exp2(float x) { return exp2f(x * 1.44269504088896341f); }

// 2^x on the exp2 unit alone (one MUFU.EX2; exp2f adds a scaling on either side of it for results
// below 2^-126): about 2 ulp, subnormal inputs and results flushed to zero. Intrinsic::Exp2.
__device__ inline float exp2_unit(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// 1 / x on the reciprocal unit alone (one MUFU.RCP; 1.0f / x adds a correctly rounded refinement
// and a slow path): about 1 ulp, subnormals flushed to zero. Intrinsic::Rcp.
__device__ inline float rcp_unit(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// Combiners of the cross-thread reductions (kiln::ir::ReduceKind order: sum, prod, min, max).
template <int Kind, typename T>
__device__ inline T combine(T a, T b) {
  if constexpr (Kind == 0) return a + b;
  else if constexpr (Kind == 1) return a * b;
  else if constexpr (Kind == 2) return min_(a, b);
  else return max_(a, b);
}

template <int Kind, typename T>
__device__ inline T warp_allreduce(T v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    v = combine<Kind>(v, static_cast<T>(__shfl_xor_sync(0xffffffffu, v, offset)));  // bool shuffles as int
  }
  return v;
}

// Every thread of the block gets the reduction of `v` over the block's threads. The block must
// be a multiple of 32 threads (at most 1024) and every thread must call it (block-uniform
// control flow): warp shuffles, then one value per warp through shared memory.
template <int Kind, typename T>
__device__ inline T block_allreduce(T v, T identity) {
  v = warp_allreduce<Kind>(v);
  if (blockDim.x <= 32) return v;
  __shared__ T partial[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  __syncthreads();  // partial[] may still be read by a previous call
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  v = lane < warps ? partial[lane] : identity;
  return warp_allreduce<Kind>(v);
}

}  // namespace kiln

#endif  // KILN_CUDA_CUH_
