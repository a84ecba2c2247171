#pragma once
// Fused attention forward (FlashAttention-2 style) for fp16/bf16, fp32 accumulation, sm_80+.
//
//   O[b, i, :] = sum_j softmax_j(scale * Q[b, i, :] . K[b, j, :] + mask[b, i, j]) V[b, j, :]
//
// for b < batch (a flat index over AttentionProblem::batch_extent, e.g. (batch, heads)),
// i < seq_q, j < seq_k, head dim D (a template parameter: 64 or 128 take the tensor-core path).
// Q, K, V and the optional additive mask are read in place through strides (the q/k/v of an
// exported block are slices/permutes of one QKV tensor); the head dim must be unit-stride for Q,
// K and V. The result goes to an epilogue functor, as for the GEMM templates (gemm_problem.cuh):
//
//   struct Epilogue { __device__ void operator()(int64_t b, int64_t i, int64_t d, float o) const; };
//
// called exactly once per (b, i, d) with i < seq_q, d < D.
//
// Tensor-core path (attention_tc_kernel): a CTA of 4 warps owns 64 query rows of one batch
// index; each warp owns 16 rows. The Q tile is copied to shared memory once (cp.async) and kept
// in registers as mma A fragments; K and V tiles of 64 keys stream through double-buffered shared
// tiles (cp.async, zero-filled past seq_k, rows padded by 16 bytes so ldmatrix is conflict-free).
// Per key tile: S = Q K^T (mma.sync m16n8k16, fp32), keys past seq_k (and masked-out keys) set to
// -inf, online softmax in registers (running max and sum per row, exp2 with scale*log2(e)
// folded), P converted to 16-bit in registers and used directly as the A operand of O += P V
// (V through ldmatrix.trans). O is divided by the row sum at the end and handed to the epilogue;
// rows past seq_q are not written. The K tile j+1 copy overlaps the softmax and P V of tile j,
// the V tile j+1 copy the S of tile j+1.
//
// Anything else (head dims other than 64/128, a head dim that is not unit-stride, pointers or
// strides not 16-byte aligned, more than 2^31 batch x tiles) runs attention_simt_kernel: exact
// fp32, one CTA per query row, any strides. Slower, never wrong.
#include <math.h>

#include <type_traits>
#include <utility>

#include "gemm_ptx.cuh"

namespace kiln::gemm {

// One attention operand: element (b, row, d) at data[batch_offset(b) + row * stride_row + d * stride_d].
struct AttentionOperand {
  const void* data = nullptr;
  int64_t stride_row = 0;
  int64_t stride_d = 1;
  int64_t batch_stride[kMaxBatchRank] = {0, 0, 0, 0};
};

struct AttentionProblem {
  int64_t seq_q = 0, seq_k = 0;
  int batch_rank = 0;
  int64_t batch_extent[kMaxBatchRank] = {1, 1, 1, 1};
  AttentionOperand q, k, v;
  float scale = 1.0f;               // multiplies Q.K before the mask is added (times the
                                    // epilogue's kiln_device_scale(), when it has one: see attention_scale)
  // Optional additive mask (same element type as Q): element (b, i, j) at
  // mask.data[batch_offset(b) + i * mask.stride_row + j * mask.stride_d]; null: no mask.
  AttentionOperand mask;
  bool causal = false;              // keys j > i (top-left aligned) contribute nothing

  __host__ __device__ int64_t batch() const {
    int64_t p = 1;
    for (int d = 0; d < batch_rank; ++d) p *= batch_extent[d];
    return p;
  }
  __host__ __device__ int64_t batch_offset(const AttentionOperand& op, int64_t b) const {
    int64_t offset = 0;
    for (int d = batch_rank - 1; d >= 0; --d) {
      offset += (b % batch_extent[d]) * op.batch_stride[d];
      b /= batch_extent[d];
    }
    return offset;
  }
};

namespace detail {

constexpr float kLog2e = 1.4426950408889634f;

// An epilogue may supply a factor of the scale known only on the device (an exported graph's
// scale computed from a shape, or an initializer): `__device__ float kiln_device_scale() const`, read once
// per CTA and multiplied into AttentionProblem::scale.
template <typename E, typename = void>
struct EpilogueHasScale : std::false_type {};
template <typename E>
struct EpilogueHasScale<E, std::void_t<decltype(std::declval<const E&>().kiln_device_scale())>> : std::true_type {};

template <typename Epilogue>
__device__ __forceinline__ float attention_scale(const AttentionProblem& p, const Epilogue& epilogue) {
  if constexpr (EpilogueHasScale<Epilogue>::value) {
    return p.scale * epilogue.kiln_device_scale();
  } else {
    return p.scale;
  }
}

template <typename T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  if constexpr (kIsBf16<T>) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  } else {
    __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  }
}

