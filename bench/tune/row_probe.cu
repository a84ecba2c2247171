// A probe for issue 12's row kernels (not part of kiln): times one kiln-generated row kernel under
// other launch grids, and (for LayerNorm+GELU) hand-edited copies of it, against the generated
// launch, in one process on one GPU. Every variant's output is compared bit for bit with the
// generated launch's (which bench_tune.py checks against PyTorch), and that output is checked on
// sampled rows against a float64 host reference, before anything is timed.
//
// Built once per generated source (row_probe.sh does this):
//   nvcc -O3 -std=c++20 --expt-relaxed-constexpr -gencode=arch=compute_90a,code=sm_90a
//        -I OUT/include -DGENERATED='"OUT/softmax.cu"' -DKERNEL=softmax_k0_y -DOP_SOFTMAX
//        -DROWS=1024 -DCOLS=32000 -DTHREADS=256 row_probe.cu
// OP_SOFTMAX: kernel(x, y). OP_LAYERNORM_GELU: kernel(x, gamma, beta, y), and the variants below.
// Prints one Markdown row per variant: grid, median (min / max) us per call, GB/s, % of the copy.
#include GENERATED

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#define CHECK(call)                                                                                 \
  do {                                                                                              \
    const cudaError_t e_ = (call);                                                                  \
    if (e_ != cudaSuccess) {                                                                        \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      std::exit(1);                                                                                 \
    }                                                                                               \
  } while (0)

#ifdef OP_LAYERNORM_GELU
namespace probe {

// The generated LayerNorm+GELU row (same expressions, same order), restructured by hand:
//   Prefetch: row r + gridDim.x's slice is loaded into a second register array before row r's
//             reductions, so a block's next loads are in flight during its reductions and stores.
//   Hoist:    gamma and beta are loaded into registers once per block instead of once per row.
template <bool Prefetch, bool Hoist>
__global__ void __launch_bounds__(THREADS) layernorm_gelu(const __half* __restrict__ x, const __half* __restrict__ gamma,
                                                         const __half* __restrict__ beta, __half* __restrict__ y) {
  constexpr int kLoads = COLS / (THREADS * 8);  // 16-byte loads per thread and row
  const int t = threadIdx.x;
  __half g_reg[Hoist ? kLoads * 8 : 1], b_reg[Hoist ? kLoads * 8 : 1];
  if constexpr (Hoist) {
#pragma unroll
    for (int k = 0; k < kLoads; ++k) {
      kiln::copy_vector<8>(&g_reg[k * 8], &gamma[(k * THREADS + t) * 8]);
      kiln::copy_vector<8>(&b_reg[k * 8], &beta[(k * THREADS + t) * 8]);
    }
  }
  __half next[kLoads * 8];
  int64_t row = blockIdx.x;
  if (Prefetch && row < ROWS) {
#pragma unroll
    for (int k = 0; k < kLoads; ++k) kiln::copy_vector<8>(&next[k * 8], &x[row * COLS + (k * THREADS + t) * 8]);
  }
  for (; row < ROWS; row += gridDim.x) {
    __half x_row[kLoads * 8];
    if constexpr (Prefetch) {
#pragma unroll
      for (int i = 0; i < kLoads * 8; ++i) x_row[i] = next[i];
      const int64_t following = row + gridDim.x;
      if (following < ROWS) {
#pragma unroll
        for (int k = 0; k < kLoads; ++k) kiln::copy_vector<8>(&next[k * 8], &x[following * COLS + (k * THREADS + t) * 8]);
      }
    } else {
#pragma unroll
      for (int k = 0; k < kLoads; ++k) kiln::copy_vector<8>(&x_row[k * 8], &x[row * COLS + (k * THREADS + t) * 8]);
    }
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < kLoads * 8; ++i) sum = sum + kiln::cast<float, __half>(x_row[i]);
    sum = kiln::block_allreduce<0>(sum, 0.0f);
    __syncthreads();
    float sq = 0.0f;
#pragma unroll
    for (int i = 0; i < kLoads * 8; ++i) {
      const float d = kiln::cast<float, __half>(x_row[i]) - (sum / float(COLS));
      sq = sq + d * d;
    }
    sq = kiln::block_allreduce<0>(sq, 0.0f);
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kLoads; ++k) {
      __half gamma_v[8], beta_v[8], y_v[8];
      if constexpr (Hoist) {
        kiln::copy_vector<8>(&gamma_v[0], &g_reg[k * 8]);
        kiln::copy_vector<8>(&beta_v[0], &b_reg[k * 8]);
      } else {
        kiln::copy_vector<8>(&gamma_v[0], &gamma[(k * THREADS + t) * 8]);
        kiln::copy_vector<8>(&beta_v[0], &beta[(k * THREADS + t) * 8]);
      }
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const float v = kiln::cast<float, __half>(x_row[k * 8 + i]);
        const float erf_u0 = ((((v - (sum / float(COLS))) * (1.0f / sqrtf(((sq / float(COLS)) + 9.99999975e-06f)))) * kiln::cast<float, __half>(gamma_v[i])) + kiln::cast<float, __half>(beta_v[i]));
        const float erf_t0 = ((fabsf(erf_u0) > 5.54312479f) ? 5.54312479f : fabsf(erf_u0));
        const float erf_c0 = kiln::exp2_unit(((((((((((((((((-2.64186885e-06f) * erf_t0) + 3.70755785e-05f) * erf_t0) + (-0.000175334404f)) * erf_t0) + (-0.000163053596f)) * erf_t0) + 0.00709964623f) * erf_t0) + (-0.0525352397f)) * erf_t0) + (-0.459299354f)) * erf_t0) + (-1.151229f)) * erf_t0));
        y_v[i] = kiln::cast<__half, float>(((((((v - (sum / float(COLS))) * (1.0f / sqrtf(((sq / float(COLS)) + 9.99999975e-06f)))) * kiln::cast<float, __half>(gamma_v[i])) + kiln::cast<float, __half>(beta_v[i])) * ((erf_u0 < 0.0f) ? erf_c0 : (2.0f - erf_c0))) * 0.5f));
      }
      kiln::copy_vector<8>(&y[row * COLS + (k * THREADS + t) * 8], &y_v[0]);
    }
    __syncthreads();
  }
}

