// Which M >= 17 kernel a 4-bit linear layer runs (kernels/quant/w4_wgmma_plan.h): GEMM variants 3
// and 4 (wgmma) only in sm_90a builds on sm_90 devices, with N a multiple of its 128-row tile; its
// token tile and split of K. The kernels themselves run on the GPU (bench/quant/run.sh).
#include <gtest/gtest.h>

#include <string>

#include "../../kernels/quant/w4_wgmma_plan.h"

namespace kiln::quant::gpu {
namespace {

TEST(W4WgmmaPlan, OnlySm90aBuildsOnSm90DevicesFromM17) {
  EXPECT_TRUE(plan_wgmma(51, 16384, 2048, true, true).use);
  const WgmmaPlan not_built = plan_wgmma(51, 16384, 2048, false, true);
  EXPECT_FALSE(not_built.use);
  EXPECT_EQ(std::string(not_built.reason), "not an sm_90a build (KILN_GEMM_SM90A undefined)");
  const WgmmaPlan other_device = plan_wgmma(51, 16384, 2048, true, false);
  EXPECT_FALSE(other_device.use);
  EXPECT_EQ(std::string(other_device.reason), "the device is not sm_90");
  EXPECT_FALSE(plan_wgmma(16, 16384, 2048, true, true).use);
  EXPECT_TRUE(plan_wgmma(17, 16384, 2048, true, true).use);
}

TEST(W4WgmmaPlan, RefusesShapesOffItsTiles) {
  const WgmmaPlan n272 = plan_wgmma(51, 272, 1024, true, true);  // a multiple of 16, not of 128
  EXPECT_FALSE(n272.use);
  EXPECT_EQ(std::string(n272.reason), "N is not a multiple of 128");
  const WgmmaPlan k64 = plan_wgmma(51, 256, 64, true, true);
  EXPECT_FALSE(k64.use);
  EXPECT_EQ(std::string(k64.reason), "K is not a multiple of 128");
}

TEST(W4WgmmaPlan, TokenTileFollowsM) {
  EXPECT_EQ(plan_wgmma(17, 4096, 1024, true, true).bn, 64);
  EXPECT_EQ(plan_wgmma(51, 4096, 1024, true, true).bn, 64);
  EXPECT_EQ(plan_wgmma(64, 4096, 1024, true, true).bn, 64);
  EXPECT_EQ(plan_wgmma(65, 4096, 1024, true, true).bn, 128);
  EXPECT_EQ(plan_wgmma(816, 4096, 1024, true, true).bn, 128);
  EXPECT_EQ(plan_wgmma(51, 4096, 1024, true, true, 128).bn, 128);  // KILN_QUANT_WGMMA_BN
  EXPECT_EQ(plan_wgmma(51, 4096, 1024, true, true, 256).bn, 64);   // not a tile: ignored
}

TEST(W4WgmmaPlan, SplitsKOnlyForSmallGridsWithinOneWave) {
  // Gemma MLP at M = 51: 128 row tiles fill the SMs; the 2048-row down projection splits.
  EXPECT_EQ(plan_wgmma(51, 16384, 2048, true, true).split, 1);
  EXPECT_EQ(plan_wgmma(51, 2048, 16384, true, true).split, 8);
  // Action expert at M = 51: gate/up (8192 rows, K = 1024) and down (1024 rows, K = 4096).
  EXPECT_EQ(plan_wgmma(51, 8192, 1024, true, true).split, 2);
  EXPECT_EQ(plan_wgmma(51, 1024, 4096, true, true).split, 8);  // 32 stages, at most kWgmmaMaxSplit
  EXPECT_EQ(plan_wgmma(816, 16384, 2048, true, true).split, 1);
  // Variant 4's 256-k stages (the last one 128 k when K is not a multiple of 256).
  EXPECT_EQ(plan_wgmma(51, 1024, 4096, true, true, 0, 256).split, 8);
  EXPECT_EQ(plan_wgmma(51, 2048, 16384, true, true, 0, 256).split, 8);
  EXPECT_EQ(plan_wgmma(51, 256, 640, true, true, 0, 256).split, 1);  // 3 stages: none to share
  for (int stage_k : {128, 256})
  for (int m : {17, 51, 200, 816}) {
    for (int n : {128, 1024, 2048, 8192}) {
      for (int k : {128, 640, 1024, 4096, 16384}) {
        const WgmmaPlan plan = plan_wgmma(m, n, k, true, true, 0, stage_k);
        const int tiles = (n / 128) * ((m + plan.bn - 1) / plan.bn), steps = (k + stage_k - 1) / stage_k;
        SCOPED_TRACE("m=" + std::to_string(m) + " n=" + std::to_string(n) +
                     " k=" + std::to_string(k) + " stage_k=" + std::to_string(stage_k));
        EXPECT_EQ(steps % plan.split, 0);
        EXPECT_TRUE(plan.split == 1 || steps / plan.split >= 2);
        EXPECT_TRUE(plan.split == 1 || tiles * plan.split <= kWgmmaSms);
        EXPECT_LE(plan.split, kWgmmaMaxSplit);
      }
    }
  }
}

}  // namespace
}  // namespace kiln::quant::gpu
