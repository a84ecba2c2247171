#pragma once
// GEMV variant 8, M = 1: variant 7's schedule and math (w4_gemv_half2.cuh), with the weights and
// scales of the warp's range copied into shared memory by cp.async before griddepcontrol.wait.
//
// Why. Run 1 (H100, bench/quant/NOTES.md session 4) showed in variant 7's SASS that ptxas had
// placed griddepcontrol.wait (ACQBULK) before every weight load (an acquire lets later loads stay
// later, and ptxas sank them there); forcing the order with a block boundary made it sink the
// register loads next to their uses instead, to save registers. Register-destination loads cannot
// be pinned ahead of the wait; cp.async (LDGSTS) writes shared memory and stays where it is
// written. So: the lane's scale pieces (one commit group) and its 16 weight units per chunk (four
// groups of four rows) are issued first, then the wait, then x into registers, then row group g is
// consumed after cp.async.wait_group of its group: rows are computed in the order they were
// requested, as their bytes arrive, while later rows are still in flight.
// One chunk per warp (the CPW template parameter is kept for two, which run 2 measured slower).
// Shared memory per warp and chunk: 16 rows x 32 lanes x 16 B of weights, then 16 rows x 128 B
// for the scale (and INT4 zero) bytes of the row's chunk.
#include "w4_gemv_half2.cuh"

namespace kiln::quant::gpu {

struct Gemv8Layout {
  static constexpr int kWeightBytes = kGemv7Rows * 32 * 16;
  static constexpr int kScaleRowBytes = 128;  // scales at 0, INT4 zeros at 64
  static constexpr int kChunkBytes = kWeightBytes + kGemv7Rows * kScaleRowBytes;
};
// Variants 10, 13, 14: a ring of 8 rows per warp instead of all 16 rows of the warp's chunk
// (variant 8): the rows of group g + slots are requested into the slot of group g once the lane has
// read it, so that a K = 16384 CTA (16 warps) takes 96 KB instead of 160, and two CTAs (this
// kernel's and the next one's, under programmatic dependent launch) are resident on one SM.
template <int RING_ROWS>
struct Gemv8Ring {
  static constexpr int kWeightBytes = RING_ROWS * 32 * 16;
  static constexpr int kChunkBytes = kWeightBytes + kGemv7Rows * Gemv8Layout::kScaleRowBytes;
};
static_assert(Gemv8Ring<kGemv7Rows>::kChunkBytes == Gemv8Layout::kChunkBytes, "variant 8's layout");
constexpr int kGemv10RingRows = 8;
inline size_t gemv8_smem_bytes(int k, int ring_rows = kGemv7Rows) {
  const int bytes = ring_rows == kGemv10RingRows ? Gemv8Ring<kGemv10RingRows>::kChunkBytes : Gemv8Layout::kChunkBytes;
  return size_t(k / kGemv7Chunk) * bytes;
}

// Variant 8 takes one chunk per warp and up to 16 warps (K <= 16384, 160 KB of shared memory):
// run 2 measured 2 chunks per warp with 8 warps at K = 16384 at 64% of the read ceiling, against
// 80% for 1 chunk per warp at K = 2048 (the compute after the last bytes arrive is per warp).
constexpr int kGemv8MaxWarps = 16;
inline bool gemv8_applies(int m, int n, int k) {
  return m == 1 && n % kGemv7Rows == 0 && k % kGemv7Chunk == 0 && k / kGemv7Chunk <= kGemv8MaxWarps;
}

// Bytes of scales (and, INT4, of zeros) per row in one 1024-k chunk, and per row of the tensor.
template <Format F>
__device__ __forceinline__ int chunk_scale_bytes(int group) {
  return F == Format::NvFp4 ? 64 : F == Format::MxFp4 ? 32 : 2 * (kGemv7Chunk / group);
}
template <Format F>
__device__ __forceinline__ size_t row_scale_bytes(const LinearParams& p) {
  return F == Format::NvFp4 ? size_t(p.k) / 16 : F == Format::MxFp4 ? size_t(p.k) / 32 : 2 * size_t(p.k / p.group);
}

// Scale pieces of one chunk (16 bytes each, spread over the lanes); the caller commits.
template <Format F, int WB = Gemv8Layout::kWeightBytes>
__device__ __forceinline__ void issue_chunk_scales(const LinearParams& p, uint8_t* smem, int row0, int chunk, int lane) {
  const int bytes = chunk_scale_bytes<F>(p.group), pieces = bytes / 16;
  const int tensors = F == Format::Int4 ? 2 : 1;
  const size_t stride = row_scale_bytes<F>(p);
  uint8_t* dst = smem + WB;
  for (int q = lane; q < kGemv7Rows * pieces * tensors; q += 32) {
    const int tensor = q / (kGemv7Rows * pieces), rem = q - tensor * kGemv7Rows * pieces;
    const int r = rem / pieces, part = rem - r * pieces;
    const uint8_t* base = static_cast<const uint8_t*>(tensor == 0 ? p.scale : p.zero);
    cp_async16(dst + r * Gemv8Layout::kScaleRowBytes + 64 * tensor + 16 * part,
               base + size_t(row0 + r) * stride + size_t(chunk) * bytes + 16 * part, true);
  }
}

// Rows 4g..4g+3 of one chunk: the lane's 16 bytes of each, into slot `slot` (4 rows); the caller
// commits.
__device__ __forceinline__ void issue_chunk_rows(const LinearParams& p, uint8_t* smem, int row0, int chunk, int lane, int g,
                                                 int slot) {
  const size_t row_bytes = size_t(p.k) / 2;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int r = 4 * g + i;
    cp_async16(smem + ((4 * slot + i) * 32 + lane) * 16, p.weight + size_t(row0 + r) * row_bytes + size_t(chunk) * 512 + 16 * lane, true);
  }
}
__device__ __forceinline__ void issue_chunk_rows(const LinearParams& p, uint8_t* smem, int row0, int chunk, int lane, int g) {
  issue_chunk_rows(p, smem, row0, chunk, lane, g, g);
}
// Row g of one chunk (the lane's 16 bytes) into slot row `slot`; the caller commits.
__device__ __forceinline__ void issue_chunk_row(const LinearParams& p, uint8_t* smem, int row0, int chunk, int lane, int g, int slot) {
  cp_async16(smem + (slot * 32 + lane) * 16, p.weight + size_t(row0 + g) * (size_t(p.k) / 2) + size_t(chunk) * 512 + 16 * lane, true);
}

