#pragma once
// PTX wrappers shared by the contraction templates: mma.sync m16n8k16, ldmatrix, cp.async with
// zero fill, streaming loads. Portable PTX for sm_80+ (nothing sm_90a- or sm_100-only), so one
// header compiles for sm_80, sm_90 and sm_110.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <utility>

#include "gemm_problem.cuh"

namespace kiln::gemm::detail {

template <typename T>
constexpr bool kIsBf16 = std::is_same<T, __nv_bfloat16>::value;

// D += A·B, m16n8k16, 16-bit float operands (fp16 or bf16), fp32 accumulators.
template <typename T>
__device__ __forceinline__ void mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  if constexpr (kIsBf16<T>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Four 8x8 matrices of 16-bit elements; lane l gives the address of row l % 8 of matrix l / 8.
template <bool kTrans>
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
  if constexpr (kTrans) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(p)));
  } else {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(p)));
  }
}

// The same, from a shared-space byte address (lets the mainloop keep 32-bit addresses whose
// constant parts fold into the instruction's immediate offset).
template <bool kTrans>
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  if constexpr (kTrans) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
  } else {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
  }
}

// 16-byte global -> shared copy; bytes past `src_bytes` (0..16) are zero-filled and not read.
__device__ __forceinline__ void cp_async16(void* dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(smem_addr(dst)), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N));
}

// Streaming 16-byte load of data read once (weights): skip L1.
__device__ __forceinline__ uint4 load_stream16(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// L2 prefetch of the line holding p (no register, no wait).
__device__ __forceinline__ void prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }

// Programmatic dependent launch (sm_90+; no-ops below). A kernel launched with
// cudaLaunchAttributeProgrammaticStreamSerialization may start while the kernel before it on the
// stream still runs, once every block of that kernel has called pdl_trigger() (or exited). Before
// pdl_wait() it may read only data that no earlier work on the stream writes; pdl_wait() returns
// once the kernel before has finished and its writes are visible (at once without the attribute).
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Whether the device code of this build, as the current device runs it, was compiled for sm_90+
// (PTX version >= 9.0), i.e. holds the pdl_wait() of the kernels that call it: only then may they
// be launched with programmatic dependent launch. Looked up once per device through an empty kernel
// compiled with the same flags.
template <int>
__global__ void pdl_probe_kernel() {}
inline bool device_code_has_pdl() {
  static std::atomic<int> cache[64];  // per device: 0 not looked up, 1 yes, 2 no
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) {
    (void)cudaGetLastError();
    return false;
  }
  int known = cache[dev].load(std::memory_order_relaxed);
  if (known == 0) {
    cudaFuncAttributes attr{};
    const bool ok = cudaFuncGetAttributes(&attr, pdl_probe_kernel<0>) == cudaSuccess && attr.ptxVersion >= 90;
    if (!ok) (void)cudaGetLastError();
    known = ok ? 1 : 2;
    cache[dev].store(known, std::memory_order_relaxed);
  }
  return known == 1;
}

// Whether the environment leaves the switch `name` on: unset or anything but "0" (benchmarks compare
// a path on and off in one process: KILN_GEMM_SWAP, KILN_GEMV_WGMMA, KILN_GEMM_PDL).
inline bool env_switch_on(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr || std::strcmp(v, "0") != 0;
}

// Whether kernels/gemm's GEMM, convolution and attention kernels are launched with
// programmatic dependent launch: on unless KILN_GEMM_PDL=0 (benchmarks compare the two in one
// build), where the device code holds their pdl_wait (device_code_has_pdl).
inline bool gemm_pdl() {
  static const bool on = env_switch_on("KILN_GEMM_PDL");
  return on && device_code_has_pdl();
}

// The launch attribute of programmatic dependent launch (cudaLaunchKernelEx).
inline cudaLaunchAttribute programmatic_attribute() {
  cudaLaunchAttribute a;
  a.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  a.val.programmaticStreamSerializationAllowed = 1;
  return a;
}

