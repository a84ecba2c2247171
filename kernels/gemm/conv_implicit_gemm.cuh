#pragma once
// Implicit-GEMM convolution (variant 1): a 1-D or 2-D convolution over an NCHW image (NCW: height
// 1) on tensor cores, mma.sync m16n8k16 over fp16/bf16 with fp32 accumulators, the same PTX
// core as gemm_tensorcore.cuh (gemm_ptx.cuh: ldmatrix, mma16816, cp.async), for sm_80 and later.
//
// The convolution as a contraction (kiln's te::as_contraction sees it so):
//   C[m, n] = sum_k A[m, k] * B[k, n]
//   m = output channel, n = (image, oh, ow) flattened, k = (c, kh, kw) flattened,
//   A = the weight [OC, C, KH, KW] as a Problem operand (usually stride_mn = K, stride_k = 1),
//   B[k, n] = x[image, c, oh * stride_h - pad_h + kh * dilation_h, ow * stride_w - pad_w + kw * dilation_w],
//             0 where that position lies outside the image (padding).
// The epilogue functor receives (0, m, n, acc), as for a GEMM: with n the flat output pixel, an
// NCHW output row of a channel is contiguous in n, so its stores coalesce.
//
// Why B is gathered along n (ow) and not along k: NCHW is channel-planar, so k (c, kh, kw) is
// contiguous only within a kernel row, and the 8 taps of a 16-byte vector along ow are aligned
// only for stride 1 and a pad that is a multiple of 8. Instead each warp gathers a k row of the B
// tile over 64 consecutive pixels (two per lane, stored as one 32-bit word; 128 contiguous bytes
// for stride 1; neighbouring taps hit L1), through registers: the gather of step s + 1 is issued
// before the mmas of step s and stored to shared memory after them. Each thread's pixels are fixed
// for the whole reduction, so their window origin and, for windows of at most 32 taps, a mask of
// the taps inside the image live in registers; a k row's (c, kh, kw) is warp-uniform (two 32-bit
// divisions per warp and row). The shared B tile is k-major (a row per k, like a row-major [K, N]
// GEMM operand) and read by ldmatrix.trans. A (the weight) is copied by cp.async in 16-byte chunks
// (TileCopy) when its rows are 16-byte aligned, else gathered element-wise like B (C * KH * KW not
// a multiple of 8: the first layer of an RGB network).
//
// Schedule: TileConfig<BM, BN, BK, WARPS_M, WARPS_N, STAGES>; the shared tiles are double
// buffered (STAGES is not used: the register-staged gather is the pipeline). Edge tiles (m, n or
// k past the end) read zeros; out-of-image taps read zeros; nothing else branches.
//
// Not taken here (generated code keeps the tiled FP32 loops for them): grouped and depthwise
// convolutions (not a single contraction in kiln's view), 3-D, ConvTranspose.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include <type_traits>

#include "gemm_problem.cuh"
#include "gemm_ptx.cuh"
#include "gemm_tensorcore.cuh"

