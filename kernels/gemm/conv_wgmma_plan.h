#pragma once
// Whether and how the Hopper convolution (conv_wgmma.cuh) runs a convolution: the host-side rule,
// in plain C++ so that unit tests can check it without a GPU (tests/quant/W4WgmmaPlan_test.cpp is
// the same idea for the 4-bit kernels). The device and the build are checked by conv_wgmma itself.
#include <stdint.h>

namespace kiln::gemm {

// The convolution as the contraction m x n x k (m = output channels, n = images * OH * OW,
// k = C * KH * KW) and its window.
struct ConvWgmmaShape {
  int64_t m = 0, n = 0, k = 0;
  int64_t channels = 0, height = 1, width = 0, out_height = 1, out_width = 0;
  int kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1, pad_h = 0, pad_w = 0;
};

// The channels of the kernel's copies: C rounded up to a multiple of 8 (16-byte TMA strides), the
// added channels zero in both the weight and the image. (plan_conv_wgmma refuses C off 8 since
// session 7's measurement, so today this is C; the copies and the tests keep the padded case.)
inline int64_t conv_wgmma_padded_channels(int64_t channels) { return (channels + 7) / 8 * 8; }

// The workspace the kernel needs: the repacked weight (m * k 16-bit elements), then the NHWC copy
// of the image (images * C * H * W), both with C padded to conv_wgmma_padded_channels.
inline int64_t conv_wgmma_workspace_bytes(int64_t m, int64_t k, int64_t image_elements, int64_t channels) {
  if (channels <= 0) return 0;
  const int64_t padded = conv_wgmma_padded_channels(channels);
  return (m * (k / channels) * padded + image_elements / channels * padded) * 2;
}
// The same for C a multiple of 8 (no padding).
inline int64_t conv_wgmma_workspace_bytes(int64_t m, int64_t k, int64_t image_elements) { return (m * k + image_elements) * 2; }

struct ConvWgmmaPlan {
  bool use = false;
  const char* reason = "";  // why not (use == false)
  int64_t images = 0, workspace_bytes = 0;
  // Tiles of bn pixels of one image: `rows` output rows x `chunks` boxes of `box_w` columns
  // (rows * chunks * box_w = bn). Where the output width rounded up to 8 divides bn, a box is one
  // whole row (box_w = that width, chunks = 1, rows = bn / box_w: no column wasted past the 8);
  // else box_w = 64 and chunks is the power of two that covers a row, at most bn / 64.
  int rows = 0, chunks = 0, box_w = 64;
  int64_t row_tiles = 0, col_tiles = 0;
};

inline ConvWgmmaPlan plan_conv_wgmma(const ConvWgmmaShape& s, int bn, bool workspace_aligned, int64_t workspace_bytes) {
  ConvWgmmaPlan plan;
  auto refuse = [&](const char* why) {
    plan.reason = why;
    return plan;
  };
  const int64_t taps = int64_t(s.kernel_h) * s.kernel_w, out_plane = s.out_height * s.out_width;
  if (s.m <= 0 || s.n <= 0 || taps <= 0 || s.channels <= 0 || s.height <= 0 || s.width <= 0 || out_plane <= 0)
    return refuse("an empty extent");
  if (s.k != s.channels * taps || s.n % out_plane != 0) return refuse("k or n does not match the window");
  if (s.stride_h != 1 || s.stride_w != 1) return refuse("a stride other than 1");
  if (s.dilation_h < 1 || s.dilation_w < 1) return refuse("a dilation below 1");
  // The copies can pad C to a multiple of 8, but C = 3 padded to 8 ran at 80 us against the
  // gather kernel's 46 (32x3x56x56 -> 64, H200, session 7: boxes of 64 channels with 5 of 8 real
  // ones, 3 of 64 useful), so channels off 8 keep the mma.sync kernels.
  if (s.channels % 8 != 0) return refuse("C is not a multiple of 8 (the mma.sync kernels are faster there)");
  plan.images = s.n / out_plane;
  // TMA coordinates and the kernel's tile indices are 32-bit; the NHWC copy's grid has an image per z.
  const int64_t big = int64_t(1) << 30, pad_limit = int64_t(1) << 20;
  if (s.width >= big || s.height >= big || s.channels >= big || taps >= big || s.m >= big || s.out_width >= big ||
      s.out_height >= big || plan.images > 65535)
    return refuse("an extent past the kernel's 32-bit indices");
  if (s.pad_h > pad_limit || s.pad_w > pad_limit || s.pad_h < -pad_limit || s.pad_w < -pad_limit ||
      int64_t(s.kernel_h) * s.dilation_h > pad_limit || int64_t(s.kernel_w) * s.dilation_w > pad_limit)
    return refuse("a padding or window past the kernel's 32-bit coordinates");
  plan.workspace_bytes = conv_wgmma_workspace_bytes(s.m, s.k, plan.images * s.channels * s.height * s.width, s.channels);
  if (!workspace_aligned || workspace_bytes < plan.workspace_bytes) return refuse("no workspace, or one too small or unaligned");
  const int64_t row8 = (s.out_width + 7) / 8 * 8;
  if (bn >= 8 && bn % 8 == 0 && row8 <= bn && bn % row8 == 0) {
    plan.box_w = int(row8), plan.chunks = 1, plan.rows = int(bn / row8);
  } else {
    if (bn < 64 || bn % 64 != 0 || ((bn / 64) & (bn / 64 - 1)) != 0)
      return refuse("a tile width that is neither a multiple of the output row (rounded up to 8) nor 64 times a power of two");
    plan.box_w = 64, plan.chunks = 1;
    while (plan.chunks < bn / 64 && 64 * plan.chunks < s.out_width) plan.chunks *= 2;
    plan.rows = bn / 64 / plan.chunks;
  }
  plan.row_tiles = (s.out_height + plan.rows - 1) / plan.rows;
  plan.col_tiles = (s.out_width + int64_t(plan.box_w) * plan.chunks - 1) / (int64_t(plan.box_w) * plan.chunks);
  if (plan.row_tiles * plan.col_tiles * plan.images >= (int64_t(1) << 31)) return refuse("too many pixel tiles");
  plan.use = true;
  return plan;
}

}  // namespace kiln::gemm
