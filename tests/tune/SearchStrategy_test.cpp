#include "kiln/tune/SearchStrategy.h"

#include <gtest/gtest.h>

#include <cmath>

#include "TuneTestModels.h"

namespace kiln::tune {
namespace {

// A synthetic landscape over the softmax space: fastest at row_threads=512, vector_bytes=16,
// row_cache_bytes=256; one point is "wrong" and must never be best.
Record measure(const Candidate& c) {
  Record r;
  r.knobs = c;
  if (c.at("row_threads") == 64 && c.at("vector_bytes") == 4) {
    r.status = "wrong";
    return r;
  }
  const double rt = c.at("row_threads") == 0 ? 256 : static_cast<double>(c.at("row_threads"));
  r.median_us = 10 + std::abs(std::log2(rt / 512.0)) * 3 + (16.0 / static_cast<double>(c.at("vector_bytes")) - 1) * 2 +
                (c.at("row_cache_bytes") == 256 ? 0 : 1);
  return r;
}

TEST(SearchStrategy, StartsFromDefaultAndKnownGoodThenRespectsTheBudget) {
  const SearchSpace space = search_space(test::only_kernel(test::softmax_graph(64, 4096, DType::Float16)), codegen::Target::Cuda);
  StrategyOptions o;
  o.trials = 20, o.batch = 8, o.patience = 100;
  SearchStrategy s(space, o);
  std::vector<Candidate> first = s.next_batch();
  ASSERT_EQ(first.size(), 8u);
  EXPECT_EQ(candidate_text(first[0]), candidate_text(space.default_candidate()));
  EXPECT_EQ(candidate_text(first[1]), candidate_text(space.known_good()[0]));
  std::set<std::string> all;
  int total = 0;
  for (std::vector<Candidate> batch = first; !batch.empty(); batch = s.next_batch()) {
    std::vector<Record> results;
    for (const Candidate& c : batch) {
      EXPECT_TRUE(all.insert(candidate_text(c)).second) << "proposed twice: " << candidate_text(c);
      EXPECT_EQ(space.illegal_reason(c), "");
      results.push_back(measure(c));
    }
    total += static_cast<int>(batch.size());
    s.tell(results);
  }
  EXPECT_EQ(total, 20);
  EXPECT_STREQ(s.stop_reason(), "trial budget reached");
  EXPECT_DOUBLE_EQ(s.best_us(), 10.0);  // the known-good row_threads=512 point
}

TEST(SearchStrategy, StopsWithoutImprovementAndSkipsEarlierRecords) {
  const SearchSpace space = search_space(test::only_kernel(test::softmax_graph(64, 4096, DType::Float16)), codegen::Target::Cuda);
  StrategyOptions o;
  o.trials = 1000, o.batch = 4, o.patience = 2;
  SearchStrategy s(space, o);
  Record earlier = measure(space.default_candidate());
  s.seed_with({&earlier});
  int rounds = 0;
  for (std::vector<Candidate> batch = s.next_batch(); !batch.empty(); batch = s.next_batch()) {
    for (const Candidate& c : batch) EXPECT_NE(candidate_text(c), candidate_text(space.default_candidate()));
    std::vector<Record> results;
    for (const Candidate& c : batch) results.push_back(measure(c));
    s.tell(results);
    ASSERT_LT(++rounds, 100);
  }
  EXPECT_STREQ(s.stop_reason(), "no improvement");
  EXPECT_LT(s.measured(), static_cast<int>(space.size()));  // stopped before enumerating the space
}

TEST(CostModel, InterpolatesFromNeighbours) {
  const SearchSpace space = search_space(test::only_kernel(test::softmax_graph(64, 4096, DType::Float16)), codegen::Target::Cuda);
  CostModel model(space);
  EXPECT_EQ(model.predict_us(space.default_candidate()), 0);
  Record fast = measure(space.default_candidate());
  Candidate slow_c = space.default_candidate();
  slow_c["vector_bytes"] = 4;
  Record slow = measure(slow_c);
  model.train({&fast, &slow});
  EXPECT_DOUBLE_EQ(model.predict_us(fast.knobs), fast.median_us);
  Candidate near_fast = fast.knobs;
  near_fast["row_cache_bytes"] = 0;
  EXPECT_LT(model.predict_us(near_fast), (fast.median_us + slow.median_us) / 2);
}

}  // namespace
}  // namespace kiln::tune