namespace kiln::gemm {

// The B operand of a convolution (see above): the input image and the window.
struct ConvShape {
  const void* x = nullptr;
  int64_t channels = 0, height = 1, width = 0;  // C (per the weight's K: channels * kernel_h * kernel_w == k)
  int64_t out_height = 1, out_width = 0;        // n = images * out_height * out_width
  int kernel_h = 1, kernel_w = 1;
  int stride_h = 1, stride_w = 1;
  int dilation_h = 1, dilation_w = 1;
  int pad_h = 0, pad_w = 0;  // begin padding; the end padding is implied by out_height/out_width
};

namespace detail {

template <typename T, typename Config, bool kAVec>
struct ConvLayout {
  static constexpr int BM = Config::BM, BN = Config::BN, BK = Config::BK;
  static constexpr int kALd = BK + 8, kBLd = BN + 8;  // 16 bytes of padding per row: ldmatrix without conflicts
  static constexpr int kAElems = BM * kALd, kBElems = BK * kBLd;
  static constexpr int kStageElems = kAElems + kBElems;
  static constexpr size_t kSmemBytes = 2 * size_t(kStageElems) * sizeof(T);
};

// Two CTAs of 8 warps (three of 4) per SM: the gather's load latency is hidden by the other CTAs'
// mmas, so registers are capped for that occupancy. The element-wise A gather (unaligned weight
// rows, rare) needs more registers: no cap there, rather than spills.
template <typename Config, bool kAVec>
constexpr int conv_min_blocks() {
  return !kAVec ? 1 : Config::kThreads >= 256 ? 2 : 3;
}

// kVariant says where the gathered B values are packed into the 32-bit words stored to shared
// memory: 1 (in use) right after the loads, which makes the warp wait for them before the step's
// mmas; 2 in the store after the mmas, so the loads' latency overlaps them (twice the staging
// registers). Variant 2 is timed by bench/gemm/conv_bench.cu only, not yet used by generated code.
template <typename T, typename Config, typename Epilogue, bool kAVec, int kVariant>
__global__ void __launch_bounds__(Config::kThreads, conv_min_blocks<Config, kAVec>()) conv_implicit_gemm_kernel(Problem p, ConvShape s, Epilogue epilogue) {
  pdl_wait();  // launch_programmatic
  constexpr int BM = Config::BM, BN = Config::BN, BK = Config::BK;
  constexpr int kThreads = Config::kThreads, kWarps = kThreads / 32;
  constexpr int WM = BM / Config::WARPS_M, WN = BN / Config::WARPS_N;
  constexpr int MT = WM / 16, NT = WN / 8, KS = BK / 16;
  static_assert(BN % 64 == 0 && BK % kWarps == 0, "conv TileConfig: BN a multiple of 64, BK of the warp count");
  constexpr int kPix = BN / 32, kRows = BK / kWarps;  // B gather: pixels (pairs) and k rows per thread
  constexpr int kAElemsPerThread = kAVec ? 0 : (BM * BK + kThreads - 1) / kThreads;
  using L = ConvLayout<T, Config, kAVec>;
  constexpr uint32_t kEl = sizeof(T), kStageBytes = L::kStageElems * kEl;
  using ACopy = TileCopy<T, BM, BK, L::kALd, kThreads>;

  extern __shared__ __align__(16) unsigned char conv_smem[];
  unsigned short* smem_el = reinterpret_cast<unsigned short*>(conv_smem);
  const uint32_t smem = smem_addr(conv_smem);
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  const int wm0 = (warp % Config::WARPS_M) * WM, wn0 = (warp / Config::WARPS_M) * WN;
  const int64_t n0 = int64_t(blockIdx.x) * BN, m0 = int64_t(blockIdx.y) * BM;
  const int steps = int((p.k + BK - 1) / BK);

  // This thread's pixels: columns 2 lane + {0, 1} + 64 j of the B tile (pairs, stored as one
  // 32-bit word). For each: a pointer to where its window starts (may point before the image; only
  // taps inside are read), the window's first row and column, and, for windows of at most 32
  // taps, a mask of the taps inside the image (one shift per element instead of two compares).
  const int plane = int(s.height * s.width), out_plane = int(s.out_height * s.out_width), out_w = int(s.out_width);
  const int khw = s.kernel_h * s.kernel_w;
  const bool tap_masks = khw <= 32;
  const unsigned short* x = static_cast<const unsigned short*>(s.x);
  const unsigned short* pix_ptr[kPix];
  int pix_h[kPix], pix_w[kPix];
  uint32_t pix_mask[kPix];
#pragma unroll
  for (int j = 0; j < kPix; ++j) {
    const int64_t n = n0 + 2 * lane + (j % 2) + 64 * (j / 2);
    pix_mask[j] = 0;
    if (n < p.n) {
      const int64_t image = n / out_plane;
      const int r = int(n - image * out_plane), oh = r / out_w, ow = r - oh * out_w;
      pix_h[j] = oh * s.stride_h - s.pad_h;
      pix_w[j] = ow * s.stride_w - s.pad_w;
      pix_ptr[j] = x + image * s.channels * plane + (int64_t(pix_h[j]) * s.width + pix_w[j]);
      if (tap_masks) {
        for (int kh = 0; kh < s.kernel_h; ++kh)
          for (int kw = 0; kw < s.kernel_w; ++kw) {
            const int ih = pix_h[j] + kh * s.dilation_h, iw = pix_w[j] + kw * s.dilation_w;
            if (unsigned(ih) < unsigned(s.height) && unsigned(iw) < unsigned(s.width)) pix_mask[j] |= 1u << (kh * s.kernel_w + kw);
          }
      }
    } else {
      pix_h[j] = -(1 << 29);  // never inside the image
      pix_w[j] = 0;
      pix_ptr[j] = x;
    }
  }

  const T* a_base = static_cast<const T*>(p.a.data);
  ACopy a_copy;
  if constexpr (kAVec) a_copy = ACopy(a_base, p.a.stride_mn, m0, p.m, 0, p.k);
  uint32_t b_regs[kRows][kPix / 2];
  unsigned short b_raw[kVariant == 2 ? kRows : 1][kVariant == 2 ? kPix : 1];
  unsigned short a_regs[kAElemsPerThread > 0 ? kAElemsPerThread : 1];

  // Step `step`'s B tile (and A when not copied by cp.async) into registers. A k row is the same
  // for the whole warp: its (c, kh, kw) costs two 32-bit divisions per warp, not per element.
  auto gather = [&](int step) {
    const int k0 = step * BK;
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      const int k = k0 + warp + kWarps * i;
      const bool row_ok = k < int(p.k);
      const int c = k / khw, tap = k - c * khw, kh = tap / s.kernel_w, kw = tap - kh * s.kernel_w;
      const int dh = kh * s.dilation_h, dw = kw * s.dilation_w;
      const int koff = c * plane + dh * int(s.width) + dw;
      unsigned short v[kPix];
      if (tap_masks) {
        const uint32_t bit = row_ok ? 1u << tap : 0u;
#pragma unroll
        for (int j = 0; j < kPix; ++j) v[j] = (pix_mask[j] & bit) ? __ldg(pix_ptr[j] + koff) : (unsigned short)0;
      } else {
#pragma unroll
        for (int j = 0; j < kPix; ++j) {
          const int ih = pix_h[j] + dh, iw = pix_w[j] + dw;
          const bool inside = row_ok && unsigned(ih) < unsigned(s.height) && unsigned(iw) < unsigned(s.width);
          v[j] = inside ? __ldg(pix_ptr[j] + koff) : (unsigned short)0;
        }
      }
#pragma unroll
      for (int j = 0; j < kPix / 2; ++j) {
        if constexpr (kVariant == 2) {
          b_raw[i][2 * j] = v[2 * j];
          b_raw[i][2 * j + 1] = v[2 * j + 1];
        } else {
          b_regs[i][j] = uint32_t(v[2 * j]) | (uint32_t(v[2 * j + 1]) << 16);
        }
      }
    }
    if constexpr (!kAVec) {
      const unsigned short* a = static_cast<const unsigned short*>(p.a.data);
#pragma unroll
      for (int e = 0; e < kAElemsPerThread; ++e) {
        const int idx = int(threadIdx.x) + e * kThreads, r = idx / BK, c = idx % BK;
        const int64_t m = m0 + r, k = k0 + c;
        a_regs[e] = idx < BM * BK && m < p.m && k < p.k ? __ldg(a + m * p.a.stride_mn + k * p.a.stride_k) : (unsigned short)0;
      }
    }
  };
  auto store = [&](int stage) {
    unsigned short* st = smem_el + stage * L::kStageElems;
#pragma unroll
    for (int i = 0; i < kRows; ++i)
#pragma unroll
      for (int j = 0; j < kPix / 2; ++j) {
        uint32_t word;
        if constexpr (kVariant == 2) {
          word = uint32_t(b_raw[i][2 * j]) | (uint32_t(b_raw[i][2 * j + 1]) << 16);
        } else {
          word = b_regs[i][j];
        }
        *reinterpret_cast<uint32_t*>(st + L::kAElems + (warp + kWarps * i) * L::kBLd + 2 * lane + 64 * j) = word;
      }
    if constexpr (!kAVec) {
#pragma unroll
      for (int e = 0; e < kAElemsPerThread; ++e) {
        const int idx = int(threadIdx.x) + e * kThreads;
        if (idx < BM * BK) st[(idx / BK) * L::kALd + idx % BK] = a_regs[e];
      }
    }
  };
  auto issue_a = [&](int stage) {
    if constexpr (kAVec) {
      a_copy.issue(smem + uint32_t(stage) * kStageBytes);
      a_copy.advance(0, BK);
    }
  };

