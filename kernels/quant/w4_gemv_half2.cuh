#pragma once
// GEMV variant 7, M = 1: packed half2 math, the whole weight range of a warp requested before
// the programmatic-dependent-launch wait (bench/quant/NOTES.md, session 4).
//
// Schedule. A CTA owns 16 weight rows x all of K; its W <= 8 warps split K into chunks of 1024 k
// (512 bytes of a row), warp w taking chunks w (and w + W when K > 8192). A lane owns 32 consecutive k of a
// chunk (16 bytes of each of the 16 rows), so one warp-wide 16-byte load reads 512 contiguous
// bytes of a row, and the lane's 32 activations (16 half2 registers) serve all 16 rows.
// Order: the 16 (or 32) weight loads and as many scale loads of the lane, i.e. all of them,
// then griddepcontrol.wait (x and y belong to the previous kernel
// until then), then x, then the math. So a whole wave's weight bytes are requested at once, and
// under programmatic dependent launch while the previous kernel drains.
//
// Math. x is converted once per lane to fp16 with an exact power-of-two prescale 2^s chosen from
// the lane's own 32 values (max |x|·2^s in [2^14, 2^15) for E2M1; [2^8, 2^9) for INT4, whose
// codes are not pre-scaled), so that the fp16 partial sums below stay normal and far from
// overflow. Per 16 weights: 8 E2M1->fp16 pair decodes (shift/mask, v·2^-14 exactly) and 8 HFMA2
// into one half2 accumulator (8 products per half); then one fp32 multiply-add with the block
// scale. The lane's factor 2^(14 - s) (and fp16's E4M3 2^-8) is folded into one FFMA per row.
// INT4 decodes q - 8 exactly (fp16 1024 + q, minus 1032) and adds (8 - z)·sum(x) in fp32.
// Epilogue: butterfly reduction of the 16 row sums across the lanes, warps' sums in shared
// memory, then scales, bias and the gated activation in fp32 (as variants 1-6).
#include "w4_gemv.cuh"

