#include "kiln/tune/Tuner.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kiln/onnx/Import.h"
#include "kiln/support/Error.h"
#include "kiln/support/Parallel.h"
#include "kiln/tune/Runner.h"

namespace kiln::tune {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

std::string quote(const std::string& s) { return "'" + s + "'"; }

std::string self_exe() {
  std::error_code ec;
  const fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("kiln") : p.string();
}

std::string duration_text(double seconds) {
  const int s = static_cast<int>(seconds + 0.5);
  char text[32];
  if (s >= 60) std::snprintf(text, sizeof text, "%dm%02ds", s / 60, s % 60);
  else std::snprintf(text, sizeof text, "%ds", s);
  return text;
}

// What the concurrent kernel loops share: the records file and the progress line.
struct Progress {
  std::mutex mutex;
  Clock::time_point start = Clock::now();
  size_t kernels = 0, kernels_done = 0;
  int trials_planned = 0, trials_done = 0;
  bool show = true;

  // One line per finished kernel, then the overall bar (redrawn in place on a terminal).
  void kernel_done(const KernelReport& r) {
    if (!show) return;
    std::fprintf(stderr, "\r%-110s\r%s: %d trials, default %.2f us, best %.2f us (%.2fx), %s\n", "", r.kernel.c_str(),
                 r.trials, r.default_us, r.best_us, r.default_us > 0 && r.best_us > 0 ? r.default_us / r.best_us : 0.0,
                 duration_text(r.seconds).c_str());
    bar();
  }
  void bar() {
    if (!show) return;
    constexpr int kWidth = 24;
    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    const int filled = trials_planned > 0 ? std::min(kWidth, trials_done * kWidth / trials_planned) : 0;
    // Early stops end kernels before their trial budget: the ETA is an upper bound.
    const double eta = trials_done > 0 ? elapsed / trials_done * std::max(0, trials_planned - trials_done) : 0;
    std::fprintf(stderr, "\r[%s%s] %zu/%zu kernels, %d trials measured, %s elapsed, ETA <= %s   ",
                 std::string(static_cast<size_t>(filled), '#').c_str(), std::string(static_cast<size_t>(kWidth - filled), '.').c_str(),
                 kernels_done, kernels, trials_done, duration_text(elapsed).c_str(), duration_text(eta).c_str());
    std::fflush(stderr);
  }
};

// The measuring slots: a GPU each on the CUDA target (its number), a worker process each on the
// CPU target (0 .. --workers - 1).
std::vector<int> measuring_slots(const TuneOptions& options) {
  if (options.target == codegen::Target::Cuda) return options.gpus;
  std::vector<int> slots;
  for (int w = 0; w < std::max(1, options.cpu_workers); ++w) slots.push_back(w);
  return slots;
}

// Where a loop's worker runs: its slot, and its own folder (worker<slot>, worker<slot>_<i> for the
// i-th further loop on the slot), so that no two workers write one folder at once.
struct Seat {
  int slot = 0;
  std::string dir;
};

// The seats of each search loop: with at least as many loops as slots, one seat each, the loops
// dealt round the slots; with fewer (fewer kernels than slots), each loop gets several slots.
std::vector<std::vector<Seat>> loop_seats(const std::vector<int>& slots, size_t loops) {
  std::vector<std::vector<Seat>> seats(loops);
  if (loops >= slots.size()) {
    for (size_t l = 0; l < loops; ++l) {
      const size_t round = l / slots.size();
      const int slot = slots[l % slots.size()];
      seats[l].push_back({slot, "worker" + std::to_string(slot) + (round ? "_" + std::to_string(round) : "")});
    }
  } else {
    for (size_t j = 0; j < slots.size(); ++j) seats[j % loops].push_back({slots[j], "worker" + std::to_string(slots[j])});
  }
  return seats;
}

// Compilers per worker: --build-jobs, or (0) the cores this process may run on (its affinity
// mask: taskset and cgroup cpusets count) shared by the workers that run at once.
int build_jobs_per_worker(const TuneOptions& options, size_t workers) {
  if (options.build_jobs > 0) return options.build_jobs;
  return std::max(1, available_cores() / static_cast<int>(std::max<size_t>(1, workers)));
}

// Builds `batch` here, in one pool of the cores of all the round's workers (the template units,
// longest first, with the candidates' own units), and computes the reference outputs beside it
// (cached in the shared reference folder, where the workers read them). One pool rather than a
// pool per worker: the template units are shared work, and split between workers' pools, the
// worker that took the longest ones ended its build last while the others waited (run s30a).
// A candidate whose source equals an earlier one's gets that one's library (measured again, by
// whichever worker has it). Writes a line to <work_dir>/rounds.log.
std::vector<BuiltCandidate> build_batch(const TuneOptions& options, const codegen::KernelDefinition& kernel,
                                        const SearchSpace& space, const std::vector<Candidate>& batch, int round,
                                        int jobs, const std::string& object_cache, const std::string& reference_dir) {
  const auto t0 = Clock::now();
  BuildRequest request;
  request.target = options.target;
  request.arch = options.arch;
  request.work_dir = fs::absolute(fs::path(options.work_dir) / "build").string();
  request.jobs = jobs;
  request.object_cache = object_cache;
  // The reference, lowered here, compiles and runs on a thread beside the build. One that fails is
  // left to the workers, which compute it again and report why.
  RunRequest run = options.run;
  run.target = options.target;
  std::unique_ptr<Runner> runner;
  try {
    runner = std::make_unique<Runner>(kernel, run, reference_dir);
  } catch (const std::exception&) {
  }
  double reference_s = 0;
  std::thread reference([&] {
    if (!runner) return;
    const auto r0 = Clock::now();
    try {
      runner->compute_reference();
    } catch (const std::exception&) {
    }
    reference_s = std::chrono::duration<double>(Clock::now() - r0).count();
  });
  std::vector<BuiltCandidate> built;
  BuildTimes times;
  try {
    built = build_candidates(kernel, space, batch, request, &times);
  } catch (...) {
    reference.join();
    throw;
  }
  const double build_s = std::chrono::duration<double>(Clock::now() - t0).count();
  reference.join();
  for (BuiltCandidate& b : built) {
    if (b.same_as < 0) continue;
    const BuiltCandidate& first = built[static_cast<size_t>(b.same_as)];
    b.library = first.library, b.error = first.error, b.illegal = first.illegal;
    b.registers = first.registers, b.spill_bytes = first.spill_bytes, b.same_as = -1;
  }
  std::ofstream(fs::path(options.work_dir) / "rounds.log", std::ios::app)
      << fmt::format("{} round {}: {} candidates built in {:.1f} s, {} compiler{} at once: lowering {:.1f} s, compiling "
                     "{:.1f} s ({} template units: {:.1f} s in all, longest {:.1f} s; {} candidates' units: {:.1f} s in all, "
                     "longest {:.1f} s), linking {:.1f} s; {} reused from earlier rounds; the reference {:.1f} s beside it\n",
                     kernel.name, round, batch.size(), build_s, jobs, jobs == 1 ? "" : "s", times.lowering_s, times.compile_s,
                     times.units, times.units_s, times.longest_unit_s, times.candidates, times.candidates_s,
                     times.longest_candidate_s, times.link_s, times.reused, reference_s);
  return built;
}

// Measures `batch` in worker processes, one shard per slot (worker<slot>/ holds its files); a
// record per candidate, in batch order.
std::vector<Record> measure_batch(const TuneOptions& options, const codegen::KernelDefinition& kernel,
                                  const SearchSpace& space, const KernelKey& key, const std::vector<Candidate>& batch,
                                  int round, const std::vector<Seat>& seats, int build_jobs) {
  const bool cuda = options.target == codegen::Target::Cuda;
  const size_t workers = std::min(batch.size(), seats.size());
  std::vector<WorkerTask> tasks(workers);
  for (size_t w = 0; w < workers; ++w) {
    WorkerTask& t = tasks[w];
    t.model = fs::absolute(options.model).string();
    t.nodes = options.nodes;
    t.kernel = kernel.name;
    t.target = options.target;
    t.arch = options.arch;
    t.work_dir = fs::absolute(fs::path(options.work_dir) / seats[w].dir).string();
    t.build_jobs = build_jobs;
    t.object_cache = fs::absolute(fs::path(options.work_dir) / "objects").string();
    t.reference_dir = fs::absolute(fs::path(options.work_dir) / "reference").string();
    if (cuda) t.device_lock = fs::absolute(fs::path(options.work_dir) / ("gpu" + std::to_string(seats[w].slot) + ".lock")).string();
    t.run = options.run;
    t.run.target = options.target;
  }
  const std::vector<BuiltCandidate> built =
      build_batch(options, kernel, space, batch, round, build_jobs * static_cast<int>(workers), tasks[0].object_cache, tasks[0].reference_dir);
  for (size_t i = 0; i < batch.size(); ++i) {
    tasks[i % workers].candidates.push_back(batch[i]);
    tasks[i % workers].built.push_back(built[i]);
  }
  const std::string exe = options.kiln_exe.empty() ? self_exe() : options.kiln_exe;
  std::vector<std::string> outs(workers), logs(workers);
  std::vector<int> status(workers, 0);
  std::vector<std::thread> threads;
  for (size_t w = 0; w < workers; ++w) {
    fs::create_directories(tasks[w].work_dir);
    const std::string stem = tasks[w].work_dir + "/" + kernel.name + "_round" + std::to_string(round);
    outs[w] = stem + ".jsonl", logs[w] = stem + ".log";
    fs::remove(outs[w]);
    std::ofstream(stem + ".task.json") << task_to_json(tasks[w]);
    std::string cmd;
    if (cuda) cmd += "CUDA_VISIBLE_DEVICES=" + std::to_string(seats[w].slot) + " ";
    cmd += "timeout " + std::to_string(options.worker_timeout_s) + " " + quote(exe) + " tune-worker " +
           quote(stem + ".task.json") + " -o " + quote(outs[w]) + " > " + quote(logs[w]) + " 2>&1";
    threads.emplace_back([cmd, &status, w] { status[w] = std::system(cmd.c_str()); });
  }
  for (std::thread& t : threads) t.join();
  std::map<std::string, Record> reported;
  for (size_t w = 0; w < workers; ++w) {
    std::ifstream in(outs[w]);
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
      const Record r = record_from_json(line, outs[w] + ":" + std::to_string(n));
      reported[candidate_text(r.knobs)] = r;
    }
  }
  std::vector<Record> results;
  for (size_t i = 0; i < batch.size(); ++i) {
    auto it = reported.find(candidate_text(batch[i]));
    if (it != reported.end()) {
      results.push_back(it->second);
      continue;
    }
    const size_t w = i % workers;
    const int code = WIFEXITED(status[w]) ? WEXITSTATUS(status[w]) : -1;
    Record r;
    r.kernel = kernel.name;
    r.key = key;
    r.target = codegen::target_name(options.target);
    r.knobs = batch[i];
    r.status = code == 124 ? "timeout" : "run_failed";
    r.error = (code == 124 ? "the worker ran past " + std::to_string(options.worker_timeout_s) + " s"
                           : "the worker exited with status " + std::to_string(code)) +
              " before measuring it (log: " + logs[w] + ")";
    results.push_back(r);
  }
  return results;
}

