#pragma once
// Implicit-GEMM convolution, variant 2 ("patch"): the same contraction as conv_implicit_gemm.cuh
// (m = output channel, n = flat output pixel (image, oh, ow), k = (c, kh, kw); A = the weight
// [OC, C, KH, KW], B = the implicit im2col of an NCHW image), computed without gathering B
// element by element from global memory:
//
//   * The k loop runs over chunks of 16 input channels (k = 16 * KH * KW per chunk). For a chunk,
//     a CTA copies with cp.async (16, 8 or 4 bytes: the widest that the image width allows)
//       - the weight rows [BM, 16 * KH * KW] (contiguous in the weight: 16-byte copies), and
//       - the input "patch": the 16 channels' whole input rows that the CTA's BN output pixels
//         read (with the halo of the window; for pixels of several images, one run of rows per
//         image), each row at a fixed shared-memory column, zeros for padding rows and columns;
//     and every input value is then read from shared memory by all KH * KW taps that use it,
//     instead of KH * KW times from L1/L2.
//   * B fragments are built from the patch by 16-bit shared loads: lane (g, t4) of an m16n8k16
//     mma holds B[k][n] for k = 2 t4 + {0, 1, 8, 9}, n = g; its pixel's patch offset is fixed for
//     the whole reduction (a register per n8 tile) and a k's offset (channel plane + kh row + kw
//     column) comes from a per-CTA table, so a B element costs one shared load and an add.
//     (ldmatrix cannot be used on B: the taps shift the pixel rows by one element, breaking its
//     16-byte alignment.) A fragments are ldmatrix'ed as in gemm_tensorcore.cuh.
//   * Each warp owns a 64 x 64 output tile (4 x 8 mma tiles): B shared loads per mma = 1, A
//     ldmatrix per mma = 1/8. Fragments of the next 16-k slice are loaded before the current
//     slice's mmas. Chunks are double-buffered (cp.async groups, one barrier per chunk).
//
// Taken by conv_auto (at the end of this file, called by kiln_gemm.cuh's conv), unless the Hopper
// kernel (conv_wgmma.cuh) takes the convolution, when: C % 16 == 0,
// KH * KW <= 16, the image width even, the weight k-contiguous with 16-byte aligned rows, and the
// patch fits in shared memory; any stride, dilation and padding; 1-D (height 1) and 2-D. Everything
// else keeps the gather kernel of conv_implicit_gemm.cuh.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include <type_traits>

#include "conv_direct.cuh"
#include "conv_implicit_gemm.cuh"
#include "conv_wgmma.cuh"
#include "gemm_problem.cuh"
#include "gemm_ptx.cuh"