__device__ __forceinline__ void cp_async_wait_upto7(int n) {
  switch (n) {
    case 0: cp_async_wait<0>(); break;
    case 1: cp_async_wait<1>(); break;
    case 2: cp_async_wait<2>(); break;
    case 3: cp_async_wait<3>(); break;
    case 4: cp_async_wait<4>(); break;
    case 5: cp_async_wait<5>(); break;
    case 6: cp_async_wait<6>(); break;
    default: cp_async_wait<7>(); break;
  }
}

// Row r's unit: its weights at slot row `sr` (r itself where every row has its own slot).
template <Format F, typename T, int WB = Gemv8Layout::kWeightBytes>
__device__ __forceinline__ Gemv7Unit<F, T> read_unit(const uint8_t* smem, int r, int lane, int group, int sr) {
  Gemv7Unit<F, T> u;
  u.w = *reinterpret_cast<const uint4*>(smem + (sr * 32 + lane) * 16);
  const uint8_t* sc = smem + WB + r * Gemv8Layout::kScaleRowBytes;
  if constexpr (F == Format::NvFp4) {
    u.s = *reinterpret_cast<const uint16_t*>(sc + 2 * lane);
    u.z = 0;
  } else if constexpr (F == Format::MxFp4) {
    u.s = sc[lane];
    u.z = 0;
  } else {
    const int gi = (32 * lane) / group;
    u.s = *reinterpret_cast<const uint16_t*>(sc + 2 * gi);
    u.z = *reinterpret_cast<const uint16_t*>(sc + 64 + 2 * gi);
  }
  return u;
}
template <Format F, typename T>
__device__ __forceinline__ Gemv7Unit<F, T> read_unit(const uint8_t* smem, int r, int lane, int group) {
  return read_unit<F, T>(smem, r, lane, group, r);
}