// The restructured row (no prefetch, no hoist) with the mean and the sum of squared deviations in
// ONE block reduction: every thread reduces its own elements exactly (mean, then squared
// deviations from it), and the (mean, M2) pairs of equal counts merge by Chan's formula
// (M2 = M2a + M2b + (mb - ma)^2 * n / 2, n the elements on each side) in a shuffle tree, then
// over the warps through shared memory. One barrier round trip per row instead of two; results
// differ from the generated row's in rounding only (checked against it with a tolerance).
__global__ void __launch_bounds__(THREADS) layernorm_gelu_chan(const __half* __restrict__ x, const __half* __restrict__ gamma,
                                                               const __half* __restrict__ beta, __half* __restrict__ y) {
  constexpr int kLoads = COLS / (THREADS * 8), kOwn = kLoads * 8, kWarps = THREADS / 32;
  const int t = threadIdx.x;
  __shared__ float2 partial[kWarps];
  for (int64_t row = blockIdx.x; row < ROWS; row += gridDim.x) {
    __half x_row[kOwn];
#pragma unroll
    for (int k = 0; k < kLoads; ++k) kiln::copy_vector<8>(&x_row[k * 8], &x[row * COLS + (k * THREADS + t) * 8]);
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < kOwn; ++i) sum += __half2float(x_row[i]);
    float mean = sum * (1.0f / kOwn), m2 = 0.0f;
#pragma unroll
    for (int i = 0; i < kOwn; ++i) {
      const float d = __half2float(x_row[i]) - mean;
      m2 += d * d;
    }
    float n = kOwn;
#pragma unroll
    for (int offset = 1; offset < 32; offset <<= 1, n *= 2.0f) {
      const float mb = __shfl_xor_sync(0xffffffffu, mean, offset), m2b = __shfl_xor_sync(0xffffffffu, m2, offset);
      const float delta = mb - mean;
      m2 = (m2 + m2b) + delta * delta * (n * 0.5f);
      mean = (mean + mb) * 0.5f;
    }
    if constexpr (kWarps > 1) {
      if ((t & 31) == 0) partial[t >> 5] = make_float2(mean, m2);
      __syncthreads();
      mean = partial[0].x, m2 = partial[0].y;
#pragma unroll
      for (int w = 1; w < kWarps; ++w, n += float(32 * kOwn)) {
        const float2 b = partial[w];
        const float delta = b.x - mean, nb = float(32 * kOwn);
        mean = mean + delta * (nb / (n + nb));
        m2 = (m2 + b.y) + delta * delta * (n * nb / (n + nb));
      }
      __syncthreads();  // partial[] is written again by the next row
    }
    const float rstd = 1.0f / sqrtf(m2 * (1.0f / COLS) + 9.99999975e-06f);
#pragma unroll
    for (int k = 0; k < kLoads; ++k) {
      __half gamma_v[8], beta_v[8], y_v[8];
      kiln::copy_vector<8>(&gamma_v[0], &gamma[(k * THREADS + t) * 8]);
      kiln::copy_vector<8>(&beta_v[0], &beta[(k * THREADS + t) * 8]);
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const float erf_u0 = (__half2float(x_row[k * 8 + i]) - mean) * rstd * __half2float(gamma_v[i]) + __half2float(beta_v[i]);
        const float erf_t0 = ((fabsf(erf_u0) > 5.54312479f) ? 5.54312479f : fabsf(erf_u0));
        const float erf_c0 = kiln::exp2_unit(((((((((((((((((-2.64186885e-06f) * erf_t0) + 3.70755785e-05f) * erf_t0) + (-0.000175334404f)) * erf_t0) + (-0.000163053596f)) * erf_t0) + 0.00709964623f) * erf_t0) + (-0.0525352397f)) * erf_t0) + (-0.459299354f)) * erf_t0) + (-1.151229f)) * erf_t0));
        y_v[i] = __float2half(erf_u0 * ((erf_u0 < 0.0f) ? erf_c0 : (2.0f - erf_c0)) * 0.5f);
      }
      kiln::copy_vector<8>(&y[row * COLS + (k * THREADS + t) * 8], &y_v[0]);
    }
  }
}

}  // namespace probe
#endif