namespace kiln::quant::gpu {

constexpr int kGemv7Rows = 16;
constexpr int kGemv7Chunk = 1024;  // k per warp-wide step: 32 lanes x 32 k
constexpr int kGemv7MaxWarps = 8;  // 256 threads: up to 255 registers for 2 x 16 units in flight

// Where variant 7 applies: one token per launch, whole chunks, and at most 16 chunks (K <= 16384)
// so that every unit of a warp is requested up front: 1 chunk per warp up to 8 chunks, else 2.
inline bool gemv7_applies(int m, int n, int k) {
  const int chunks = k / kGemv7Chunk;
  return m == 1 && n % kGemv7Rows == 0 && k % kGemv7Chunk == 0 && (chunks <= kGemv7MaxWarps || (chunks <= 2 * kGemv7MaxWarps && chunks % 2 == 0));
}
inline int gemv7_chunks_per_warp(int k) { return k / kGemv7Chunk <= kGemv7MaxWarps ? 1 : 2; }
inline int gemv7_warps(int k) { return k / kGemv7Chunk / gemv7_chunks_per_warp(k); }

__device__ __forceinline__ uint32_t hfma2(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t d;
  asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

__device__ __forceinline__ float half_lo(uint32_t h) { return __half2float(__ushort_as_half(static_cast<unsigned short>(h & 0xffffu))); }
__device__ __forceinline__ float half_hi(uint32_t h) { return __half2float(__ushort_as_half(static_cast<unsigned short>(h >> 16))); }

// Nibbles p and p + 4 of a word (elements 2p, 2p+1 of its 8 in kernel order; p, p+4 in exported
// order: pair_x_as_stored) as an fp16 pair.
//  E2M1: v·2^-14 (sign to bit 15, magnitude to bits 11..9).  INT4: q - 8 exactly.
template <Format F>
__device__ __forceinline__ uint32_t decode_pair_f16(uint32_t w, int p) {
  if constexpr (F == Format::Int4) {
    const uint32_t biased = ((w >> (4 * p)) & 0x000f000fu) | 0x64006400u;  // 1024 + q
    uint32_t d;
    asm("sub.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(biased), "r"(0x64086408u));  // - 1032
    return d;
  } else {
    const uint32_t t = w << (12 - 4 * p);
    return (t & 0x80008000u) | ((t & 0x70007000u) >> 3);
  }
}

// The activation pairs that the pair decodes of a stored word meet (w4_nibbles.h): x as converted
// in kernel order; in exported order, which the kernels below read as stored, paired by
// exported_order_x_pairs (w4_nibbles.h's stored_order_x_pairs): 16 byte permutes per lane and chunk, where reordering every weight word
// as it is decoded cost ~10 instructions per 8 weights (sm_90a: variant 8's kernel, 2952 -> 2272
// instructions).
__device__ __forceinline__ void pair_x_as_stored(uint32_t (&xh)[16]) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    uint32_t xp[4] = {xh[4 * i], xh[4 * i + 1], xh[4 * i + 2], xh[4 * i + 3]};
    stored_order_x_pairs(xp);
#pragma unroll
    for (int q = 0; q < 4; ++q) xh[4 * i + q] = xp[q];
  }
}

// The lane's 32 activations of token `tok` at k0 as 16 fp16 pairs times 2^s, and 2^-s's
// exponent (returned as s). E2M1 target: max in [2^14, 2^15); INT4: [2^8, 2^9). kWarpScale: one
// s for the whole warp (from the warp's largest value; w4_gemv_tokens.cuh).
template <typename T, Format F, bool kWarpScale = false>
__device__ __forceinline__ int convert_x_f16(const uint4 (&raw)[4], uint32_t (&xh)[16], float* xsum) {
  constexpr bool BF16 = IsBf16<T>::value;
  // Two passes over the raw words (no 32 live floats): the max, then the scaled conversion.
  auto lo = [](uint32_t v) { return BF16 ? __uint_as_float(v << 16) : half_lo(v); };
  auto hi = [](uint32_t v) { return BF16 ? __uint_as_float(v & 0xffff0000u) : half_hi(v); };
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    const uint32_t v = word_of(raw[i >> 2], i & 3);
    amax = fmaxf(amax, fmaxf(fabsf(lo(v)), fabsf(hi(v))));
  }
  // (non-negative floats order as their bits)
  if constexpr (kWarpScale) amax = __uint_as_float(__reduce_max_sync(0xffffffffu, __float_as_uint(amax)));
  // amax = 2^(e-127)·1.m; want amax·2^s in [2^top, 2^(top+1)): s = top + 127 - e.
  constexpr int kTop = F == Format::Int4 ? 8 : 14;
  const int e = int((__float_as_uint(amax) >> 23) & 0xffu);
  int s = kTop + 127 - e;
  // 2^s and the lane factor 2^-s stay normal fp32 for s in [-126, 120]; the format's constant
  // 2^gemv7_shift is applied after the reduction (run 3: with it folded into the lane factor,
  // s was clamped at -100 and |x| >= 2^116 overflowed the fp16 conversion).
  s = s > 120 ? 120 : s < -126 ? -126 : s;
  const float mul = __uint_as_float(uint32_t(127 + s) << 23);
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    const uint32_t v = word_of(raw[i >> 2], i & 3);
    const __half2 h = __floats2half2_rn(lo(v) * mul, hi(v) * mul);
    xh[i] = *reinterpret_cast<const uint32_t*>(&h);
    if constexpr (F == Format::Int4) sum += __low2float(h) + __high2float(h);
  }
  *xsum = sum;
  pair_x_as_stored(xh);
  return s;
}

template <typename T, Format F>
__device__ __forceinline__ int load_x_f16(const LinearParams& p, int tok, int k0, uint32_t (&xh)[16], float* xsum) {
  const T* src = static_cast<const T*>(p.x) + size_t(tok) * p.k + k0;
  uint4 raw[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) raw[i] = load_cached16(src + 8 * i);
  return convert_x_f16<T, F>(raw, xh, xsum);
}

template <Format F, typename T>
struct Gemv7Unit {
  uint4 w;
  uint32_t s;  // NVFP4: 2 E4M3 bytes; MXFP4: E8M0 byte; INT4: scale bits
  uint32_t z;  // INT4: zero bits
};

