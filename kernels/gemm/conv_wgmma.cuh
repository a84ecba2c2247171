#pragma once
// Implicit-GEMM convolution, variant 3: Hopper (sm_90a) warpgroup MMA fed by TMA. The contraction
// of conv_implicit_gemm.cuh (m = output channel, n = flat output pixel (image, oh, ow), A = the
// weight [OC, C, KH, KW], B = the implicit im2col of an NCHW image; the epilogue functor called as
// epilogue(0, m, n, acc) once per output element), summed in another k order:
//
//   k-step s = (tap (kh, kw), block of 64 input channels):
//     A tile = W'[m0 .. m0 + BM, tap, c0 .. c0 + 64]  from the weight repacked per call into the
//              caller's workspace as W'[OC][KH*KW][C'] (C' = C rounded up to 8, zeros past C; the
//              same launch as the NHWC copy below, conv_wgmma_prepare_kernel): a 3-D
//              tensor map (C, taps, OC), box 64 c x 1 tap x BM oc, k-contiguous, 128-byte swizzle;
//     B tile = BN/64 boxes of the 4-D tensor map of the image copied per call into the workspace
//              as NHWC (dims C, W, H, N), each 64 c x 64 w x 1 h x 1 image at (c0, ow0 - pad_w +
//              kw * dil_w, oh - pad_h + kh * dil_h, image): in shared memory [64 w][64 c], 128-byte
//              swizzled, the K-major B layout (gemm_wgmma.cuh's box of 64 k x BN rows).
//   TMA zero-fills every coordinate outside the tensor, negative ones included: that is the
//   padding (and channels past C' in both A and B; C' = C rounded up to 8 keeps the TMA strides
//   16-byte multiples, so any C runs, C = 3 included).
//   Why NHWC: a tiled TMA load needs its innermost coordinate 16-byte aligned. Boxes of the NCHW
//   image itself (innermost w) would start at w = ow0 - pad_w + kw * dil_w, at odd elements for
//   most taps: that version (commit 010b71b) stopped with cudaErrorIllegalInstruction on an H200.
//   With channels innermost the innermost coordinate is c0, a multiple of 64.
//
// A tile of BN pixels is R output rows x CW boxes of box_w columns of one image (plan_conv_wgmma):
// where the output width rounded up to 8 divides BN, one box per row of that width (56-wide rows:
// BN = 224 is 4 rows, nothing wasted); else boxes of 64 columns, CW = the power of two of them that
// covers an output row, at most BN / 64 (a 56-wide row wastes 8 of 64 columns).
// Pixels past the output row or the image are computed from whatever TMA reads and not stored.
//
// Schedule (WgmmaConfig<BM, BN, STAGES, PINGPONG> of gemm_wgmma.cuh): a persistent grid walks the
// tiles (m tiles fastest: the CTAs that share an input tile run together and read it from L2); a
// producer warpgroup (one thread issues the TMA loads into a ring of STAGES stages, full/empty
// mbarriers) and two consumer warpgroups (wgmma m64nBNk16 from shared-memory descriptors, fp32
// accumulators in registers, one stage's wgmmas in flight), cooperative (both on one tile, BM/2
// rows each) or ping-pong (each takes every other tile whole: one's epilogue overlaps the other's
// mainloop). The epilogue stages the accumulators of one 64-pixel chunk through a shared buffer
// per consumer warpgroup; each thread then owns one pixel of the chunk (consecutive threads store
// consecutive pixels of one channel: an NCHW output row is contiguous in n) and calls the functor
// for its channels in unrolled blocks of 16, unchecked where all rows of the block exist.
// Session 5's version walked the buffer one element per loop trip with a bounds test and the
// functor's n arithmetic (64-bit divisions by the plane and the width) per element.
//
// Taken by conv_auto (conv_patch.cuh) on an sm_90 device in an sm_90a build (KILN_GEMM_SM90A) when
// plan_conv_wgmma (conv_wgmma_plan.h) accepts the shape: stride 1, a workspace of
// conv_wgmma_workspace_bytes; otherwise the patch or the gather kernel runs. Generated code
// passes the workspace only where the schedule enables this kernel (ir::GemmTemplate::conv_wgmma,
// off by default: checked correct on an H200, but not faster than conv_patch there yet; see
// bench/gemm/NOTES_conv.md).
#include <cuda.h>
#include <cudaTypedefs.h>