  // ldmatrix lane roles as in gemm_tensorcore.cuh: A k-contiguous (rows per m), B k-major.
  const int q = lane / 8, r = lane % 8;
  const uint32_t a_lane = smem + kEl * uint32_t((wm0 + 8 * (q % 2) + r) * L::kALd + 8 * (q / 2));
  const uint32_t b_lane = smem + kEl * uint32_t(L::kAElems + (8 * (q % 2) + r) * L::kBLd + wn0 + 8 * (q / 2));

  float acc[MT][NT][4];
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int t = 0; t < NT; ++t) acc[i][t][0] = acc[i][t][1] = acc[i][t][2] = acc[i][t][3] = 0.0f;

  auto compute = [&](int stage) {
    const uint32_t off0 = uint32_t(stage) * kStageBytes;
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) {
      uint32_t af[MT][4], bf[NT / 2][4];
#pragma unroll
      for (int i = 0; i < MT; ++i) ldmatrix_x4<false>(af[i], a_lane + off0 + kEl * uint32_t(16 * i * L::kALd + 16 * ks));
#pragma unroll
      for (int tp = 0; tp < NT / 2; ++tp) ldmatrix_x4<true>(bf[tp], b_lane + off0 + kEl * uint32_t(16 * ks * L::kBLd + 16 * tp));
#pragma unroll
      for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int tt = 0; tt < NT; ++tt) {
          const int t = i % 2 ? NT - 1 - tt : tt;
          mma16816<T>(acc[i][t], af[i], bf[t / 2][2 * (t % 2)], bf[t / 2][2 * (t % 2) + 1]);
        }
    }
  };

  // Prologue: step 0 into stage 0.
  if (steps > 0) {
    issue_a(0);
    cp_async_commit();
    gather(0);
    store(0);
    cp_async_wait<0>();
    __syncthreads();
  }
  // Mainloop: the copies and the gather of step s + 1 are in flight during the mmas of step s;
  // stage (s + 1) % 2 was last read in step s - 1, which ended with a barrier.
  for (int step = 0; step < steps; ++step) {
    const int cur = step & 1;
    const bool more = step + 1 < steps;
    if (more) {
      issue_a(cur ^ 1);
      gather(step + 1);
    }
    cp_async_commit();
    compute(cur);
    if (more) store(cur ^ 1);
    cp_async_wait<0>();
    __syncthreads();
  }

  // C fragment of an mma tile: c0, c1 = (row g, columns 2t, 2t+1), c2, c3 = (row g + 8, same).
  // A whole tile calls the epilogue in straight-line code, pixel by pixel, so that the functor's
  // arithmetic on n is computed once per pixel (as in conv_patch.cuh).
  const int g = lane / 4, t4 = lane % 4;
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