template <int D>
struct AttnTc {
  static constexpr int kBM = 64, kBN = 64, kWarps = 4, kThreads = 32 * kWarps;
  static constexpr int kLd = D + 8;                           // padded shared row (elements)
  static constexpr int kTileElems = 64 * kLd;                 // Q, one K or one V tile
  static constexpr size_t kSmemBytes = size_t(5) * kTileElems * 2;  // Q, K x2, V x2
};

// Copies rows [row0, row0 + 64) of an operand (D columns) into a padded shared tile; rows at or
// past `rows` are zero-filled.
template <typename T, int D>
__device__ __forceinline__ void attn_load_tile(T* smem, const T* base, int64_t stride_row, int64_t row0, int64_t rows) {
  constexpr int kChunksPerRow = D / 8, kChunks = 64 * kChunksPerRow;
  constexpr int kLd = AttnTc<D>::kLd;
#pragma unroll
  for (int c = int(threadIdx.x); c < kChunks; c += AttnTc<D>::kThreads) {
    const int r = c / kChunksPerRow, col = (c % kChunksPerRow) * 8;
    const bool in = row0 + r < rows;
    const T* src = in ? base + (row0 + r) * stride_row + col : base;
    cp_async16(smem + r * kLd + col, src, in ? 16 : 0);
  }
}