namespace {

constexpr int64_t kElems = int64_t(ROWS) * COLS;

struct Variant {
  std::string name;
  const void* kernel;
  unsigned grid;
  bool exact = true;  // bit for bit the generated row's results; else within a tolerance of them
};

struct Buffers {
  __half* x[2];  // two inputs, alternated between calls, so no call reads the last one's inputs from L2
  __half* gamma;
  __half* beta;
  __half* y;
};

void launch(const Variant& v, const Buffers& b, int which) {
#ifdef OP_LAYERNORM_GELU
  const void* args[] = {&b.x[which], &b.gamma, &b.beta, &b.y};
#else
  const void* args[] = {&b.x[which], &b.y};
#endif
  CHECK(cudaLaunchKernel(v.kernel, dim3(v.grid), dim3(THREADS), const_cast<void**>(args), 0, nullptr));
}

// float64 reference of one row of the op.
std::vector<double> reference_row(const std::vector<__half>& x, const std::vector<__half>& gamma,
                                  const std::vector<__half>& beta, int64_t r) {
  std::vector<double> out(COLS);
  const __half* row = &x[r * COLS];
#ifdef OP_LAYERNORM_GELU
  double mean = 0, var = 0;
  for (int c = 0; c < COLS; ++c) mean += double(__half2float(row[c]));
  mean /= COLS;
  for (int c = 0; c < COLS; ++c) var += std::pow(double(__half2float(row[c])) - mean, 2);
  var /= COLS;
  for (int c = 0; c < COLS; ++c) {
    const double n = (double(__half2float(row[c])) - mean) / std::sqrt(var + 1e-5) * double(__half2float(gamma[c])) +
                     double(__half2float(beta[c]));
    out[c] = 0.5 * n * (1 + std::erf(n / std::sqrt(2.0)));
  }
#else
  (void)gamma, (void)beta;
  double m = -1e300, s = 0;
  for (int c = 0; c < COLS; ++c) m = std::max(m, double(__half2float(row[c])));
  for (int c = 0; c < COLS; ++c) s += std::exp(double(__half2float(row[c])) - m);
  for (int c = 0; c < COLS; ++c) out[c] = std::exp(double(__half2float(row[c])) - m) / s;
#endif
  return out;
}

// Median, min and max of per-call times (us): each sample is `calls` back-to-back launches between
// two events, inputs alternated.
std::vector<float> time_us(const Variant& v, const Buffers& b, int samples, int calls) {
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  for (int i = 0; i < 3; ++i) launch(v, b, i & 1);
  std::vector<float> us;
  for (int s = 0; s < samples; ++s) {
    CHECK(cudaEventRecord(start));
    for (int i = 0; i < calls; ++i) launch(v, b, i & 1);
    CHECK(cudaEventRecord(stop));
    CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, start, stop));
    us.push_back(ms * 1000.0f / calls);
  }
  std::sort(us.begin(), us.end());
  CHECK(cudaEventDestroy(start));
  CHECK(cudaEventDestroy(stop));
  return {us[us.size() / 2], us.front(), us.back()};
}

}  // namespace

