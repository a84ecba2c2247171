// Check-then-time for kernels/gemm/attention.cuh (fp16/bf16, head dims 64/128, edge sequence
// lengths), against an fp32 CPU reference computed from the same 16-bit inputs.
// Q/K/V are read in place from one interleaved QKV buffer [B, S, 3, H, D] (as an exported ViT
// block's q/k/v are), the output is written [B, S, H, D]. Also runs the fallback on a
// misaligned layout (head-dim stride 1 but row stride not a multiple of 8).
// Build: nvcc -O3 -std=c++20 -arch=sm_90 -I kernels/gemm bench/attention/attn_check.cu -o attn_check
// Prints: CHECK lines (max abs error vs the reference, pass/fail) then TIME lines (us per call).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "attention.cuh"

using namespace kiln::gemm;

template <typename T> static T from_f(float x) {
  if constexpr (std::is_same<T, __half>::value) return __float2half_rn(x); else return __float2bfloat16_rn(x);
}
template <typename T> static float to_f(T x) {
  if constexpr (std::is_same<T, __half>::value) return __half2float(x); else return __bfloat162float(x);
}

#define CK(...) do { cudaError_t e_ = (__VA_ARGS__); if (e_ != cudaSuccess) { printf("CUDA error %s at %d\n", cudaGetErrorString(e_), __LINE__); exit(1);} } while (0)

// row_pad: extra elements per token row of the QKV buffer (0: aligned; 1: misaligned -> fallback)
template <typename T, int D>
static bool run_case(const char* tname, int B, int H, int S, bool causal, int row_pad, bool time_it, bool masked = false) {
  const int64_t tok = int64_t(3) * H * D + row_pad;  // elements per token in QKV
  std::vector<T> qkv(size_t(B) * S * tok);
  std::mt19937 rng(1234 + S * 7 + D + row_pad);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (auto& x : qkv) x = from_f<T>(nd(rng));
  T* dqkv; T* dout;
  CK(cudaMalloc(&dqkv, qkv.size() * sizeof(T) + 64));
  CK(cudaMalloc(&dout, size_t(B) * S * H * D * sizeof(T)));
  CK(cudaMemcpy(dqkv, qkv.data(), qkv.size() * sizeof(T), cudaMemcpyHostToDevice));
  CK(cudaMemset(dout, 0xff, size_t(B) * S * H * D * sizeof(T)));  // NaN: unwritten shows
  AttentionProblem p;
  p.seq_q = S; p.seq_k = S; p.batch_rank = 2; p.batch_extent[0] = B; p.batch_extent[1] = H;
  p.scale = 1.0f / std::sqrt(float(D)); p.causal = causal;
  AttentionOperand* ops[3] = {&p.q, &p.k, &p.v};
  for (int w = 0; w < 3; ++w) {
    ops[w]->data = dqkv + int64_t(w) * H * D; ops[w]->stride_row = tok; ops[w]->stride_d = 1;
    ops[w]->batch_stride[0] = int64_t(S) * tok; ops[w]->batch_stride[1] = D;
  }
  // Additive mask [S, S] broadcast over (B, H): random in [-2, 0], every 7th key -inf (never key 0).
  std::vector<T> mask(size_t(S) * S);
  for (int i = 0; i < S; ++i) for (int j = 0; j < S; ++j)
    mask[size_t(i) * S + j] = from_f<T>(j % 7 == 3 ? -INFINITY : -2.f * float((i * 31 + j * 17) % 101) / 100.f);
  T* dmask = nullptr;
  if (masked) {
    CK(cudaMalloc(&dmask, mask.size() * sizeof(T)));
    CK(cudaMemcpy(dmask, mask.data(), mask.size() * sizeof(T), cudaMemcpyHostToDevice));
    p.mask.data = dmask; p.mask.stride_row = S; p.mask.stride_d = 1;
  }
  AttentionStore<T> st; st.out = dout; st.shape = p;
  st.layout.stride_row = int64_t(H) * D; st.layout.stride_d = 1;
  st.layout.batch_stride[0] = int64_t(S) * H * D; st.layout.batch_stride[1] = D;
  const bool tc = attention_uses_tensor_cores<T, D>(p);
  CK(attention<T, D>(p, st, 0));
  CK(cudaDeviceSynchronize());
  std::vector<T> out(size_t(B) * S * H * D);
  CK(cudaMemcpy(out.data(), dout, out.size() * sizeof(T), cudaMemcpyDeviceToHost));
  // reference (fp32 from the 16-bit inputs)
  double max_err = 0, max_ref = 0;
  std::vector<float> logit(S);
  for (int b = 0; b < B; ++b) for (int h = 0; h < H; ++h) for (int i = 0; i < S; ++i) {
    const T* q = &qkv[(size_t(b) * S + i) * tok + 0 * H * D + h * D];
    float mx = -INFINITY;
    for (int j = 0; j < S; ++j) {
      const T* k = &qkv[(size_t(b) * S + j) * tok + 1 * H * D + h * D];
      float dot = 0; for (int d = 0; d < D; ++d) dot += to_f(q[d]) * to_f(k[d]);
      logit[j] = (causal && j > i) ? -INFINITY : dot * p.scale + (masked ? to_f(mask[size_t(i) * S + j]) : 0.f); mx = std::max(mx, logit[j]);
    }
    float sum = 0; for (int j = 0; j < S; ++j) { logit[j] = std::exp(logit[j] - mx); sum += logit[j]; }
    for (int d = 0; d < D; ++d) {
      float o = 0;
      for (int j = 0; j < S; ++j) o += logit[j] * to_f(qkv[(size_t(b) * S + j) * tok + 2 * H * D + h * D + d]);
      o /= sum;
      const float got = to_f(out[((size_t(b) * S + i) * H + h) * D + d]);
      const double err = std::isfinite(got) ? std::fabs(got - o) : 1e30;
      max_err = std::max(max_err, err); max_ref = std::max(max_ref, double(std::fabs(o)));
    }
  }
  const double tol = std::is_same<T, __half>::value ? 4e-3 : 2.5e-2;
  const bool ok = max_err <= tol * std::max(1.0, max_ref);
  printf("CHECK %s D=%d B=%d H=%d S=%d causal=%d mask=%d pad=%d path=%s max_abs_err=%.3g max_ref=%.3g %s\n", tname, D, B, H, S, int(causal), int(masked),
         row_pad, tc ? "tensorcore" : "simt", max_err, max_ref, ok ? "PASS" : "FAIL");
  cudaFree(dqkv); cudaFree(dout); cudaFree(dmask);
  (void)time_it;
  return ok;
}