template <typename T, int D, typename Epilogue>
__global__ void __launch_bounds__(128) attention_tc_kernel(const AttentionProblem p, const Epilogue epilogue) {
  pdl_wait();  // launch_programmatic
  using L = AttnTc<D>;
  constexpr int kLd = L::kLd;
  extern __shared__ __align__(16) unsigned char attn_smem[];
  T* sQ = reinterpret_cast<T*>(attn_smem);
  T* sK = sQ + L::kTileElems;          // two stages
  T* sV = sK + 2 * L::kTileElems;      // two stages

  const int64_t b = blockIdx.y;
  const int64_t q0 = int64_t(blockIdx.x) * L::kBM;
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  const T* Q = static_cast<const T*>(p.q.data) + p.batch_offset(p.q, b);
  const T* K = static_cast<const T*>(p.k.data) + p.batch_offset(p.k, b);
  const T* V = static_cast<const T*>(p.v.data) + p.batch_offset(p.v, b);
  const T* M = p.mask.data ? static_cast<const T*>(p.mask.data) + p.batch_offset(p.mask, b) : nullptr;

  int64_t kv_len = p.seq_k;
  if (p.causal) kv_len = q0 + L::kBM < kv_len ? q0 + L::kBM : kv_len;
  const int n_tiles = int((kv_len + L::kBN - 1) / L::kBN);

  attn_load_tile<T, D>(sQ, Q, p.q.stride_row, q0, p.seq_q);
  attn_load_tile<T, D>(sK, K, p.k.stride_row, 0, p.seq_k);
  cp_async_commit();
  attn_load_tile<T, D>(sV, V, p.v.stride_row, 0, p.seq_k);
  cp_async_commit();

  const float scale_log2 = attention_scale(p, epilogue) * kLog2e;
  // Rows owned by this thread (within the CTA's 64): r_lo and r_lo + 8.
  const int r_lo = warp * 16 + lane / 4;
  const int64_t row_g[2] = {q0 + r_lo, q0 + r_lo + 8};

  uint32_t qf[D / 16][4];
  float o[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.f, 0.f};

  for (int t = 0; t < n_tiles; ++t) {
    const int stage = t & 1;
    const T* cK = sK + stage * L::kTileElems;
    const T* cV = sV + stage * L::kTileElems;
    cp_async_wait<1>();  // Q and K_t are in shared memory
    __syncthreads();
    if (t == 0) {
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk)
        ldmatrix_x4<false>(qf[kk], sQ + (warp * 16 + lane % 16) * kLd + kk * 16 + (lane / 16) * 8);
    }
    // S = Q K^T: 16 x 64 per warp.
    float s[8][4];
#pragma unroll
    for (int i = 0; i < 8; ++i) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
#pragma unroll
      for (int nb = 0; nb < 4; ++nb) {  // 16 keys per ldmatrix.x4
        uint32_t kf[4];
        ldmatrix_x4<false>(kf, cK + (nb * 16 + (lane % 8) + (lane / 16) * 8) * kLd + kk * 16 + ((lane / 8) % 2) * 8);
        mma16816<T>(s[2 * nb], qf[kk], kf[0], kf[1]);
        mma16816<T>(s[2 * nb + 1], qf[kk], kf[2], kf[3]);
      }
    }
    // Prefetch K_{t+1} into the other stage (its last readers passed this iteration's barrier).
    if (t + 1 < n_tiles) attn_load_tile<T, D>(sK + (stage ^ 1) * L::kTileElems, K, p.k.stride_row, int64_t(t + 1) * L::kBN, p.seq_k);
    cp_async_commit();

    // Online softmax over this tile's keys; logits in the log2 domain.
    const int64_t key0 = int64_t(t) * L::kBN;
    float tile_max[2] = {-INFINITY, -INFINITY};
    // Only the last key tile, the tiles crossing the causal diagonal and masked problems need the
    // per-element checks; the others just scale.
    const bool edge_tile = key0 + L::kBN > p.seq_k || M != nullptr || (p.causal && key0 + L::kBN - 1 > q0);
    if (!edge_tile) {
#pragma unroll
      for (int nb = 0; nb < 8; ++nb) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          s[nb][e] *= scale_log2;
          tile_max[e / 2] = fmaxf(tile_max[e / 2], s[nb][e]);
        }
      }
    } else {
#pragma unroll
      for (int nb = 0; nb < 8; ++nb) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int h = e / 2;
          const int64_t key = key0 + nb * 8 + (lane % 4) * 2 + (e % 2);
          float x = s[nb][e] * scale_log2;
          if (M != nullptr && key < p.seq_k && row_g[h] < p.seq_q)
            x += to_float(M[row_g[h] * p.mask.stride_row + key * p.mask.stride_d]) * kLog2e;
          if (key >= p.seq_k || (p.causal && key > row_g[h])) x = -INFINITY;
          s[nb][e] = x;
          tile_max[h] = fmaxf(tile_max[h], x);
        }
      }
    }
    float alpha[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 1));
      tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 2));
      const float new_max = fmaxf(row_max[h], tile_max[h]);
      const float base = new_max == -INFINITY ? 0.f : new_max;  // a row with no key yet
      alpha[h] = exp2f(row_max[h] - base);
      row_max[h] = new_max;
      tile_max[h] = base;
    }
    float tile_sum[2] = {0.f, 0.f};
#pragma unroll
    for (int nb = 0; nb < 8; ++nb) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float pe = exp2f(s[nb][e] - tile_max[e / 2]);
        s[nb][e] = pe;
        tile_sum[e / 2] += pe;
      }
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) row_sum[h] = row_sum[h] * alpha[h] + tile_sum[h];  // quad-partial sums
#pragma unroll
    for (int i = 0; i < D / 8; ++i) {
      o[i][0] *= alpha[0];
      o[i][1] *= alpha[0];
      o[i][2] *= alpha[1];
      o[i][3] *= alpha[1];
    }

    cp_async_wait<1>();  // V_t is in shared memory
    __syncthreads();
    // O += P V: P's accumulators are the A fragments (k = keys).
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {  // 16 keys per step
      uint32_t pf[4];
      pf[0] = pack2<T>(s[2 * kk][0], s[2 * kk][1]);
      pf[1] = pack2<T>(s[2 * kk][2], s[2 * kk][3]);
      pf[2] = pack2<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]);
      pf[3] = pack2<T>(s[2 * kk + 1][2], s[2 * kk + 1][3]);
