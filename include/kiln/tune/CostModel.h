#pragma once
// Predicts a candidate's time from the measured ones (TVM MetaSchedule's "cost model"), so that
// the search strategy spends measurements on the most promising of many proposals. A small
// model of our own: k-nearest neighbours over the knobs, each knob a coordinate at the index of
// its value in the space, log-time averaged with weights 1 / distance^2. Trained on every "ok"
// record of the kernel; candidates far from all of them get the mean (the strategy's random
// share explores those).
#include <vector>

#include "kiln/tune/Records.h"
#include "kiln/tune/SearchSpace.h"

namespace kiln::tune {

class CostModel {
 public:
  explicit CostModel(const SearchSpace& space, int neighbours = 4) : space_(space), k_(neighbours) {}
  void train(const std::vector<const Record*>& records);
  double predict_us(const Candidate& c) const;  // 0 when untrained
  size_t size() const { return points_.size(); }

 private:
  std::vector<double> coordinates(const Candidate& c) const;
  const SearchSpace& space_;
  int k_;
  std::vector<std::vector<double>> points_;
  std::vector<double> log_times_;
};

}  // namespace kiln::tune
