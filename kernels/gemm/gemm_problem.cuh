#pragma once
// The contract between generated code and the contraction templates (kernels/gemm/): what a
// contraction is, how its operands lie in memory, and what the epilogue functor receives.
//
//   C[b, m, n] = sum_k A[b, m, k] * B_j[b, k, n]      (j = 0, or j = 0 and 1 for a dual product)
//
// The template computes the sums in fp32 and hands them to the epilogue, a functor printed by
// kiln's CUDA printer for each contraction site: it applies whatever elementwise chain followed
// the contraction in the model (casts, bias, residual, GELU, the gate*up product) and stores the
// result itself, so the template never knows the output's dtype or layout:
//
//   struct Epilogue {
//     __device__ void operator()(int64_t b, int64_t m, int64_t n, float acc0) const;             // one B
//     __device__ void operator()(int64_t b, int64_t m, int64_t n, float acc0, float acc1) const; // dual
//   };
//
// It is called exactly once per (b, m, n) with b < batch, m < m, n < n, from any thread.
#include <cuda_runtime.h>
#include <stdint.h>

#include <type_traits>
#include <utility>

namespace kiln::gemm {

constexpr int kMaxBatchRank = 4;

// One operand, elements of type T (the template's element type: __half or __nv_bfloat16).
// A's element (b, m, k) is at  data[batch_offset(b) + m * stride_mn + k * stride_k],
// B's element (b, k, n) is at  data[batch_offset(b) + n * stride_mn + k * stride_k],
// where batch_offset(b) = sum_d digit_d(b) * batch_stride[d], the digits of the flat batch index
// b over Problem::batch_extent (row-major; stride 0 broadcasts the operand along that dim).
struct Operand {
  const void* data = nullptr;
  int64_t stride_mn = 0;
  int64_t stride_k = 0;
  int64_t batch_stride[kMaxBatchRank] = {0, 0, 0, 0};
};

struct Problem {
  int64_t m = 0, n = 0, k = 0;
  int batch_rank = 0;                                  // 0: no batch (batch = 1)
  int64_t batch_extent[kMaxBatchRank] = {1, 1, 1, 1};
  Operand a;
  Operand b[2];
  int num_b = 1;                                       // 2: a dual product sharing A
  // True when no work enqueued on the stream before the call's kernel writes any B (a weight,
  // and the call is not the first launch of a generated function): the small-M kernel then
  // prefetches B while the kernel before it still runs (programmatic dependent launch, sm_90+).
  bool b_early = false;

  __host__ __device__ int64_t batch() const {
    int64_t p = 1;
    for (int d = 0; d < batch_rank; ++d) p *= batch_extent[d];
    return p;
  }
  // Element offset of operand `op` for flat batch index `b`.
  __host__ __device__ int64_t batch_offset(const Operand& op, int64_t b) const {
    int64_t offset = 0;
    for (int d = batch_rank - 1; d >= 0; --d) {
      offset += (b % batch_extent[d]) * op.batch_stride[d];
      b /= batch_extent[d];
    }
    return offset;
  }
};

// What an epilogue functor may declare about itself (generated ones do; a functor without the
// member gets the default), for kernels that can call it more than one way (gemm_wgmma.cuh):
//   kReadsRows: it loads global memory at an index that depends on the row or batch (a residual):
//     call it straight from the accumulator registers, every element unrolled, so that all of its
//     loads are in flight at once. Default true (the calling pattern every kernel supports).
//   kLong: its code is long (transcendental calls, divisions): call it from a rolled loop, so that
//     its code exists a few times rather than once per accumulator. Default false.
template <typename E, typename = void>
struct EpilogueReadsRows : std::true_type {};
template <typename E>
struct EpilogueReadsRows<E, std::void_t<decltype(E::kReadsRows)>> : std::bool_constant<E::kReadsRows> {};
template <typename E, typename = void>
struct EpilogueIsLong : std::false_type {};
template <typename E>
struct EpilogueIsLong<E, std::void_t<decltype(E::kLong)>> : std::bool_constant<E::kLong> {};
//   kAKMajor, kBKMajor: what the caller knows of an operand's layout when it is compiled (generated
//     code, from constant strides and extents): 1 when it is K-major (stride_k == 1, and
//     stride_mn != 1 or the M/N extent is 1; for B, every B), 0 when it is not, -1 (the default)
//     when that is known only per call. A kernel instantiates only the layouts the hint allows and
//     treats a call that contradicts it as one it cannot run (its fallback takes it), so a hint
//     costs no correctness, only the instantiations the calls cannot reach.
template <typename E, typename = void>
struct EpilogueAKMajor : std::integral_constant<int, -1> {};
template <typename E>
struct EpilogueAKMajor<E, std::void_t<decltype(E::kAKMajor)>> : std::integral_constant<int, E::kAKMajor> {};
template <typename E, typename = void>
struct EpilogueBKMajor : std::integral_constant<int, -1> {};
template <typename E>
struct EpilogueBKMajor<E, std::void_t<decltype(E::kBKMajor)>> : std::integral_constant<int, E::kBKMajor> {};
// Whether a layout hint (-1, 0, 1) allows an operand that is (`k_major`) or is not K-major.
constexpr bool layout_allows(int hint, bool k_major) { return hint < 0 || (hint == 1) == k_major; }
// Calls launch(std::bool_constant<a_k>, std::bool_constant<b_k>) for the call's layouts, so that a
// kernel's launcher names each layout's instantiation at one place (pruned there with
// layout_allows under `if constexpr`).
template <typename Launch>
void with_layouts(bool a_k, bool b_k, Launch&& launch) {
  using K = std::true_type;
  using MN = std::false_type;
  if (a_k) {
    b_k ? launch(K{}, K{}) : launch(K{}, MN{});
  } else {
    b_k ? launch(MN{}, K{}) : launch(MN{}, MN{});
  }
}
//   prefetch(b, m, n): issues, as L1 prefetches, the per-row loads the call at (b, m, n) will make
//     (generated for kReadsRows functors whose load addresses depend on b, m, n and sizes only), so
//     that a kernel can put every load of a group of elements in flight before calling it.
template <typename E, typename = void>
struct EpilogueHasPrefetch : std::false_type {};
template <typename E>
struct EpilogueHasPrefetch<E, std::void_t<decltype(std::declval<const E&>().prefetch(int64_t(0), int64_t(0), int64_t(0)))>>
    : std::true_type {};

__device__ __forceinline__ void prefetch_l1(const void* p) { asm volatile("prefetch.global.L1 [%0];" ::"l"(p)); }

}  // namespace kiln::gemm
