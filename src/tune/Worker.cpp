// `kiln tune-worker TASK -o OUT`: measures one shard of candidates of one kernel (build, check
// against the CPU backend, time) and appends a record per candidate to OUT as it goes. The same
// command runs under the process pool of `kiln tune`, a Slurm array or a Kubernetes Job.
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <thread>
#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include "FileLock.h"
#include "kiln/onnx/Import.h"
#include "kiln/support/Error.h"
#include "kiln/tune/Runner.h"
#include "kiln/tune/Tuner.h"

namespace kiln::tune {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string task_to_json(const WorkerTask& t) {
  json j;
  j["model"] = t.model;
  j["nodes"] = t.nodes;
  j["kernel"] = t.kernel;
  j["target"] = codegen::target_name(t.target);
  j["arch"] = t.arch;
  j["work_dir"] = t.work_dir;
  j["build_jobs"] = t.build_jobs;
  j["device_lock"] = t.device_lock;
  j["object_cache"] = t.object_cache;
  j["reference_dir"] = t.reference_dir;
  j["warmup"] = t.run.warmup;
  j["repeats"] = t.run.repeats;
  j["seed"] = t.run.seed;
  j["candidates"] = json::array();
  for (const Candidate& c : t.candidates) {
    json k = json::object();
    for (const auto& [name, v] : c) k[name] = v;
    j["candidates"].push_back(k);
  }
  if (!t.built.empty()) {
    j["built"] = json::array();
    for (const BuiltCandidate& b : t.built) {
      j["built"].push_back({{"library", b.library}, {"function", b.function}, {"error", b.error}, {"illegal", b.illegal},
                            {"registers", b.registers}, {"spill_bytes", b.spill_bytes}});
    }
  }
  return j.dump(1);
}

WorkerTask task_from_json(const std::string& text, const std::string& where) {
  WorkerTask t;
  try {
    const json j = json::parse(text);
    t.model = j.at("model").get<std::string>();
    t.nodes = j.at("nodes").get<std::vector<std::string>>();
    t.kernel = j.at("kernel").get<std::string>();
    const std::string target = j.at("target").get<std::string>();
    if (target != "cuda" && target != "cpu") user_error("{}: \"target\" is '{}' (expected cuda or cpu)", where, target);
    t.target = target == "cpu" ? codegen::Target::Cpu : codegen::Target::Cuda;
    t.arch = j.at("arch").get<std::string>();
    t.work_dir = j.at("work_dir").get<std::string>();
    t.build_jobs = j.value("build_jobs", 4);
    t.device_lock = j.value("device_lock", std::string());
    t.object_cache = j.value("object_cache", std::string());
    t.reference_dir = j.value("reference_dir", std::string());
    t.run.target = t.target;
    t.run.warmup = j.value("warmup", 3);
    t.run.repeats = j.value("repeats", 20);
    t.run.seed = j.value("seed", 1ull);
    for (const json& c : j.at("candidates")) {
      Candidate cand;
      for (const auto& [k, v] : c.items()) cand[k] = v.get<int64_t>();
      t.candidates.push_back(cand);
    }
    for (const json& b : j.value("built", json::array())) {
      BuiltCandidate built;
      built.library = b.at("library").get<std::string>();
      built.function = b.at("function").get<std::string>();
      built.error = b.at("error").get<std::string>();
      built.illegal = b.at("illegal").get<bool>();
      built.registers = b.at("registers").get<int>();
      built.spill_bytes = b.at("spill_bytes").get<int>();
      t.built.push_back(built);
    }
  } catch (const json::exception& e) {
    user_error("{}: not a tune-worker task: {}", where, e.what());
  }
  if (!t.built.empty() && t.built.size() != t.candidates.size()) {
    user_error("{}: \"built\" has {} entries for {} candidates", where, t.built.size(), t.candidates.size());
  }
  for (size_t i = 0; i < t.built.size(); ++i) t.built[i].knobs = t.candidates[i];
  return t;
}

codegen::KernelDefinition find_kernel(const std::string& model, const std::vector<std::string>& nodes,
                                      const std::string& name) {
  const Graph graph = load_onnx(model);
  const std::string model_name = graph.name.empty() ? fs::path(model).stem().string() : graph.name;
  for (codegen::KernelDefinition& k : codegen::kernel_definitions(graph, model_name, nodes)) {
    if (k.name == name) return k;
  }
  user_error("the model {} has no kernel named '{}' (with --nodes {})", model, name, nodes.size());
}

static std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return text;
}

