#include "kiln/tune/CostModel.h"

#include <algorithm>
#include <cmath>

namespace kiln::tune {

std::vector<double> CostModel::coordinates(const Candidate& c) const {
  std::vector<double> x;
  for (const Knob& k : space_.knobs) {
    auto it = c.find(k.name);
    const auto v = it == c.end() ? k.values.end() : std::find(k.values.begin(), k.values.end(), it->second);
    // Index of the value, scaled to [0, 1] so every knob weighs the same.
    const double index = v == k.values.end() ? 0.0 : static_cast<double>(v - k.values.begin());
    x.push_back(k.values.size() > 1 ? index / static_cast<double>(k.values.size() - 1) : 0.0);
  }
  return x;
}

void CostModel::train(const std::vector<const Record*>& records) {
  points_.clear();
  log_times_.clear();
  for (const Record* r : records) {
    if (!r->ok()) continue;
    points_.push_back(coordinates(r->knobs));
    log_times_.push_back(std::log(r->median_us));
  }
}

double CostModel::predict_us(const Candidate& c) const {
  if (points_.empty()) return 0;
  const std::vector<double> x = coordinates(c);
  std::vector<std::pair<double, double>> by_distance;  // (distance^2, log time)
  for (size_t i = 0; i < points_.size(); ++i) {
    double d = 0;
    for (size_t j = 0; j < x.size(); ++j) d += (x[j] - points_[i][j]) * (x[j] - points_[i][j]);
    by_distance.emplace_back(d, log_times_[i]);
  }
  std::sort(by_distance.begin(), by_distance.end());
  double weight = 0, sum = 0;
  for (size_t i = 0; i < by_distance.size() && i < static_cast<size_t>(k_); ++i) {
    if (by_distance[i].first == 0) return std::exp(by_distance[i].second);
    const double w = 1.0 / by_distance[i].first;
    weight += w, sum += w * by_distance[i].second;
  }
  return std::exp(sum / weight);
}

}  // namespace kiln::tune
