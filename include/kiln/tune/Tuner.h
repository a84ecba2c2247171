#pragma once
// `kiln tune`: the search loop over the kernels of a model, with measurement in worker processes.
//
// The measuring slots are the GPUs (--gpus) or, on the CPU target, --workers processes. Kernels are
// tuned concurrently, --loops-per-gpu search loops per GPU (one per CPU worker), each loop taking
// the next kernel when its last one stops (with fewer kernels than slots, a loop gets several
// slots and splits its batches). Loops sharing a GPU take it in turn for their measurements.
// A round of one kernel: the strategy proposes a batch; kiln tune builds it (one pool of all the
// loop's compilers) and computes the reference outputs beside the build; the batch is split into
// one shard per slot of its loop; each shard is written as a task file, with its libraries, and
// measured by `kiln tune-worker TASK -o OUT` (check against the CPU backend, time), one process per
// slot (CUDA_VISIBLE_DEVICES=g). A task without libraries (written for another host) has the worker
// build its candidates. A worker runs under `timeout`; candidates a worker did not
// report (it crashed or ran out of time) are recorded as "timeout". Results are appended to the
// records file as they come. The same worker command runs under a cluster scheduler (a Slurm
// array or a Kubernetes Job per task file; docs/TUNING.md).
#include <string>
#include <vector>

#include "kiln/tune/Builder.h"
#include "kiln/tune/Records.h"
#include "kiln/tune/Runner.h"
#include "kiln/tune/SearchStrategy.h"

namespace kiln::tune {

struct TuneOptions {
  std::string model;
  std::vector<std::string> nodes;  // empty: the whole model as one function
  codegen::Target target = codegen::Target::Cuda;
  std::string arch = "sm_90";
  std::string records;             // -o: appended to; existing records are reused
  std::string work_dir = "kiln-tune";
  std::vector<int> gpus = {0};     // one worker per GPU
  int cpu_workers = 1;             // CPU target: worker processes
  int build_jobs = 0;              // compilers per worker; 0: the machine's cores / slots
  int worker_timeout_s = 300;
  // CUDA: kernels searched at once per GPU. Their workers build in parallel and take the GPU in
  // turn (a lock file per GPU held from the first measurement to the worker's exit), so one
  // kernel's compiles overlap another's timing and no two candidates are timed at once on a GPU.
  int loops_per_gpu = 2;
  RunRequest run;
  StrategyOptions strategy;
  std::string kiln_exe;            // the kiln binary workers run ("" = this process' binary)
  bool progress = true;
};

struct KernelReport {
  std::string kernel, hash, shape, dtypes;
  double default_us = 0, best_us = 0;
  int trials = 0, ok = 0, failed = 0;
  double seconds = 0;
  std::string best_knobs, note;
};

std::vector<KernelReport> tune_model(const TuneOptions& options);
std::string report_markdown(const std::vector<KernelReport>& reports, const TuneOptions& options);
std::string report_json(const std::vector<KernelReport>& reports);

// The worker side: reads a task file, measures its candidates, appends records to `out`.
struct WorkerTask {
  std::string model;
  std::vector<std::string> nodes;
  std::string kernel;  // which of the model's kernel definitions
  codegen::Target target = codegen::Target::Cuda;
  std::string arch;
  std::string work_dir;
  int build_jobs = 4;
  std::string device_lock;  // a file to hold locked (flock) while measuring; "" for none
  std::string object_cache; // compiled template units shared by the workers (Builder.h)
  std::string reference_dir; // reference libraries and outputs shared by the workers ("": work_dir)
  RunRequest run;
  std::vector<Candidate> candidates;
  // The candidates as kiln tune built them, one each (libraries on this host); empty: the worker
  // builds them (a task run on another host).
  std::vector<BuiltCandidate> built;
};
std::string task_to_json(const WorkerTask& task);
WorkerTask task_from_json(const std::string& text, const std::string& where);
void run_worker(const WorkerTask& task, const std::string& out);

}  // namespace kiln::tune