// EARLY (variant 12): griddepcontrol.launch_dependents right after the copies are requested,
// before the wait, so that the next kernel's CTAs may take free SM slots as soon as all of this
// kernel's CTAs run (the next kernel still waits for this one's completion before it reads x).
// PRE (variants 17, 18; 4 elsewhere, CPW = 1 only): row groups of 4 requested before the wait;
// the others right after the x loads (same commit order), so that under programmatic dependent
// launch this kernel's early CTAs queue fewer requests ahead of the previous kernel's last ones.
template <Format F, typename T, int CPW, class Ep, bool EARLY = false, int PRE = 4>
__global__ void __launch_bounds__(kGemv8MaxWarps * 32) w4_gemv8_kernel(LinearParams p, Ep ep) {
  static_assert(PRE == 4 || (CPW == 1 && PRE >= 1 && PRE < 4),
                "late row groups: one chunk per warp");
  extern __shared__ __align__(16) uint8_t gemv8_smem[];
  __shared__ float red[kGemv8MaxWarps][kGemv7Rows];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const int row0 = blockIdx.x * kGemv7Rows;
  uint8_t* mine = gemv8_smem + size_t(warp) * CPW * Gemv8Layout::kChunkBytes;
  // Groups, oldest first: the scales of all CPW chunks, then chunk 0 rows 0-3, 4-7, ..., chunk 1 ...
#pragma unroll
  for (int j = 0; j < CPW; ++j) issue_chunk_scales<F>(p, mine + j * Gemv8Layout::kChunkBytes, row0, warp + j * warps, lane);
  cp_async_commit();
#pragma unroll
  for (int j = 0; j < CPW; ++j) {
#pragma unroll
    for (int g = 0; g < PRE; ++g) {
      issue_chunk_rows(p, mine + j * Gemv8Layout::kChunkBytes, row0, warp + j * warps, lane, g);
      cp_async_commit();
    }
  }
  // The wait, the launch of dependents and the x loads sit in a block of their own behind a branch
  // that is never false at run time (m >= 1): ptxas otherwise placed the first cp.async wait
  // (DEPBAR) above the x loads, so that x was requested only after the first rows had arrived.
  uint4 xraw[CPW][4];
#pragma unroll
  for (int j = 0; j < CPW; ++j)
#pragma unroll
    for (int i = 0; i < 4; ++i) xraw[j][i] = make_uint4(0, 0, 0, 0);
  if constexpr (EARLY) pdl_trigger();
  if (p.m > 0) {
    pdl_wait();  // x (and y, below) belong to the previous kernel until here
    if constexpr (!EARLY) pdl_trigger();  // the next kernel may start and request its weights
#pragma unroll
    for (int j = 0; j < CPW; ++j) {
      const T* src = static_cast<const T*>(p.x) + (warp + j * warps) * kGemv7Chunk + 32 * lane;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        asm volatile("ld.global.nc.v4.u32 {%0,%1,%2,%3}, [%4];"
                     : "=r"(xraw[j][i].x), "=r"(xraw[j][i].y), "=r"(xraw[j][i].z), "=r"(xraw[j][i].w)
                     : "l"(src + 8 * i));
      }
    }
#pragma unroll
    for (int g = PRE; g < 4; ++g) {
      issue_chunk_rows(p, mine, row0, warp, lane, g);
      cp_async_commit();
    }
  }
  float acc[kGemv7Rows];
#pragma unroll
  for (int j = 0; j < CPW; ++j) {
    uint32_t xh[16];
    float xsum = 0.0f;
    const int s = convert_x_f16<T, F>(xraw[j], xh, &xsum);
    const float f = pow2(-s);  // 2^gemv7_shift is applied in the epilogue
    const uint8_t* chunk = mine + j * Gemv8Layout::kChunkBytes;
#pragma unroll
    for (int g = 0; g < 4; ++g) {
      cp_async_wait_upto7((CPW - 1 - j) * 4 + 3 - g);
      if (j == 0 && g == 0) __syncwarp();  // the scale pieces other lanes copied
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int r = 4 * g + i;
        const float d = unit_dot<F, T>(read_unit<F, T>(chunk, r, lane, p.group), xh, xsum);
        acc[r] = j == 0 ? d * f : fmaf(d, f, acc[r]);
      }
    }
  }
  gemv7_epilogue<F, T, kGemv8MaxWarps>(p, acc, red, lane, warp, warps, row0, ep);
}