namespace kiln::gemm {

namespace detail {

// BM x BN per CTA, every warp 64 x 64; kMinBlocks CTAs per SM (the register cap follows).
template <int BM_, int BN_, int WARPS_M_, int WARPS_N_, int MIN_BLOCKS_>
struct PatchTile {
  static constexpr int BM = BM_, BN = BN_, WARPS_M = WARPS_M_, WARPS_N = WARPS_N_,
                       kMinBlocks = MIN_BLOCKS_;
  static constexpr int kThreads = 32 * WARPS_M * WARPS_N;
  static_assert(BM == 64 * WARPS_M && BN == 64 * WARPS_N, "PatchTile: 64 x 64 per warp");
};
// Output channels > 64: 128 x 256, 8 warps, one CTA per SM. At most 64: 64 x 256, 4 warps, two.
using PatchTileWide = PatchTile<128, 256, 2, 4, 1>;
using PatchTileNarrow = PatchTile<64, 256, 1, 4, 2>;

constexpr int kPatchChannels = 16;  // input channels per k chunk
constexpr int kPatchStages = 2;

// The host-computed layout of one CTA's shared memory (element counts are 16-bit elements).
struct PatchGeometry {
  int chunk_k = 0;       // 16 * KH * KW: k per chunk
  int a_ld = 0;          // weight tile row pitch: chunk_k + 8 (ldmatrix without bank conflicts)
  int slots = 0;         // patch rows per channel, the most any CTA needs
  int row_pitch = 0;     // elements per patch row
  int plane_pitch = 0;   // elements per channel of the patch
  int col0 = 0;          // patch column of image column 0 (a multiple of 8: 16-byte copies)
  int vec = 16;          // bytes per cp.async of the patch: 16, 8 or 4
  uint32_t a_bytes = 0;  // one stage's weight tile
  uint32_t stage_bytes = 0;
  uint32_t tables = 0;  // offset of the k table (int32 per k) and the row table (int64 per slot)
  size_t smem_bytes = 0;
};

// The patch rows of the CTA whose first output pixel is n0 (see the kernel): a run of rows per
// image; `first` rows for the first image, `full` for every later one.
struct PatchRows {
  int64_t image0;
  int first_oh, first, full, total;
};

__device__ __forceinline__ PatchRows patch_rows(int64_t n0, int64_t n_end, int64_t out_h,
                                                int64_t out_w, int stride_h, int extent_h) {
  const int64_t r0 = n0 / out_w, r1 = (n_end - 1) / out_w;  // flat output rows (image * OH + oh)
  const int64_t i0 = r0 / out_h, i1 = r1 / out_h;
  PatchRows r;
  r.image0 = i0;
  r.first_oh = int(r0 - i0 * out_h);
  const int last_oh0 = int((i1 == i0 ? r1 : i0 * out_h + out_h - 1) - i0 * out_h);
  r.first = (last_oh0 - r.first_oh) * stride_h + extent_h;
  r.full = int(out_h - 1) * stride_h + extent_h;
  r.total = r.first +
            (i1 > i0 ? int(i1 - i0 - 1) * r.full + int(r1 - i1 * out_h) * stride_h + extent_h : 0);
  return r;
}

__device__ __forceinline__ uint32_t lds16(uint32_t addr) {
  unsigned short v;
  asm volatile("ld.shared.u16 %0, [%1];" : "=h"(v) : "r"(addr));
  return v;
}

template <int kBytes>
__device__ __forceinline__ void cp_async_small(uint32_t dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2;" ::"r"(dst), "l"(src), "n"(kBytes));
}

template <typename T, typename Tile, typename Epilogue>
__global__ void __launch_bounds__(Tile::kThreads, Tile::kMinBlocks)
    conv_patch_kernel(Problem p, ConvShape s, PatchGeometry geo, Epilogue epilogue) {
  pdl_wait();  // launch_programmatic
  constexpr int BM = Tile::BM, BN = Tile::BN, kThreads = Tile::kThreads, MT = 4, NT = 8;
  constexpr int CC = kPatchChannels, S = kPatchStages;
  extern __shared__ __align__(16) unsigned char patch_smem[];
  const uint32_t smem = smem_addr(patch_smem);
  const int tid = int(threadIdx.x), warp = tid / 32, lane = tid % 32;
  const int wm0 = (warp % Tile::WARPS_M) * 64, wn0 = (warp / Tile::WARPS_M) * 64;
  const int64_t n0 = int64_t(blockIdx.x) * BN, m0 = int64_t(blockIdx.y) * BM;
  const int64_t n_end = n0 + BN < p.n ? n0 + BN : p.n;
  const int kw_n = s.kernel_w, khw = s.kernel_h * s.kernel_w;
  const int extent_h = (s.kernel_h - 1) * s.dilation_h + 1;
  const int64_t out_w = s.out_width, out_h = s.out_height, out_plane = out_h * out_w;
  const int64_t in_plane = s.height * s.width;
  const PatchRows rows = patch_rows(n0, n_end, out_h, out_w, s.stride_h, extent_h);

  int* ktab = reinterpret_cast<int*>(patch_smem + geo.tables);
  int64_t* rowtab =
      reinterpret_cast<int64_t*>(patch_smem + geo.tables + ((4 * geo.chunk_k + 7) / 8) * 8);
  // k table: byte offset of k (within a chunk) in the patch, relative to a pixel's window origin.
  for (int k = tid; k < geo.chunk_k; k += kThreads) {
    const int c = k / khw, tap = k - c * khw, kh = tap / kw_n, kw = tap - kh * kw_n;
    ktab[k] = 2 * (c * geo.plane_pitch + kh * s.dilation_h * geo.row_pitch + kw * s.dilation_w);
  }
  // Row table: the image row (element offset of channel 0) each patch row copies, -1 for none.
  for (int slot = tid; slot < geo.slots; slot += kThreads) {
    int64_t src = -1;
    if (slot < rows.total) {
      int64_t image;
      int ih;
      if (slot < rows.first) {
        image = rows.image0, ih = rows.first_oh * s.stride_h - s.pad_h + slot;
      } else {
        const int j = slot - rows.first;
        image = rows.image0 + 1 + j / rows.full, ih = -s.pad_h + j % rows.full;
      }
      if (ih >= 0 && ih < s.height) src = image * s.channels * in_plane + int64_t(ih) * s.width;
    }
    rowtab[slot] = src;
  }
  // Zero both patch stages (padding rows and columns stay zero; copies fill the rest).
  {
    const uint32_t words = (geo.stage_bytes - geo.a_bytes) / 16;
    for (int st = 0; st < S; ++st) {
      uint4* z = reinterpret_cast<uint4*>(patch_smem + st * geo.stage_bytes + geo.a_bytes);
      for (uint32_t i = tid; i < words; i += kThreads) z[i] = make_uint4(0, 0, 0, 0);
    }
  }
  __syncthreads();

  // This thread's pixels (column g of each n8 tile): byte offset of the window origin in the patch.
  const int g = lane / 4, t4 = lane % 4;
  uint32_t pix[NT];
#pragma unroll
  for (int t = 0; t < NT; ++t) {
    const int64_t n = n0 + wn0 + 8 * t + g;
    pix[t] = 0;
    if (n < p.n) {
      const int64_t image = n / out_plane, r = n - image * out_plane;
      const int oh = int(r / out_w), ow = int(r - int64_t(oh) * out_w);
      const int slot =
          image == rows.image0
              ? (oh - rows.first_oh) * s.stride_h
              : rows.first + int(image - rows.image0 - 1) * rows.full + oh * s.stride_h;
      pix[t] = 2u * uint32_t(slot * geo.row_pitch + geo.col0 - s.pad_w + ow * s.stride_w);
    }
  }

  const T* a_ptr = static_cast<const T*>(p.a.data);
  const unsigned short* x = static_cast<const unsigned short*>(s.x);
  const int a_segs = geo.chunk_k / 8, a_items = BM * a_segs;
  const int vec_el = geo.vec / 2, row_segs = int(s.width) / vec_el;
  const int p_items = CC * rows.total * row_segs;
  auto issue = [&](int chunk, int stage) {
    const uint32_t base = smem + uint32_t(stage) * geo.stage_bytes;
    for (int it = tid; it < a_items; it += kThreads) {
      const int r = it / a_segs, sg = it - r * a_segs;
      const int64_t m = m0 + r;
      const T* src =
          m < p.m ? a_ptr + m * p.a.stride_mn + int64_t(chunk) * geo.chunk_k + 8 * sg : a_ptr;
      cp_async16(base + 2u * uint32_t(r * geo.a_ld + 8 * sg), src, m < p.m ? 16 : 0);
    }
    const uint32_t pbase = base + geo.a_bytes;
    const int64_t c0 = int64_t(chunk) * CC;
    for (int it = tid; it < p_items; it += kThreads) {
      const int sg = it % row_segs, t = it / row_segs, slot = t % rows.total, c = t / rows.total;
      const int64_t row = rowtab[slot];
      if (row < 0) continue;
      const unsigned short* src = x + row + (c0 + c) * in_plane + sg * vec_el;
      const uint32_t dst = pbase + 2u * uint32_t(c * geo.plane_pitch + slot * geo.row_pitch +
                                                 geo.col0 + sg * vec_el);
      if (geo.vec == 16) {
        cp_async16(dst, src, 16);
      } else if (geo.vec == 8) {
        cp_async_small<8>(dst, src);
      } else {
        cp_async_small<4>(dst, src);
      }
    }
  };

  float acc[MT][NT][4];
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int t = 0; t < NT; ++t) acc[i][t][0] = acc[i][t][1] = acc[i][t][2] = acc[i][t][3] = 0.0f;

