#pragma once
// The MLP layer of kiln_w4_mlp_* at M = 1 as one kernel (issue 11, item 2; opt-in, see
// mlp_fused_enabled):
//   y = (act(x · Gᵀ) ⊙ (x · Uᵀ)) · Dᵀ,  x [1, H], G/U [I, H] (interleaved tiles), D [H, I].
//
// Why it was built. The two-kernel path (gate/up GEMV, then the down GEMV on the T-rounded h in the workspace)
// pays a kernel boundary in the middle of the layer: the down projection's CTAs start only after
// the last gate/up CTA, and the 2048 x 16384 down GEMV spreads each output row over all of K, so
// its own ramp and tail come on top (bench/quant/NOTES.md, sessions 9-10: the Gemma MLP x18 chain
// at M = 1 stays at ~22 us a layer while the weights alone would stream in ~13).
//
// Schedule. CTA c of G = I / R owns R features [c R, c R + R) of h and, for the down projection,
// the same R columns of D (split-K by feature):
//   0. before griddepcontrol.wait (nothing here depends on the previous kernel): it asks L2 to
//      keep its D slice (H rows x R/2 bytes and their scale bytes, `prefetch.global.L2::evict_last`)
//      and requests its warps' first two gate/up items into their shared-memory slots (cp.async);
//   1. its 2R gate/up rows (x · Gᵀ, x · Uᵀ): an item is 8 or 4 rows x one 1024-k chunk (16 bytes a lane
//      and row, variant 7's packed half2 math); each warp walks its items through two slots, the
//      next item in flight while it computes this one; the partial sums meet in shared memory, and
//      h = act(gate) · up is rounded to T as the two-kernel path rounds it;
//   2. its down partial sums p_c[r] = h_c · D[r, slice]ᵀ for all H rows (a unit of 32 k per lane
//      from L2, the R/32 lanes of a row reduced by shuffles) into its slot of the workspace;
//   3. after a grid-wide barrier, the CTA sums rows [c RP, c RP + RP) over the G slots in a fixed
//      order (deterministic) and stores them as T.
// The barrier is cooperative groups' grid sync, so the kernel is a cooperative launch: the driver
// guarantees that all G CTAs are resident at once (or refuses the launch; the host checks the
// occupancy first and takes the two-kernel path where they do not fit), and keeps the barrier's
// state itself. (A barrier on flags in the workspace would need a value unique to each launch:
// %gridid is not, it repeats across replays of a CUDA graph, measured in session 18.)
#include <cooperative_groups.h>

#include <atomic>
#include <cstdlib>
#include <type_traits>

#include "w4_gemv_async.cuh"

