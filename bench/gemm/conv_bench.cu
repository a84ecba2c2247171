// Check-then-time harness for the implicit-GEMM convolution templates
// (kernels/gemm/conv_wgmma.cuh, conv_patch.cuh, conv_direct.cuh and the gather kernel of
// conv_implicit_gemm.cuh),
// llm.c style:
// the convolution layers of bench/contraction's CNN (3x3, pad 1, NCHW fp16, 32x56x56), a stride-2
// one, then edge shapes (checked only; `./conv_bench all` runs the gather kernel on them too). For
// each (layer, variant): random input and weight (uniform in [-1, 1]), the output poisoned with
// NaN, one run, every element checked against a direct fp32 convolution on the GPU (a plain loop
// per output, no tensor cores, no im2col); only then timed (CUDA events, L2 flushed before each
// launch, median of 15). The peer (cuDNN through torch) is timed by bench/contraction/bench.py.
// The Hopper kernel (variants "wgmma ...": conv_wgmma with a WgmmaConfig, and "auto": conv_auto
// as generated code calls it) needs the sm_90a build:
//   nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -DKILN_GEMM_SM90A conv_bench.cu \
//     -o conv_bench -lcuda && ./conv_bench
// A variant that does not apply to a layer prints "n/a" (the Hopper kernel: stride 2, C = 3, ...).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "../../kernels/gemm/kiln_gemm.cuh"

using T = __half;
using kiln::gemm::TileConfig;

#define CHECK_CUDA(x)                                                                     \
  do {                                                                                    \
    cudaError_t e_ = (x);                                                                 \
    if (e_ != cudaSuccess) {                                                              \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      exit(2);                                                                            \
    }                                                                                     \
  } while (0)

struct Layer {
  int n, c, h, w, oc, k, stride, pad;
  int dil = 1, kw = 0, stride_w = 0, pad_w = -1;  // kw, stride_w, pad_w: 0 / -1 = as k, stride, pad
  bool timed = true;
  __host__ __device__ int kwid() const { return kw ? kw : k; }
  __host__ __device__ int sw() const { return stride_w ? stride_w : stride; }
  __host__ __device__ int pw() const { return pad_w >= 0 ? pad_w : pad; }
  __host__ __device__ int oh() const { return (h + 2 * pad - dil * (k - 1) - 1) / stride + 1; }
  __host__ __device__ int ow() const { return (w + 2 * pw() - dil * (kwid() - 1) - 1) / sw() + 1; }
};

// What generated code's epilogue does for a Conv + bias: y[image, m, oh, ow] = acc + bias[m].
struct Epilogue {
  static constexpr int kNumB = 1;
  T* y;
  const T* bias;
  int64_t out_plane, channels;
  __device__ __forceinline__ void operator()(int64_t, int64_t m, int64_t n, float acc) const {
    const int64_t image = n / out_plane, pixel = n - image * out_plane;
    y[(image * channels + m) * out_plane + pixel] = __float2half(acc + __half2float(bias[m]));
  }
};

// No store: the Hopper kernel's time without its epilogue's calls (the accumulators are still
// staged through shared memory). Stores one element only if the sum is exactly 12345, so the
// compiler keeps the sums.
struct NullEpilogue {
  static constexpr int kNumB = 1;
  T* y;
  __device__ __forceinline__ void operator()(int64_t, int64_t m, int64_t n, float acc) const {
    if (acc == 12345.0f) y[m + n] = __float2half(acc);
  }
};