#include <algorithm>
#include <type_traits>

#include "conv_implicit_gemm.cuh"
#include "conv_wgmma_plan.h"
#include "gemm_problem.cuh"
#include "gemm_ptx.cuh"
#include "gemm_sm90_ptx.cuh"
#include "gemm_wgmma.cuh"

namespace kiln::gemm {

// The window of `s` as the plan's shape (conv_wgmma_plan.h).
inline ConvWgmmaShape conv_wgmma_shape(const Problem& p, const ConvShape& s) {
  ConvWgmmaShape c;
  c.m = p.m, c.n = p.n, c.k = p.k;
  c.channels = s.channels, c.height = s.height, c.width = s.width, c.out_height = s.out_height, c.out_width = s.out_width;
  c.kernel_h = s.kernel_h, c.kernel_w = s.kernel_w, c.stride_h = s.stride_h, c.stride_w = s.stride_w;
  c.dilation_h = s.dilation_h, c.dilation_w = s.dilation_w, c.pad_h = s.pad_h, c.pad_w = s.pad_w;
  return c;
}

// The workspace conv_wgmma needs for `s` as `p`: the repacked weight, then the NHWC image.
inline int64_t conv_wgmma_workspace_bytes(const Problem& p, const ConvShape& s) {
  const int64_t out_plane = s.out_height * s.out_width, images = out_plane > 0 ? p.n / out_plane : 0;
  return conv_wgmma_workspace_bytes(p.m, p.k, images * s.channels * s.height * s.width, s.channels);
}

}  // namespace kiln::gemm

namespace kiln::gemm::detail {

// The tiling of the pixels (see the top of this file) and the k loop, per call.
struct ConvWgmmaArgs {
  int m = 0;
  int out_h = 0, out_w = 0;
  int rows = 1, chunks = 1, box_w = 64;  // R output rows x CW boxes of box_w columns per tile
  int row_tiles = 0, col_tiles = 0;    // per image
  int tiles_m = 0;
  int64_t units = 0;                   // tiles_m * images * row_tiles * col_tiles
  int channel_blocks = 0, kernel_w = 1, k_steps = 0;
  int pad_h = 0, pad_w = 0, dil_h = 1, dil_w = 1;
};

template <typename Config>
struct ConvWgmmaLayout {
  static constexpr uint32_t kABytes = Config::BM * 64 * 2, kBBytes = Config::BN * 64 * 2;
  static constexpr uint32_t kStageBytes = kABytes + kBBytes;
  static constexpr size_t kRingBytes = 1024 + size_t(Config::STAGES) * kStageBytes + 16 * Config::STAGES;
  // One epilogue buffer per consumer warpgroup: its tile rows x one 64-pixel chunk of fp32,
  // rows padded by 8 floats (the fragments' float2 writes on distinct banks).
  static constexpr int kRows = Config::BM / Config::kConsumersPerTile, kEpiStride = 64 + 8;
  static constexpr size_t kEpiBytes = size_t(kRows) * kEpiStride * 4;
  static constexpr size_t kSmemBytes = kRingBytes + Config::kConsumers * kEpiBytes;
};

#if defined(KILN_GEMM_SM90A_DEVICE)
// One box of a 4-D tensor map into shared memory at `dst`, completing its bytes on `bar`.
__device__ __forceinline__ void tma_load_4d(uint32_t dst, const void* tensor_map, uint32_t bar, int c0, int c1, int c2, int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], [%6];" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(tensor_map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
      : "memory");
}
#endif

