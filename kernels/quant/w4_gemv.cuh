#pragma once
// Variant 1, M = 1..16: y = x · dequant(W)ᵀ streaming W once.
//
// Schedule. A CTA owns one 16-row tile of W; its `kw` warps split K evenly. The mma is
// m16n8k16 with the operands swapped (W is the 16-row A operand, xᵀ the n8 B operand: 8 tokens,
// a second mma for tokens 8..15), so one decoded weight fragment feeds every token. Per step a
// thread (group g = lane/4, t = lane%4) loads 16 bytes = 32 consecutive k of rows g and g+8
// (a quad reads 64 contiguous bytes per row), their 2 scale bytes, and the 32 matching x values
// of its token(s) from L1/L2. Logical mma k follows the thread's own physical k (any permutation
// of k shared by A and B gives the same dot product), so no shuffles are needed.
// Weights are prefetched kGemvDepth steps ahead in registers, x as far through a per-warp
// cp.async ring in shared memory (x comes from L2, whose latency would otherwise serialize steps).
// Epilogue: the warps' partial sums meet in shared memory; scales, bias and the gated
// activation are applied in fp32.
#include "../gemm/gemm_ptx.cuh"  // pdl_wait, pdl_trigger
#include "w4_params.cuh"

namespace kiln::quant::gpu {

// 16-byte copy to shared memory, zero-filled when !valid. L1_CACHED: through L1 (.ca), for
// activations that every CTA of an SM reads again; otherwise L2 only (.cg), for streamed weights.
template <bool L1_CACHED = false>
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool valid) {
  const uint32_t dst = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  if constexpr (L1_CACHED) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(gmem), "r"(valid ? 16 : 0) : "memory");
  } else {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(gmem), "r"(valid ? 16 : 0) : "memory");
  }
}
__device__ __forceinline__ void cp_async4(void* smem, const void* gmem) {
  const uint32_t dst = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(dst), "l"(gmem) : "memory");
}
// "memory" clobbers: shared-memory reads must not move across the waits and refills.
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

// 16-byte unit u (8 k) of token row `tok` in a stage: swizzled so that the 8 lanes of a
// shared-load phase (2 tokens x 4 threads, units i, 4+i, 8+i, 12+i) hit 8 distinct bank groups.
__device__ __forceinline__ int swizzle_unit(int u, int tok) {
  return (u & 8) | ((u & 7) ^ (((u >> 3) & 1) << 1) ^ (tok & 1));
}

template <Format F>
struct WeightStep {
  uint4 w[2];      // rows g and g+8: 32 elements each
  uint32_t s[2];   // raw scale bits per row
  uint32_t z[2];   // INT4 zero bits per row
};

// Row h's scale bits (and INT4 zero) of unit u (32 k) of `ws`, from its scale row `sc` staged in
// shared memory with the INT4 zeros `zeros` bytes after the scales (variants 9 and 19).
template <Format F>
__device__ __forceinline__ void staged_unit_scales(WeightStep<F>& ws, int h, const uint8_t* sc, int u, int group, int zeros) {
  if constexpr (F == Format::NvFp4) {
    ws.s[h] = *reinterpret_cast<const uint16_t*>(sc + 2 * u);  // blocks 2u, 2u + 1
    ws.z[h] = 0;
  } else if constexpr (F == Format::MxFp4) {
    ws.s[h] = sc[u];
    ws.z[h] = 0;
  } else {
    const int gi = (32 * u) / group;
    ws.s[h] = *reinterpret_cast<const uint16_t*>(sc + 2 * gi);
    ws.z[h] = *reinterpret_cast<const uint16_t*>(sc + zeros + 2 * gi);
  }
}

template <Format F, typename T>
__device__ __forceinline__ WeightStep<F> load_weight_step(const LinearParams& p, int row, int k0) {
  WeightStep<F> ws;
  const size_t row_bytes = size_t(p.k) / 2;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const size_t rr = size_t(row + 8 * r);
    ws.w[r] = load_stream16(p.weight + rr * row_bytes + k0 / 2);
    if constexpr (F == Format::NvFp4) {
      ws.s[r] = __ldg(reinterpret_cast<const uint16_t*>(static_cast<const uint8_t*>(p.scale) + rr * (p.k / 16) + k0 / 16));
      ws.z[r] = 0;
    } else if constexpr (F == Format::MxFp4) {
      ws.s[r] = __ldg(static_cast<const uint8_t*>(p.scale) + rr * (p.k / 32) + k0 / 32);
      ws.z[r] = 0;
    } else {
      const size_t gi = rr * (p.k / p.group) + k0 / p.group;
      ws.s[r] = __ldg(static_cast<const uint16_t*>(p.scale) + gi);
      ws.z[r] = __ldg(static_cast<const uint16_t*>(p.zero) + gi);
    }
  }
  return ws;
}