  const int q = lane / 8, r8 = lane % 8;
  const uint32_t a_lane = 2u * uint32_t((wm0 + 8 * (q % 2) + r8) * geo.a_ld + 8 * (q / 2));
  const uint32_t ktab_addr = smem + geo.tables + 8u * uint32_t(t4);
  auto load_frags = [&](uint32_t stage_base, int slice, uint32_t(&af)[MT][4],
                        uint32_t(&bf)[NT][2]) {
#pragma unroll
    for (int i = 0; i < MT; ++i)
      ldmatrix_x4<false>(af[i],
                         stage_base + a_lane + 2u * uint32_t(16 * i * geo.a_ld + 16 * slice));
    uint32_t k0, k1, k8, k9;
    asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];"
                 : "=r"(k0), "=r"(k1)
                 : "r"(ktab_addr + 64u * uint32_t(slice)));
    asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];"
                 : "=r"(k8), "=r"(k9)
                 : "r"(ktab_addr + 64u * uint32_t(slice) + 32u));
    const uint32_t pbase = stage_base + geo.a_bytes;
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      const uint32_t b = pbase + pix[t];
      bf[t][0] = lds16(b + k0) | (lds16(b + k1) << 16);
      bf[t][1] = lds16(b + k8) | (lds16(b + k9) << 16);
    }
  };
  auto mmas = [&](const uint32_t(&af)[MT][4], const uint32_t(&bf)[NT][2]) {
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int tt = 0; tt < NT; ++tt) {
        const int t = i % 2 ? NT - 1 - tt : tt;
        mma16816<T>(acc[i][t], af[i], bf[t][0], bf[t][1]);
      }
  };

  const int chunks = int(s.channels / CC);
