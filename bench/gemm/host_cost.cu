// Host cost of a Hopper GEMM call, split into its parts (256^3 fp16, A [M,K], B [N,K]): the whole
// gemm_wgmma call, the mma.sync call, cudaFuncSetAttribute alone, the cached tensor-map lookups
// alone, the bare kernel launch; each as host time per call and the stream's time per call over 2000
// back-to-back calls (bench/gemm/NOTES.md, session 21: the harness measured 34.6 us of both for the
// whole call against a kernel of ~9 us under ncu). Build here, carry, run on the GPU machine:
//   nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -DKILN_GEMM_SM90A -Ikernels/gemm \
//     bench/gemm/host_cost.cu -o .carry/hc/host_cost
#include <cstdio>
#include <ctime>
#include "kiln_gemm.cuh"
namespace kg = kiln::gemm;
struct StoreE {
  static constexpr int kNumB = 1;
  __half* out; int64_t n;
  __device__ void operator()(int64_t, int64_t m, int64_t c, float acc) const { out[m * n + c] = __float2half(acc); }
};
static double now_us() { timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e6 + t.tv_nsec * 1e-3; }
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("error %s line %d\n", cudaGetErrorString(e_), __LINE__); return 1; } } while (0)
int main() {
  const int64_t M = 256, N = 256, K = 256;
  __half *a, *b, *out;
  CK(cudaMalloc(&a, M * K * 2)); CK(cudaMalloc(&b, N * K * 2)); CK(cudaMalloc(&out, M * N * 2));
  CK(cudaMemset(a, 0, M * K * 2)); CK(cudaMemset(b, 0, N * K * 2));
  kg::Problem p; p.m = M; p.n = N; p.k = K;
  p.a.data = a; p.a.stride_mn = K; p.a.stride_k = 1;
  p.b[0].data = b; p.b[0].stride_mn = K; p.b[0].stride_k = 1;
  const StoreE e{out, N};
  using C = kg::WgmmaConfig<128, 128, 6>;
  using F = kg::TileConfig<128, 128, 64, 2, 2, 3>;
  const int kCalls = 2000;
  auto run = [&](const char* what, auto&& f) {
    for (int i = 0; i < 20; ++i) f();
    cudaDeviceSynchronize();
    cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
    cudaEventRecord(e0, 0);
    const double t0 = now_us();
    for (int i = 0; i < kCalls; ++i) f();
    const double host = (now_us() - t0) / kCalls;
    cudaEventRecord(e1, 0); cudaEventSynchronize(e1);
    float ms; cudaEventElapsedTime(&ms, e0, e1);
    printf("%-60s host %7.2f us/call, stream %7.2f us/call, %s\n", what, host, ms * 1000.0 / kCalls, cudaGetErrorString(cudaGetLastError()));
  };
  run("gemm_wgmma<128,128,6> whole call", [&] { (void)kg::gemm_wgmma<__half, C, F>(p, e, nullptr, 0, 0); });
  run("gemm<128,128,64,2,2,3> (mma.sync) whole call", [&] { (void)kg::gemm<__half, F>(p, e, nullptr, 0, 0); });
  auto kernel = kg::detail::wgmma_gemm_kernel<__half, C, StoreE, true, true>;
  using L = kg::detail::WgmmaLayout<C, 1>;
  run("cudaFuncSetAttribute(wgmma kernel, max dynamic smem) alone", [&] {
    (void)cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(L::kSmemBytes)); });
  CUtensorMap ma, mb;
  bool ab = false, bb = false;
  if (!kg::detail::operand_tensor_map(p, p.a, M, true, 128, false, 1, ab, ma) || !kg::detail::operand_tensor_map(p, p.b[0], N, true, 128, false, 1, bb, mb)) { printf("no maps\n"); return 1; }
  run("three tensor-map lookups (cached)", [&] {
    (void)kg::detail::operand_tensor_map(p, p.a, M, true, 128, false, 1, ab, ma);
    (void)kg::detail::operand_tensor_map(p, p.b[0], N, true, 128, false, 1, bb, mb);
    (void)kg::detail::operand_tensor_map(p, p.b[0], N, true, 128, false, 1, bb, mb); });
  kg::detail::WgmmaArgs args;
  args.m = M; args.n = N; args.tiles_m = 2; args.tiles_n = 2; args.k_steps = 4; args.splits = 1; args.k_steps_per_split = 4; args.units = 4;
  run("wgmma kernel<<<4, 384, smem>>> alone", [&] { kernel<<<4, C::kThreads, L::kSmemBytes, 0>>>(ma, mb, mb, args, e); });
  run("cudaGetDevice + device attribute (device_sm_count)", [&] { (void)kg::detail::device_sm_count(); });
  return 0;
}