// Byte offset of the thread's scale (or zero) bits of row rr at k0, and where they sit in the
// aligned 4-byte word that cp.async copies.
template <Format F>
__device__ __forceinline__ size_t scale_offset(const LinearParams& p, size_t rr, int k0) {
  if constexpr (F == Format::NvFp4) return rr * (p.k / 16) + k0 / 16;
  if constexpr (F == Format::MxFp4) return rr * (p.k / 32) + k0 / 32;
  return 2 * (rr * (p.k / p.group) + k0 / p.group);
}

// Variant 3's weight ring: per warp kWeightDepth slots of rows g, g+8 (16 B per lane each) and
// the aligned 4-byte words holding each lane's scale (and INT4 zero) bits.
constexpr int kWeightDepth = 8;
struct WeightSlot {
  static constexpr size_t kW = 2 * 32 * 16, kS = 2 * 32 * 4;
  static constexpr size_t kBytes = kW + 2 * kS;
};

template <Format F>
__device__ __forceinline__ void issue_weight_slot(const LinearParams& p, uint8_t* slot, int row, int lane, int k0) {
  uint4* w = reinterpret_cast<uint4*>(slot);
  uint32_t* sc = reinterpret_cast<uint32_t*>(slot + WeightSlot::kW);
  const size_t row_bytes = size_t(p.k) / 2;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const size_t rr = size_t(row + 8 * h);
    cp_async16(w + h * 32 + lane, p.weight + rr * row_bytes + k0 / 2, true);
    const size_t off = scale_offset<F>(p, rr, k0) & ~size_t(3);
    cp_async4(sc + h * 32 + lane, static_cast<const uint8_t*>(p.scale) + off);
    if constexpr (F == Format::Int4) cp_async4(sc + 64 + h * 32 + lane, static_cast<const uint8_t*>(p.zero) + off);
  }
}

template <Format F>
__device__ __forceinline__ WeightStep<F> read_weight_slot(const LinearParams& p, const uint8_t* slot, int row, int lane, int k0) {
  const uint4* w = reinterpret_cast<const uint4*>(slot);
  const uint32_t* sc = reinterpret_cast<const uint32_t*>(slot + WeightSlot::kW);
  WeightStep<F> ws;
  const uint32_t mask = F == Format::MxFp4 ? 0xffu : 0xffffu;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int shift = int(scale_offset<F>(p, size_t(row + 8 * h), k0) & 3) * 8;
    ws.w[h] = w[h * 32 + lane];
    ws.s[h] = (sc[h * 32 + lane] >> shift) & mask;
    ws.z[h] = F == Format::Int4 ? (sc[64 + h * 32 + lane] >> shift) & mask : 0u;
  }
  return ws;
}

template <int NT>
struct ActStep {
  uint4 x[NT][4];  // token g (+8): 32 consecutive k
};

// x of one step into this thread's slot of the warp's shared-memory ring (own data only:
// each thread reads back exactly what it copied, so cp.async.wait_group is the only sync).
template <typename T, int NT>
__device__ __forceinline__ void issue_act_step(const LinearParams& p, uint4* slot, int tok_base, int g, int lane, int k0) {
#pragma unroll
  for (int j = 0; j < NT; ++j) {
    const int tok = tok_base + 8 * j + g;
    const bool valid = tok < p.m;
    const T* src = static_cast<const T*>(p.x) + size_t(valid ? tok : 0) * p.k + k0;
#pragma unroll
    for (int i = 0; i < 4; ++i) cp_async16<true>(slot + (j * 4 + i) * 32 + lane, src + 8 * i, valid);
  }
}