int main() {
  int device = 0, sms = 0;
  CHECK(cudaGetDevice(&device));
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, device));

  // Inputs: N(0, 1) + a row-dependent offset, fresh each run (seeded from the clock), and the
  // LayerNorm's gamma and beta.
  std::mt19937_64 rng(std::random_device{}());
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<__half> hx(kElems), hgamma(COLS), hbeta(COLS);
  for (int64_t i = 0; i < kElems; ++i) hx[i] = __float2half(normal(rng) + 0.25f * float((i / COLS) % 7));
  for (int c = 0; c < COLS; ++c) hgamma[c] = __float2half(1.0f + 0.1f * normal(rng)), hbeta[c] = __float2half(0.1f * normal(rng));
  Buffers b{};
  const size_t bytes = kElems * sizeof(__half);
  for (__half*& p : b.x) CHECK(cudaMalloc(&p, bytes));
  CHECK(cudaMalloc(&b.y, bytes));
  CHECK(cudaMalloc(&b.gamma, COLS * sizeof(__half)));
  CHECK(cudaMalloc(&b.beta, COLS * sizeof(__half)));
  for (__half* p : b.x) CHECK(cudaMemcpy(p, hx.data(), bytes, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(b.gamma, hgamma.data(), COLS * sizeof(__half), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(b.beta, hbeta.data(), COLS * sizeof(__half), cudaMemcpyHostToDevice));

  auto resident = [&](const void* kernel) {
    int per_sm = 0;
    CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, THREADS, 0));
    return unsigned(per_sm * sms);
  };
  const int64_t row_bytes = int64_t(COLS) * sizeof(__half);
  std::vector<Variant> variants;
  auto add_grids = [&](const std::string& name, const void* kernel) {
    const unsigned r = resident(kernel);
    const unsigned per_block = unsigned((ROWS + r - 1) / r);  // rows a block takes when all are resident
    variants.push_back({name + ", kiln_row_grid_size", kernel, kiln_row_grid_size(ROWS, row_bytes)});
    variants.push_back({name + ", resident blocks (" + std::to_string(r / sms) + "/SM)", kernel, r});
    variants.push_back({name + ", equal rows per block (" + std::to_string(per_block) + ")", kernel,
                        unsigned((ROWS + per_block - 1) / per_block)});
    variants.push_back({name + ", a block per row", kernel, unsigned(ROWS)});
  };
  add_grids("generated", reinterpret_cast<const void*>(&KERNEL));
#ifdef OP_LAYERNORM_GELU
  add_grids("prefetch", reinterpret_cast<const void*>(&probe::layernorm_gelu<true, false>));
  add_grids("hoist", reinterpret_cast<const void*>(&probe::layernorm_gelu<false, true>));
  add_grids("prefetch+hoist", reinterpret_cast<const void*>(&probe::layernorm_gelu<true, true>));
  add_grids("restructured", reinterpret_cast<const void*>(&probe::layernorm_gelu<false, false>));
  // The one-reduction row is not bit-identical to the generated one: checked within a tolerance.
  const void* chan = reinterpret_cast<const void*>(&probe::layernorm_gelu_chan);
  variants.push_back({"one reduction (Chan), kiln_row_grid_size", chan, kiln_row_grid_size(ROWS, row_bytes), false});
  variants.push_back({"one reduction (Chan), a block per row", chan, unsigned(ROWS), false});
