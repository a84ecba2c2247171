// The read ceiling of the quant benchmark: a plain streaming read of a buffer (the same bytes as
// a weight + its scales), so that every GEMV is reported against what a kernel that only reads
// those bytes costs on this GPU, in the same run and the same harness (bench.py).
//
//   kiln_bench_read(src, bytes, sink, pdl, stream)
//
// One wave of CTAs; each thread issues all of its 16-byte loads (ld.global.nc, L1::no_allocate,
// as the GEMV's weight loads) before it uses any, folds them with xor, and writes one word per
// CTA to `sink` only after griddepcontrol.wait (sink belongs to the previous kernel until then).
// pdl = 1 launches it as a programmatic dependent launch (the "chained" ceiling: the next read
// starts while this one drains, as the GEMVs do); 0 launches it plainly ("isolated").
// bytes must be a multiple of 16. Built by run.sh with nvcc beside libkiln_quant.
#include <cuda_runtime.h>

#include <cstdint>

namespace {

constexpr int kThreads = 512, kUnroll = 8;

__device__ __forceinline__ uint4 load_stream16(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

__global__ void __launch_bounds__(kThreads) read_kernel(const uint4* src, size_t units, uint32_t* sink) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  uint32_t acc = 0;
  for (; i + (kUnroll - 1) * stride < units; i += kUnroll * stride) {
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = load_stream16(src + i + u * stride);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < units; i += stride) {
    const uint4 v = load_stream16(src + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
  acc = __reduce_xor_sync(0xffffffffu, acc);
  if ((threadIdx.x & 31) == 0) atomicXor(sink + blockIdx.x, acc);
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int kiln_bench_read(const void* src, long long bytes, void* sink, int pdl,
                                                                      void* stream) {
  int sms = 0, per_sm = 0, dev = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, read_kernel, kThreads, 0);
  const size_t units = size_t(bytes) / 16;
  size_t blocks = size_t(sms) * size_t(per_sm > 0 ? per_sm : 1);
  const size_t needed = (units + kThreads - 1) / kThreads;
  if (blocks > needed) blocks = needed > 0 ? needed : 1;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = pdl ? 1 : 0;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(unsigned(blocks));
  cfg.blockDim = dim3(kThreads);
  cfg.stream = static_cast<cudaStream_t>(stream);
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  const cudaError_t e = cudaLaunchKernelEx(&cfg, read_kernel, static_cast<const uint4*>(src), units, static_cast<uint32_t*>(sink));
  return e == cudaSuccess ? int(cudaGetLastError()) : int(e);
}