// The search of one kernel: rounds of batches measured on `slots` until the strategy stops.
KernelReport tune_kernel(const TuneOptions& options, const codegen::KernelDefinition& kernel, const Database& db,
                         const DeviceInfo& device, const std::vector<Seat>& seats, int build_jobs, Progress& progress) {
  const auto start = Clock::now();
  KernelReport report;
  report.kernel = kernel.name;
  const KernelKey key = kernel_key(kernel);
  report.hash = key.hash, report.shape = key.shape, report.dtypes = key.dtypes;
  const SearchSpace space = search_space(kernel, options.target, available_cores());
  if (space.knobs.empty()) {
    report.note = "not tuned: no knob changes this kernel's code (its stages are template calls or in their epilogues); "
                  "the default schedule stays";
    report.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    return report;
  }
  // --batch is per slot: a loop with several slots measures as many more candidates per round.
  StrategyOptions strategy_options = options.strategy;
  strategy_options.batch *= static_cast<int>(seats.size());
  SearchStrategy strategy(space, strategy_options);
  // Earlier records of this kernel on this target: not measured again (same device only: times
  // from another device do not compare).
  std::vector<const Record*> earlier;
  for (const Record* r : db.of(key, codegen::target_name(options.target))) {
    if (r->device == device.name) earlier.push_back(r);
  }
  strategy.seed_with(earlier);
  const std::string default_text = candidate_text(space.default_candidate());
  std::vector<Record> mine;
  for (const Record* r : earlier) mine.push_back(*r);
  for (int round = 0;; ++round) {
    const std::vector<Candidate> batch = strategy.next_batch();
    if (batch.empty()) break;
    const std::vector<Record> results = measure_batch(options, kernel, space, key, batch, round, seats, build_jobs);
    strategy.tell(results);
    for (const Record& r : results) {
      mine.push_back(r);
      ++report.trials;
      r.ok() ? ++report.ok : ++report.failed;
    }
    std::lock_guard<std::mutex> lock(progress.mutex);
    if (!options.records.empty()) Database::append(options.records, results);
    progress.trials_done += static_cast<int>(results.size());
    progress.bar();
  }
  for (const Record& r : mine) {
    if (r.ok() && candidate_text(r.knobs) == default_text) report.default_us = r.median_us;
  }
  const Record* best = nullptr;
  for (const Record& r : mine) {
    if (r.ok() && (!best || r.median_us < best->median_us)) best = &r;
  }
  if (best) report.best_us = best->median_us, report.best_knobs = candidate_text(best->knobs);
  report.note = strategy.stop_reason();
  if (!best) report.note = "no candidate ran correctly; the default schedule stays";
  else if (report.default_us == 0) report.note += "; the default schedule did not run correctly";
  report.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return report;
}

}  // namespace