template <typename T, int D>
static void time_case(const char* tname, int B, int H, int S) {
  const int64_t tok = int64_t(3) * H * D;
  T* dqkv; T* dout;
  CK(cudaMalloc(&dqkv, size_t(B) * S * tok * sizeof(T)));
  CK(cudaMalloc(&dout, size_t(B) * S * H * D * sizeof(T)));
  CK(cudaMemset(dqkv, 0, size_t(B) * S * tok * sizeof(T)));
  AttentionProblem p;
  p.seq_q = S; p.seq_k = S; p.batch_rank = 2; p.batch_extent[0] = B; p.batch_extent[1] = H;
  p.scale = 1.0f / std::sqrt(float(D));
  AttentionOperand* ops[3] = {&p.q, &p.k, &p.v};
  for (int w = 0; w < 3; ++w) {
    ops[w]->data = dqkv + int64_t(w) * H * D; ops[w]->stride_row = tok;
    ops[w]->batch_stride[0] = int64_t(S) * tok; ops[w]->batch_stride[1] = D;
  }
  AttentionStore<T> st; st.out = dout; st.shape = p;
  st.layout.stride_row = int64_t(H) * D; st.layout.batch_stride[0] = int64_t(S) * H * D; st.layout.batch_stride[1] = D;
  for (int i = 0; i < 10; ++i) CK(attention<T, D>(p, st, 0));
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  const int iters = 100;
  cudaEventRecord(a);
  for (int i = 0; i < iters; ++i) attention<T, D>(p, st, 0);
  cudaEventRecord(b); CK(cudaEventSynchronize(b));
  float ms; cudaEventElapsedTime(&ms, a, b);
  const double us = ms * 1000.0 / iters;
  const double flops = 4.0 * B * H * double(S) * S * D;
  printf("TIME kiln %s D=%d B=%d H=%d S=%d %.2f us %.1f TFLOP/s\n", tname, D, B, H, S, us, flops / us * 1e-6);
  cudaFree(dqkv); cudaFree(dout);
}

int main() {
  bool ok = true;
  const int seqs[] = {1, 17, 197, 256, 800};
  for (int S : seqs) {
    ok &= run_case<__half, 64>("fp16", 2, 3, S, false, 0, false);
    ok &= run_case<__half, 128>("fp16", 2, 3, S, false, 0, false);
    ok &= run_case<__nv_bfloat16, 64>("bf16", 2, 3, S, false, 0, false);
    ok &= run_case<__nv_bfloat16, 128>("bf16", 2, 3, S, false, 0, false);
  }
  ok &= run_case<__half, 64>("fp16", 2, 3, 197, true, 0, false);
  ok &= run_case<__nv_bfloat16, 128>("bf16", 1, 2, 300, true, 0, false);
  ok &= run_case<__half, 64>("fp16", 2, 3, 197, false, 0, false, true);          // additive mask
  ok &= run_case<__nv_bfloat16, 128>("bf16", 1, 2, 130, true, 0, false, true);   // mask + causal
  ok &= run_case<__half, 64>("fp16", 1, 2, 77, false, 1, false, true);           // mask, misaligned -> simt
  ok &= run_case<__half, 64>("fp16", 1, 2, 77, false, 1, false);     // misaligned -> simt
  ok &= run_case<__half, 80>("fp16", 1, 2, 65, false, 0, false);     // head dim 80 -> simt
  printf(ok ? "ALL CHECKS PASS\n" : "SOME CHECKS FAILED\n");
  if (!ok) return 1;
  time_case<__half, 64>("fp16", 8, 12, 197);   // the ViT block's attention core
  time_case<__nv_bfloat16, 64>("bf16", 8, 12, 197);
  time_case<__half, 64>("fp16", 8, 12, 800);
  time_case<__half, 128>("fp16", 8, 12, 800);
  time_case<__half, 128>("fp16", 4, 16, 2048);
  return 0;
}
