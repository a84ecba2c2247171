// kiln tune model.onnx [--nodes a,b] [--trials N] [--target sm_90|cpu] [--gpus all|0,1] -o records.jsonl
// kiln tune-worker TASK.json -o OUT.jsonl    (one shard of measurements; see tune/Tuner.h)
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "Commands.h"
#include "kiln/support/Error.h"
#include "kiln/tune/Tuner.h"

namespace kiln::cli {

namespace {

namespace fs = std::filesystem;

struct TuneCommand {
  tune::TuneOptions options;
  std::string target = "sm_90";
  std::string gpus = "0";
  std::string report;
};

std::vector<int> parse_gpus(const std::string& text) {
  std::vector<int> gpus;
  if (text == "all") {
    // One worker per GPU that the driver lists (/proc/driver/nvidia/gpus), honouring
    // CUDA_VISIBLE_DEVICES when it is a list of numbers.
    if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES")) {
      std::stringstream ss(visible);
      std::string item;
      while (std::getline(ss, item, ',')) {
        if (!item.empty() && item.find_first_not_of("0123456789") == std::string::npos) gpus.push_back(std::stoi(item));
      }
      if (!gpus.empty()) return gpus;
    }
    std::error_code ec;
    int n = 0;
    if (fs::is_directory("/proc/driver/nvidia/gpus", ec)) {
      for ([[maybe_unused]] const auto& e : fs::directory_iterator("/proc/driver/nvidia/gpus")) ++n;
    }
    for (int g = 0; g < std::max(1, n); ++g) gpus.push_back(g);
    return gpus;
  }
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty() || item.find_first_not_of("0123456789") != std::string::npos) {
      user_error("--gpus '{}' is not a GPU list (expected all, or numbers such as 0,1)", text);
    }
    gpus.push_back(std::stoi(item));
  }
  return gpus;
}

int run_tune(TuneCommand& c) {
  tune::TuneOptions& o = c.options;
  if (c.target == "cpu") {
    o.target = codegen::Target::Cpu;
    o.arch = "cpu";
  } else if (c.target.rfind("sm_", 0) == 0 && c.target.size() >= 5 &&
             c.target.find_first_not_of("0123456789", 3) == std::string::npos) {
    o.target = codegen::Target::Cuda;
    o.arch = c.target;
  } else {
    user_error("--target '{}' is not a target (expected one GPU architecture such as sm_90, or cpu)", c.target);
  }
  if (o.strategy.trials < 1) user_error("--trials {} (expected at least 1)", o.strategy.trials);
  if (o.strategy.batch < 1) user_error("--batch {} (expected at least 1)", o.strategy.batch);
  if (o.loops_per_gpu < 1) user_error("--loops-per-gpu {} (expected at least 1)", o.loops_per_gpu);
  o.gpus = parse_gpus(c.gpus);
  o.progress = isatty(2) || std::getenv("KILN_PROGRESS") != nullptr;
  const std::vector<tune::KernelReport> reports = tune::tune_model(o);
  const std::string md = tune::report_markdown(reports, o);
  const std::string stem = c.report.empty() ? o.records + ".report" : c.report;
  std::ofstream(stem + ".md") << md;
  std::ofstream(stem + ".json") << tune::report_json(reports) << "\n";
  std::cout << md << "\nrecords: " << o.records << "\nreport: " << stem << ".md, " << stem << ".json\n";
  return 0;
}

}  // namespace

void register_tune(CLI::App& app) {
  auto c = std::make_shared<TuneCommand>();
  CLI::App* cmd = app.add_subcommand(
      "tune",
      "Search the schedule of each kernel of a model by measurement (on the GPU, or the generated C++\n"
      "on the CPU with --target cpu): each candidate is built, checked against the CPU backend on\n"
      "random data, then timed. Records (JSON lines, tune/Records.h) are appended to -o; `kiln compile\n"
      "--records` uses the best. A report (per kernel: default and best time, speed-up, trials) goes\n"
      "to <records>.report.md/.json.\n"
      "Example: kiln tune model.onnx --trials 64 --gpus all -o records.jsonl");
  tune::TuneOptions& o = c->options;
  cmd->add_option("model", o.model, "The .onnx file")->required()->check(CLI::ExistingFile);
  cmd->add_option("-o,--output", o.records, "Records file (appended to; earlier records are reused)")->required();
  cmd->add_option("--nodes", o.nodes, "Comma-separated node names: one kernel per node (default: the whole model)")->delimiter(',');
  cmd->add_option("--target", c->target, "sm_<NN> (the GPU of this machine) or cpu");
  cmd->add_option("--trials", o.strategy.trials, "Candidates measured per kernel at most (default 64)");
  cmd->add_option("--batch", o.strategy.batch, "Candidates per round and GPU (or worker) that measures them (default 16)");
  cmd->add_option("--patience", o.strategy.patience, "Rounds without a 1% gain before stopping (default 2)");
  cmd->add_option("--gpus", c->gpus,
                  "GPUs to measure on: all, or a list such as 0,1 (default 0); the model's kernels are spread over them");
  cmd->add_option("--loops-per-gpu", o.loops_per_gpu,
                  "Kernels searched at once per GPU (default 2): they build in parallel and take the GPU in turn");
  cmd->add_option("--workers", o.cpu_workers, "--target cpu: worker processes (default 1)");
  cmd->add_option("--build-jobs", o.build_jobs,
                  "Compilers per GPU or worker (default: the machine's cores divided by the GPUs or workers); a round "
                  "is built by kiln tune with those of all the GPUs it is measured on");
  cmd->add_option("--repeats", o.run.repeats, "Timed calls per candidate (default 20)");
  cmd->add_option("--worker-timeout", o.worker_timeout_s, "Seconds a worker may take for its shard (default 300)");
  cmd->add_option("--work-dir", o.work_dir, "Sources, libraries and logs (default kiln-tune)");
  cmd->add_option("--report", c->report, "Report path without extension (default <records>.report)");
  cmd->callback([c] { set_exit_code(run_tune(*c)); });

  auto task = std::make_shared<std::pair<std::string, std::string>>();
  CLI::App* worker = app.add_subcommand(
      "tune-worker",
      "Measure one shard of tuning candidates (a task file written by kiln tune) and append a record\n"
      "per candidate to OUT. Runs under kiln tune's process pool, a Slurm array or a Kubernetes Job.");
  worker->add_option("task", task->first, "The task file (JSON)")->required()->check(CLI::ExistingFile);
  worker->add_option("-o,--output", task->second, "Records file to append to")->required();
  worker->callback([task] {
    std::ifstream in(task->first);
    std::stringstream text;
    text << in.rdbuf();
    tune::run_worker(tune::task_from_json(text.str(), task->first), task->second);
  });
}

}  // namespace kiln::cli