__global__ void reference_conv(const T* x, const T* w, const T* bias, float* y, Layer l) {
  const int64_t total = int64_t(l.n) * l.oc * l.oh() * l.ow();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int ow = int(i % l.ow()), oh = int(i / l.ow() % l.oh()),
              m = int(i / (int64_t(l.ow()) * l.oh()) % l.oc);
    const int64_t image = i / (int64_t(l.ow()) * l.oh() * l.oc);
    float s = __half2float(bias[m]);
    for (int c = 0; c < l.c; ++c)
      for (int kh = 0; kh < l.k; ++kh)
        for (int kw = 0; kw < l.kwid(); ++kw) {
          const int ih = oh * l.stride - l.pad + kh * l.dil, iw = ow * l.sw() - l.pw() + kw * l.dil;
          if (ih < 0 || ih >= l.h || iw < 0 || iw >= l.w) continue;
          s += __half2float(x[((image * l.c + c) * l.h + ih) * l.w + iw]) *
               __half2float(w[((int64_t(m) * l.c + c) * l.k + kh) * l.kwid() + kw]);
        }
    y[i] = s;
  }
}

__global__ void fill_random(T* p, int64_t n, uint32_t seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed;
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    h ^= h >> 15;
    p[i] = __float2half(float(h & 0xffff) / 32768.0f - 1.0f);
  }
}

struct Buffers {
  T *x, *w, *bias, *y, *workspace;
  float* ref;
  char* flush;
};

// kGather 1, 2: the gather kernel (conv_implicit_gemm.cuh) with that gather variant; 0: the patch
// kernel (conv_patch.cuh; Config unused); 3: the Hopper kernel (conv_wgmma.cuh; Config a
// WgmmaConfig); 4: conv_auto with the workspace (what generated code runs; Config the gather
// tile); 5, 6, 7: the direct kernel (conv_direct.cuh; Config unused) with two pixels a thread and 8
// channels a pass, one and 8, one and 16.
// "n/a" where it does not apply.
template <typename Config, int kGather = 1>
cudaError_t launch(const kiln::gemm::Problem& p, const kiln::gemm::ConvShape& s,
                   const Epilogue& e, const Buffers& b) {
  const int64_t ws = kiln::gemm::conv_wgmma_workspace_bytes(p, s);
  if constexpr (kGather == 0) {
    return kiln::gemm::conv_patch<T>(p, s, e, 0);
  } else if constexpr (kGather == 5) {
    return kiln::gemm::conv_direct<T, 2>(p, s, e, 0);
  } else if constexpr (kGather == 6) {
    return kiln::gemm::conv_direct<T, 1>(p, s, e, 0);
  } else if constexpr (kGather == 7) {
    return kiln::gemm::conv_direct<T, 1, 16>(p, s, e, 0);
  } else if constexpr (kGather == 3) {
    return kiln::gemm::conv_wgmma<T, Config>(p, s, e, b.workspace, ws, 0);
  } else if constexpr (kGather == 4) {
    return kiln::gemm::conv_auto<T, Config>(p, s, e, b.workspace, ws, 0);
  } else {
    return kiln::gemm::conv_implicit_gemm<T, Config, kGather>(p, s, e, 0);
  }
}

