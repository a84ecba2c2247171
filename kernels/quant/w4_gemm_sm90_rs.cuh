#pragma once
// GEMM variant 4, M >= 17 on Hopper (sm_90a): wgmma with the weights decoded in the consumers'
// registers (the A operand of wgmma from registers), the packed weights, their scale bytes and the
// activations streamed into shared memory by one producer warp. Device code only in the sm_90a
// pass (__CUDA_ARCH_FEAT_SM90_ALL); launched from w4_launch.cuh in KILN_GEMM_SM90A builds.
//
// Why. Variant 3 (w4_gemm_sm90.cuh) decodes each 64-k stage into a shared-memory A tile in its
// producer warpgroups; session 5 measured ~0.62 us per stage whatever the tile's MMA work or the
// number of decoding warps: the stage's round trip (x by TMA, decode, store, fence, barrier, wgmma,
// release) bounds it, not the decode. Here nothing decoded goes through shared memory: a consumer
// thread decodes exactly its own fragment of A (rows g and g + 8 of its warp's 16, the pair of k
// 2t, 2t + 1 in each 8-k word) right before the wgmma that reads it, while the previous wgmma runs.
//
// Product. out^T = W · x^T as in variant 3: the weight rows are wgmma's M, the tokens its N
// (BN = 64 or 128 per tile), so the accumulators and the epilogue are variant 3's
// (wgmma_w4_epilogue; rows g and g + 8 of a 16-row group in one thread: the fused gate/up's
// interleave).
//
// Schedule. CTA tile: 128 weight rows x BN tokens, K in stages of 128; three warpgroups:
//  - warpgroup 0, the producer: warp 0 only. Lane 0 loads a stage's packed weights (128 rows x 64
//    bytes, one TMA box, 64-byte swizzle: 16-byte unit u of row r at u ^ ((r / 2) % 4), so the 8
//    rows a warp reads at once hit distinct banks) and its activations (two boxes of 64 k x BN
//    tokens, 128-byte swizzle, zero-filled past M); every lane copies the scale bytes of rows
//    lane + 32i (cp.async, 4 or 8 bytes a row, 16 bytes a row in the stage) and signals them
//    with cp.async.mbarrier.arrive. A stage's `full` mbarrier: 1 + 32 arrivals and the TMA bytes;
//    its `empty` one: one arrival per consumer warpgroup. Weights and scales of the first stages
//    are requested before griddepcontrol.wait (they are constants), x after it.
//  - warpgroups 1 and 2, the consumers: 64 rows each, BN/2 fp32 accumulators per thread. Per
//    k16 step: wait until the wgmma two steps back is done (its A registers are free), decode the
//    4 registers of A (4 pairs: decode_pair, Scale::apply), wgmma m64nBNk16 (A from registers, x
//    from the stage's descriptor), commit. A stage is released when the first wgmma of the next
//    one is issued and every earlier one is done.
//  BN = 64: 4 stages of 26 KB, two CTAs per SM (no setmaxnreg); BN = 128: 5 stages of 42 KB, one
//  CTA per SM, the producer warpgroup down to 40 registers and the consumers up to 232.
// Split-K (grid.z > 1) and the epilogue: as variant 3 (atomics into a zeroed `partial`, then
// w4_finish_kernel).
#include "w4_gemm_sm90.cuh"

