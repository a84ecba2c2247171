#include "kiln/runtime/arena_plan.h"

#include <gtest/gtest.h>

namespace kiln {
namespace {

using abi::ArenaBuffer;

bool overlap(const ArenaBuffer& a, const ArenaBuffer& b) {
  return a.offset < b.offset + b.bytes && b.offset < a.offset + a.bytes;
}

TEST(ArenaPlan, BuffersWithDisjointLifetimesShareBytes) {
  // a chain: t0 -> t1 -> t2 -> t3, each live for two stages.
  ArenaBuffer b[] = {{1000, 0, 1, 0}, {4000, 1, 2, 0}, {1000, 2, 3, 0}, {4000, 3, 4, 0}};
  const size_t total = abi::plan_arena(b, 4);
  EXPECT_EQ(total, abi::arena_live_bytes(b, 4)) << "the plan should reach the largest live set here";
  EXPECT_EQ(total, 1024u + 4096u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(b[i].offset % 256, 0u);
    for (int j = i + 1; j < 4; ++j) {
      if (abi::arena_lifetimes_overlap(b[i], b[j])) {
        EXPECT_FALSE(overlap(b[i], b[j])) << i << " and " << j;
      }
    }
  }
  EXPECT_TRUE(overlap(b[1], b[3])) << "t1 and t3 are never alive together: they should share";
}

TEST(ArenaPlan, BuffersAliveTogetherNeverOverlap) {
  ArenaBuffer b[] = {{300, 0, 5, 0}, {700, 1, 3, 0}, {256, 2, 2, 0}, {5000, 4, 6, 0}, {10, 6, 6, 0}, {900, 0, 0, 0}};
  const int n = 6;
  const size_t total = abi::plan_arena(b, n);
  for (int i = 0; i < n; ++i) {
    EXPECT_LE(b[i].offset + b[i].bytes, total);
    for (int j = i + 1; j < n; ++j) {
      if (abi::arena_lifetimes_overlap(b[i], b[j])) {
        EXPECT_FALSE(overlap(b[i], b[j])) << i << " and " << j;
      }
    }
  }
  EXPECT_GE(total, abi::arena_live_bytes(b, n));
  EXPECT_LE(total, 1024u + 512u + 5120u + 256u) << "worse than keeping everything apart";
}

TEST(ArenaPlan, CacheReplansOnlyWhenSymbolsChange) {
  abi::ArenaCache<2, 1> cache;
  int plans = 0;
  auto plan = [&](const int64_t* s, size_t* o) {
    ++plans;
    o[0] = 0;
    o[1] = static_cast<size_t>(s[0]);
  };
  int64_t a[] = {512}, b[] = {1024};
  EXPECT_EQ(cache.get(a, plan)[1], 512u);
  EXPECT_EQ(cache.get(a, plan)[1], 512u);
  EXPECT_EQ(plans, 1);
  EXPECT_EQ(cache.get(b, plan)[1], 1024u);
  EXPECT_EQ(plans, 2);
}

}  // namespace
}  // namespace kiln