template <Format F, typename T>
__device__ __forceinline__ Gemv7Unit<F, T> load_unit(const LinearParams& p, int row, int k0) {
  Gemv7Unit<F, T> u;
  u.w = load_stream16(p.weight + size_t(row) * (p.k / 2) + k0 / 2);
  const uint8_t* sc = static_cast<const uint8_t*>(p.scale);
  if constexpr (F == Format::NvFp4) {
    u.s = __ldg(reinterpret_cast<const uint16_t*>(sc + size_t(row) * (p.k / 16) + k0 / 16));
    u.z = 0;
  } else if constexpr (F == Format::MxFp4) {
    u.s = __ldg(sc + size_t(row) * (p.k / 32) + k0 / 32);
    u.z = 0;
  } else {
    const size_t gi = size_t(row) * (p.k / p.group) + k0 / p.group;
    u.s = __ldg(static_cast<const uint16_t*>(p.scale) + gi);
    u.z = __ldg(static_cast<const uint16_t*>(p.zero) + gi);
  }
  return u;
}

template <typename T>
__device__ __forceinline__ float bits_to_float(uint32_t b) {
  if constexpr (IsBf16<T>::value) {
    return __uint_as_float(b << 16);
  } else {
    return __half2float(__ushort_as_half(static_cast<unsigned short>(b)));
  }
}

// The lane's contribution of one unit (32 k of one row), in units of 2^-s·(format factor).
template <Format F, typename T>
__device__ __forceinline__ float unit_dot(const Gemv7Unit<F, T>& u, const uint32_t (&xh)[16], float xsum) {
  uint32_t h[2] = {0u, 0u};  // words 0-1, words 2-3: 16 weights each
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const uint32_t w = word_of(u.w, i);  // as stored: x is paired to match (pair_x_as_stored)
#pragma unroll
    for (int q = 0; q < 4; ++q) h[i >> 1] = hfma2(decode_pair_f16<F>(w, q), xh[4 * i + q], h[i >> 1]);
  }
  if constexpr (F == Format::NvFp4) {
    // E4M3 bits << 7 read as fp16 = scale·2^-8 exactly (subnormal scales too).
    const float s0 = half_lo((u.s & 0x7fu) << 7);
    const float s1 = half_lo(((u.s >> 8) & 0x7fu) << 7);
    return (half_lo(h[0]) + half_hi(h[0])) * s0 + (half_lo(h[1]) + half_hi(h[1])) * s1;
  } else if constexpr (F == Format::MxFp4) {
    const float sc = u.s == 0 ? __uint_as_float(0x00400000u) : __uint_as_float(u.s << 23);  // 2^(e-127)
    return ((half_lo(h[0]) + half_hi(h[0])) + (half_lo(h[1]) + half_hi(h[1]))) * sc;
  } else {
    const float sc = bits_to_float<T>(u.s), z = bits_to_float<T>(u.z);
    return sc * ((half_lo(h[0]) + half_hi(h[0])) + (half_lo(h[1]) + half_hi(h[1])) + (8.0f - z) * xsum);
  }
}

// 2^(shift - s) as fp32, s from load_x_f16: the lane's factor for its sums.
__device__ __forceinline__ float pow2(int e) { return __uint_as_float(uint32_t(127 + e) << 23); }

template <Format F>
__host__ __device__ constexpr int gemv7_shift() {
  return F == Format::NvFp4 ? 14 + 8 : F == Format::MxFp4 ? 14 : 0;  // decode 2^-14, E4M3-as-fp16 2^-8
}

// Folds a[0, V) across the lanes `offset` apart: with V even, the lanes with the offset's bit
// keep the upper half and the others the lower half (a[i] is then the sum over both lanes of old
// a[i + V/2] or a[i]); with V odd every value is summed and both lanes keep all V.
template <int V, int N>
__device__ __forceinline__ void fold_lanes(float (&a)[N], int lane, int offset) {
  static_assert(V <= N, "fold within the array");
  if constexpr (V % 2 == 0) {
    const bool upper = lane & offset;
#pragma unroll
    for (int i = 0; i < V / 2; ++i) {
      const float send = upper ? a[i] : a[i + V / 2];
      const float keep = upper ? a[i + V / 2] : a[i];
      a[i] = keep + __shfl_xor_sync(0xffffffffu, send, offset);
    }
  } else {
#pragma unroll
    for (int i = 0; i < V; ++i) a[i] += __shfl_xor_sync(0xffffffffu, a[i], offset);
  }
}

// Sums each of a lane's 16 row values over the warp: after it acc[0] of every even lane l holds
// the warp's sum of the returned row (bits 4, 3, 2, 1 of l: rows 8, 4, 2, 1 further).
__device__ __forceinline__ int butterfly_rows16(float (&acc)[kGemv7Rows], int lane) {
  fold_lanes<16>(acc, lane, 16);
  fold_lanes<8>(acc, lane, 8);
  fold_lanes<4>(acc, lane, 4);
  fold_lanes<2>(acc, lane, 2);
  fold_lanes<1>(acc, lane, 1);
  return ((lane >> 4) & 1) * 8 + ((lane >> 3) & 1) * 4 + ((lane >> 2) & 1) * 2 + ((lane >> 1) & 1);
}

