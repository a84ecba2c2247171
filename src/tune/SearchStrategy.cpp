#include "kiln/tune/SearchStrategy.h"

#include <algorithm>

namespace kiln::tune {

namespace {
// Proposals generated per batch slot before ranking them with the cost model.
constexpr int kProposalsPerSlot = 8;
constexpr double kGain = 0.99;  // a new best must be 1% faster to count as an improvement
}  // namespace

SearchStrategy::SearchStrategy(const SearchSpace& space, const StrategyOptions& options)
    : space_(space), options_(options), rng_(options.seed), model_(space) {}

void SearchStrategy::seed_with(const std::vector<const Record*>& records) {
  std::vector<Record> copies;
  for (const Record* r : records) copies.push_back(*r);
  tell(copies);
  measured_ = 0;  // earlier runs' trials do not count against this run's budget
  rounds_without_gain_ = 0;
}

Candidate SearchStrategy::random_candidate() {
  Candidate c;
  for (const Knob& k : space_.knobs) {
    std::uniform_int_distribution<size_t> pick(0, k.values.size() - 1);
    c[k.name] = k.values[pick(rng_)];
  }
  return c;
}

Candidate SearchStrategy::mutate(const Candidate& c) {
  Candidate m = c;
  std::uniform_int_distribution<size_t> knob(0, space_.knobs.size() - 1);
  std::uniform_int_distribution<int> twice(0, 2);
  const int changes = twice(rng_) == 0 ? 2 : 1;
  for (int n = 0; n < changes; ++n) {
    const Knob& k = space_.knobs[knob(rng_)];
    std::uniform_int_distribution<size_t> pick(0, k.values.size() - 1);
    m[k.name] = k.values[pick(rng_)];
  }
  return m;
}

std::vector<Candidate> SearchStrategy::next_batch() {
  const int budget = std::min(options_.batch, options_.trials - measured_);
  if (budget <= 0) {
    stop_reason_ = "trial budget reached";
    return {};
  }
  if (round_ > 0 && rounds_without_gain_ >= options_.patience) {
    stop_reason_ = "no improvement";
    return {};
  }
  std::vector<Candidate> batch;
  std::set<std::string> in_batch;
  auto take = [&](const Candidate& c) {
    const std::string t = candidate_text(c);
    if (static_cast<int>(batch.size()) >= budget || seen_.count(t) || in_batch.count(t)) return;
    if (!space_.illegal_reason(c).empty()) return;
    in_batch.insert(t);
    batch.push_back(c);
  };
  if (round_ == 0) {
    take(space_.default_candidate());
    for (const Candidate& c : space_.known_good()) take(c);
  }
  // Parents: the best "ok" candidates so far.
  std::vector<const Record*> ok;
  for (const Record& r : history_) {
    if (r.ok()) ok.push_back(&r);
  }
  std::sort(ok.begin(), ok.end(), [](const Record* a, const Record* b) { return a->median_us < b->median_us; });
  const size_t parents = std::min<size_t>(ok.size(), 4);
  std::vector<Candidate> proposals;
  const int slots = budget - static_cast<int>(batch.size());
  for (int i = 0; i < slots * kProposalsPerSlot && parents > 0; ++i) {
    std::uniform_int_distribution<size_t> pick(0, parents - 1);
    Candidate c = mutate(ok[pick(rng_)]->knobs);
    if (i % 4 == 3 && parents > 1) {  // crossover: each knob from one of two parents
      const Candidate& other = ok[pick(rng_)]->knobs;
      std::uniform_int_distribution<int> coin(0, 1);
      for (auto& [k, v] : c) {
        if (coin(rng_) && other.count(k)) v = other.at(k);
      }
    }
    proposals.push_back(c);
  }
  // Ranked by the cost model: three quarters of the free slots from the top, the rest at random.
  std::stable_sort(proposals.begin(), proposals.end(), [&](const Candidate& a, const Candidate& b) {
    return model_.predict_us(a) < model_.predict_us(b);
  });
  const int exploit = batch.size() < static_cast<size_t>(budget) ? (slots * 3 + 3) / 4 : 0;
  for (const Candidate& c : proposals) {
    if (static_cast<int>(batch.size()) >= budget - (slots - exploit)) break;
    take(c);
  }
  // Random points fill the rest (and everything when nothing has been measured yet).
  for (int tries = 0; static_cast<int>(batch.size()) < budget && tries < 64 * budget; ++tries) take(random_candidate());
  if (batch.empty()) stop_reason_ = "search space exhausted";
  ++round_;
  return batch;
}

void SearchStrategy::tell(const std::vector<Record>& results) {
  const double before = best_us_;
  for (const Record& r : results) {
    seen_.insert(candidate_text(r.knobs));
    history_.push_back(r);
    ++measured_;
    if (r.ok() && (best_us_ == 0 || r.median_us < best_us_)) best_us_ = r.median_us;
  }
  rounds_without_gain_ = (before > 0 && best_us_ > before * kGain) ? rounds_without_gain_ + 1 : 0;
  std::vector<const Record*> all;
  for (const Record& r : history_) all.push_back(&r);
  model_.train(all);
}

}  // namespace kiln::tune