template <typename T, typename Config, typename Epilogue, bool kAVec, int kVariant>
cudaError_t launch_conv(const Problem& p, const ConvShape& s, const Epilogue& epilogue, dim3 grid, cudaStream_t stream) {
  using L = ConvLayout<T, Config, kAVec>;
  auto kernel = conv_implicit_gemm_kernel<T, Config, Epilogue, kAVec, kVariant>;
  if (L::kSmemBytes > 48 * 1024) {
    const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(L::kSmemBytes));
    if (e != cudaSuccess) return e;
  }
  return launch_programmatic(kernel, grid, dim3(Config::kThreads), L::kSmemBytes, stream, p, s, epilogue);
}

}  // namespace detail

// The convolution `s` as the contraction `p` (m = output channels, n = output pixels, k = C * KH *
// KW; batch 1, one B operand whose Operand fields are unused). Returns cudaErrorInvalidValue for a
// problem outside that contract (the caller's lowering guarantees it; offsets within one image
// are 32-bit, so C * H * W < 2^31 is part of the contract).
template <typename T, typename Config, int kVariant = 1, typename Epilogue>
cudaError_t conv_implicit_gemm(const Problem& p, const ConvShape& s, const Epilogue& epilogue, cudaStream_t stream) {
  static_assert(std::is_same<T, __half>::value || std::is_same<T, __nv_bfloat16>::value,
                "conv<T>: T is __half or __nv_bfloat16");
  static_assert(Config::BK % 16 == 0 && Config::BM % (16 * Config::WARPS_M) == 0 && Config::BN % (16 * Config::WARPS_N) == 0,
                "TileConfig: BK a multiple of 16, each warp's tile a multiple of 16 x 16");
  static_assert(Epilogue::kNumB == 1, "a convolution has one B operand");
  if (p.m <= 0 || p.n <= 0) return cudaSuccess;
  if (p.batch() != 1 || p.num_b != 1 || s.channels * s.kernel_h * s.kernel_w != p.k ||
      p.n % (s.out_height * s.out_width) != 0 || s.channels * s.height * s.width >= (int64_t(1) << 31) ||
      p.k >= (int64_t(1) << 31) || s.out_height * s.out_width >= (int64_t(1) << 31))
    return cudaErrorInvalidValue;
  const int64_t tiles_m = (p.m + Config::BM - 1) / Config::BM, tiles_n = (p.n + Config::BN - 1) / Config::BN;
  if (tiles_m > 65535 || tiles_n > 2147483647) return cudaErrorInvalidValue;
  const dim3 grid{unsigned(tiles_n), unsigned(tiles_m), 1};
  const bool a_vec = p.a.stride_k == 1 && p.a.stride_mn % 8 == 0 && reinterpret_cast<uintptr_t>(p.a.data) % 16 == 0;
  return a_vec ? detail::launch_conv<T, Config, Epilogue, true, kVariant>(p, s, epilogue, grid, stream)
               : detail::launch_conv<T, Config, Epilogue, false, kVariant>(p, s, epilogue, grid, stream);
}

}  // namespace kiln::gemm