// The end of variants 7 and 8: lane sums of the 16 rows -> butterfly over the lanes -> warps'
// sums in shared memory -> tensor scale, bias or gated activation in fp32 -> y.
template <Format F, typename T, int kMaxW, class Ep>
__device__ __forceinline__ void gemv7_epilogue(const LinearParams& p, float (&acc)[kGemv7Rows], float (&red)[kMaxW][kGemv7Rows],
                                               int lane, int warp, int warps, int row0, const Ep& ep) {
  const int row = butterfly_rows16(acc, lane);
  if ((lane & 1) == 0) red[warp][row] = acc[0];
  __syncthreads();

  if (threadIdx.x < kGemv7Rows) {
    const int r = threadIdx.x;
    const bool gated = p.act != Activation::None;
    float v = 0.0f;
    for (int w = 0; w < warps; ++w) v += red[w][r];
    float scale2 = 1.0f;
    if constexpr (F == Format::NvFp4) {
      if (p.scale2) scale2 = p.scale2[gated && (r & 8) ? 1 : 0];
    }
    v *= scale2 * float(1 << gemv7_shift<F>());
    if (gated) {
      // rows 0..7 gate, 8..15 up of the same 8 features (Prepack.h)
      const float up = __shfl_down_sync(0x0000ffffu, v, 8);
      if (r < 8) static_cast<T*>(p.y)[blockIdx.x * 8 + r] = from_float<T>(activate(v, p.act) * up);
    } else {
      ep(0, 0, row0 + r, v);
    }
  }
}

template <Format F, typename T, int CPW, class Ep>
__global__ void __launch_bounds__(kGemv7MaxWarps * 32, CPW == 1 ? 2 : 1) w4_gemv7_kernel(LinearParams p, Ep ep) {
  __shared__ float red[kGemv7MaxWarps][kGemv7Rows];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const int row0 = blockIdx.x * kGemv7Rows;
  // The warp's CPW chunks: warp, warp + warps. All their weight and scale loads go out first.
  Gemv7Unit<F, T> u[CPW][kGemv7Rows];
#pragma unroll
  for (int j = 0; j < CPW; ++j)
#pragma unroll
    for (int r = 0; r < kGemv7Rows; ++r) u[j][r] = load_unit<F, T>(p, row0 + r, (warp + j * warps) * kGemv7Chunk + 32 * lane);
  pdl_wait();    // x (and y, below) belong to the previous kernel until here
  pdl_trigger();  // the next kernel may start and request its weights
  float acc[kGemv7Rows];
#pragma unroll
  for (int j = 0; j < CPW; ++j) {
    uint32_t xh[16];
    float xsum = 0.0f;
    const int s = load_x_f16<T, F>(p, 0, (warp + j * warps) * kGemv7Chunk + 32 * lane, xh, &xsum);
    const float f = pow2(-s);  // 2^gemv7_shift is applied in the epilogue
#pragma unroll
    for (int r = 0; r < kGemv7Rows; ++r) {
      const float d = unit_dot<F, T>(u[j][r], xh, xsum);
      acc[r] = j == 0 ? d * f : fmaf(d, f, acc[r]);
    }
  }

  gemv7_epilogue<F, T, kGemv7MaxWarps>(p, acc, red, lane, warp, warps, row0, ep);
}

template <Format F, typename T, class Ep>
cudaError_t launch_gemv7(const LinearParams& p, const Ep& ep, bool pdl, cudaStream_t stream) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = pdl ? 1 : 0;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(p.n / kGemv7Rows);
  cfg.blockDim = dim3(gemv7_warps(p.k) * 32);
  cfg.dynamicSmemBytes = 0;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  const cudaError_t e = gemv7_chunks_per_warp(p.k) == 1 ? cudaLaunchKernelEx(&cfg, w4_gemv7_kernel<F, T, 1, Ep>, p, ep)
                                                        : cudaLaunchKernelEx(&cfg, w4_gemv7_kernel<F, T, 2, Ep>, p, ep);
  if (e != cudaSuccess) return e;
  return cudaGetLastError();
}

}  // namespace kiln::quant::gpu