#pragma unroll
  for (int st = 0; st < S - 1; ++st) {
    if (st < chunks) issue(st, st);
    cp_async_commit();
  }
  uint32_t af0[MT][4], af1[MT][4], bf0[NT][2], bf1[NT][2];
  for (int chunk = 0; chunk < chunks; ++chunk) {
    cp_async_wait<S - 2>();
    __syncthreads();  // chunk's copies visible; the stage refilled below was last read one chunk
                      // ago
    if (chunk + S - 1 < chunks) issue(chunk + S - 1, (chunk + S - 1) % S);
    cp_async_commit();
    const uint32_t stage_base = smem + uint32_t(chunk % S) * geo.stage_bytes;
    load_frags(stage_base, 0, af0, bf0);
#pragma unroll 1
    for (int slice = 0; slice < khw; slice += 2) {
      if (slice + 1 < khw) load_frags(stage_base, slice + 1, af1, bf1);
      mmas(af0, bf0);
      if (slice + 1 < khw) {
        if (slice + 2 < khw) load_frags(stage_base, slice + 2, af0, bf0);
        mmas(af1, bf1);
      }
    }
  }

  // C fragment of an mma tile: c0, c1 = (row g, columns 2t, 2t+1), c2, c3 = (row g + 8, same).
  // A whole tile (the common case) calls the epilogue in straight-line code, pixel by pixel: the
  // functor's address arithmetic on n (divisions by the output extents) is then computed once per
  // pixel (16 per thread), not once per element (128).
  if (m0 + BM <= p.m && n0 + BN <= p.n) {
#pragma unroll
    for (int t = 0; t < NT; ++t)
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const int64_t n = n0 + wn0 + 8 * t + 2 * t4 + c;
#pragma unroll
        for (int i = 0; i < MT; ++i)
#pragma unroll
          for (int h = 0; h < 2; ++h) epilogue(0, m0 + wm0 + 16 * i + 8 * h + g, n, acc[i][t][2 * h + c]);
      }
    return;
  }
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t m = m0 + wm0 + 16 * i + 8 * h + g;
      if (m >= p.m) continue;
