// How GEMV variant 9 splits a shape (kernels/quant/w4_gemv9_plan.h): warps per CTA and CTAs per
// 64-row tile, a thread-block cluster along K. The kernel itself runs on the GPU (bench/quant/run.sh).
#include <gtest/gtest.h>

#include "../../kernels/quant/w4_gemv9_plan.h"

namespace kiln::quant::gpu {
namespace {

auto all_resident = [](int, int) { return true; };

void expect_plan(Gemv9Plan plan, int warps, int splits, const char* what) {
  EXPECT_EQ(plan.warps, warps) << what;
  EXPECT_EQ(plan.splits, splits) << what;
}

TEST(W4Gemv9Plan, EightWarpsWhenTheRowTilesFillTheGpu) {
  // 256 tiles of 64 rows, 8 warps x 256 k = all of K: one CTA per tile, no cluster.
  expect_plan(gemv9_plan(16384, 2048, true, all_resident), 8, 1, "16384x2048");
  expect_plan(gemv9_plan(16384, 2048, false, all_resident), 8, 1, "16384x2048 without clusters");
}

TEST(W4Gemv9Plan, ClustersSplitLongK) {
  // 32 tiles: K = 16384 is 64 slices of 256, 8 CTAs of 8 warps per tile (256 CTAs).
  expect_plan(gemv9_plan(2048, 16384, true, all_resident), 8, 8, "2048x16384");
  // Clusters of 8 not all resident at once: 16 warps, clusters of 4.
  auto no_eight = [](int, int s) { return s < 8; };
  expect_plan(gemv9_plan(2048, 16384, true, no_eight), 16, 4, "2048x16384, clusters of 8 not resident");
  // Without clusters (before sm_90) one CTA cannot hold K = 16384 (16 warps x 256 = 4096).
  expect_plan(gemv9_plan(2048, 16384, false, all_resident), 0, 0, "2048x16384 without clusters");
}

TEST(W4Gemv9Plan, SmallShapesTakeFewerWarpsAndMoreCtas) {
  expect_plan(gemv9_plan(4096, 1024, true, all_resident), 2, 2, "4096x1024");
  expect_plan(gemv9_plan(1024, 4096, true, all_resident), 2, 8, "1024x4096");
  // Without clusters: the single-CTA plan with the most warps that covers K.
  expect_plan(gemv9_plan(4096, 1024, false, all_resident), 4, 1, "4096x1024 without clusters");
  // Too few CTAs whatever the split: the plan with the most CTAs (clusters of 3 and 5 here).
  expect_plan(gemv9_plan(192, 768, true, all_resident), 1, 3, "192x768");
  expect_plan(gemv9_plan(320, 2560, true, all_resident), 2, 5, "320x2560");
}

TEST(W4Gemv9Plan, RefusesShapesOffItsTiles) {
  expect_plan(gemv9_plan(208, 1024, true, all_resident), 0, 0, "N not a multiple of 64");
  expect_plan(gemv9_plan(2048, 2176, true, all_resident), 0, 0, "K not a multiple of 256");
  expect_plan(gemv9_plan(2048, 256 * 9 * 8 * 2, true, all_resident), 0, 0, "K needs more than 8 CTAs of 16 warps");
}

TEST(W4Gemv9Plan, ForcedWarps) {
  expect_plan(gemv9_plan(16384, 2048, true, all_resident, 4), 4, 2, "4 warps asked");
  expect_plan(gemv9_plan(16384, 2048, true, all_resident, 16), 0, 0, "16 warps asked: 8 slices");
}

TEST(W4Gemv9Plan, TheDefaultTakesOnlyGridsOfManyWarpsWithoutClusters) {
  EXPECT_TRUE(gemv9_default_takes(Gemv9Plan{8, 1}, 16384));   // 2048 warps
  EXPECT_TRUE(gemv9_default_takes(Gemv9Plan{8, 1}, 32768));   // Gemma's fused gate/up
  EXPECT_FALSE(gemv9_default_takes(Gemv9Plan{8, 8}, 2048));   // 2048 warps, but in clusters of 8
  EXPECT_FALSE(gemv9_default_takes(Gemv9Plan{4, 1}, 8192));   // 512 warps
  EXPECT_FALSE(gemv9_default_takes(Gemv9Plan{2, 2}, 4096));   // 256 warps
  EXPECT_FALSE(gemv9_default_takes(Gemv9Plan{}, 16384));      // no plan
}

}  // namespace
}  // namespace kiln::quant::gpu
