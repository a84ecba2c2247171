// Stream-K for the Hopper GEMM (kernels/gemm/streamk_plan.h): where the plan takes it, that the
// CTAs' walks cover every (tile, k-step) once with equal shares, that each cut tile has one
// finalizer that finds exactly its contributors, and that the workspace contract
// (split_k_workspace_bytes above M = 256, and lowering's copy of it) is enough for the plans of
// the default tiles. The kernel itself runs on the GPU (bench/gemm/gemm_bench.cu).
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "../../kernels/gemm/streamk_plan.h"

namespace kiln::gemm {
namespace {

constexpr int64_t kSlot128x128 = 128 * 128 * 4, kBigWorkspace = int64_t(1) << 30;

TEST(StreamKPlan, TakesTheShapesWhoseLastWaveIsMostlyIdle) {
  // 816 x 4096 x 4096 in 128 x 128 tiles: 224 tiles on 132 SMs (85% of 2 waves): all shared out.
  StreamKPlan p = plan_stream_k(224, 64, 132, kBigWorkspace, kSlot128x128);
  ASSERT_TRUE(p.use) << p.reason;
  EXPECT_EQ(p.dp_tiles, 0);
  EXPECT_EQ(p.sk_tiles, 224);
  EXPECT_EQ(p.grid, 132);
  // 816 x 2048 x 16384: 112 tiles, fewer than the SMs.
  p = plan_stream_k(112, 256, 132, kBigWorkspace, kSlot128x128);
  ASSERT_TRUE(p.use) << p.reason;
  EXPECT_EQ(p.sk_tiles, 112);
  EXPECT_EQ(p.grid, 132);
  // 300 tiles (3 waves, 76%): the first wave stays whole tiles, the rest is shared out.
  p = plan_stream_k(300, 32, 132, kBigWorkspace, kSlot128x128);
  ASSERT_TRUE(p.use) << p.reason;
  EXPECT_EQ(p.dp_tiles, 132);
  EXPECT_EQ(p.sk_tiles, 168);
  // Few tiles: at most kStreamKMaxShare CTAs per tile.
  p = plan_stream_k(10, 64, 132, kBigWorkspace, kSlot128x128);
  ASSERT_TRUE(p.use) << p.reason;
  EXPECT_EQ(p.grid, 10 * kStreamKMaxShare);
}

TEST(StreamKPlan, RefusesWithAReason) {
  EXPECT_EQ(std::string(plan_stream_k(896, 32, 132, kBigWorkspace, kSlot128x128).reason), "whole tiles fill >= 90% of the waves");
  EXPECT_EQ(std::string(plan_stream_k(264, 32, 132, kBigWorkspace, kSlot128x128).reason), "whole tiles fill >= 90% of the waves");
  EXPECT_EQ(std::string(plan_stream_k(224, 4, 132, kBigWorkspace, kSlot128x128).reason), "too few k-steps per tile");
  EXPECT_EQ(std::string(plan_stream_k(224, 64, 132, 132 * kSlot128x128, kSlot128x128).reason), "workspace too small");
  EXPECT_EQ(std::string(plan_stream_k(300, 64, 200, kBigWorkspace, kSlot128x128).reason), "more SMs than stream-K slots");
  EXPECT_FALSE(plan_stream_k(0, 64, 132, kBigWorkspace, kSlot128x128).use);
}

// Every CTA's walk, as the kernel does it (WgmmaWork::next's stream-K part): the pieces cover each
// (tile, k-step) once, contributors come first and finalizers last in a CTA's walk, every cut tile
// has one finalizer whose contributors (stream_k_contributes from the next CTA on) are exactly the
// CTAs with a contributor piece of it, and the CTAs' shares differ by at most one k-step.
void check_walk(const StreamKPlan& plan) {
  SCOPED_TRACE("sk_tiles " + std::to_string(plan.sk_tiles) + ", k_steps " + std::to_string(plan.k_steps) + ", grid " +
               std::to_string(plan.grid));
  std::vector<int> covered(size_t(plan.sk_iters()), 0);
  std::map<int64_t, int> finalizer;                  // tile -> CTA
  std::map<int64_t, std::set<int>> contributors;     // tile -> CTAs
  int64_t least = plan.sk_iters(), most = 0;
  for (int c = 0; c < plan.grid; ++c) {
    const int64_t begin = plan.sk_begin(c), end = plan.sk_begin(c + 1);
    least = std::min(least, end - begin), most = std::max(most, end - begin);
    ASSERT_GT(end, begin) << "CTA " << c << " has no k-steps";
    int pieces = 0;
    for (int64_t i = begin; i < end; ++pieces) {
      const StreamKPiece p = stream_k_piece(plan, i, end);
      ASSERT_LT(p.ks0, p.ks1);
      for (int ks = p.ks0; ks < p.ks1; ++ks) ++covered[size_t(p.tile * plan.k_steps + ks)];
      const int64_t next = p.tile * plan.k_steps + p.ks1;
      if (p.role == StreamKRole::Contributor) {
        EXPECT_EQ(pieces, 0) << "CTA " << c << ": a contributor piece that is not its first";
        contributors[p.tile].insert(c);
      }
      if (p.role == StreamKRole::Finalizer) {
        EXPECT_EQ(next, end) << "CTA " << c << ": a finalizer piece that is not its last";
        EXPECT_EQ(finalizer.count(p.tile), 0u);
        finalizer[p.tile] = c;
      }
      i = next;
    }
  }
  for (size_t i = 0; i < covered.size(); ++i) ASSERT_EQ(covered[i], 1) << "flattened k-step " << i;
  EXPECT_LE(most - least, 1);
  for (const auto& [tile, ctas] : contributors) {
    ASSERT_EQ(finalizer.count(tile), 1u) << "tile " << tile << " is cut but has no finalizer";
    std::set<int> found;
    for (int c = finalizer[tile] + 1; stream_k_contributes(plan, c, tile); ++c) found.insert(c);
    EXPECT_EQ(found, ctas) << "tile " << tile;
  }
  for (const auto& [tile, c] : finalizer) EXPECT_EQ(contributors.count(tile), 1u) << "tile " << tile << ": a finalizer alone";
}

TEST(StreamKPlan, WalksCoverEveryKStepOnceAndFinalizersFindTheirContributors) {
  check_walk(plan_stream_k(224, 64, 132, kBigWorkspace, kSlot128x128));
  check_walk(plan_stream_k(112, 256, 132, kBigWorkspace, kSlot128x128));
  check_walk(plan_stream_k(3, 100, 132, kBigWorkspace, kSlot128x128));  // a tile cut among 4 CTAs
  std::mt19937 rng(7);
  int planned = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const int sms = 8 + int(rng() % 150);
    const int64_t tiles = 1 + int64_t(rng() % 600), k_steps = 1 + int64_t(rng() % 300);
    const StreamKPlan p = plan_stream_k(tiles, k_steps, sms, kBigWorkspace, kSlot128x128);
    if (!p.use) continue;
    ++planned;
    EXPECT_EQ(p.dp_tiles + p.sk_tiles, tiles);
    EXPECT_EQ(p.dp_tiles % p.grid, 0) << "data-parallel tiles fill whole waves";
    EXPECT_LE(p.grid, sms);
    check_walk(p);
    if (HasFatalFailure()) return;
  }
  EXPECT_GT(planned, 100);
}

// The contract (stream_k_workspace_bytes, what generated functions reserve above M = 256) is
// enough for every plan the default Hopper tiles (128 x 128, 128 x 256) want on a 132-SM device.
TEST(StreamKPlan, TheWorkspaceContractFitsTheDefaultTiles) {
  for (int64_t m : {257, 300, 816, 1576, 4096, 8192})
    for (int64_t n : {64, 256, 768, 2048, 3000, 4096, 16384})
      for (int64_t bn : {128, 256}) {
        const int64_t tiles = (m + 127) / 128 * ((n + bn - 1) / bn);
        const StreamKPlan want = plan_stream_k(tiles, 64, 132, kBigWorkspace, 128 * bn * 4);
        if (!want.use) continue;
        const StreamKPlan got = plan_stream_k(tiles, 64, 132, stream_k_workspace_bytes(m, n), 128 * bn * 4);
        EXPECT_TRUE(got.use) << m << " x " << n << ", BN " << bn << ": " << got.reason;
      }
}

}  // namespace
}  // namespace kiln::gemm