// Launches `kernel` on `stream` with cudaLaunchKernelEx, as a programmatic dependent launch
// where `programmatic` (the kernel must then call pdl_wait() before its first global access).
template <typename... Params, typename... Args>
cudaError_t launch_maybe_programmatic(bool programmatic, void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem_bytes,
                                      cudaStream_t stream, Args&&... args) {
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem_bytes;
  config.stream = stream;
  cudaLaunchAttribute pdl = programmatic_attribute();
  if (programmatic) config.attrs = &pdl, config.numAttrs = 1;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

// Launches `kernel` on `stream`, programmatically where gemm_pdl() says so: the kernel must call
// pdl_wait() before its first global access (kernels/gemm's conv and attention kernels do).
template <typename... Params, typename... Args>
cudaError_t launch_programmatic(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem_bytes, cudaStream_t stream,
                                Args&&... args) {
  return launch_maybe_programmatic(gemm_pdl(), kernel, grid, block, smem_bytes, stream, std::forward<Args>(args)...);
}

// Whether kiln's generated kernels (src/codegen/CudaPrinter.cpp: every one calls pdl_trigger and
// then pdl_wait before anything else) are launched programmatically too: where gemm_pdl() says so,
// unless KILN_GEN_PDL=0. Their launch and set-up then overlap the tail of the kernel before them
// (Gemma layer at 16 tokens, H200: 110.4 -> 108.2 us, bench/gemm/NOTES.md session 33).
inline bool generated_pdl() {
  static const bool on = env_switch_on("KILN_GEN_PDL");
  return on && gemm_pdl();
}

// A generated kernel's launch (no dynamic shared memory): programmatic where `programmatic` and
// generated_pdl() say so, else in stream order (after all earlier work on the stream has finished).
template <typename... Params, typename... Args>
cudaError_t launch_generated(bool programmatic, void (*kernel)(Params...), dim3 grid, dim3 block, cudaStream_t stream,
                             Args&&... args) {
  return launch_maybe_programmatic(programmatic && generated_pdl(), kernel, grid, block, 0, stream, std::forward<Args>(args)...);
}

__device__ __forceinline__ float to_float(__half h) { return __half2float(h); }
__device__ __forceinline__ float to_float(__nv_bfloat16 h) { return __bfloat162float(h); }

// The fast paths read an operand in 16-byte vectors along its unit-stride axis: the data pointer
// 16-byte aligned and every other stride (mn or k, and the batch strides) a multiple of 8
// elements. `k_contiguous` says which axis is the unit-stride one.
inline bool vector_aligned(const Problem& p, const Operand& op, bool k_contiguous) {
  if (reinterpret_cast<uintptr_t>(op.data) % 16 != 0) return false;
  if (k_contiguous ? op.stride_k != 1 : op.stride_mn != 1) return false;
  if ((k_contiguous ? op.stride_mn : op.stride_k) % 8 != 0) return false;
  for (int d = 0; d < p.batch_rank; ++d)
    if (op.batch_stride[d] % 8 != 0) return false;
  return true;
}

// Which axis of an operand the fast paths stream along: 1 = k, 0 = m/n, -1 = neither (simt).
// An axis of extent 1 has a meaningless stride, so a k-contiguous operand with one row counts.
inline int vector_axis(const Problem& p, const Operand& op, int64_t mn_extent) {
  if (vector_aligned(p, op, true)) return 1;
  if (vector_aligned(p, op, false)) return 0;
  if (mn_extent == 1 && op.stride_k == 1 && reinterpret_cast<uintptr_t>(op.data) % 16 == 0) {
    for (int d = 0; d < p.batch_rank; ++d)
      if (op.batch_stride[d] % 8 != 0) return -1;
    return 1;
  }
  return -1;
}

// The launch attribute of 1-D thread-block clusters of `size` CTAs (sm_90+).
inline cudaLaunchAttribute cluster_attribute(int size) {
  cudaLaunchAttribute a = {};
  a.id = cudaLaunchAttributeClusterDimension;
  a.val.clusterDim.x = unsigned(size);
  a.val.clusterDim.y = 1;
  a.val.clusterDim.z = 1;
  return a;
}

// How many 1-D clusters of `size` CTAs of `kernel` (`threads` threads and `smem` bytes of dynamic
// shared memory each) can be resident at once: the occupancy API, which counts what fits in each
// GPC (on H100/H200 far less than SM slots / size for some sizes); 0 where it cannot say.
template <typename Kernel>
int max_active_clusters(Kernel kernel, int size, int threads, size_t smem) {
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(unsigned(size) * 1024u, 1, 1);  // (more clusters than can ever be resident)
  config.blockDim = dim3(unsigned(threads), 1, 1);
  config.dynamicSmemBytes = smem;
  cudaLaunchAttribute cluster = cluster_attribute(size);
  config.attrs = &cluster;
  config.numAttrs = 1;
  int count = 0;
  if (cudaOccupancyMaxActiveClusters(&count, kernel, &config) != cudaSuccess || count < 0) {
    (void)cudaGetLastError();
    return 0;
  }
  return count;
}

inline int device_sm_count() {
  int dev = 0, sms = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
    return 1;
  return sms;
}

}  // namespace kiln::gemm::detail