template <typename T, typename Config, typename Epilogue>
__global__ void __launch_bounds__(Config::kThreads, 1)
    conv_wgmma_kernel(const __grid_constant__ CUtensorMap tma_w, const __grid_constant__ CUtensorMap tma_x,
                      const ConvWgmmaArgs args, const Epilogue epilogue) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using namespace kiln::gemm::sm90;
  constexpr int BM = Config::BM, BN = Config::BN, S = Config::STAGES, NC = (BN + 63) / 64;  // epilogue chunks
  constexpr int MI = BM / 64 / Config::kConsumersPerTile;  // m64 blocks per consumer warpgroup
  constexpr bool kPingPong = Config::kPingPong;
  using L = ConvWgmmaLayout<Config>;
  extern __shared__ __align__(1024) unsigned char conv_wgmma_smem[];
  const uint32_t base = (smem_addr(conv_wgmma_smem) + 1023u) & ~1023u;
  const uint32_t bars = base + S * L::kStageBytes;
  auto full = [&](int s) { return bars + 8u * uint32_t(s); };
  auto empty = [&](int s) { return bars + 8u * uint32_t(S + s); };
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      mbar_init(full(s), 1);
      mbar_init(empty(s), Config::kConsumersPerTile);
    }
    mbar_init_fence();
  }
  __syncthreads();
  pdl_wait();  // launch_programmatic: the image copy and the epilogue's buffers belong to earlier kernels until here

  // Unit u -> m tile (fastest), image, first output row and column of the pixel tile.
  auto decode = [&](int64_t u, int& tm, int& image, int& oh0, int& ow0) {
    tm = int(u % args.tiles_m);
    int64_t t = u / args.tiles_m;
    const int ct = int(t % args.col_tiles);
    t /= args.col_tiles;
    const int rt = int(t % args.row_tiles);
    image = int(t / args.row_tiles);
    oh0 = rt * args.rows;
    ow0 = ct * args.chunks * args.box_w;
  };

  const int wg = int(threadIdx.x) / 128;
  if (wg == 0) {
    setmaxnreg_dec<40>();
    if (threadIdx.x == 0) {
      int stage = 0;
      uint32_t phase = 0;
      for (int64_t u = blockIdx.x; u < args.units; u += gridDim.x) {
        int tm, image, oh0, ow0;
        decode(u, tm, image, oh0, ow0);
        int cb = 0, tap = 0;
        for (int ks = 0; ks < args.k_steps; ++ks) {
          const int kh = tap / args.kernel_w, kw = tap - kh * args.kernel_w;
          mbar_wait(empty(stage), phase ^ 1u);
          mbar_expect_tx(full(stage), L::kStageBytes);
          const uint32_t st = base + uint32_t(stage) * L::kStageBytes;
          tma_load_3d(st, &tma_w, full(stage), 64 * cb, tap, tm * BM);
          const int ih = oh0 - args.pad_h + kh * args.dil_h, iw = ow0 - args.pad_w + kw * args.dil_w;
          // rows * chunks boxes of box_w pixels, one after another ([box_w w][64 c] each, 1024-byte
          // multiples: box_w % 8 == 0): together the BN rows of the K-major B tile.
          for (int j = 0, r = 0, c = 0; j < args.rows * args.chunks; ++j) {
            tma_load_4d(st + L::kABytes + 128u * uint32_t(args.box_w * j), &tma_x, full(stage), 64 * cb, iw + args.box_w * c, ih + r,
                        image);
            if (++c == args.chunks) c = 0, ++r;
          }
          if (++cb == args.channel_blocks) cb = 0, ++tap;
          if (++stage == S) stage = 0, phase ^= 1u;
        }
      }
    }
  } else {
    setmaxnreg_inc<232>();
    const int cw = wg - 1, tid = int(threadIdx.x) % 128, warp = tid / 32, lane = tid % 32;
    const int row0 = kPingPong ? 0 : cw * MI;  // this warpgroup's first m64 block in the tile
    int stage = 0;
    uint32_t phase = 0;
    float acc[MI][BN / 2];
    constexpr int R = L::kRows, CS = L::kEpiStride;
    float* const buf = reinterpret_cast<float*>(conv_wgmma_smem + (base - smem_addr(conv_wgmma_smem)) + S * L::kStageBytes +
                                                16 * S + size_t(cw) * L::kEpiBytes);
    const int64_t out_plane = int64_t(args.out_h) * args.out_w;
    int64_t local = 0;  // the CTA's units in order; ping-pong: warpgroup cw takes those with local % 2 == cw
    for (int64_t u = blockIdx.x; u < args.units; u += gridDim.x, ++local) {
      if (kPingPong && local % 2 != cw) {  // the other warpgroup's unit: skip its stages in the ring
        const int skip = args.k_steps;
        stage += skip % S;
        phase ^= uint32_t((skip / S) & 1);
        if (stage >= S) stage -= S, phase ^= 1u;
        continue;
      }
      int tm, image, oh0, ow0;
      decode(u, tm, image, oh0, ow0);
      // Ping-pong order (as gemm_wgmma.cuh): this warpgroup's mainloop starts once the other one
      // has waited on every stage of its previous unit.
      if (kPingPong && local > 0) named_barrier_sync(1 + cw, 256);
      int prev = -1;
      for (int ks = 0; ks < args.k_steps; ++ks) {
        mbar_wait(full(stage), phase);
        const uint32_t st = base + uint32_t(stage) * L::kStageBytes;
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {
#pragma unroll
          for (int mi = 0; mi < MI; ++mi) {
            const uint64_t da = smem_desc(st + 8192u * uint32_t(row0 + mi) + 32u * kk, 16, 1024);
            const uint64_t db = smem_desc(st + L::kABytes + 32u * kk, 16, 1024);
            wgmma<BN, 0, 0, T>(acc[mi], da, db, (ks > 0 || kk > 0) ? 1 : 0);
          }
        }
        wgmma_commit();
        wgmma_wait<1>();  // the previous stage's wgmmas are done: release it
        if (prev >= 0 && tid == 0) mbar_arrive(empty(prev));
        prev = stage;
        if (++stage == S) stage = 0, phase ^= 1u;
      }
      if (kPingPong) named_barrier_arrive(2 - cw, 256);  // the other warpgroup's turn
      wgmma_wait<0>();
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int e = 0; e < BN / 2; ++e) fence_operand(acc[mi][e]);
      if (prev >= 0 && tid == 0) mbar_arrive(empty(prev));

      // Accumulator layout of wgmma m64nN: element 4i + e of a thread is row 16 warp + lane/4 +
      // 8 (e/2), column 8i + 2 (lane%4) + e%2. Column col of the tile is pixel col % box_w of box
      // j = col / box_w: output row oh0 + j / CW, column ow0 + box_w (j % CW) + col % box_w. The
      // epilogue stages 64 columns at a time (the last chunk of BN = 224 has 32).
      const int64_t m0 = int64_t(tm) * BM + 64 * row0;
#pragma unroll 1
      for (int chunk = 0; chunk < NC; ++chunk) {
        named_barrier_sync(3 + cw, 128);  // every thread of the warpgroup has read the buffer's last use
#pragma unroll
        for (int cc = 0; cc < NC; ++cc) {
          if (cc != chunk) continue;
#pragma unroll
          for (int mi = 0; mi < MI; ++mi)
#pragma unroll
            for (int h = 0; h < 2; ++h)
#pragma unroll
              for (int i8 = 0; i8 < 8; ++i8) {
                const int i = 8 * cc + i8;  // the last chunk of BN = 224 has 4 column blocks of 8
                if (i >= BN / 8) continue;
                const int r = 64 * mi + 16 * warp + lane / 4 + 8 * h, c = 8 * i8 + 2 * (lane % 4);
                *reinterpret_cast<float2*>(buf + r * CS + c) = make_float2(acc[mi][4 * i + 2 * h], acc[mi][4 * i + 2 * h + 1]);
              }
        }
        named_barrier_sync(3 + cw, 128);
        // Thread tid owns pixel column c = tid % 64 of the chunk and rows tid / 64 + 2 j: its pixel n
        // is fixed, so the functor's n arithmetic (image, oh, ow) is computed once per chunk, not per
        // element, and a warp stores 32 consecutive pixels of one channel. Its in-range rows are a
        // prefix (m < args.m), so whole blocks of kUnroll rows run unchecked and unrolled, with their
        // loads (bias, residual) in flight together; only the last partial block tests each row
        // (the short-K GEMM's lesson, bench/gemm/NOTES.md session 6).
        const int c = tid % 64, r_first = tid / 64, col = 64 * chunk + c;
        if (col >= BN) continue;
        const int box = col / args.box_w, rr = box / args.chunks, oh = oh0 + rr;
        const int ow = ow0 + args.box_w * (box - rr * args.chunks) + (col - box * args.box_w);
        if (oh >= args.out_h || ow >= args.out_w) continue;
        const int64_t n = int64_t(image) * out_plane + int64_t(oh) * args.out_w + ow;
        const int64_t left = args.m - m0;  // rows of the tile that exist
        const int rows_here = left >= R ? R / 2 : int((left - r_first + 1) / 2);  // this thread's in-range rows
        constexpr int kUnroll = EpilogueIsLong<Epilogue>::value ? 2 : 16;
        constexpr int kRowsPerThread = R / 2;
        static_assert(kRowsPerThread % kUnroll == 0, "conv_wgmma: epilogue rows per thread in whole blocks");
        int j = 0;
#pragma unroll 1
        for (; j + kUnroll <= rows_here; j += kUnroll) {
#pragma unroll
          for (int u = 0; u < kUnroll; ++u) {
            const int r = r_first + 2 * (j + u);
            epilogue(0, m0 + r, n, buf[r * CS + c]);
          }
        }
#pragma unroll 1
        for (; j < rows_here; ++j) {
          const int r = r_first + 2 * j;
          epilogue(0, m0 + r, n, buf[r * CS + c]);
        }
      }
    }
  }