// Variant 1's activation load: straight into registers through L1.
template <typename T, int NT>
__device__ __forceinline__ ActStep<NT> load_act_step(const LinearParams& p, int tok_base, int g, int k0) {
  ActStep<NT> a;
#pragma unroll
  for (int j = 0; j < NT; ++j) {
    const int tok = tok_base + 8 * j + g;
    const T* src = static_cast<const T*>(p.x) + size_t(tok) * p.k + k0;
#pragma unroll
    for (int i = 0; i < 4; ++i) a.x[j][i] = tok < p.m ? load_cached16(src + 8 * i) : make_uint4(0, 0, 0, 0);
  }
  return a;
}

template <int NT>
__device__ __forceinline__ ActStep<NT> read_act_step(const uint4* slot, int lane) {
  ActStep<NT> a;
#pragma unroll
  for (int j = 0; j < NT; ++j)
#pragma unroll
    for (int i = 0; i < 4; ++i) a.x[j][i] = slot[(j * 4 + i) * 32 + lane];
  return a;
}

// Variant 5's mma step: word i of the step accumulates into chain i % C, so that the 8 (NT = 1)
// mmas of a step form C independent dependency chains instead of one.
template <Format F, typename T, int NT, int C>
__device__ __forceinline__ void mma_step_chains(const WeightStep<F>& ws, const ActStep<NT>& as, float (&acc)[C][NT][4]) {
  constexpr bool BF16 = IsBf16<T>::value;
  Scale<F, BF16> sc[2];
  sc[0].expand(ws.s[0], ws.z[0]);
  sc[1].expand(ws.s[1], ws.z[1]);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    uint32_t d0[4], d1[4];
    decode_word_as_stored<F, BF16>(word_of(ws.w[0], i), d0);
    decode_word_as_stored<F, BF16>(word_of(ws.w[1], i), d1);
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      d0[q] = sc[0].apply(d0[q], i);
      d1[q] = sc[1].apply(d1[q], i);
    }
    uint4 xv[NT];
#pragma unroll
    for (int j = 0; j < NT; ++j) xv[j] = x_pairs_as_stored(as.x[j][i]);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint32_t a[4] = {d0[2 * h], d1[2 * h], d0[2 * h + 1], d1[2 * h + 1]};
#pragma unroll
      for (int j = 0; j < NT; ++j) mma16816<BF16>(acc[i % C][j], a, h == 0 ? xv[j].x : xv[j].z, h == 0 ? xv[j].y : xv[j].w);
    }
  }
}

// One step: 32 k of rows g, g+8 against NT token tiles, one dependency chain.
template <Format F, typename T, int NT>
__device__ __forceinline__ void mma_step(const WeightStep<F>& ws, const ActStep<NT>& as, float (&acc)[NT][4]) {
  mma_step_chains<F, T, NT, 1>(ws, as, reinterpret_cast<float(&)[1][NT][4]>(acc));
}

constexpr int kGemvDepth = 4;
// Variant 4: weight steps in flight per warp (8 KB per warp at NT = 1; 6 steps where the x
// registers of a second token tile or INT4's zeros would otherwise spill under the 128-register cap).
template <Format F, int NT>
__host__ __device__ constexpr int gemv4_depth() {
  return NT == 1 && F != Format::Int4 ? 8 : 6;
}

// Programmatic dependent launch (kernels/gemm/gemm_ptx.cuh; sm_90+, no-ops below): a kernel
// launched with cudaLaunchAttributeProgrammaticStreamSerialization may start while the kernel
// before it on the stream still runs. It may read only constants (weights, scales) before
// pdl_wait(), which returns once that kernel has finished and its writes are visible.
using kiln::gemm::detail::pdl_trigger;
using kiln::gemm::detail::pdl_wait;

// Variant 6's activation stage: the CTA's valid tokens (at most 8 * NT) x all of K, in shared
// memory, each 128-k block of a token row laid out with swizzle_unit (conflict-free reads).
// Staged only where it fits beside the CTAs of an SM (gemv6_stage_bytes; else variant 5 runs).
constexpr size_t kGemv6StageMax = 48 * 1024;         // per CTA: no opt-in attribute needed
constexpr size_t kGemv6StagePerSm = 160 * 1024;      // all CTAs of an SM at once (one-wave grid)
inline size_t gemv6_stage_bytes(int tokens, int k) { return size_t(tokens) * size_t(k) * 2; }