#pragma unroll
      for (int t = 0; t < NT; ++t)
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          const int64_t n = n0 + wn0 + 8 * t + 2 * t4 + c;
          if (n < p.n) epilogue(0, m, n, acc[i][t][2 * h + c]);
        }
    }
}

inline int device_max_smem_optin() {
  static int cached = -1;
  if (cached < 0) {
    int dev = 0, v = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess)
      v = 48 * 1024;
    cached = v;
  }
  return cached;
}

// The patch kernel's layout for `s` with tiles of BN pixels, or false when the convolution is
// outside its contract (see the top of this file).
inline bool patch_geometry(const Problem& p, const ConvShape& s, int bm, int bn,
                           PatchGeometry& geo) {
  const int64_t khw = int64_t(s.kernel_h) * s.kernel_w;
  if (s.channels % kPatchChannels != 0 || s.channels <= 0 || khw > 16 || khw <= 0 ||
      p.k != s.channels * khw)
    return false;
  if (p.a.stride_k != 1 || p.a.stride_mn % 8 != 0 ||
      reinterpret_cast<uintptr_t>(p.a.data) % 16 != 0)
    return false;
  if (s.width % 2 != 0 || s.width <= 0 || s.out_width <= 0 || s.out_height <= 0 || s.stride_h < 1 ||
      s.stride_w < 1 || s.dilation_h < 1 || s.dilation_w < 1 || s.pad_h < 0 || s.pad_w < 0)
    return false;
  const uintptr_t xa = reinterpret_cast<uintptr_t>(s.x);
  geo.vec = s.width % 8 == 0 && xa % 16 == 0  ? 16
            : s.width % 4 == 0 && xa % 8 == 0 ? 8
            : xa % 4 == 0                     ? 4
                                              : 0;
  if (geo.vec == 0) return false;
  geo.chunk_k = int(kPatchChannels * khw);
  geo.a_ld = geo.chunk_k + 8;
  geo.col0 = (s.pad_w + 7) / 8 * 8;
  const int64_t last_col =
      (s.out_width - 1) * s.stride_w - s.pad_w + int64_t(s.kernel_w - 1) * s.dilation_w;
  int64_t pitch = (geo.col0 + (last_col > s.width - 1 ? last_col : s.width - 1) + 1 + 7) / 8 * 8;
  while (pitch % 64 < 16 || pitch % 64 > 48) pitch += 8;  // rows kh apart on different banks
  // Patch rows: (rows of output pixels - images) * stride + images * window extent, at most.
  const int64_t out_plane = s.out_height * s.out_width, images = p.n / out_plane;
  const int64_t extent_h = int64_t(s.kernel_h - 1) * s.dilation_h + 1;
  int64_t out_rows = (s.out_width - 1 + bn - 1) / s.out_width + 1;  // flat output rows of one tile
  if (out_rows > images * s.out_height) out_rows = images * s.out_height;
  int64_t segs = (bn - 2 + out_plane) / out_plane + 1;  // images of one tile
  if (segs > images) segs = images;
  if (segs > out_rows) segs = out_rows;
  const int64_t slots =
      out_rows * s.stride_h + (extent_h > s.stride_h ? segs : 1) * (extent_h - s.stride_h);
  if (slots <= 0 || slots * pitch * kPatchChannels > (int64_t(1) << 20)) return false;
  int64_t plane = slots * pitch;
  while (plane % 64 != 32) plane += 8;  // channel planes on different banks
  geo.slots = int(slots);
  geo.row_pitch = int(pitch);
  geo.plane_pitch = int(plane);
  geo.a_bytes = uint32_t(bm) * geo.a_ld * 2;
  geo.stage_bytes = geo.a_bytes + uint32_t(plane) * kPatchChannels * 2;
  geo.tables = kPatchStages * geo.stage_bytes;
  geo.smem_bytes = geo.tables + size_t(4 * geo.chunk_k + 7) / 8 * 8 + 8 * size_t(slots);
  if (geo.smem_bytes > size_t(device_max_smem_optin())) return false;
  // 32-bit patch offsets and flat output pixels within an image; 64-bit image offsets.
  if (s.channels * s.height * s.width >= (int64_t(1) << 31) || out_plane >= (int64_t(1) << 31))
    return false;
  return true;
}