// Variants 10, 13 and 14: variant 8 with one chunk per warp and a ring of 8 rows per warp in
// slots of SR rows (SR = 4: variants 10 and 13; SR = 1: variant 14). Groups, oldest first: the
// scales of the chunk (all 16 rows), then row groups 0 .. 8/SR - 1; the wait and the x loads as in
// variant 8; then row group g is consumed from its slot after cp.async.wait_group, and group
// g + 8/SR (if any) is requested into that slot. A lane reads only the weight units it copied
// itself (the scales, copied by all lanes, are never overwritten), so the refill needs no barrier.
// EARLY (variant 13): launch_dependents before the wait, as variant 12.
// __launch_bounds__(512, 2): at most 64 registers, so that two 16-warp CTAs (96 KB each) are
// resident on one SM.
template <Format F, typename T, int SR, bool EARLY, class Ep>
__global__ void __launch_bounds__(kGemv8MaxWarps * 32, 2) w4_gemv10_kernel(LinearParams p, Ep ep) {
  static_assert(SR == 4 || SR == 1, "slots of 4 rows or of 1 row");
  using L = Gemv8Ring<kGemv10RingRows>;
  constexpr int kSlots = kGemv10RingRows / SR, kGroups = kGemv7Rows / SR;
  extern __shared__ __align__(16) uint8_t gemv8_smem[];
  __shared__ float red[kGemv8MaxWarps][kGemv7Rows];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int row0 = blockIdx.x * kGemv7Rows;
  uint8_t* mine = gemv8_smem + size_t(warp) * L::kChunkBytes;
  issue_chunk_scales<F, L::kWeightBytes>(p, mine, row0, warp, lane);
  cp_async_commit();
#pragma unroll
  for (int g = 0; g < kSlots; ++g) {
    if constexpr (SR == 4) {
      issue_chunk_rows(p, mine, row0, warp, lane, g, g);
    } else {
      issue_chunk_row(p, mine, row0, warp, lane, g, g);
    }
    cp_async_commit();
  }
  uint4 xraw[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) xraw[i] = make_uint4(0, 0, 0, 0);
  if constexpr (EARLY) pdl_trigger();
  if (p.m > 0) {  // never false: keeps the wait and the x loads in a block of their own (variant 8)
    pdl_wait();
    if constexpr (!EARLY) pdl_trigger();
    const T* src = static_cast<const T*>(p.x) + warp * kGemv7Chunk + 32 * lane;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      asm volatile("ld.global.nc.v4.u32 {%0,%1,%2,%3}, [%4];"
                   : "=r"(xraw[i].x), "=r"(xraw[i].y), "=r"(xraw[i].z), "=r"(xraw[i].w)
                   : "l"(src + 8 * i));
    }
  }
  float acc[kGemv7Rows];
  uint32_t xh[16];
  float xsum = 0.0f;
  const int s = convert_x_f16<T, F>(xraw, xh, &xsum);
  const float f = pow2(-s);  // 2^gemv7_shift is applied in the epilogue
#pragma unroll
  for (int g = 0; g < kGroups; ++g) {
    // row groups requested so far: min(kGroups, kSlots + g); group g must have landed
    const int issued = kSlots + g < kGroups ? kSlots + g : kGroups;
    cp_async_wait_upto7(issued - g - 1);
    if (g == 0) __syncwarp();  // the scale pieces other lanes copied
    const int slot = g % kSlots;
#pragma unroll
    for (int i = 0; i < SR; ++i) {
      const int r = SR * g + i;
      acc[r] = unit_dot<F, T>(read_unit<F, T, L::kWeightBytes>(mine, r, lane, p.group, SR * slot + i), xh, xsum) * f;
    }
    if (g + kSlots < kGroups) {
      if constexpr (SR == 4) {
        issue_chunk_rows(p, mine, row0, warp, lane, g + kSlots, slot);
      } else {
        issue_chunk_row(p, mine, row0, warp, lane, g + kSlots, slot);
      }
      cp_async_commit();
    }
  }
  gemv7_epilogue<F, T, kGemv8MaxWarps>(p, acc, red, lane, warp, int(blockDim.x >> 5), row0, ep);
}