void run_worker(const WorkerTask& task, const std::string& out) {
  const codegen::KernelDefinition kernel = find_kernel(task.model, task.nodes, task.kernel);
  const KernelKey key = kernel_key(kernel);
  const DeviceInfo device = device_info(task.target);
  BuildRequest build;
  build.target = task.target;
  build.arch = task.arch;
  build.work_dir = task.work_dir;
  build.jobs = task.build_jobs;
  build.object_cache = task.object_cache;
  // The reference (the CPU backend's library and its outputs: seconds to minutes for a whole layer)
  // is computed on a thread of its own while the candidates are built; the lowering both need
  // happens on this thread.
  const auto t_start = std::chrono::steady_clock::now();
  auto seconds_since = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  };
  std::unique_ptr<Runner> runner;
  std::string reference_error;
  try {
    runner = std::make_unique<Runner>(kernel, task.run, task.reference_dir.empty() ? task.work_dir : task.reference_dir);
  } catch (const std::runtime_error& e) {
    reference_error = e.what();
  }
  double reference_s = 0;
  std::thread reference([&] {
    if (!runner) return;
    const auto t0 = std::chrono::steady_clock::now();
    try {
      runner->compute_reference();
    } catch (const std::exception& e) {
      reference_error = e.what();
    }
    reference_s = seconds_since(t0);
  });
  // The libraries kiln tune built, unless one is not here (the task was moved to another host
  // without the work folder): then this worker builds the candidates.
  std::vector<BuiltCandidate> built = task.built;
  for (const BuiltCandidate& b : task.built) {
    if (!b.library.empty() && !fs::exists(b.library)) {
      std::cerr << "tune-worker: " << b.library << " is not on this host; building the candidates here\n";
      built.clear();
      break;
    }
  }
  const bool build_here = built.empty();
  try {
    if (build_here) built = build_candidates(kernel, search_space(kernel, task.target, task.build_jobs), task.candidates, build);
  } catch (...) {
    reference.join();
    throw;
  }
  const double build_s = seconds_since(t_start);
  reference.join();
  std::ofstream file(out, std::ios::app);
  std::vector<Record> records;
  const char* commit = std::getenv("KILN_COMMIT");
  // The device is taken after building (other workers' compiles overlap this one's timing) and
  // held until this process exits.
  const auto t_wait = std::chrono::steady_clock::now();
  std::optional<FileLock> device_lock;
  if (!task.device_lock.empty()) {
    device_lock.emplace(task.device_lock, FileLock::Mode::Wait);
    if (!device_lock->held()) user_error("tune-worker: cannot lock {}: {}", task.device_lock, std::strerror(device_lock->error()));
  }
  const double wait_s = seconds_since(t_wait);
  try {
    if (!reference_error.empty()) throw std::runtime_error(reference_error);
    runner->attach_device();
  } catch (const std::runtime_error& e) {
    // No device to run on (or the reference failed): every candidate says so.
    for (const BuiltCandidate& b : built) {
      Record r;
      r.kernel = kernel.name, r.key = key, r.target = codegen::target_name(task.target), r.arch = device.arch;
      r.device = device.name, r.knobs = b.knobs, r.time = utc_now();
      r.status = "run_failed", r.error = std::string("the runner could not start: ") + e.what();
      file << record_to_json(r) << "\n";
    }
    user_error("tune-worker: the runner could not start: {}", e.what());
  }
  const auto t_measure = std::chrono::steady_clock::now();
  for (size_t i = 0; i < built.size(); ++i) {
    Record r;
    r.kernel = kernel.name;
    r.key = key;
    r.target = codegen::target_name(task.target);
    r.arch = device.arch;
    r.device = device.name;
    r.kiln_commit = commit ? commit : "";
    r.knobs = built[i].knobs;
    r.time = utc_now();
    if (built[i].same_as >= 0) {
      const Record& same = records[static_cast<size_t>(built[i].same_as)];
      r.status = same.status, r.median_us = same.median_us, r.min_us = same.min_us, r.p90_us = same.p90_us;
      r.repeats = same.repeats, r.registers = same.registers, r.spill_bytes = same.spill_bytes;
      r.error = same.error.empty() ? "" : same.error;
    } else {
      try {
        runner->measure(built[i], r);
      } catch (const std::exception&) {
        file << record_to_json(r) << "\n" << std::flush;
        throw;  // the CUDA context is lost; the tuner reports the rest as not measured
      }
    }
    records.push_back(r);
    file << record_to_json(r) << "\n" << std::flush;
  }
  // Where the worker's time went (its log, beside the records: <kernel>_round<r>.log).
  std::cerr << fmt::format("tune-worker: {} candidates: {} {:.1f} s (reference {:.1f} s beside it), waited {:.1f} s "
                           "for the device, measured in {:.1f} s\n",
                           built.size(), build_here ? "built in" : "built by kiln tune, taken in", build_s,
                           reference_s, wait_s, seconds_since(t_measure));
}

}  // namespace kiln::tune
