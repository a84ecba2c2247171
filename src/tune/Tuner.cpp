#include "kiln/tune/Tuner.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "kiln/onnx/Import.h"
#include "kiln/support/Error.h"
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

void progress_bar(const std::string& kernel, int done, int total, double best, double def, double elapsed) {
  constexpr int kWidth = 24;
  const int filled = total > 0 ? std::min(kWidth, done * kWidth / total) : 0;
  const double eta = done > 0 ? elapsed / done * std::max(0, total - done) : 0;
  std::fprintf(stderr, "\r%-24.24s [%s%s] %3d/%d trials  best %8.2f us (%.2fx)  %s elapsed, ETA %s   ",
               kernel.c_str(), std::string(static_cast<size_t>(filled), '#').c_str(),
               std::string(static_cast<size_t>(kWidth - filled), '.').c_str(), done, total, best,
               def > 0 && best > 0 ? def / best : 0.0, duration_text(elapsed).c_str(), duration_text(eta).c_str());
  std::fflush(stderr);
}

// Measures `batch` in worker processes (one shard each); a record per candidate, in batch order.
std::vector<Record> measure_batch(const TuneOptions& options, const codegen::KernelDefinition& kernel,
                                  const KernelKey& key, const std::vector<Candidate>& batch, int round) {
  const bool cuda = options.target == codegen::Target::Cuda;
  const size_t workers = std::min(batch.size(), cuda ? options.gpus.size() : static_cast<size_t>(std::max(1, options.cpu_workers)));
  std::vector<WorkerTask> tasks(workers);
  for (size_t w = 0; w < workers; ++w) {
    WorkerTask& t = tasks[w];
    t.model = fs::absolute(options.model).string();
    t.nodes = options.nodes;
    t.kernel = kernel.name;
    t.target = options.target;
    t.arch = options.arch;
    t.work_dir = fs::absolute(fs::path(options.work_dir) / ("worker" + std::to_string(w))).string();
    t.build_jobs = options.build_jobs;
    t.run = options.run;
    t.run.target = options.target;
  }
  for (size_t i = 0; i < batch.size(); ++i) tasks[i % workers].candidates.push_back(batch[i]);
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
    if (cuda) cmd += "CUDA_VISIBLE_DEVICES=" + std::to_string(options.gpus[w]) + " ";
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

}  // namespace

std::vector<KernelReport> tune_model(const TuneOptions& options) {
  const Graph graph = load_onnx(options.model);
  const std::string model_name = graph.name.empty() ? fs::path(options.model).stem().string() : graph.name;
  const std::vector<codegen::KernelDefinition> kernels = codegen::kernel_definitions(graph, model_name, options.nodes);
  Database db;
  if (!options.records.empty()) db.load(options.records);
  const DeviceInfo device = device_info(options.target);
  std::vector<KernelReport> reports;
  for (size_t n = 0; n < kernels.size(); ++n) {
    const codegen::KernelDefinition& kernel = kernels[n];
    const auto start = Clock::now();
    KernelReport report;
    report.kernel = kernel.name;
    const KernelKey key = kernel_key(kernel);
    report.hash = key.hash, report.shape = key.shape, report.dtypes = key.dtypes;
    const SearchSpace space = search_space(kernel, options.target);
    SearchStrategy strategy(space, options.strategy);
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
      const std::vector<Record> results = measure_batch(options, kernel, key, batch, round);
      if (!options.records.empty()) Database::append(options.records, results);
      strategy.tell(results);
      for (const Record& r : results) {
        mine.push_back(r);
        ++report.trials;
        r.ok() ? ++report.ok : ++report.failed;
      }
      for (const Record& r : mine) {
        if (r.ok() && candidate_text(r.knobs) == default_text) report.default_us = r.median_us;
      }
      if (options.progress) {
        progress_bar(kernel.name, strategy.measured(), options.strategy.trials, strategy.best_us(), report.default_us,
                     std::chrono::duration<double>(Clock::now() - start).count());
      }
    }
    if (options.progress) std::fprintf(stderr, "\n");
    const Record* best = nullptr;
    for (const Record& r : mine) {
      if (r.ok() && (!best || r.median_us < best->median_us)) best = &r;
    }
    if (best) report.best_us = best->median_us, report.best_knobs = candidate_text(best->knobs);
    report.note = strategy.stop_reason();
    if (!best) report.note = "no candidate ran correctly; the default schedule stays";
    else if (report.default_us == 0) report.note += "; the default schedule did not run correctly";
    report.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    reports.push_back(report);
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