// Kernels are tuned concurrently, as many at once as there are slots (GPUs, or CPU workers), each
// loop taking the next kernel when its last one stops; with fewer kernels than slots, a kernel's
// batches are split over several slots. So a model of many kernels keeps every GPU measuring, and
// a single kernel still uses them all.
std::vector<KernelReport> tune_model(const TuneOptions& options) {
  const Graph graph = load_onnx(options.model);
  const std::string model_name = graph.name.empty() ? fs::path(options.model).stem().string() : graph.name;
  const std::vector<codegen::KernelDefinition> kernels = codegen::kernel_definitions(graph, model_name, options.nodes);
  Database db;
  if (!options.records.empty()) db.load(options.records);
  const DeviceInfo device = device_info(options.target);
  const std::vector<int> slots = measuring_slots(options);
  const size_t per_slot = options.target == codegen::Target::Cuda ? static_cast<size_t>(std::max(1, options.loops_per_gpu)) : 1;
  const size_t loops = std::max<size_t>(1, std::min(kernels.size(), slots.size() * per_slot));
  const std::vector<std::vector<Seat>> seats = loop_seats(slots, loops);
  // Loops sharing a GPU rarely build at the same moment (one builds while another measures): the
  // compilers are counted per slot.
  const int build_jobs = build_jobs_per_worker(options, slots.size());
  Progress progress;
  progress.show = options.progress;
  progress.kernels = kernels.size();
  progress.trials_planned = static_cast<int>(kernels.size()) * options.strategy.trials;
  std::vector<KernelReport> reports(kernels.size());
  std::atomic<size_t> next{0};
  std::vector<std::exception_ptr> errors(loops);
  std::vector<std::thread> threads;
  for (size_t l = 0; l < loops; ++l) {
    threads.emplace_back([&, l] {
      try {
        for (size_t k; (k = next++) < kernels.size();) {
          try {
            reports[k] = tune_kernel(options, kernels[k], db, device, seats[l], build_jobs, progress);
          } catch (const std::exception& e) {
            // One kernel that cannot be searched (it does not lower, a record cannot be written)
            // leaves the others to go on; the report says why.
            reports[k] = KernelReport();
            reports[k].kernel = kernels[k].name;
            reports[k].note = std::string("not tuned: ") + e.what();
          }
          std::lock_guard<std::mutex> lock(progress.mutex);
          ++progress.kernels_done;
          progress.trials_planned -= options.strategy.trials - reports[k].trials;
          progress.kernel_done(reports[k]);
        }
      } catch (...) {
        errors[l] = std::current_exception();
        next = kernels.size();  // the other loops stop after their current kernel
      }
    });
  }
  for (std::thread& t : threads) t.join();
  if (options.progress) std::fprintf(stderr, "\n");
  for (const std::exception_ptr& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  return reports;
}

std::string report_markdown(const std::vector<KernelReport>& reports, const TuneOptions& options) {
  std::ostringstream md;
  md << "# kiln tune report\n\nmodel: `" << options.model << "`, target: "
     << (options.target == codegen::Target::Cuda ? options.arch : std::string("cpu")) << ", trials per kernel: "
     << options.strategy.trials << ", records: `" << options.records << "`\n\n";
  md << "| kernel | shape | dtypes | default (us) | best (us) | speed-up | trials (ok / failed) | time | best knobs | note |\n";
  md << "| --- | --- | --- | ---: | ---: | ---: | --- | ---: | --- | --- |\n";
  char buf[64];
  for (const KernelReport& r : reports) {
    md << "| " << r.kernel << " | " << r.shape << " | " << r.dtypes << " | ";
    std::snprintf(buf, sizeof buf, "%.2f | %.2f | ", r.default_us, r.best_us);
    md << buf;
    if (r.default_us > 0 && r.best_us > 0) std::snprintf(buf, sizeof buf, "%.2fx", r.default_us / r.best_us);
    else std::snprintf(buf, sizeof buf, "-");
    md << buf << " | " << r.trials << " (" << r.ok << " / " << r.failed << ") | " << duration_text(r.seconds) << " | `"
       << r.best_knobs << "` | " << r.note << " |\n";
  }
  return md.str();
}

std::string report_json(const std::vector<KernelReport>& reports) {
  nlohmann::json j = nlohmann::json::array();
  for (const KernelReport& r : reports) {
    j.push_back({{"kernel", r.kernel}, {"hash", r.hash}, {"shape", r.shape}, {"dtypes", r.dtypes},
                 {"default_us", r.default_us}, {"best_us", r.best_us},
                 {"speedup", r.default_us > 0 && r.best_us > 0 ? r.default_us / r.best_us : 0.0},
                 {"trials", r.trials}, {"ok", r.ok}, {"failed", r.failed}, {"seconds", r.seconds},
                 {"best_knobs", r.best_knobs}, {"note", r.note}});
  }
  return j.dump(2);
}

}  // namespace kiln::tune