template <typename Config, int kGather = 1>
float run_variant(const char* name_in, const Layer& l, const Buffers& b,
                  std::vector<float>& host_ref) {
  const char* name = name_in;
  const int64_t pixels = int64_t(l.n) * l.oh() * l.ow(), out_elems = pixels * l.oc;
  kiln::gemm::Problem p;
  p.m = l.oc;
  p.n = pixels;
  p.k = int64_t(l.c) * l.k * l.kwid();
  p.a.data = b.w;
  p.a.stride_mn = p.k;
  p.a.stride_k = 1;
  kiln::gemm::ConvShape s;
  s.x = b.x;
  s.channels = l.c, s.height = l.h, s.width = l.w, s.out_height = l.oh(), s.out_width = l.ow();
  s.kernel_h = l.k, s.kernel_w = l.kwid(), s.stride_h = l.stride, s.stride_w = l.sw(),
  s.pad_h = l.pad, s.pad_w = l.pw();
  s.dilation_h = s.dilation_w = l.dil;
  char shape[160];
  snprintf(shape, sizeof shape, "%dx%dx%dx%d -> %d, %dx%d s%dx%d p%dx%d d%d", l.n, l.c, l.h, l.w,
           l.oc, l.k, l.kwid(), l.stride, l.sw(), l.pad, l.pw(), l.dil);
  const Epilogue e{b.y, b.bias, int64_t(l.oh()) * l.ow(), l.oc};
  CHECK_CUDA(cudaMemset(b.y, 0xff, out_elems * sizeof(T)));  // NaN
  const int64_t hopper_before = kiln::gemm::detail::conv_wgmma_launches;
  const cudaError_t first = launch<Config, kGather>(p, s, e, b);
  if (first == cudaErrorNotSupported) {
    printf("| %s | %s | n/a | - | - |\n", name, shape);
    return -1;
  }
  CHECK_CUDA(first);
  CHECK_CUDA(cudaDeviceSynchronize());
  std::string label = name;
  if (kGather == 4) label += kiln::gemm::detail::conv_wgmma_launches > hopper_before ? " (ran wgmma)" : " (ran mma.sync)";
  name = label.c_str();
  std::vector<T> got(out_elems);
  CHECK_CUDA(cudaMemcpy(got.data(), b.y, out_elems * sizeof(T), cudaMemcpyDeviceToHost));
  double worst = 0;
  int64_t bad = 0;
  for (int64_t i = 0; i < out_elems; ++i) {
    const double g = __half2float(got[i]), r = host_ref[i];
    const double err = std::fabs(g - r) / (1.0 + std::fabs(r));
    if (!(err <= 2e-2) && bad++ < 3) {  // where: (image, m, oh, ow), got, want
      const int64_t ow = i % l.ow(), oh = i / l.ow() % l.oh(),
                    m = i / (int64_t(l.ow()) * l.oh()) % l.oc;
      printf("  bad at image %lld m %lld oh %lld ow %lld: %g vs %g\n",
             (long long)(i / (int64_t(l.ow()) * l.oh() * l.oc)), (long long)m, (long long)oh,
             (long long)ow, g, r);
    }
    if (!(err <= worst)) worst = err;
  }
  if (bad) {
    printf("| %s | %s | FAIL: %lld of %lld wrong (worst %.3g) | - | - |\n", name, shape,
           (long long)bad, (long long)out_elems, worst);
    return -1;
  }
  if (!l.timed) {
    printf("| %s | %s | ok (worst %.1e) | - | - |\n", name, shape, worst);
    return 0;
  }
  cudaEvent_t t0, t1;
  CHECK_CUDA(cudaEventCreate(&t0));
  CHECK_CUDA(cudaEventCreate(&t1));
  std::vector<float> ms;
  for (int rep = 0; rep < 15; ++rep) {
    CHECK_CUDA(cudaMemsetAsync(b.flush, rep, 256 << 20));
    CHECK_CUDA(cudaEventRecord(t0));
    CHECK_CUDA((launch<Config, kGather>(p, s, e, b)));
    CHECK_CUDA(cudaEventRecord(t1));
    CHECK_CUDA(cudaEventSynchronize(t1));
    float t = 0;
    CHECK_CUDA(cudaEventElapsedTime(&t, t0, t1));
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  const double us = ms[ms.size() / 2] * 1e3, flops = 2.0 * pixels * l.oc * p.k;
  printf("| %s | %s | ok (worst %.1e) | %.1f | %.1f |\n", name, shape, worst, us, flops / us / 1e6);
  return float(us);
}

// The Hopper kernel's steps timed apart (after run_variant has checked the whole call): the
// preparation alone (NHWC copy + weight repack, one launch), the convolution alone on the prepared
// workspace, and the convolution with NullEpilogue. L2 flushed before each, median of 15.
template <typename Config>
void time_wgmma_steps(const char* name, const Layer& l, const Buffers& b) {
  kiln::gemm::Problem p;
  p.m = l.oc, p.n = int64_t(l.n) * l.oh() * l.ow(), p.k = int64_t(l.c) * l.k * l.kwid();
  p.a.data = b.w, p.a.stride_mn = p.k, p.a.stride_k = 1;
  kiln::gemm::ConvShape s;
  s.x = b.x;
  s.channels = l.c, s.height = l.h, s.width = l.w, s.out_height = l.oh(), s.out_width = l.ow();
  s.kernel_h = l.k, s.kernel_w = l.kwid(), s.stride_h = l.stride, s.stride_w = l.sw(), s.pad_h = l.pad, s.pad_w = l.pw();
  s.dilation_h = s.dilation_w = l.dil;
  const Epilogue e{b.y, b.bias, int64_t(l.oh()) * l.ow(), l.oc};
  const NullEpilogue null_e{b.y};
  const int64_t ws = kiln::gemm::conv_wgmma_workspace_bytes(p, s);
  using Steps = kiln::gemm::ConvWgmmaSteps;
  auto time = [&](const char* step, auto&& launch_once) {
    if (launch_once() == cudaErrorNotSupported) return;
    CHECK_CUDA(cudaDeviceSynchronize());
    cudaEvent_t t0, t1;
    CHECK_CUDA(cudaEventCreate(&t0));
    CHECK_CUDA(cudaEventCreate(&t1));
    std::vector<float> ms;
    for (int rep = 0; rep < 15; ++rep) {
      CHECK_CUDA(cudaMemsetAsync(b.flush, rep, 256 << 20));
      CHECK_CUDA(cudaEventRecord(t0));
      CHECK_CUDA(launch_once());
      CHECK_CUDA(cudaEventRecord(t1));
      CHECK_CUDA(cudaEventSynchronize(t1));
      float t = 0;
      CHECK_CUDA(cudaEventElapsedTime(&t, t0, t1));
      ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    printf("| %s: %s | %dx%dx%dx%d -> %d | step | %.1f | - |\n", name, step, l.n, l.c, l.h, l.w, l.oc, ms[ms.size() / 2] * 1e3);
  };
  time("prepare only", [&] { return kiln::gemm::conv_wgmma<T, Config>(p, s, e, b.workspace, ws, 0, Steps::kPrepare); });
  time("convolution only", [&] { return kiln::gemm::conv_wgmma<T, Config>(p, s, e, b.workspace, ws, 0, Steps::kConvolution); });
  time("convolution, null epilogue",
       [&] { return kiln::gemm::conv_wgmma<T, Config>(p, s, null_e, b.workspace, ws, 0, Steps::kConvolution); });
}

int main(int argc, char** argv) {
  // The CNN's layers and a stride-2 one (timed), then edge shapes for the patch kernel (checked):
  // widths 4 and 2 mod 8 (8- and 4-byte copies), stride 2, dilation 2, pad 0, output channels off
  // the tile, 1x1, 1-D, tiles across several images (small planes), asymmetric kernel/stride.
  std::vector<Layer> layers = {{32, 3, 56, 56, 64, 3, 1, 1},
                               {32, 64, 56, 56, 64, 3, 1, 1},
                               {32, 64, 56, 56, 128, 3, 1, 1},
                               {32, 128, 56, 56, 128, 3, 1, 1},
                               {32, 128, 56, 56, 256, 3, 2, 1}};
  // `all`: the gather kernel on the edge shapes too; `ncu`: only the patch kernel on 128->128.
  const bool all_variants = argc > 1 && std::string(argv[1]) == "all";
  const bool ncu_mode = argc > 1 && std::string(argv[1]) == "ncu";
  auto edge = [](Layer l) {
    l.timed = false;
    return l;
  };
  const std::vector<Layer> edges = {
      edge({3, 16, 14, 14, 40, 3, 1, 1}),   edge({2, 32, 12, 20, 72, 3, 1, 2, 2}),
      edge({3, 48, 9, 12, 24, 3, 1, 0}),    edge({2, 16, 20, 20, 136, 3, 2, 1}),
      edge({5, 64, 8, 8, 136, 1, 1, 0}),    edge({3, 32, 1, 40, 48, 1, 1, 0, 1, 3, 1, 1}),
      edge({7, 64, 7, 8, 64, 3, 1, 1}),     edge({2, 32, 10, 10, 200, 3, 1, 1, 1, 1, 2, 0}),
      edge({1, 128, 28, 28, 256, 3, 1, 1}), edge({4, 16, 6, 6, 64, 3, 1, 1, 1, 3, 1, 0}),
      // The Hopper kernel (C a multiple of 8): OC off the tile (40, 200), C = 8, 24, 72 (two
      // channel blocks, the second partial), odd H, W > 64 (136: two or four column chunks), batch
      // 1, pad 0 and 2, 1x1, 5x5, dilation 2, odd H and W, 1-D.
      edge({2, 64, 16, 24, 40, 3, 1, 1}),   edge({2, 64, 16, 24, 200, 3, 1, 1}),
      edge({3, 8, 12, 16, 64, 3, 1, 1}),    edge({2, 24, 10, 32, 72, 3, 1, 1}),
      edge({2, 72, 9, 16, 96, 3, 1, 1}),    edge({2, 32, 6, 136, 64, 3, 1, 1}),
      edge({1, 64, 56, 56, 128, 3, 1, 1}),  edge({2, 64, 14, 16, 64, 3, 1, 0}),
      edge({2, 32, 12, 16, 48, 3, 1, 2}),   edge({3, 64, 8, 16, 136, 1, 1, 0}),
      edge({2, 16, 20, 24, 32, 5, 1, 2}),   edge({2, 32, 12, 24, 72, 3, 1, 2, 2}),
      edge({2, 64, 11, 13, 64, 3, 1, 1}),   edge({3, 64, 1, 200, 128, 1, 1, 0, 1, 5, 1, 2}),
      // C off 8 (padded to 8 / 16 by the Hopper kernel's copies): odd plane (element-wise copy),
      // plane a multiple of 8 (16-byte copy), M off the tile.
      edge({2, 3, 13, 11, 24, 3, 1, 1}),    edge({3, 12, 16, 16, 40, 3, 1, 1}),
      edge({2, 3, 8, 24, 64, 3, 1, 1}),
      // The direct kernel (C * KH * KW <= 32): C = 1, 2, 3; stride 2, pad 0 and 2, dilation 2, 1-D,
      // asymmetric kernel and stride, output channels off its 8-channel passes (20, 3, 200), one
      // image, a plane smaller than the 256-pixel block, 5x5 on one channel.
      edge({3, 3, 17, 19, 20, 3, 2, 1}),    edge({2, 1, 30, 30, 3, 5, 1, 2}),
      edge({1, 3, 33, 35, 200, 3, 1, 0, 2}), edge({4, 2, 1, 70, 16, 1, 1, 0, 1, 7, 2, 3}),
      edge({5, 3, 6, 7, 64, 3, 1, 1}),      edge({2, 3, 12, 10, 24, 3, 1, 1, 1, 1, 2, 0}),
  };
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  printf("# conv_bench (kernels/gemm/conv_wgmma.cuh, conv_patch.cuh, conv_implicit_gemm.cuh), %s, fp16 NCHW\n\n",
         prop.name);
  printf("| variant | layer | check | us | TFLOP/s |\n| --- | --- | --- | ---: | ---: |\n");
  Buffers b;
  CHECK_CUDA(cudaMalloc(&b.x, int64_t(32) * 128 * 56 * 56 * sizeof(T)));
  CHECK_CUDA(cudaMalloc(&b.w, int64_t(256) * 128 * 9 * sizeof(T)));
  CHECK_CUDA(cudaMalloc(&b.bias, 256 * sizeof(T)));
  CHECK_CUDA(cudaMalloc(&b.y, int64_t(32) * 128 * 56 * 56 * sizeof(T)));
  CHECK_CUDA(cudaMalloc(&b.ref, int64_t(32) * 128 * 56 * 56 * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&b.flush, 256 << 20));
  CHECK_CUDA(cudaMalloc(&b.workspace, 64 << 20));  // weight + NHWC image: 26 MB for 32x128x56x56
  if (ncu_mode) {
    layers = {layers[3]};
  } else {
    layers.insert(layers.end(), edges.begin(), edges.end());
  }
  for (const Layer& l : layers) {
    fill_random<<<1024, 256>>>(b.x, int64_t(l.n) * l.c * l.h * l.w, 1u + l.c);
    fill_random<<<1024, 256>>>(b.w, int64_t(l.oc) * l.c * l.k * l.kwid(), 7u + l.oc);
    fill_random<<<1, 256>>>(b.bias, l.oc, 3u);
    reference_conv<<<4096, 256>>>(b.x, b.w, b.bias, b.ref, l);
    CHECK_CUDA(cudaDeviceSynchronize());
    const int64_t out_elems = int64_t(l.n) * l.oc * l.oh() * l.ow();
    std::vector<float> ref(out_elems);
    CHECK_CUDA(cudaMemcpy(ref.data(), b.ref, out_elems * sizeof(float), cudaMemcpyDeviceToHost));
    run_variant<TileConfig<64, 128, 32, 2, 2, 2>, 4>("auto", l, b, ref);
    run_variant<kiln::gemm::WgmmaConfig<64, 256, 4, 1>, 3>("wgmma 64x256 ping-pong", l, b, ref);
    run_variant<kiln::gemm::WgmmaConfig<128, 128, 4, 1>, 3>("wgmma 128x128 ping-pong", l, b, ref);
    if (ncu_mode) continue;
    run_variant<kiln::gemm::WgmmaConfig<128, 256, 3, 0>, 3>("wgmma 128x256 cooperative", l, b, ref);
    // 224 = 4 rows of 56 (whole-row boxes where the width rounded to 8 divides 224).
    run_variant<kiln::gemm::WgmmaConfig<64, 224, 4, 1>, 3>("wgmma 64x224 ping-pong", l, b, ref);
    run_variant<kiln::gemm::WgmmaConfig<128, 224, 4, 0>, 3>("wgmma 128x224 cooperative", l, b, ref);
    if (l.timed) {
      run_variant<kiln::gemm::WgmmaConfig<64, 128, 6, 1>, 3>("wgmma 64x128 ping-pong", l, b, ref);
      run_variant<kiln::gemm::WgmmaConfig<128, 128, 5, 0>, 3>("wgmma 128x128 cooperative", l, b, ref);
    }
    if (l.timed && !ncu_mode) {
      time_wgmma_steps<kiln::gemm::WgmmaConfig<64, 256, 4, 1>>("wgmma 64x256 ping-pong", l, b);
      time_wgmma_steps<kiln::gemm::WgmmaConfig<128, 128, 4, 1>>("wgmma 128x128 ping-pong", l, b);
      time_wgmma_steps<kiln::gemm::WgmmaConfig<64, 224, 4, 1>>("wgmma 64x224 ping-pong", l, b);
      time_wgmma_steps<kiln::gemm::WgmmaConfig<128, 224, 4, 0>>("wgmma 128x224 cooperative", l, b);
    }
    run_variant<TileConfig<64, 128, 32, 2, 2, 2>, 0>("patch", l, b, ref);
    run_variant<TileConfig<64, 128, 32, 2, 2, 2>, 5>("direct, 2 pixels a thread", l, b, ref);
    run_variant<TileConfig<64, 128, 32, 2, 2, 2>, 6>("direct, 1 pixel a thread", l, b, ref);
    run_variant<TileConfig<64, 128, 32, 2, 2, 2>, 7>("direct, 1 pixel a thread, 16 channels a pass", l, b, ref);
    if ((l.timed && !ncu_mode) || all_variants) {
      run_variant<TileConfig<64, 128, 32, 2, 2, 2>>("gather 64x128x32, 4 warps", l, b, ref);
      run_variant<TileConfig<128, 128, 32, 2, 4, 2>>("gather 128x128x32, 8 warps", l, b, ref);
    }
  }
  return 0;
}