namespace kiln::quant::gpu {

constexpr int kMlpFusedMaxChunks = 16;  // H <= 16384 (gate/up rows of 1024-k chunks)

struct MlpFusedParams {
  LinearParams gu;    // gate/up: x [1, H], weight [2I, H] (8-row gate and up halves), k = H, act
  LinearParams down;  // down: weight [H, I], k = I, n = H, y [1, H]
  float* slots;       // [G][H]: CTA c's down partial sums
};

// A CTA of THREADS threads (512: up to 128 registers a thread; 1024: 64, twice the warps to hide
// latency) takes gate/up items of kItemRows rows (8, or 4 at 1024 threads, so that the slots fit)
// and kBatch D rows' loads at a time in step 2.
// Shared memory: per warp two item slots (variant 8's chunk layout for kItemRows rows), then the
// gate/up partial sums [2R rows][chunks] and h [R] (T).
template <int THREADS>
struct MlpFusedLayout {
  static_assert(THREADS == 512 || THREADS == 1024, "MlpFusedLayout: 512 or 1024 threads");
  static constexpr int kItemRows = THREADS == 1024 ? 4 : 8;
  static constexpr int kBatch = THREADS == 1024 ? 4 : 8;
  static constexpr int kItemWeightBytes = kItemRows * 32 * 16;
  static constexpr int kSlotBytes = kItemWeightBytes + kItemRows * Gemv8Layout::kScaleRowBytes;
  static constexpr int kSlots = 2;
  static constexpr size_t kRingBytes = size_t(THREADS / 32) * kSlots * kSlotBytes;
  __host__ __device__ static size_t h_offset(int features, int h) {
    return kRingBytes + size_t(2 * features) * (h / kGemv7Chunk) * sizeof(float);
  }
  __host__ __device__ static size_t bytes(int features, int h) { return h_offset(features, h) + size_t(features) * 2; }
};

// One item (kItemRows gate/up rows x the 1024 k of `chunk`) into a slot; the caller commits.
template <Format F, int THREADS>
__device__ __forceinline__ void issue_mlp_item(const LinearParams& gu, uint8_t* slot, int row0, int chunk, int lane) {
  using L = MlpFusedLayout<THREADS>;
  issue_chunk_scales<F, L::kItemWeightBytes, L::kItemRows>(gu, slot, row0, chunk, lane);
#pragma unroll
  for (int g = 0; g < L::kItemRows / 4; ++g) issue_chunk_rows(gu, slot, row0 + 4 * g, chunk, lane, 0, g);
}

// Asks L2 to keep CTA c's slice of D (its R columns of every row, with their scale and INT4 zero
// bytes) until step 2 reads it, while the gate/up rows stream past.
template <Format F, int R>
__device__ __forceinline__ void prefetch_down_slice(const LinearParams& d, int f0) {
  auto keep = [](const void* p) { asm volatile("prefetch.global.L2::evict_last [%0];" ::"l"(p)); };
  const size_t row_bytes = size_t(d.k) / 2, scale_row = row_scale_bytes<F>(d);
  const size_t scale_at = F == Format::NvFp4 ? size_t(f0) / 16 : F == Format::MxFp4 ? size_t(f0) / 32 : 2 * size_t(f0 / d.group);
  for (int r = threadIdx.x; r < d.n; r += blockDim.x) {
    keep(d.weight + size_t(r) * row_bytes + f0 / 2);
    keep(static_cast<const uint8_t*>(d.scale) + size_t(r) * scale_row + scale_at);
    if constexpr (F == Format::Int4) keep(static_cast<const uint8_t*>(d.zero) + size_t(r) * scale_row + scale_at);
  }
}

template <Format F, typename T, int R, int THREADS>
__global__ void __launch_bounds__(THREADS, 1) w4_mlp_fused_kernel(MlpFusedParams p) {
  using L = MlpFusedLayout<THREADS>;
  constexpr int kItemRows = L::kItemRows;
  constexpr int kUnits = R / 32;  // 32-k units of a D row slice
  extern __shared__ __align__(16) uint8_t mlp_smem[];
  const LinearParams& gu = p.gu;
  const LinearParams& d = p.down;
  const int h = d.n, chunks = gu.k / kGemv7Chunk;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const int c = blockIdx.x, f0 = c * R;
  float* red = reinterpret_cast<float*>(mlp_smem + L::kRingBytes);
  T* hs = reinterpret_cast<T*>(mlp_smem + L::h_offset(R, h));
  uint8_t* slots = mlp_smem + size_t(warp) * L::kSlots * L::kSlotBytes;

  // 0. Nothing before the wait depends on the previous kernel. Items: (kItemRows rows, chunk), rows
  // 2 f0 + kItemRows i .. (Prepack.h's 16-row tiles: the gate rows of 8 features, then their up rows).
  prefetch_down_slice<F, R>(d, f0);
  const int items = (2 * R / kItemRows) * chunks;
  auto issue = [&](int q, int slot) {
    if (q < items) {
      const int group = q / chunks;
      issue_mlp_item<F, THREADS>(gu, slots + slot * L::kSlotBytes, 2 * f0 + kItemRows * group, q - group * chunks, lane);
    }
    cp_async_commit();  // (empty groups too: the wait below counts groups)
  };
  issue(warp, 0);
  issue(warp + warps, 1);
  kiln::gemm::detail::pdl_wait();  // x, y and the workspace belong to the previous kernel until here

  // 1. Gate/up.
  {
    int x_chunk = -1, s = 0, j = 0;
    uint32_t xh[16];
    float xsum = 0.0f;
    for (int q = warp; q < items; q += warps, ++j) {
      const int group = q / chunks, chunk = q - group * chunks;
      if (chunk != x_chunk) s = load_x_f16<T, F>(gu, 0, chunk * kGemv7Chunk + 32 * lane, xh, &xsum), x_chunk = chunk;
      cp_async_wait<1>();  // this item's group (the next one may still be in flight)
      __syncwarp();        // the scale pieces other lanes copied
      const uint8_t* slot = slots + (j & 1) * L::kSlotBytes;
      const float f = pow2(-s);
      float acc[kItemRows];
#pragma unroll
      for (int r = 0; r < kItemRows; ++r)
        acc[r] = unit_dot<F, T>(read_unit<F, T, L::kItemWeightBytes>(slot, r, lane, gu.group, r), xh, xsum) * f;
      __syncwarp();  // every lane has read the slot before it is refilled
      issue(q + 2 * warps, j & 1);
      const int row = butterfly_rows<kItemRows>(acc, lane);
      if ((lane & (32 / kItemRows - 1)) == 0) red[(kItemRows * group + row) * chunks + chunk] = acc[0];
    }
  }
  cp_async_wait<0>();
  __syncthreads();
  if (threadIdx.x < R) {  // h of feature f: the two-kernel path's epilogue (gemv7_epilogue), same order
    const int f = threadIdx.x, gate = 16 * (f / 8) + f % 8;  // its gate row in the CTA's rows; up: + 8
    float g = 0.0f, u = 0.0f;
    for (int ch = 0; ch < chunks; ++ch) g += red[gate * chunks + ch];
    for (int ch = 0; ch < chunks; ++ch) u += red[(gate + 8) * chunks + ch];
    float s_gate = 1.0f, s_up = 1.0f;
    if constexpr (F == Format::NvFp4) {
      if (gu.scale2) s_gate = gu.scale2[0], s_up = gu.scale2[1];
    }
    g *= s_gate * float(1 << gemv7_shift<F>());
    u *= s_up * float(1 << gemv7_shift<F>());
    hs[f] = from_float<T>(activate(g, gu.act) * u);
  }
  __syncthreads();

  // 2. Down partial sums of the slice: lane t takes unit t % U of rows t / U, + THREADS / U, ...,
  // kBatch rows' loads in flight at a time.
  {
    const int u = threadIdx.x % kUnits, k0 = f0 + 32 * u;
    uint4 raw[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) raw[i] = reinterpret_cast<const uint4*>(hs + 32 * u)[i];
    uint32_t xh[16];
    float xsum = 0.0f;
    const float f = pow2(-convert_x_f16<T, F>(raw, xh, &xsum));
    float* slot = p.slots + size_t(c) * h;
    // (h is a multiple of the step, so `r < h` below is the same in every lane: the shuffles are safe)
    constexpr int kBatch = L::kBatch, step = THREADS / kUnits;
    for (int r0 = threadIdx.x / kUnits; r0 < h; r0 += kBatch * step) {
      Gemv7Unit<F, T> units[kBatch];
#pragma unroll
      for (int i = 0; i < kBatch; ++i)
        if (r0 + i * step < h) units[i] = load_unit<F, T>(d, r0 + i * step, k0);
#pragma unroll
      for (int i = 0; i < kBatch; ++i) {
        if (r0 + i * step >= h) break;
        float v = unit_dot<F, T>(units[i], xh, xsum) * f;
#pragma unroll
        for (int o = 1; o < kUnits; o *= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
        if (u == 0) __stcg(slot + r0 + i * step, v);
      }
    }
  }
  kiln::gemm::detail::pdl_trigger();
  __threadfence();
  cooperative_groups::this_grid().sync();

  // 3. Every slot complete: this CTA's rows summed over the slots in slot order.
  const int ctas = gridDim.x;
  const int rows = (h + ctas - 1) / ctas, row0 = c * rows;
  const int parts = blockDim.x / rows;  // threads per row, each summing every parts-th slot
  float* part = reinterpret_cast<float*>(mlp_smem);  // (over the item slots: step 1 is done)
  if (threadIdx.x < parts * rows) {
    const int rr = threadIdx.x % rows, j0 = threadIdx.x / rows;
    float v = 0.0f;
    if (row0 + rr < h)
      for (int j = j0; j < ctas; j += parts) v += __ldcg(p.slots + size_t(j) * h + row0 + rr);
    part[j0 * rows + rr] = v;
  }
  __syncthreads();
  if (threadIdx.x < rows && row0 + int(threadIdx.x) < h) {
    float v = 0.0f;
    for (int j = 0; j < parts; ++j) v += part[j * rows + threadIdx.x];
    float scale2 = 1.0f;
    if constexpr (F == Format::NvFp4) {
      if (d.scale2) scale2 = d.scale2[0];
    }
    v *= scale2 * float(1 << gemv7_shift<F>());
    static_cast<T*>(d.y)[row0 + threadIdx.x] = from_float<T>(v);
  }
}

// ---- host side ----

// Features per CTA, threads per CTA and the CTAs of a fused launch; ctas == 0: the fused kernel
// does not take the call.
struct MlpFusedPlan {
  int features = 0, threads = 0, ctas = 0;
  size_t smem = 0;
};

template <Format F, typename T, int R, int THREADS>
const void* mlp_fused_kernel_ptr() {
  return reinterpret_cast<const void*>(&w4_mlp_fused_kernel<F, T, R, THREADS>);
}

// Threads per CTA: 1024 unless KILN_QUANT_MLP_FUSED_THREADS=512.
inline int mlp_fused_threads() {
  const char* v = std::getenv("KILN_QUANT_MLP_FUSED_THREADS");
  return v && std::atoi(v) == 512 ? 512 : 1024;
}

// The smallest R of 32, 64, 128 whose G = I / R CTAs are all resident at once on this device
// (the last answer per thread is kept: a model calls the same shapes every inference).
template <Format F, typename T>
MlpFusedPlan mlp_fused_plan(int m, int h, int i) {
  MlpFusedPlan plan;
  if (m != 1 || h % kGemv7Chunk != 0 || h / kGemv7Chunk > kMlpFusedMaxChunks || i % 128 != 0) return plan;
  int dev = 0, sms = 0, max_smem = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return plan;
  const int threads = mlp_fused_threads();
  thread_local int last_dev = -1, last_h = 0, last_i = 0, last_threads = 0;
  thread_local MlpFusedPlan last;
  if (dev == last_dev && h == last_h && i == last_i && threads == last_threads) return last;
  int cooperative = 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&cooperative, cudaDevAttrCooperativeLaunch, dev) != cudaSuccess || !cooperative)
    return plan;
  auto try_r = [&](auto r_tag, auto threads_tag) {
    constexpr int R = decltype(r_tag)::value, THREADS = decltype(threads_tag)::value;
    const size_t smem = MlpFusedLayout<THREADS>::bytes(R, h);
    const int ctas = i / R;
    if (threads != THREADS || plan.ctas != 0 || smem > size_t(max_smem) || ctas > 1024 || (h + ctas - 1) / ctas > THREADS) return;
    const void* kernel = mlp_fused_kernel_ptr<F, T, R, THREADS>();
    if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, max_smem) != cudaSuccess) return;
    int per_sm = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, THREADS, smem) != cudaSuccess) return;
    if (ctas <= per_sm * sms) plan.features = R, plan.threads = THREADS, plan.ctas = ctas, plan.smem = smem;
  };
  using T512 = std::integral_constant<int, 512>;
  using T1024 = std::integral_constant<int, 1024>;
  try_r(std::integral_constant<int, 32>{}, T512{});
  try_r(std::integral_constant<int, 64>{}, T512{});
  try_r(std::integral_constant<int, 128>{}, T512{});
  try_r(std::integral_constant<int, 32>{}, T1024{});
  try_r(std::integral_constant<int, 64>{}, T1024{});
  try_r(std::integral_constant<int, 128>{}, T1024{});
  (void)cudaGetLastError();
  last_dev = dev, last_h = h, last_i = i, last_threads = threads, last = plan;
  return plan;
}

