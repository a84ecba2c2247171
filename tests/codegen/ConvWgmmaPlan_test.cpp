// Whether and how the Hopper convolution (kernels/gemm/conv_wgmma.cuh) runs a convolution
// (conv_wgmma_plan.h): the shapes it refuses, the workspace it needs, its pixel tiling. The kernel
// itself runs on the GPU (bench/gemm/conv_bench.cu).
#include <gtest/gtest.h>

#include <string>

#include "../../kernels/gemm/conv_wgmma_plan.h"

namespace kiln::gemm {
namespace {

// images x C x H x W -> oc, kh x kw, stride 1, pad p (symmetric), dilation 1.
ConvWgmmaShape conv(int64_t images, int64_t c, int64_t h, int64_t w, int64_t oc, int k, int pad) {
  ConvWgmmaShape s;
  s.channels = c, s.height = h, s.width = w, s.kernel_h = s.kernel_w = k, s.pad_h = s.pad_w = pad;
  s.out_height = h + 2 * pad - k + 1, s.out_width = w + 2 * pad - k + 1;
  s.m = oc, s.k = c * k * k, s.n = images * s.out_height * s.out_width;
  return s;
}

TEST(ConvWgmmaPlan, TheCnnLayersRunWithAWorkspaceForTheWeightAndTheNhwcImage) {
  const ConvWgmmaShape s = conv(32, 128, 56, 56, 128, 3, 1);
  const int64_t bytes = conv_wgmma_workspace_bytes(128, 128 * 9, 32 * 128 * 56 * 56);
  EXPECT_EQ(bytes, (128 * 1152 + 32 * 128 * 56 * 56) * 2);
  const ConvWgmmaPlan plan = plan_conv_wgmma(s, 128, true, bytes);
  ASSERT_TRUE(plan.use) << plan.reason;
  EXPECT_EQ(plan.images, 32);
  EXPECT_EQ(plan.workspace_bytes, bytes);
  // 56-wide rows: one 64-column chunk, two rows per 128-pixel tile, 28 row tiles.
  EXPECT_EQ(plan.chunks, 1);
  EXPECT_EQ(plan.rows, 2);
  EXPECT_EQ(plan.row_tiles, 28);
  EXPECT_EQ(plan.col_tiles, 1);
  const ConvWgmmaPlan wide = plan_conv_wgmma(conv(32, 64, 56, 56, 64, 3, 1), 256, true, bytes);
  ASSERT_TRUE(wide.use) << wide.reason;
  EXPECT_EQ(wide.rows, 4);
  EXPECT_EQ(wide.row_tiles, 14);
}

TEST(ConvWgmmaPlan, RowsWhoseWidthDividesTheTileAreWholeBoxes) {
  // 56-wide rows in 224-pixel tiles: four boxes of one row each, 14 row tiles, no wasted column.
  const ConvWgmmaShape s = conv(32, 64, 56, 56, 64, 3, 1);
  const int64_t bytes = conv_wgmma_workspace_bytes(64, 576, 32 * 64 * 56 * 56);
  const ConvWgmmaPlan p224 = plan_conv_wgmma(s, 224, true, bytes);
  ASSERT_TRUE(p224.use) << p224.reason;
  EXPECT_EQ(p224.box_w, 56);
  EXPECT_EQ(p224.rows, 4);
  EXPECT_EQ(p224.chunks, 1);
  EXPECT_EQ(p224.row_tiles, 14);
  EXPECT_EQ(p224.col_tiles, 1);
  // 56 does not divide 128: 64-column boxes as before.
  EXPECT_EQ(plan_conv_wgmma(s, 128, true, bytes).box_w, 64);
  // 28-wide rows (rounded to 32) in 128-pixel tiles: four rows per tile.
  const ConvWgmmaShape narrow = conv(2, 64, 28, 28, 64, 3, 1);
  const ConvWgmmaPlan p128 = plan_conv_wgmma(narrow, 128, true, conv_wgmma_workspace_bytes(64, 576, 2 * 64 * 28 * 28));
  ASSERT_TRUE(p128.use) << p128.reason;
  EXPECT_EQ(p128.box_w, 32);
  EXPECT_EQ(p128.rows, 4);
  EXPECT_EQ(p128.row_tiles, 7);
  // A 64-wide row in 224-pixel tiles fits neither way.
  const ConvWgmmaShape w64 = conv(2, 64, 8, 64, 64, 3, 1);
  const ConvWgmmaPlan refused = plan_conv_wgmma(w64, 224, true, conv_wgmma_workspace_bytes(64, 576, 2 * 64 * 8 * 64));
  EXPECT_FALSE(refused.use);
  EXPECT_EQ(std::string(refused.reason),
            "a tile width that is neither a multiple of the output row (rounded up to 8) nor 64 times a power of two");
}

TEST(ConvWgmmaPlan, WideRowsTakeSeveralChunks) {
  // 136 output columns: 4 chunks of 64 (one row) for 256-pixel tiles, 2 (two column tiles) for 128.
  const ConvWgmmaShape s = conv(2, 32, 6, 136, 64, 3, 1);
  const int64_t bytes = conv_wgmma_workspace_bytes(64, 32 * 9, 2 * 32 * 6 * 136);
  const ConvWgmmaPlan p256 = plan_conv_wgmma(s, 256, true, bytes), p128 = plan_conv_wgmma(s, 128, true, bytes);
  ASSERT_TRUE(p256.use && p128.use);
  EXPECT_EQ(p256.chunks, 4);
  EXPECT_EQ(p256.rows, 1);
  EXPECT_EQ(p256.col_tiles, 1);
  EXPECT_EQ(p256.row_tiles, 6);
  EXPECT_EQ(p128.chunks, 2);
  EXPECT_EQ(p128.rows, 1);
  EXPECT_EQ(p128.col_tiles, 2);
  // Odd widths and heights are fine (the NHWC copy has no width restriction).
  const ConvWgmmaShape odd = conv(3, 8, 11, 13, 24, 3, 1);
  EXPECT_TRUE(plan_conv_wgmma(odd, 128, true, conv_wgmma_workspace_bytes(24, 72, 3 * 8 * 11 * 13)).use);
}

TEST(ConvWgmmaPlan, RefusesWhatItCannotRun) {
  const ConvWgmmaShape ok = conv(2, 64, 14, 16, 64, 3, 1);
  const int64_t bytes = conv_wgmma_workspace_bytes(64, 576, 2 * 64 * 14 * 16);
  ASSERT_TRUE(plan_conv_wgmma(ok, 128, true, bytes).use);
  ConvWgmmaShape stride = ok;
  stride.stride_w = 2;
  EXPECT_EQ(std::string(plan_conv_wgmma(stride, 128, true, bytes).reason), "a stride other than 1");
  // C = 3 would run with the weight and the image padded to 8 channels (this workspace), but the
  // gather kernel is faster there: refused.
  const ConvWgmmaShape rgb = conv(2, 3, 14, 16, 64, 3, 1);
  const int64_t rgb_bytes = conv_wgmma_workspace_bytes(64, 27, 2 * 3 * 14 * 16, 3);
  EXPECT_EQ(rgb_bytes, (64 * 9 * 8 + 2 * 8 * 14 * 16) * 2);
  EXPECT_EQ(std::string(plan_conv_wgmma(rgb, 128, true, rgb_bytes).reason), "C is not a multiple of 8 (the mma.sync kernels are faster there)");
  EXPECT_EQ(std::string(plan_conv_wgmma(ok, 128, true, bytes - 2).reason), "no workspace, or one too small or unaligned");
  EXPECT_FALSE(plan_conv_wgmma(ok, 128, false, bytes).use);
  EXPECT_FALSE(plan_conv_wgmma(ok, 128, true, 0).use);
  ConvWgmmaShape mismatch = ok;
  mismatch.k = 100;
  EXPECT_EQ(std::string(plan_conv_wgmma(mismatch, 128, true, bytes).reason), "k or n does not match the window");
  ConvWgmmaShape many = conv(70000, 8, 2, 8, 8, 1, 0);
  EXPECT_EQ(std::string(plan_conv_wgmma(many, 128, true, int64_t(1) << 40).reason), "an extent past the kernel's 32-bit indices");
}

}  // namespace
}  // namespace kiln::gemm
