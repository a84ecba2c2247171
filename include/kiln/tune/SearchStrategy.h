#pragma once
// Chooses what to measure next (TVM MetaSchedule's "search strategy"): first the default and the
// space's known-good points, then an evolutionary search: the best measured candidates are
// mutated (one or two knobs changed) and crossed over, the proposals that are new and legal are
// ranked by the cost model, and a batch is taken from the top (three quarters) and at random (the
// rest, to explore). The search stops at the trial budget, when the space is exhausted, or after
// `patience` batches without a 1% improvement.
#include <random>
#include <set>
#include <vector>

#include "kiln/tune/CostModel.h"

namespace kiln::tune {

struct StrategyOptions {
  int trials = 64;      // candidates measured at most (the default included)
  int batch = 16;       // candidates per round
  int patience = 2;     // rounds without a 1% improvement before stopping
  uint64_t seed = 7;
};

class SearchStrategy {
 public:
  SearchStrategy(const SearchSpace& space, const StrategyOptions& options);
  // Records already measured for this kernel (a previous run): not proposed again.
  void seed_with(const std::vector<const Record*>& records);
  // The next batch; empty when the search is over.
  std::vector<Candidate> next_batch();
  // Results of the last batch (any status).
  void tell(const std::vector<Record>& results);
  int measured() const { return measured_; }
  double best_us() const { return best_us_; }
  const char* stop_reason() const { return stop_reason_; }

 private:
  Candidate mutate(const Candidate& c);
  Candidate random_candidate();
  const SearchSpace& space_;
  StrategyOptions options_;
  std::mt19937_64 rng_;
  CostModel model_;
  std::vector<Record> history_;
  std::set<std::string> seen_;
  int measured_ = 0, rounds_without_gain_ = 0, round_ = 0;
  double best_us_ = 0;
  const char* stop_reason_ = "";
};

}  // namespace kiln::tune