#pragma unroll
      for (int db = 0; db < D / 16; ++db) {
        uint32_t vf[4];
        ldmatrix_x4<true>(vf, cV + (kk * 16 + (lane % 8) + ((lane / 8) % 2) * 8) * kLd + db * 16 + (lane / 16) * 8);
        mma16816<T>(o[2 * db], pf, vf[0], vf[1]);
        mma16816<T>(o[2 * db + 1], pf, vf[2], vf[3]);
      }
    }
    if (t + 1 < n_tiles) attn_load_tile<T, D>(sV + (stage ^ 1) * L::kTileElems, V, p.v.stride_row, int64_t(t + 1) * L::kBN, p.seq_k);
    cp_async_commit();
  }
  cp_async_wait<0>();

  float inv[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float sum = row_sum[h];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    inv[h] = 1.f / sum;
  }
#pragma unroll
  for (int i = 0; i < D / 8; ++i) {
    const int d = i * 8 + (lane % 4) * 2;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if (row_g[h] < p.seq_q) {
        epilogue(b, row_g[h], d, o[i][2 * h] * inv[h]);
        epilogue(b, row_g[h], d + 1, o[i][2 * h + 1] * inv[h]);
      }
    }
  }
}

// Fallback: one CTA of 128 threads per (b, query row); keys in chunks of 128 (one logit per
// thread, exact fp32), online softmax across chunks, thread d accumulates O[d] (d += 128).
template <typename T, int D, typename Epilogue>
__global__ void __launch_bounds__(128) attention_simt_kernel(const AttentionProblem p, const Epilogue epilogue) {
  constexpr int kThreads = 128, kDPer = (D + kThreads - 1) / kThreads;
  __shared__ float probs[kThreads];
  __shared__ float red[kThreads / 32];
  const int64_t b = blockIdx.y, i = blockIdx.x;
  const int tid = int(threadIdx.x), lane = tid % 32, warp = tid / 32;
  const T* Q = static_cast<const T*>(p.q.data) + p.batch_offset(p.q, b) + i * p.q.stride_row;
  const T* K = static_cast<const T*>(p.k.data) + p.batch_offset(p.k, b);
  const T* V = static_cast<const T*>(p.v.data) + p.batch_offset(p.v, b);
  const T* M = p.mask.data ? static_cast<const T*>(p.mask.data) + p.batch_offset(p.mask, b) + i * p.mask.stride_row : nullptr;
  float o[kDPer];
#pragma unroll
  for (int r = 0; r < kDPer; ++r) o[r] = 0.f;
  float run_max = -INFINITY, run_sum = 0.f;
  const float scale = attention_scale(p, epilogue);
  for (int64_t j0 = 0; j0 < p.seq_k; j0 += kThreads) {
    const int64_t j = j0 + tid;
    float x = -INFINITY;
    if (j < p.seq_k && !(p.causal && j > i)) {
      float dot = 0.f;
      for (int d = 0; d < D; ++d) dot += to_float(Q[d * p.q.stride_d]) * to_float(K[j * p.k.stride_row + d * p.k.stride_d]);
      x = dot * scale;
      if (M) x += to_float(M[j * p.mask.stride_d]);
    }
    float mx = x;
    for (int off = 16; off > 0; off /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
    if (lane == 0) red[warp] = mx;
    __syncthreads();
    mx = fmaxf(fmaxf(red[0], red[1]), fmaxf(red[2], red[3]));
    __syncthreads();
    const float new_max = fmaxf(run_max, mx);
    const float base = new_max == -INFINITY ? 0.f : new_max;
    const float alpha = expf(run_max - base);
    const float pe = expf(x - base);
    probs[tid] = pe;
    float sm = pe;
    for (int off = 16; off > 0; off /= 2) sm += __shfl_xor_sync(0xffffffffu, sm, off);
    if (lane == 0) red[warp] = sm;
    __syncthreads();
    sm = red[0] + red[1] + red[2] + red[3];
    run_sum = run_sum * alpha + sm;
    run_max = new_max;
    const int n = p.seq_k - j0 < kThreads ? int(p.seq_k - j0) : kThreads;
#pragma unroll
    for (int r = 0; r < kDPer; ++r) {
      const int d = tid + r * kThreads;
      if (d < D) {
        float acc = o[r] * alpha;
        for (int jj = 0; jj < n; ++jj) acc += probs[jj] * to_float(V[(j0 + jj) * p.v.stride_row + d * p.v.stride_d]);
        o[r] = acc;
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int r = 0; r < kDPer; ++r) {
    const int d = tid + r * kThreads;
    if (d < D) epilogue(b, i, d, o[r] / run_sum);
  }
}

inline bool attention_operand_aligned(const AttentionProblem& p, const AttentionOperand& op) {
  if (reinterpret_cast<uintptr_t>(op.data) % 16 != 0 || op.stride_d != 1 || op.stride_row % 8 != 0) return false;
  for (int d = 0; d < p.batch_rank; ++d)
    if (op.batch_stride[d] % 8 != 0) return false;
  return true;
}

}  // namespace detail

// Which path attention<T, D> takes for `p`: true = tensor cores, false = the fp32 fallback.
template <typename T, int D>
inline bool attention_uses_tensor_cores(const AttentionProblem& p) {
  if constexpr (D != 64 && D != 128) {
    return false;
  } else {
    return detail::attention_operand_aligned(p, p.q) && detail::attention_operand_aligned(p, p.k) &&
           detail::attention_operand_aligned(p, p.v) && p.batch() <= 65535 && (p.seq_q + 63) / 64 <= 0x7fffffff;
  }
}

// Fused attention (see the top of this file). T: __half or __nv_bfloat16; D: the head dim.
// Launches on `stream` only, allocates nothing, returns the launch's cudaError_t.
template <typename T, int D, typename Epilogue>
cudaError_t attention(const AttentionProblem& p, const Epilogue& epilogue, cudaStream_t stream) {
  static_assert(std::is_same<T, __half>::value || std::is_same<T, __nv_bfloat16>::value, "attention<T>: fp16 or bf16");
  const int64_t batch = p.batch();
  if (batch == 0 || p.seq_q == 0) return cudaSuccess;
  if constexpr (D == 64 || D == 128) {
    if (attention_uses_tensor_cores<T, D>(p) && p.seq_k > 0) {
      using L = detail::AttnTc<D>;
      auto kernel = detail::attention_tc_kernel<T, D, Epilogue>;
      const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(L::kSmemBytes));
      if (e != cudaSuccess) return e;
      const dim3 grid(unsigned((p.seq_q + L::kBM - 1) / L::kBM), unsigned(batch));
      return detail::launch_programmatic(kernel, grid, dim3(L::kThreads), L::kSmemBytes, stream, p, epilogue);
    }
  }
  if (batch > 65535 || p.seq_q > 0x7fffffff) return cudaErrorInvalidConfiguration;
  const dim3 grid(unsigned(p.seq_q), unsigned(batch));
  detail::attention_simt_kernel<T, D, Epilogue><<<grid, 128, 0, stream>>>(p, epilogue);
  return cudaGetLastError();
}

// An epilogue that stores O (as T) at out[batch_offset(b) + i * stride_row + d * stride_d], with
// the batch strides of `layout` (over the problem's batch extents).
template <typename T>
struct AttentionStore {
  T* out;
  AttentionProblem shape;   // only batch_rank / batch_extent are used
  AttentionOperand layout;
  __device__ void operator()(int64_t b, int64_t i, int64_t d, float o) const {
    T* dst = out + shape.batch_offset(layout, b) + i * layout.stride_row + d * layout.stride_d;
    if constexpr (detail::kIsBf16<T>) *dst = __float2bfloat16_rn(o);
    else *dst = __float2half_rn(o);
  }
};

}  // namespace kiln::gemm
