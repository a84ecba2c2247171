#pragma once
// Direct convolution for few input taps (C * KH * KW <= 32: the first layer of an image network,
// 3 channels x 3x3): fp32 FMAs on the CUDA cores, no tensor cores, no shared im2col.
//
// Why not the implicit GEMM there: with K = 27 a GEMM tile has one k-step, so the gather kernel
// (conv_implicit_gemm.cuh) is all set-up and epilogue; it ran the CNN's 3 -> 64 layer (32 x 56 x 56,
// H200) in 46-54 us where the layer's 6.4 M outputs need 173 M FMAs (~6 us of the SMs' fp32 rate)
// and 12.8 MB of stores (~5 us). Here each thread loads the K input taps of its two output pixels
// (or one) once into registers, every load issued before any is used, and runs every output channel over
// them: the weight (at most kDirectMaxM x kDirectMaxK floats) sits in shared memory as [k][m], read
// as float4 broadcasts, 8 channels a pass; a warp's threads hold consecutive pixels, so the taps'
// loads and the epilogue's NCHW stores (one channel at a time) are coalesced.
//
// Same contract as conv_implicit_gemm (m = output channels, n = output pixels, k = C * KH * KW;
// batch 1, one B operand; the epilogue called once per (m, n) with the fp32 sum). Returns
// cudaErrorNotSupported where it does not apply (k or m too large, extents past 32-bit offsets), so
// that conv_auto tries the next kernel.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include <type_traits>

#include "conv_implicit_gemm.cuh"
#include "gemm_problem.cuh"