// Launches `kKernel` on variant 8's grid and block (a CTA per kGemv7Rows rows, a warp per
// kGemv7Chunk of K) with `smem` bytes of dynamic shared memory, as a programmatic dependent launch
// when `pdl`. `max_smem`, the most any call of the kernel asks, is set once per kernel.
template <auto kKernel, class Ep>
cudaError_t launch_on_gemv8_grid(size_t smem, size_t max_smem, const LinearParams& p, const Ep& ep, bool pdl, cudaStream_t stream) {
  static const cudaError_t attr = cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(max_smem));
  if (attr != cudaSuccess) return attr;
  cudaLaunchAttribute la[1];
  la[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  la[0].val.programmaticStreamSerializationAllowed = pdl ? 1 : 0;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(p.n / kGemv7Rows);
  cfg.blockDim = dim3(p.k / kGemv7Chunk * 32);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = la;
  cfg.numAttrs = 1;
  if (cudaError_t e = cudaLaunchKernelEx(&cfg, kKernel, p, ep)) return e;
  return cudaGetLastError();
}

// `pre`: row groups requested before the wait (4, 2 or 1; see w4_gemv8_kernel's PRE).
template <Format F, typename T, class Ep>
cudaError_t launch_gemv8(const LinearParams& p, const Ep& ep, bool pdl, cudaStream_t stream,
                         bool early = false, int pre = 4) {
  const size_t smem = gemv8_smem_bytes(p.k), max_smem = gemv8_smem_bytes(kGemv8MaxWarps * kGemv7Chunk);
  if (early)
    return launch_on_gemv8_grid<w4_gemv8_kernel<F, T, 1, Ep, true>>(smem, max_smem, p, ep, pdl,
                                                                    stream);
  if (pre == 2)
    return launch_on_gemv8_grid<w4_gemv8_kernel<F, T, 1, Ep, false, 2>>(smem, max_smem, p, ep, pdl,
                                                                        stream);
  if (pre == 1)
    return launch_on_gemv8_grid<w4_gemv8_kernel<F, T, 1, Ep, false, 1>>(smem, max_smem, p, ep, pdl,
                                                                        stream);
  return launch_on_gemv8_grid<w4_gemv8_kernel<F, T, 1, Ep>>(smem, max_smem, p, ep, pdl, stream);
}

// Variant 10 (SR 4), 13 (SR 4, early launch of dependents) or 14 (SR 1); same grid and block as
// variant 8, where gemv8_applies.
template <Format F, typename T, int SR, bool EARLY, class Ep>
cudaError_t launch_gemv10_as(const LinearParams& p, const Ep& ep, bool pdl, cudaStream_t stream) {
  return launch_on_gemv8_grid<w4_gemv10_kernel<F, T, SR, EARLY, Ep>>(
      gemv8_smem_bytes(p.k, kGemv10RingRows), gemv8_smem_bytes(kGemv8MaxWarps * kGemv7Chunk, kGemv10RingRows), p, ep, pdl, stream);
}
template <Format F, typename T, class Ep>
cudaError_t launch_gemv10(const LinearParams& p, const Ep& ep, int variant, bool pdl, cudaStream_t stream) {
  if (variant == 13) return launch_gemv10_as<F, T, 4, true>(p, ep, pdl, stream);
  if (variant == 14) return launch_gemv10_as<F, T, 1, false>(p, ep, pdl, stream);
  return launch_gemv10_as<F, T, 4, false>(p, ep, pdl, stream);
}

}  // namespace kiln::quant::gpu