// Cooperative copy of x[tok_base .. tok_base + tokens) into the stage (every thread of the CTA).
template <typename T>
__device__ __forceinline__ void stage_x_rows(const LinearParams& p, T* stage, int tok_base, int tokens) {
  const int units_per_row = p.k / 8;
  const int total = tokens * units_per_row;
  for (int idx = threadIdx.x; idx < total; idx += blockDim.x) {
    const int tok = idx / units_per_row, ug = idx - tok * units_per_row;
    const int blk = ug >> 4, u = ug & 15;
    const T* src = static_cast<const T*>(p.x) + size_t(tok_base + tok) * p.k + 8 * ug;
    cp_async16<true>(stage + size_t(tok) * p.k + 128 * blk + 8 * swizzle_unit(u, tok), src, true);
  }
  cp_async_commit();
}

// The thread's x of one step (128-k block `blk`) from the stage; tokens past `tokens` read 0.
template <typename T, int NT>
__device__ __forceinline__ ActStep<NT> read_staged_x(const T* stage, int k, int tokens, int g, int t, int blk) {
  ActStep<NT> a;
#pragma unroll
  for (int j = 0; j < NT; ++j) {
    const int tok = 8 * j + g;
    const T* row = stage + size_t(tok) * k + 128 * blk;
#pragma unroll
    for (int i = 0; i < 4; ++i)
      a.x[j][i] = tok < tokens ? *reinterpret_cast<const uint4*>(row + 8 * swizzle_unit(4 * t + i, tok)) : make_uint4(0, 0, 0, 0);
  }
  return a;
}

template <int NT>
constexpr size_t gemv_ring_bytes(int warps) {
  return size_t(warps) * kGemvDepth * NT * 4 * 32 * 16;
}
constexpr size_t gemv_weight_ring_bytes(int warps) { return size_t(warps) * kWeightDepth * WeightSlot::kBytes; }