namespace kiln::gemm {

namespace detail {

constexpr int kDirectMaxK = 32;       // C * KH * KW
constexpr int kDirectMaxM = 256;      // output channels (the weight in shared memory: 32 KB)
constexpr int kDirectThreads = 128;
constexpr int kDirectPad = 16;        // the weight's rows: m rounded up to it (the most channels a pass takes)
constexpr int kDirectStep = 4;        // taps per step of a pass (the weight's rows: K rounded up to it)

struct ConvDirectArgs {
  int64_t n = 0;                      // output pixels (images * out_height * out_width)
  int m = 0, k = 0, m_pad = 0;        // m_pad: m rounded up to kDirectPad (the weight's row)
  int k_steps = 0;                    // k rounded up to kDirectStep (the weight's rows)
  int taps = 0, kernel_w = 1;         // KH * KW
  int height = 0, width = 0, out_height = 0, out_width = 0;
  int stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1, pad_h = 0, pad_w = 0;
  int64_t image_elements = 0;         // C * H * W
};

// kPixels output pixels a thread (kDirectThreads apart), kChannels output channels a pass (8 or 16).
template <typename T, int kPixels, int kChannels, typename Epilogue>
__global__ void __launch_bounds__(kDirectThreads, kPixels == 1 ? 6 : 1)
    conv_direct_kernel(const Problem p, const ConvShape s, const ConvDirectArgs a, const Epilogue epilogue) {
  pdl_wait();  // launch_programmatic
  // The weight as [k_steps][m_pad] floats (k_steps: K rounded up to kDirectStep, the rows past K
  // zero), then per k the tap's row and column offsets from the window's origin and its channel's
  // offset in the image (for k past K, a row offset that puts every tap outside the image).
  extern __shared__ float4 direct_smem4[];
  float* w_s = reinterpret_cast<float*>(direct_smem4);
  int* tap_dy = reinterpret_cast<int*>(w_s + a.k_steps * a.m_pad);
  int* tap_dx = tap_dy + kDirectMaxK;
  int* tap_plane = tap_dx + kDirectMaxK;
  const T* weight = static_cast<const T*>(p.a.data);
  // Its loads in batches of kFill a thread, each batch issued before any of it is stored.
  constexpr int kFill = 8;
  for (int base = 0; base < a.k_steps * a.m_pad; base += kFill * kDirectThreads) {
    T v[kFill];
    bool ok[kFill];
#pragma unroll
    for (int u = 0; u < kFill; ++u) {
      const int i = base + u * kDirectThreads + threadIdx.x, k = i / a.m_pad, m = i - k * a.m_pad;
      ok[u] = i < a.k_steps * a.m_pad && m < a.m && k < a.k;
      v[u] = weight[ok[u] ? int64_t(m) * p.a.stride_mn + int64_t(k) * p.a.stride_k : 0];
    }
#pragma unroll
    for (int u = 0; u < kFill; ++u) {
      const int i = base + u * kDirectThreads + threadIdx.x;
      if (i < a.k_steps * a.m_pad) w_s[i] = ok[u] ? float(v[u]) : 0.0f;
    }
  }
  if (threadIdx.x < kDirectMaxK) {
    const int k = threadIdx.x, c = k / a.taps, tap = k - c * a.taps, kh = tap / a.kernel_w, kw = tap - kh * a.kernel_w;
    tap_dy[k] = k < a.k ? kh * a.dilation_h - a.pad_h : -(1 << 30);
    tap_dx[k] = k < a.k ? kw * a.dilation_w - a.pad_w : 0;
    tap_plane[k] = k < a.k ? c * a.height * a.width : 0;
  }
  __syncthreads();

  // The taps of this thread's pixels: every load issued before any is used (no branch between
  // them: a tap outside the image, or of a pixel past n, reads the image's first element and is
  // then replaced by zero), so they share one memory latency.
  const T* x = static_cast<const T*>(s.x);
  const int64_t out_plane = int64_t(a.out_height) * a.out_width;
  const int64_t n0 = int64_t(blockIdx.x) * (kDirectThreads * kPixels) + threadIdx.x;
  T raw[kPixels][kDirectMaxK];
  uint32_t inside[kPixels];
  bool valid[kPixels];
#pragma unroll
  for (int j = 0; j < kPixels; ++j) {
    const int64_t n = n0 + j * kDirectThreads;
    valid[j] = n < a.n;
    const int64_t image = valid[j] ? n / out_plane : 0;
    const int pixel = valid[j] ? int(n - image * out_plane) : 0;
    const int oh = pixel / a.out_width, ow = pixel - oh * a.out_width;
    const int ih0 = oh * a.stride_h, iw0 = ow * a.stride_w;
    const T* image_x = x + image * a.image_elements;
    inside[j] = 0;
#pragma unroll
    for (int k = 0; k < kDirectMaxK; ++k) {
      const int ih = ih0 + tap_dy[k], iw = iw0 + tap_dx[k];
      const bool in = valid[j] && ih >= 0 && ih < a.height && iw >= 0 && iw < a.width;
      inside[j] |= uint32_t(in) << k;
      raw[j][k] = image_x[in ? tap_plane[k] + ih * a.width + iw : 0];
    }
  }
  float taps[kPixels][kDirectMaxK];
#pragma unroll
  for (int j = 0; j < kPixels; ++j)
#pragma unroll
    for (int k = 0; k < kDirectMaxK; ++k) taps[j][k] = (inside[j] >> k) & 1u ? float(raw[j][k]) : 0.0f;

  // Each pass: kChannels output channels over all k, in steps of kDirectStep taps (one
  // uniform test a step, so the step's weight loads are issued together).
  for (int m0 = 0; m0 < a.m; m0 += kChannels) {
    float acc[kPixels][kChannels];
#pragma unroll
    for (int j = 0; j < kPixels; ++j)
#pragma unroll
      for (int i = 0; i < kChannels; ++i) acc[j][i] = 0.0f;
#pragma unroll
    for (int k0 = 0; k0 < kDirectMaxK; k0 += kDirectStep) {
      if (k0 < a.k) {
#pragma unroll
        for (int k = k0; k < k0 + kDirectStep; ++k) {
          float w[kChannels];
#pragma unroll
          for (int q = 0; q < kChannels / 4; ++q) {
            const float4 v = *reinterpret_cast<const float4*>(&w_s[k * a.m_pad + m0 + 4 * q]);
            w[4 * q] = v.x, w[4 * q + 1] = v.y, w[4 * q + 2] = v.z, w[4 * q + 3] = v.w;
          }
#pragma unroll
          for (int j = 0; j < kPixels; ++j)
#pragma unroll
            for (int i = 0; i < kChannels; ++i) acc[j][i] = fmaf(taps[j][k], w[i], acc[j][i]);
        }
      }
    }
#pragma unroll
    for (int i = 0; i < kChannels; ++i) {
      if (m0 + i >= a.m) break;
#pragma unroll
      for (int j = 0; j < kPixels; ++j)
        if (valid[j]) epilogue(0, m0 + i, n0 + j * kDirectThreads, acc[j][i]);
    }
  }
}

}  // namespace detail

// Whether conv_direct runs this convolution (see above): k <= 32 taps, at most 256 output
// channels, offsets within an image and output coordinates in 32 bits.
inline bool conv_direct_applies(const Problem& p, const ConvShape& s) {
  const int64_t big = int64_t(1) << 30;
  return p.batch() == 1 && p.num_b == 1 && p.m > 0 && p.n > 0 && p.k > 0 && p.k <= detail::kDirectMaxK &&
         p.m <= detail::kDirectMaxM && s.channels * s.kernel_h * s.kernel_w == p.k && s.out_height > 0 && s.out_width > 0 &&
         p.n % (s.out_height * s.out_width) == 0 && s.channels * s.height * s.width < big && s.height < big &&
         s.width < big && s.out_height < big && s.out_width < big && s.stride_h > 0 && s.stride_w > 0 &&
         s.dilation_h > 0 && s.dilation_w > 0 && s.pad_h >= -big && s.pad_h < big && s.pad_w >= -big && s.pad_w < big &&
         (s.out_height - 1) * int64_t(s.stride_h) + int64_t(s.kernel_h) * s.dilation_h < big &&
         (s.out_width - 1) * int64_t(s.stride_w) + int64_t(s.kernel_w) * s.dilation_w < big &&
         (p.n + detail::kDirectThreads - 1) / detail::kDirectThreads < (int64_t(1) << 31);
}

// Two pixels a thread by default: in the CNN (H200, bench/contraction's profile) its 3 -> 64 layer
// took 22.3 us (run s31d) against 25.1 with one pixel compiled for 6 CTAs an SM (run s31i), though
// conv_bench, whose epilogue divides by the plane at run time per element, had one pixel ahead
// (34.8 against 40.6 us; 16 channels a pass 36.1).
template <typename T, int kPixels = 2, int kChannels = 8, typename Epilogue>
cudaError_t conv_direct(const Problem& p, const ConvShape& s, const Epilogue& epilogue, cudaStream_t stream) {
  static_assert(std::is_same<T, __half>::value || std::is_same<T, __nv_bfloat16>::value,
                "conv_direct<T>: T is __half or __nv_bfloat16");
  static_assert(Epilogue::kNumB == 1, "a convolution has one B operand");
  if (!conv_direct_applies(p, s)) return cudaErrorNotSupported;
  detail::ConvDirectArgs a;
  a.n = p.n, a.m = int(p.m), a.k = int(p.k);
  static_assert(kChannels == 8 || kChannels == 16, "conv_direct: 8 or 16 channels a pass");
  a.m_pad = (a.m + detail::kDirectPad - 1) / detail::kDirectPad * detail::kDirectPad;
  a.k_steps = (a.k + detail::kDirectStep - 1) / detail::kDirectStep * detail::kDirectStep;
  a.taps = s.kernel_h * s.kernel_w, a.kernel_w = s.kernel_w;
  a.height = int(s.height), a.width = int(s.width), a.out_height = int(s.out_height), a.out_width = int(s.out_width);
  a.stride_h = s.stride_h, a.stride_w = s.stride_w, a.dilation_h = s.dilation_h, a.dilation_w = s.dilation_w;
  a.pad_h = s.pad_h, a.pad_w = s.pad_w;
  a.image_elements = s.channels * s.height * s.width;
  const int64_t per_block = detail::kDirectThreads * kPixels;
  const size_t smem = size_t(a.k_steps) * a.m_pad * sizeof(float) + 3 * detail::kDirectMaxK * sizeof(int);
  return detail::launch_programmatic(detail::conv_direct_kernel<T, kPixels, kChannels, Epilogue>,
                                     dim3(unsigned((p.n + per_block - 1) / per_block)), dim3(detail::kDirectThreads), smem, stream, p,
                                     s, a, epilogue);
}

}  // namespace kiln::gemm