// Workspace of a fused launch (its slots) for any plan of this shape: G <= I / 32.
inline size_t mlp_fused_workspace_bytes(int m, int h, int i) {
  return m == 1 ? size_t(i) / 32 * h * sizeof(float) : 0;
}

// Not the default: KILN_QUANT_MLP_FUSED=1 takes it (read per call, so that a benchmark compares
// both paths). Measured slower than the two kernels on an H100 (bench/quant/NOTES.md, session 18:
// Gemma MLP x18 at M = 1 nvfp4 633 against 573 us): both are bound by the SM's issue rate at 16
// warps an SM (10 cycles per issued instruction a warp, ncu), not by the kernel boundary.
inline bool mlp_fused_enabled() {
  const char* v = std::getenv("KILN_QUANT_MLP_FUSED");
  return v && v[0] == '1';
}

// Whether a cooperative launch may also be a programmatic dependent one here (false after the
// driver refused the pair once; the launch is then repeated without PDL).
inline std::atomic<bool> mlp_fused_pdl_ok{true};

// A cooperative launch (the grid sync), and a programmatic dependent one when `pdl`.
template <Format F, typename T>
cudaError_t launch_mlp_fused_as(const MlpFusedPlan& plan, const MlpFusedParams& p, bool pdl, cudaStream_t stream) {
  cudaLaunchAttribute la[2];
  la[0].id = cudaLaunchAttributeCooperative;
  la[0].val.cooperative = 1;
  la[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  la[1].val.programmaticStreamSerializationAllowed = pdl ? 1 : 0;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(plan.ctas);
  cfg.blockDim = dim3(plan.threads);
  cfg.dynamicSmemBytes = plan.smem;
  cfg.stream = stream;
  cfg.attrs = la;
  cfg.numAttrs = 2;
  cudaError_t e = cudaErrorInvalidValue;
  const int key = plan.features * 2 + (plan.threads == 1024 ? 1 : 0);
  if (key == 64) e = cudaLaunchKernelEx(&cfg, w4_mlp_fused_kernel<F, T, 32, 512>, p);
  if (key == 128) e = cudaLaunchKernelEx(&cfg, w4_mlp_fused_kernel<F, T, 64, 512>, p);
  if (key == 256) e = cudaLaunchKernelEx(&cfg, w4_mlp_fused_kernel<F, T, 128, 512>, p);
  if (key == 65) e = cudaLaunchKernelEx(&cfg, w4_mlp_fused_kernel<F, T, 32, 1024>, p);
  if (key == 129) e = cudaLaunchKernelEx(&cfg, w4_mlp_fused_kernel<F, T, 64, 1024>, p);
  if (key == 257) e = cudaLaunchKernelEx(&cfg, w4_mlp_fused_kernel<F, T, 128, 1024>, p);
  if (e != cudaSuccess) return e;
  return cudaGetLastError();
}

template <Format F, typename T>
cudaError_t launch_mlp_fused(const MlpFusedPlan& plan, const MlpFusedParams& p, bool pdl, cudaStream_t stream) {
  if (pdl && mlp_fused_pdl_ok) {
    if (launch_mlp_fused_as<F, T>(plan, p, true, stream) == cudaSuccess) return cudaSuccess;
    (void)cudaGetLastError();
    mlp_fused_pdl_ok = false;
  }
  return launch_mlp_fused_as<F, T>(plan, p, false, stream);
}

}  // namespace kiln::quant::gpu