// Variants (all kept; KILN_QUANT_GEMV_VARIANT picks, see w4_launch.cuh):
//  1: weights kGemvDepth steps ahead in registers, x in registers one step ahead.
//  2: as 1, x through a per-warp cp.async ring (kGemvDepth ahead) instead.
//  3: weights and scale words through a per-warp cp.async ring kWeightDepth steps deep in shared
//     memory (more bytes in flight per SM than registers allow), x as in 1.
//  4: as 1 with gemv4_depth() (8) weight steps in flight per warp, one warp per 16-row tile
//     unless N is small (w4_launch.cuh: ~8 warps per SM, one wave), and launched as a
//     programmatic dependent launch: the first weight steps are requested before
//     pdl_wait(), i.e. while the previous kernel on the stream (the previous layer)
//     drains, hiding launch latency, ramp-up and tail. Contract: weights and scales must not be
//     written by the kernel directly before on the stream (they are model constants).
//  5: as 4 (programmatic dependent launch; 6 steps deep), with variant 1's K split (~16 warps per
//     SM, half the steps per warp of 4 for large N) and the accumulators of a step split into
//     independent mma chains (mma_step_chains: 4 at NT = 1, 2 at NT = 2).
//  6 (KILN_QUANT_GEMV_VARIANT=6; not the default until timed): as 5, but x is staged once:
//     right after pdl_wait() the CTA copies its valid tokens x all of K into shared
//     memory (one L2 round trip per CTA, behind the weight requests
//     already queued) and every step reads x from there, so no step waits on L2 for x (variant
//     5 issued one L2 round trip per step, queued behind the weight flood). The x registers this
//     frees hold a deeper weight ring (8 steps at NT = 1, non-INT4). Only where the stage fits
//     (gemv6_stage_bytes; the launch falls back to 5 otherwise).
template <Format F, typename T, int NT, int kMaxWarps, int kVariant, class Ep>
__global__ void __launch_bounds__(kMaxWarps * 32) w4_gemv_kernel(LinearParams p, int tok_base, int kw, Ep ep) {
  constexpr int kDepth = kGemvDepth;
  __shared__ float red[kMaxWarps][NT * 8][17];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int row0 = blockIdx.x * 16;
  const int steps = p.k / 128 / kw;
  const int kbegin = warp * steps * 128 + 32 * t;

  float acc[NT][4];
#pragma unroll
  for (int j = 0; j < NT; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;

  if constexpr (kVariant == 3) {
    extern __shared__ __align__(16) uint8_t weight_ring[];
    uint8_t* my = weight_ring + size_t(warp) * kWeightDepth * WeightSlot::kBytes;
#pragma unroll
    for (int d = 0; d < kWeightDepth; ++d) {
      if (d < steps) issue_weight_slot<F>(p, my + d * WeightSlot::kBytes, row0 + g, lane, kbegin + 128 * d);
      cp_async_commit();
    }
    ActStep<NT> xa = load_act_step<T, NT>(p, tok_base, g, kbegin);
    for (int base = 0; base < steps; base += kWeightDepth) {
#pragma unroll
      for (int d = 0; d < kWeightDepth; ++d) {
        const int s = base + d;
        if (s < steps) {
          ActStep<NT> xn;
          if (s + 1 < steps) xn = load_act_step<T, NT>(p, tok_base, g, kbegin + 128 * (s + 1));
          cp_async_wait<kWeightDepth - 1>();
          const WeightStep<F> ws = read_weight_slot<F>(p, my + d * WeightSlot::kBytes, row0 + g, lane, kbegin + 128 * s);
          if (s + kWeightDepth < steps) {
            issue_weight_slot<F>(p, my + d * WeightSlot::kBytes, row0 + g, lane, kbegin + 128 * (s + kWeightDepth));
          }
          cp_async_commit();
          mma_step<F, T, NT>(ws, xa, acc);
          xa = xn;
        }
      }
    }
    cp_async_wait<0>();
  } else if constexpr (kVariant == 6) {
  extern __shared__ __align__(16) uint8_t x_stage_raw[];
  const T* x_stage = reinterpret_cast<const T*>(x_stage_raw);
  constexpr int kRing = NT == 1 && F != Format::Int4 ? 8 : 6;
  constexpr int kChains = NT == 1 ? 4 : 2;
  const int tokens = min(8 * NT, p.m - tok_base);
  const int blk0 = warp * steps;  // the warp's first 128-k block
  float chain[kChains][NT][4];
#pragma unroll
  for (int c = 0; c < kChains; ++c)
#pragma unroll
    for (int j = 0; j < NT; ++j) chain[c][j][0] = chain[c][j][1] = chain[c][j][2] = chain[c][j][3] = 0.0f;
  WeightStep<F> ring[kRing];
#pragma unroll
  for (int d = 0; d < kRing; ++d) {
    if (d < steps) ring[d] = load_weight_step<F, T>(p, row0 + g, kbegin + 128 * d);
  }
  pdl_wait();  // x (and y, below) belong to the previous kernel until here
  stage_x_rows<T>(p, reinterpret_cast<T*>(x_stage_raw), tok_base, tokens);
  cp_async_wait<0>();
  __syncthreads();
  pdl_trigger();
  for (int base = 0; base < steps; base += kRing) {
#pragma unroll
    for (int d = 0; d < kRing; ++d) {
      const int s = base + d;
      if (s < steps) {
        const ActStep<NT> xa = read_staged_x<T, NT>(x_stage, p.k, tokens, g, t, blk0 + s);
        mma_step_chains<F, T, NT, kChains>(ring[d], xa, chain);
        if (s + kRing < steps) ring[d] = load_weight_step<F, T>(p, row0 + g, kbegin + 128 * (s + kRing));
      }
    }
  }
#pragma unroll
  for (int c = 0; c < kChains; ++c)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[j][e] += chain[c][j][e];
  } else if constexpr (kVariant == 2) {
  extern __shared__ uint4 act_ring[];  // [warps][kDepth][NT][4][32 lanes]
  uint4* ring_x = act_ring + size_t(warp) * kDepth * NT * 4 * 32;
  WeightStep<F> ring[kDepth];
#pragma unroll
  for (int d = 0; d < kDepth; ++d) {
    if (d < steps) {
      ring[d] = load_weight_step<F, T>(p, row0 + g, kbegin + 128 * d);
      issue_act_step<T, NT>(p, ring_x + d * NT * 4 * 32, tok_base, g, lane, kbegin + 128 * d);
    }
    cp_async_commit();
  }
  for (int base = 0; base < steps; base += kDepth) {
#pragma unroll
    for (int d = 0; d < kDepth; ++d) {
      const int s = base + d;
      if (s < steps) {
        cp_async_wait<kDepth - 1>();
        const ActStep<NT> xa = read_act_step<NT>(ring_x + d * NT * 4 * 32, lane);
        mma_step<F, T, NT>(ring[d], xa, acc);
        if (s + kDepth < steps) {
          ring[d] = load_weight_step<F, T>(p, row0 + g, kbegin + 128 * (s + kDepth));
          issue_act_step<T, NT>(p, ring_x + d * NT * 4 * 32, tok_base, g, lane, kbegin + 128 * (s + kDepth));
        }
        cp_async_commit();
      }
    }
  }
  cp_async_wait<0>();
  } else {
  constexpr int kRing = kVariant == 5 ? 6 : kVariant == 4 ? gemv4_depth<F, NT>() : kDepth;  // 5: 6 fits 128 registers beside its 4 chains
  constexpr int kChains = kVariant == 5 ? (NT == 1 ? 4 : 2) : 1;
  float chain[kChains][NT][4];
#pragma unroll
  for (int c = 0; c < kChains; ++c)
#pragma unroll
    for (int j = 0; j < NT; ++j) chain[c][j][0] = chain[c][j][1] = chain[c][j][2] = chain[c][j][3] = 0.0f;
  WeightStep<F> ring[kRing];
#pragma unroll
  for (int d = 0; d < kRing; ++d) {
    if (d < steps) ring[d] = load_weight_step<F, T>(p, row0 + g, kbegin + 128 * d);
  }
  if constexpr (kVariant >= 4) {
    pdl_wait();    // x (and y, below) belong to the previous kernel until here
    pdl_trigger();  // the next kernel may now start and request its weights
  }
  ActStep<NT> xa = load_act_step<T, NT>(p, tok_base, g, kbegin);
  for (int base = 0; base < steps; base += kRing) {
#pragma unroll
    for (int d = 0; d < kRing; ++d) {
      const int s = base + d;
      if (s < steps) {
        ActStep<NT> xn;
        if (s + 1 < steps) xn = load_act_step<T, NT>(p, tok_base, g, kbegin + 128 * (s + 1));
        if constexpr (kVariant == 5) {
          mma_step_chains<F, T, NT, kChains>(ring[d], xa, chain);
        } else {
          mma_step<F, T, NT>(ring[d], xa, acc);
        }
        if (s + kRing < steps) ring[d] = load_weight_step<F, T>(p, row0 + g, kbegin + 128 * (s + kRing));
        xa = xn;
      }
    }
  }
  if constexpr (kVariant == 5) {
#pragma unroll
    for (int c = 0; c < kChains; ++c)
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[j][e] += chain[c][j][e];
  }
  }

  // C fragment: c0,c1 = (row g, tokens 2t, 2t+1), c2,c3 = (row g+8, same tokens).
#pragma unroll
  for (int j = 0; j < NT; ++j) {
    red[warp][8 * j + 2 * t][g] = acc[j][0];
    red[warp][8 * j + 2 * t + 1][g] = acc[j][1];
    red[warp][8 * j + 2 * t][g + 8] = acc[j][2];
    red[warp][8 * j + 2 * t + 1][g + 8] = acc[j][3];
  }
  __syncthreads();
  using Scalar = T;
  for (int idx = threadIdx.x; idx < NT * 8 * 16; idx += blockDim.x) {
    const int tok = idx / 16, r = idx % 16;
    if (tok_base + tok >= p.m) continue;
    const bool gated = p.act != Activation::None;
    if (gated && r >= 8) continue;
    float v = 0.0f, u = 0.0f;
    for (int w = 0; w < kw; ++w) {
      v += red[w][tok][r];
      if (gated) u += red[w][tok][r + 8];
    }
    const size_t m = size_t(tok_base + tok);
    v *= row_factor<T, F>(p, r);
    if (gated) {
      u *= row_factor<T, F>(p, r + 8);
      static_cast<Scalar*>(p.y)[m * (p.n / 2) + blockIdx.x * 8 + r] = from_float<T>(activate(v, p.act) * u);
    } else {
      ep(0, int64_t(m), row0 + r, v);
    }
  }
}

}  // namespace kiln::quant::gpu