template <typename T, typename Tile, typename Epilogue>
cudaError_t launch_conv_patch(const Problem& p, const ConvShape& s, const PatchGeometry& geo,
                              const Epilogue& epilogue, cudaStream_t stream) {
  auto kernel = conv_patch_kernel<T, Tile, Epilogue>;
  if (geo.smem_bytes > 48 * 1024) {
    const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               int(geo.smem_bytes));
    if (e != cudaSuccess) return e;
  }
  const int64_t tiles_n = (p.n + Tile::BN - 1) / Tile::BN,
                tiles_m = (p.m + Tile::BM - 1) / Tile::BM;
  if (tiles_m > 65535 || tiles_n > 2147483647) return cudaErrorInvalidValue;
  return launch_programmatic(kernel, dim3(unsigned(tiles_n), unsigned(tiles_m), 1), dim3(Tile::kThreads), geo.smem_bytes, stream, p, s,
                             geo, epilogue);
}

}  // namespace detail

// The patch kernel for the convolution `s` as the contraction `p` (the contract of
// conv_implicit_gemm), or cudaErrorNotSupported (nothing launched) when it does not apply.
template <typename T, typename Epilogue>
cudaError_t conv_patch(const Problem& p, const ConvShape& s, const Epilogue& epilogue,
                       cudaStream_t stream) {
  static_assert(std::is_same<T, __half>::value || std::is_same<T, __nv_bfloat16>::value,
                "conv_patch<T>: 16-bit T");
  static_assert(Epilogue::kNumB == 1, "a convolution has one B operand");
  if (p.batch() != 1 || p.num_b != 1 || p.m <= 0 || p.n <= 0 ||
      p.n % (s.out_height * s.out_width) != 0)
    return cudaErrorNotSupported;
  detail::PatchGeometry geo;
  if (p.m > 64) {
    using Tile = detail::PatchTileWide;
    if (!detail::patch_geometry(p, s, Tile::BM, Tile::BN, geo)) return cudaErrorNotSupported;
    return detail::launch_conv_patch<T, Tile>(p, s, geo, epilogue, stream);
  }
  using Tile = detail::PatchTileNarrow;
  if (!detail::patch_geometry(p, s, Tile::BM, Tile::BN, geo)) return cudaErrorNotSupported;
  return detail::launch_conv_patch<T, Tile>(p, s, geo, epilogue, stream);
}

// What generated code calls (kiln_gemm.cuh's conv): the Hopper kernel (conv_wgmma.cuh) where it
// runs (sm_90a build on an sm_90 device, stride 1, C a multiple of 8, a workspace of
// conv_wgmma_workspace_bytes for the repacked weight and the NHWC image), else the patch kernel
// where it applies, else the direct kernel (conv_direct.cuh) where C * KH * KW <= 32, else the gather
// kernel of conv_implicit_gemm.cuh with the lowering's tile.
template <typename T, typename Config, typename Epilogue>
cudaError_t conv_auto(const Problem& p, const ConvShape& s, const Epilogue& epilogue, void* workspace,
                      int64_t workspace_bytes, cudaStream_t stream) {
  const cudaError_t hopper = conv_wgmma_auto<T>(p, s, epilogue, workspace, workspace_bytes, stream);
  if (hopper != cudaErrorNotSupported) return hopper;
  const cudaError_t patched = conv_patch<T>(p, s, epilogue, stream);
  if (patched != cudaErrorNotSupported) return patched;
  const cudaError_t direct = conv_direct<T>(p, s, epilogue, stream);
  if (direct != cudaErrorNotSupported) return direct;
  return conv_implicit_gemm<T, Config>(p, s, epilogue, stream);
}

// Without a workspace: the patch kernel or the gather kernel.
template <typename T, typename Config, typename Epilogue>
cudaError_t conv_auto(const Problem& p, const ConvShape& s, const Epilogue& epilogue,
                      cudaStream_t stream) {
  return conv_auto<T, Config>(p, s, epilogue, nullptr, 0, stream);
}

}  // namespace kiln::gemm