namespace kiln::quant::gpu {

constexpr int kRsThreads = 384;  // producer warpgroup + two consumer warpgroups
constexpr int kRsStageK = 128;

template <int BN>
struct RsLayout {
  static constexpr int kCtasPerSm = BN == 64 ? 2 : 1;
  static constexpr int kStages = BN == 64 ? 4 : 5;
  static constexpr uint32_t kXBytes = 2 * BN * 128;        // two boxes of 64 k x BN tokens (16-bit)
  static constexpr uint32_t kWBytes = kWgmmaRows * 64;     // 128 rows x 128 k (4-bit)
  static constexpr uint32_t kSBytes = kWgmmaRows * 16;     // per row: 8 bytes of scale bits, 8 of zero bits
  static constexpr uint32_t kStageBytes = kXBytes + kWBytes + kSBytes;
  static constexpr uint32_t kBarrierOffset = kStages * kStageBytes;
  static constexpr size_t kSmemBytes = 1024 + size_t(kBarrierOffset) + 16 * kStages;
  static_assert(kStageBytes % 1024 == 0, "stages keep the 1024-byte alignment of the swizzled boxes");
};

#if defined(KILN_GEMM_SM90A_DEVICE)
namespace sm90rs {

// Bytes of row rr's scale (and INT4 zero) bits the stage at k0 copies: 8 where its 128 k have 8
// bytes of them (NVFP4: 8 E4M3; INT4 group 32: 4 values), else the aligned 4-byte word that holds
// them (MXFP4: 4 E8M0; INT4 group 64: 2 values; group 128: 1 value, in the word's low or high half).
template <Format F>
__device__ __forceinline__ bool scale_copy_is8(const LinearParams& p) {
  return F == Format::NvFp4 || (F == Format::Int4 && p.group == 32);
}

template <Format F>
__device__ __forceinline__ void copy_scales(const LinearParams& p, uint8_t* dst, size_t rr, int k0) {
  const size_t off = scale_offset<F>(p, rr, k0);
  const uint8_t* scale = static_cast<const uint8_t*>(p.scale);
  const uint8_t* zero = static_cast<const uint8_t*>(p.zero);
  if (scale_copy_is8<F>(p)) {
    cp_async8(dst, scale + off);
    if constexpr (F == Format::Int4) cp_async8(dst + 8, zero + off);
  } else {
    cp_async4(dst, scale + (off & ~size_t(3)));
    if constexpr (F == Format::Int4) cp_async4(dst + 8, zero + (off & ~size_t(3)));
  }
}

// Arrives on `bar` once this thread's earlier cp.asyncs have landed (counted in the barrier's
// expected arrivals).
__device__ __forceinline__ void cp_async_arrive(uint32_t bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(bar) : "memory");
}

// Scale::expand's raw bits for the 32-k unit u (0..3) of a stage, from the row's copied scale and
// zero bytes; `shift`: bit offset of the first value in the copied word (INT4 group 128).
template <Format F>
__device__ __forceinline__ void unit_scale(uint2 s, uint2 z, int shift, int group, int u, uint32_t& rs, uint32_t& rz) {
  const uint64_t sv = (uint64_t(s.y) << 32) | s.x;
  rz = 0;
  if constexpr (F == Format::NvFp4) {
    rs = uint32_t(sv >> (16 * u)) & 0xffffu;  // the 2 E4M3 of 2 x 16 k
  } else if constexpr (F == Format::MxFp4) {
    rs = uint32_t(sv >> (8 * u)) & 0xffu;
  } else {
    const uint64_t zv = (uint64_t(z.y) << 32) | z.x;
    const int at = shift + 16 * (32 * u / group);
    rs = uint32_t(sv >> at) & 0xffffu;
    rz = uint32_t(zv >> at) & 0xffffu;
  }
}

}  // namespace sm90rs
#endif

template <Format F, typename T, int BN, class Ep>
__global__ void __launch_bounds__(kRsThreads, RsLayout<BN>::kCtasPerSm)
    w4_wgmma_rs_kernel(const __grid_constant__ CUtensorMap tma_x, const __grid_constant__ CUtensorMap tma_w, LinearParams p, Ep ep) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using namespace kiln::gemm::sm90;
  using L = RsLayout<BN>;
  constexpr int S = L::kStages;
  constexpr bool BF16 = IsBf16<T>::value;
  constexpr bool kSetMaxNReg = L::kCtasPerSm == 1;
  extern __shared__ __align__(1024) uint8_t w4_rs_smem[];
  uint8_t* const smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(w4_rs_smem) + 1023) & ~uintptr_t(1023));
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const uint32_t bars = base + L::kBarrierOffset;
  auto full = [&](int s) { return bars + 8u * uint32_t(s); };
  auto empty = [&](int s) { return bars + 8u * uint32_t(S + s); };
  auto stage_offset = [](int s) { return uint32_t(s) * L::kStageBytes; };
  if (threadIdx.x == 0) {
    prefetch_tensor_map(&tma_x);
    prefetch_tensor_map(&tma_w);
    for (int s = 0; s < S; ++s) {
      mbar_init(full(s), 1 + 32);  // lane 0's expect_tx and the producer warp's cp.async arrivals
      mbar_init(empty(s), 2);      // one per consumer warpgroup
    }
    mbar_init_fence();
  }
  __syncthreads();

  const int row_tile = blockIdx.x * kWgmmaRows, tok0 = blockIdx.y * BN;
  const int stages = p.k / kRsStageK / int(gridDim.z);  // this CTA's stages
  const int kbase = int(blockIdx.z) * stages * kRsStageK;
  const int wg = threadIdx.x / 128;

  if (wg == 0) {
    // ---- producer: warp 0 ----
    if constexpr (kSetMaxNReg) setmaxnreg_dec<40>();
    if (threadIdx.x >= 32) return;
    const int lane = threadIdx.x;
    auto issue_weights = [&](int s) {  // weights and scales of stage s, and the stage's expected bytes
      const int stage = s % S, k0 = kbase + kRsStageK * s;
      const uint32_t st = base + stage_offset(stage);
      if (lane == 0) {
        mbar_expect_tx(full(stage), L::kXBytes + L::kWBytes);
        tma_load_3d(st + L::kXBytes, &tma_w, full(stage), k0 / 2, row_tile, 0);
      }
      uint8_t* scales = smem + stage_offset(stage) + L::kXBytes + L::kWBytes;
#pragma unroll
      for (int i = 0; i < kWgmmaRows / 32; ++i) {
        const int r = lane + 32 * i;
        sm90rs::copy_scales<F>(p, scales + 16 * r, size_t(row_tile + r), k0);
      }
      sm90rs::cp_async_arrive(full(stage));
    };
    auto issue_x = [&](int s) {
      const int stage = s % S, k0 = kbase + kRsStageK * s;
      const uint32_t st = base + stage_offset(stage);
      tma_load_3d(st, &tma_x, full(stage), k0, tok0, 0);
      tma_load_3d(st + BN * 128, &tma_x, full(stage), k0 + 64, tok0, 0);
    };
    const int first = stages < S ? stages : S;
    for (int s = 0; s < first; ++s) issue_weights(s);  // the ring is empty: no wait
    grid_dependency_wait();  // x belongs to the previous kernel until here
    grid_launch_dependents();
    if (lane == 0)
      for (int s = 0; s < first; ++s) issue_x(s);
    for (int s = first; s < stages; ++s) {
      mbar_wait(empty(s % S), ((s / S) & 1) ^ 1u);
      issue_weights(s);
      if (lane == 0) issue_x(s);
    }
    return;
  }

  // ---- consumers: warpgroup c owns rows 64c..64c+63 of the tile ----
  if constexpr (kSetMaxNReg) setmaxnreg_inc<232>();
  grid_dependency_wait();  // the epilogue may read what the previous kernel wrote
  const int c = wg - 1, tid = threadIdx.x % 128, warp = tid / 32, lane = tid % 32;
  const int t = lane % 4;
  const int r0 = 64 * c + 16 * warp + lane / 4;  // the thread's rows r0 and r0 + 8 of the tile
  float acc[BN / 2];