#endif

  // Check: the generated launch against float64 on sampled rows, then every variant bit for bit
  // against it (a variant that differs is reported with its largest difference and not timed).
  launch(variants[0], b, 0);
  CHECK(cudaDeviceSynchronize());
  std::vector<__half> expected(kElems), got(kElems);
  CHECK(cudaMemcpy(expected.data(), b.y, bytes, cudaMemcpyDeviceToHost));
  double worst = 0;
  for (int64_t r : {int64_t(0), int64_t(1), int64_t(ROWS / 2 + 3), int64_t(ROWS - 1)}) {
    const std::vector<double> ref = reference_row(hx, hgamma, hbeta, r);
    for (int c = 0; c < COLS; ++c) {
      const double e = std::abs(double(__half2float(expected[r * COLS + c])) - ref[c]) / (1e-3 + std::abs(ref[c]));
      worst = std::max(worst, e);
    }
  }
  std::printf("device: %s (%d SMs); %s %dx%d fp16, %d threads; generated launch vs float64 on 4 rows: max rel err %.2e (%s)\n",
              prop.name, sms, GENERATED, ROWS, COLS, THREADS, worst, worst < 2e-2 ? "ok" : "FAILED");
  if (!(worst < 2e-2)) return 1;
  // PROBE_PROFILE=i: launch variant i once more and stop (for ncu --launch-skip 1 --launch-count 1).
  if (const char* profile = std::getenv("PROBE_PROFILE")) {
    const size_t i = std::strtoul(profile, nullptr, 10);
    if (i >= variants.size()) return 1;
    std::printf("profiled: %s, grid %u\n", variants[i].name.c_str(), variants[i].grid);
    launch(variants[i], b, 1);
    CHECK(cudaDeviceSynchronize());
    return 0;
  }

  // The copy of the same bytes (read the input once, write the output once) and the 1 GiB copy.
  auto time_copy = [&](size_t n, __half* dst, __half* src) {
    cudaEvent_t start, stop;
    CHECK(cudaEventCreate(&start));
    CHECK(cudaEventCreate(&stop));
    std::vector<float> us;
    for (int s = 0; s < 23; ++s) {
      CHECK(cudaEventRecord(start));
      for (int i = 0; i < 10; ++i) CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice));
      CHECK(cudaEventRecord(stop));
      CHECK(cudaEventSynchronize(stop));
      float ms = 0;
      CHECK(cudaEventElapsedTime(&ms, start, stop));
      if (s >= 3) us.push_back(ms * 100.0f);
    }
    std::sort(us.begin(), us.end());
    return std::vector<float>{us[us.size() / 2], us.front(), us.back()};
  };
  void *big_a = nullptr, *big_b = nullptr;
  const size_t gib = size_t(1) << 30;
  CHECK(cudaMalloc(&big_a, gib));
  CHECK(cudaMalloc(&big_b, gib));
  CHECK(cudaMemset(big_a, 1, gib));
  const std::vector<float> big = time_copy(gib, static_cast<__half*>(big_b), static_cast<__half*>(big_a));
  const double copy_gbs = 2.0 * gib / (big[0] * 1e3);
  const std::vector<float> same = time_copy(bytes, b.y, b.x[0]);
  std::printf("copy bandwidth (1 GiB, read + write): %.0f GB/s; copy of the same bytes: %.1f us\n\n", copy_gbs, same[0]);
  std::printf("| variant | grid | check | us per call, median (min / max) | GB/s | %% of copy bw |\n| --- | ---: | --- | ---: | ---: | ---: |\n");
  for (const Variant& v : variants) {
    CHECK(cudaMemset(b.y, 0xff, bytes));
    launch(v, b, 0);
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemcpy(got.data(), b.y, bytes, cudaMemcpyDeviceToHost));
    int64_t differ = 0, outside = 0;
    double largest = 0;
    for (int64_t i = 0; i < kElems; ++i) {
      const float a = __half2float(got[i]), e = __half2float(expected[i]);
      if (std::memcmp(&got[i], &expected[i], sizeof(__half)) != 0) {
        ++differ;
        const double d = std::isnan(a) ? INFINITY : double(std::abs(a - e));
        largest = std::max(largest, d);
        if (!(d <= 2e-3 + 4e-3 * std::abs(e))) ++outside;  // a couple of float16 ulps
      }
    }
    if (!v.exact && !outside) {
      const std::vector<float> t = time_us(v, b, 21, 10);
      const double gbs = 2.0 * bytes / (t[0] * 1e3);
      std::printf("| %s | %u | %lld differ, largest %.3g (within tolerance) | %.1f (%.1f / %.1f) | %.0f | %.0f%% |\n", v.name.c_str(),
                  v.grid, (long long)differ, largest, t[0], t[1], t[2], gbs, 100.0 * gbs / copy_gbs);
      continue;
    }
    if (differ) {
      std::printf("| %s | %u | %lld elements differ (largest %.3g) | not timed | | |\n", v.name.c_str(), v.grid,
                  (long long)differ, largest);
      continue;
    }
    const std::vector<float> t = time_us(v, b, 21, 10);
    const double gbs = 2.0 * bytes / (t[0] * 1e3);
    std::printf("| %s | %u | identical | %.1f (%.1f / %.1f) | %.0f | %.0f%% |\n", v.name.c_str(), v.grid, t[0], t[1], t[2], gbs,
                100.0 * gbs / copy_gbs);
  }
  return 0;
}