#endif
}

// The per-call preparation, one launch: blocks [0, transpose_blocks) copy the image to NHWC, the
// rest repack the weight.
//   x[image][c][h*w] -> x_nhwc[image][h*w][c] (c < padded; channels past C are zeros) through
//   64-channel x 64-pixel shared tiles: reads along the pixels, writes along the channels; 16-byte
//   loads and stores where the plane is a multiple of 8 and both images are 16-byte aligned
//   (`vector`), else one element at a time (variant 1, session 5's copy).
//   W'[m][tap][c] = A(m, k = c * taps + tap) (c < padded; zero past C): the weight with each tap's
//   channels contiguous.
template <typename T>
struct ConvWgmmaPrepare {
  const T* x;
  T* x_nhwc;
  int64_t channels, padded, plane;  // C, C rounded up to 8 (the copies' channels), H * W
  int channel_blocks, pixel_blocks, images;
  bool vector;
  const T* a;
  int64_t stride_mn, stride_k;
  T* w;
  int64_t m, taps;
  __host__ __device__ int64_t transpose_blocks() const { return int64_t(images) * channel_blocks * pixel_blocks; }
};

template <typename T>
__device__ __forceinline__ void conv_wgmma_transpose_tile(const ConvWgmmaPrepare<T>& a, int64_t tile_index) {
  // [64 channels][64 pixels]; vector path: 16-byte chunk q of row r stored at chunk q ^ (r / 8 % 8),
  // so that both the row-wise 16-byte stores and the column reads (8 channels of one pixel per
  // thread, 8 threads per pixel) are free of bank conflicts. Scalar path: rows padded to 65.
  __shared__ __align__(16) T tile[64 * 65];
  const int64_t pb = tile_index % a.pixel_blocks, rest = tile_index / a.pixel_blocks;
  const int64_t cb = rest % a.channel_blocks, image = rest / a.channel_blocks;
  const int64_t c0 = cb * 64, p0 = pb * 64;
  const T* src = a.x + image * a.channels * a.plane;
  T* dst = a.x_nhwc + image * a.padded * a.plane;
  const int t = int(threadIdx.x);
  if (a.vector) {
    for (int i = t; i < 64 * 8; i += 256) {  // 64 channels x 8 vectors of 8 pixels
      const int r = i / 8, q = i % 8;
      uint4 val = make_uint4(0, 0, 0, 0);
      if (c0 + r < a.channels && p0 + 8 * q < a.plane)  // plane % 8 == 0: a vector is all in or all out
        val = __ldg(reinterpret_cast<const uint4*>(src + (c0 + r) * a.plane + p0 + 8 * q));
      *reinterpret_cast<uint4*>(&tile[r * 64 + 8 * (q ^ (r / 8 % 8))]) = val;
    }
    __syncthreads();
    for (int i = t; i < 64 * 8; i += 256) {  // 64 pixels x 8 vectors of 8 channels
      const int px = i / 8, v = i % 8;
      if (p0 + px >= a.plane || c0 + 8 * v >= a.padded) continue;  // padded % 8 == 0: whole vectors
      union {
        uint4 u;
        T e[8];
      } out;
#pragma unroll
      for (int e = 0; e < 8; ++e) out.e[e] = tile[(8 * v + e) * 64 + 8 * ((px / 8) ^ v) + px % 8];
      *reinterpret_cast<uint4*>(dst + (p0 + px) * a.padded + c0 + 8 * v) = out.u;
    }
  } else {
    for (int i = t; i < 64 * 64; i += 256) {
      const int r = i / 64, col = i % 64;  // r: channel, col: pixel
      if (p0 + col < a.plane) tile[r * 65 + col] = c0 + r < a.channels ? src[(c0 + r) * a.plane + p0 + col] : T(0.0f);
    }
    __syncthreads();
    for (int i = t; i < 64 * 64; i += 256) {
      const int r = i / 64, col = i % 64;  // r: pixel, col: channel
      if (p0 + r < a.plane && c0 + col < a.padded) dst[(p0 + r) * a.padded + c0 + col] = tile[col * 65 + r];
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(256) conv_wgmma_prepare_kernel(const ConvWgmmaPrepare<T> a) {
  pdl_wait();  // launch_programmatic
  const int64_t transpose = a.transpose_blocks();
  if (int64_t(blockIdx.x) < transpose) {
    conv_wgmma_transpose_tile(a, blockIdx.x);
    return;
  }
  const int64_t total = a.m * a.taps * a.padded, first = (int64_t(blockIdx.x) - transpose) * 256 + threadIdx.x;
  const int64_t step = (int64_t(gridDim.x) - transpose) * 256;
  for (int64_t i = first; i < total; i += step) {
    const int64_t c = i % a.padded, q = i / a.padded, tap = q % a.taps, row = q / a.taps;
    a.w[i] = c < a.channels ? a.a[row * a.stride_mn + (c * a.taps + tap) * a.stride_k] : T(0.0f);
  }
}

// Launches of the Hopper convolution by this thread (lets a harness tell it from the fallbacks).
inline thread_local int64_t conv_wgmma_launches = 0;

}  // namespace kiln::gemm::detail

namespace kiln::gemm {

// Whether this build has the Hopper convolution (the Hopper GEMM's build).
constexpr bool kConvWgmmaBuilt = kWgmmaBuilt;

// The Hopper convolution with tiles `Config` (a WgmmaConfig) for `s` as `p`, the weight repacked
// into `workspace`; cudaErrorNotSupported (nothing launched) where it cannot run: another device
// or build, or plan_conv_wgmma refuses the shape.
// What a call of conv_wgmma launches: both (what conv_auto runs), or for a harness that times them
// apart, only the preparation (NHWC copy + weight repack) or only the convolution (on a workspace
// an earlier call prepared for the same image and weight).
enum class ConvWgmmaSteps { kAll, kPrepare, kConvolution };

template <typename T, typename Config, typename Epilogue>
cudaError_t conv_wgmma(const Problem& p, const ConvShape& s, const Epilogue& epilogue, void* workspace, int64_t workspace_bytes,
                       cudaStream_t stream, ConvWgmmaSteps steps = ConvWgmmaSteps::kAll) {
  static_assert(std::is_same<T, __half>::value || std::is_same<T, __nv_bfloat16>::value, "conv_wgmma<T>: 16-bit T");
  static_assert(Epilogue::kNumB == 1, "a convolution has one B operand");
  static_assert(Config::BM % (64 * Config::kConsumersPerTile) == 0 && Config::BM <= 256 &&
                    (Config::BN == 64 || Config::BN == 128 || Config::BN == 224 || Config::BN == 256),
                "conv_wgmma: BM 128 or 256 (ping-pong: 64 or 128), BN 64, 128, 224 or 256");
  static_assert(Config::BM / 64 / Config::kConsumersPerTile * Config::BN / 2 <= 128, "conv_wgmma: at most 128 accumulators per thread");
  static_assert(detail::ConvWgmmaLayout<Config>::kSmemBytes <= 227 * 1024, "conv_wgmma: shared memory over 227 KB");
  if constexpr (kConvWgmmaBuilt) {
    static const int sm90 = detail::device_is_sm90();
    if (!sm90 || p.batch() != 1 || p.num_b != 1) return cudaErrorNotSupported;
    const ConvWgmmaPlan plan = plan_conv_wgmma(conv_wgmma_shape(p, s), Config::BN,
                                               workspace != nullptr && reinterpret_cast<uintptr_t>(workspace) % 16 == 0, workspace_bytes);
    if (!plan.use) return cudaErrorNotSupported;
    const bool bf16 = std::is_same<T, __nv_bfloat16>::value;
    const int64_t taps = int64_t(s.kernel_h) * s.kernel_w, images = plan.images, padded = conv_wgmma_padded_channels(s.channels);
    // The weight as W'[OC][taps][C] (3-D map: C, taps, OC; box 64 x 1 x BM).
    CUtensorMap mw, mx;
    detail::TensorMapKey kw{};
    kw.data = workspace, kw.rank = 3, kw.element = bf16 ? detail::kMapBf16 : detail::kMapF16;
    kw.dims[0] = uint64_t(padded), kw.dims[1] = uint64_t(taps), kw.dims[2] = uint64_t(p.m), kw.dims[3] = 1;
    kw.strides[0] = uint64_t(padded * 2), kw.strides[1] = uint64_t(padded * taps * 2);
    kw.box[0] = 64, kw.box[1] = 1, kw.box[2] = uint32_t(Config::BM), kw.box[3] = 1;
    // The image's NHWC copy, after the weight, as (C, W, H, N) (box 64 x 64 x 1 x 1): each box
    // lands as [64 w][64 c].
    T* const x_nhwc = static_cast<T*>(workspace) + p.m * taps * padded;
    detail::TensorMapKey kx{};
    kx.data = x_nhwc, kx.rank = 4, kx.element = bf16 ? detail::kMapBf16 : detail::kMapF16;
    kx.dims[0] = uint64_t(padded), kx.dims[1] = uint64_t(s.width), kx.dims[2] = uint64_t(s.height), kx.dims[3] = uint64_t(images);
    kx.strides[0] = uint64_t(padded * 2), kx.strides[1] = uint64_t(s.width * padded * 2),
    kx.strides[2] = uint64_t(padded * s.height * s.width * 2);
    kx.box[0] = 64, kx.box[1] = uint32_t(plan.box_w), kx.box[2] = 1, kx.box[3] = 1;
    for (uint64_t st : kx.strides)
      if (st >= (uint64_t(1) << 40)) return cudaErrorNotSupported;
    if (!detail::encode_tensor_map(kw, mw) || !detail::encode_tensor_map(kx, mx)) return cudaErrorNotSupported;

    detail::ConvWgmmaArgs args;
    args.rows = plan.rows, args.chunks = plan.chunks, args.box_w = plan.box_w;
    const int64_t row_tiles = plan.row_tiles, col_tiles = plan.col_tiles;
    const int64_t tiles_m = (p.m + Config::BM - 1) / Config::BM, channel_blocks = (padded + 63) / 64;
    if (taps * channel_blocks >= (int64_t(1) << 31)) return cudaErrorNotSupported;
    args.m = int(p.m), args.out_h = int(s.out_height), args.out_w = int(s.out_width);
    args.row_tiles = int(row_tiles), args.col_tiles = int(col_tiles), args.tiles_m = int(tiles_m);
    args.units = tiles_m * images * row_tiles * col_tiles;
    args.channel_blocks = int(channel_blocks), args.kernel_w = s.kernel_w, args.k_steps = int(taps * channel_blocks);
    args.pad_h = s.pad_h, args.pad_w = s.pad_w, args.dil_h = s.dilation_h, args.dil_w = s.dilation_w;

    if (steps != ConvWgmmaSteps::kConvolution) {
      detail::ConvWgmmaPrepare<T> prep;
      prep.x = static_cast<const T*>(s.x), prep.x_nhwc = x_nhwc, prep.channels = s.channels, prep.padded = padded;
      prep.plane = s.height * s.width;
      prep.channel_blocks = int(channel_blocks), prep.images = int(images);
      const int64_t pixel_blocks = (prep.plane + 63) / 64;
      prep.vector = prep.plane % 8 == 0 && reinterpret_cast<uintptr_t>(s.x) % 16 == 0 && reinterpret_cast<uintptr_t>(x_nhwc) % 16 == 0;
      prep.a = static_cast<const T*>(p.a.data), prep.stride_mn = p.a.stride_mn, prep.stride_k = p.a.stride_k;
      prep.w = static_cast<T*>(workspace), prep.m = p.m, prep.taps = taps;
      if (pixel_blocks >= (int64_t(1) << 31)) return cudaErrorNotSupported;
      prep.pixel_blocks = int(pixel_blocks);
      const int64_t repack_blocks = std::min<int64_t>((p.m * taps * padded + 255) / 256, 512);
      const int64_t blocks = prep.transpose_blocks() + repack_blocks;
      if (blocks >= (int64_t(1) << 31)) return cudaErrorNotSupported;
      const cudaError_t e =
          detail::launch_programmatic(detail::conv_wgmma_prepare_kernel<T>, dim3(unsigned(blocks)), dim3(256), 0, stream, prep);
      if (e != cudaSuccess) return e;
      if (steps == ConvWgmmaSteps::kPrepare) return cudaSuccess;
    }
    using L = detail::ConvWgmmaLayout<Config>;
    auto kernel = detail::conv_wgmma_kernel<T, Config, Epilogue>;
    cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(L::kSmemBytes));
    if (e != cudaSuccess) return e;
    const int64_t sms = detail::device_sm_count();
    const int grid = int(args.units < sms ? args.units : sms);
    e = detail::launch_programmatic(kernel, dim3(unsigned(grid)), dim3(Config::kThreads), L::kSmemBytes, stream, mw, mx, args, epilogue);
    ++detail::conv_wgmma_launches;
    return e;
  } else {
    (void)p, (void)s, (void)epilogue, (void)workspace, (void)workspace_bytes, (void)stream, (void)steps;
    return cudaErrorNotSupported;
  }
}

// The tiles conv_auto gives the Hopper convolution. First 224-pixel tiles, where the output row
// rounded up to 8 divides 224 (56, 28, 14, 8 and 7-wide rows: whole rows, no wasted column): 64 x 224
// ping-pong for at most 64 output channels, 128 x 224 cooperative above (BM = 128 ping-pong would
// need 224 accumulators a thread). Else 64 x 256 ping-pong (BM = 64: no half-empty m64 blocks) or
// 128 x 128 ping-pong (each warpgroup a whole tile, one's epilogue under the other's mainloop).
using ConvWgmmaRowsNarrow = WgmmaConfig<64, 224, 4, 1>;
using ConvWgmmaRowsWide = WgmmaConfig<128, 224, 4, 0>;
using ConvWgmmaNarrow = WgmmaConfig<64, 256, 4, 1>;
using ConvWgmmaWide = WgmmaConfig<128, 128, 4, 1>;

template <typename T, typename Epilogue>
cudaError_t conv_wgmma_auto(const Problem& p, const ConvShape& s, const Epilogue& epilogue, void* workspace, int64_t workspace_bytes,
                            cudaStream_t stream) {
  const cudaError_t rows = p.m <= 64 ? conv_wgmma<T, ConvWgmmaRowsNarrow>(p, s, epilogue, workspace, workspace_bytes, stream)
                                     : conv_wgmma<T, ConvWgmmaRowsWide>(p, s, epilogue, workspace, workspace_bytes, stream);
  if (rows != cudaErrorNotSupported) return rows;
  return p.m <= 64 ? conv_wgmma<T, ConvWgmmaNarrow>(p, s, epilogue, workspace, workspace_bytes, stream)
                   : conv_wgmma<T, ConvWgmmaWide>(p, s, epilogue, workspace, workspace_bytes, stream);
}

}  // namespace kiln::gemm