#pragma unroll
  for (int e = 0; e < BN / 2; ++e) acc[e] = 0.0f;
  uint32_t a[2][4];  // A of the current and of the previous k16 step (still read by its wgmma)
  for (int s = 0; s < stages; ++s) {
    const int stage = s % S, k0 = kbase + kRsStageK * s;
    mbar_wait(full(stage), (s / S) & 1);
    const uint8_t* st = smem + stage_offset(stage);
    uint2 sr[2], zr[2];
    int shift[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = r0 + 8 * h;
      const uint8_t* sc = st + L::kXBytes + L::kWBytes + 16 * r;
      sr[h] = *reinterpret_cast<const uint2*>(sc);
      zr[h] = F == Format::Int4 ? *reinterpret_cast<const uint2*>(sc + 8) : make_uint2(0, 0);
      shift[h] = F == Format::Int4 && p.group == 128 ? int(scale_offset<F>(p, size_t(row_tile + r), k0) & 3) * 8 : 0;
    }
#pragma unroll
    for (int u = 0; u < 4; ++u) {  // 32 k: 16 bytes of each row
      uint4 w[2];
      Scale<F, BF16> sc[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = r0 + 8 * h;
        w[h] = *reinterpret_cast<const uint4*>(st + L::kXBytes + r * 64 + ((u ^ ((r >> 1) & 3)) * 16));
        uint32_t rs, rz;
        sm90rs::unit_scale<F>(sr[h], zr[h], shift[h], p.group, u, rs, rz);
        sc[h].expand(rs, rz);
      }
#pragma unroll
      for (int hk = 0; hk < 2; ++hk) {  // k16 step kk = 2u + hk: words 2hk, 2hk + 1 of unit u
        const int kk = 2 * u + hk;
        wgmma_wait<1>();  // every wgmma but the last one issued is done
        // the previous stage's last wgmma is done now (and with it every warp's reads of the stage)
        if (kk == 1 && s > 0 && tid == 0) mbar_arrive(empty((s - 1) % S));
        uint32_t(&A)[4] = a[kk & 1];
#pragma unroll
        for (int j = 0; j < 2; ++j)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int word = 2 * hk + j;
            A[h + 2 * j] = sc[h].apply(decode_pair<F, BF16>(kernel_nibbles(word_of(w[h], word)), t), word);
          }
        wgmma_fence();  // A written by this thread before the wgmma reads it
        const uint32_t xb = base + stage_offset(stage) + uint32_t(kk / 4) * (BN * 128) + 32u * uint32_t(kk % 4);
        wgmma_rs<BN, T>(acc, A, smem_desc(xb, 16, 1024), 1);
        wgmma_commit();
      }
    }
  }
  wgmma_wait<0>();
#pragma unroll
  for (int e = 0; e < BN / 2; ++e) fence_operand(acc[e]);
  wgmma_w4_epilogue<F, T, BN>(p, ep, acc, row_tile + 64 * c, tok0, warp, lane);
#endif
}

}  // namespace kiln::quant::gpu
