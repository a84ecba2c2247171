// The orchestration end to end on the CPU target (CI has no GPU): kiln tune-worker processes
// build the generated C++ under each candidate's flags, check it against the CPU backend, time
// it; records are appended, reused by a second run, and read back by choose_schedule.
#include "kiln/tune/Tuner.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "../../src/tune/FileLock.h"
#include "../ops/TestGraph.h"
#include "TuneTestModels.h"
#include "kiln/tune/Apply.h"

namespace kiln::tune {
namespace {

namespace fs = std::filesystem;

std::string text_of(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string kiln_binary() { return std::string(KILN_BINARY_DIR) + "/tools/kiln"; }

TuneOptions cpu_options(const std::string& dir, const std::string& model) {
  TuneOptions o;
  o.model = model;
  o.target = codegen::Target::Cpu;
  o.arch = "cpu";
  o.records = dir + "/records.jsonl";
  o.work_dir = dir + "/work";
  o.cpu_workers = 2;
  o.build_jobs = 1;
  o.run.repeats = 3;
  o.run.warmup = 1;
  o.strategy.trials = 4;
  o.strategy.batch = 4;
  o.kiln_exe = kiln_binary();
  o.progress = false;
  return o;
}

TEST(Tuner, CpuTargetOnTwoWorkerProcesses) {
  if (!fs::exists(kiln_binary())) GTEST_SKIP() << "the kiln binary is not built (" << kiln_binary() << ")";
  const std::string dir = test::temp_dir("tuner");
  const std::string model = dir + "/softmax.onnx";
  save_onnx(test::softmax_graph(4, 64, DType::Float32), model);
  TuneOptions o = cpu_options(dir, model);
  const std::vector<KernelReport> reports = tune_model(o);
  ASSERT_EQ(reports.size(), 1u);
  const KernelReport& r = reports[0];
  EXPECT_EQ(r.trials, 4);
  EXPECT_EQ(r.ok, 4) << r.note;
  EXPECT_GT(r.default_us, 0);
  EXPECT_GT(r.best_us, 0);
  EXPECT_LE(r.best_us, r.default_us);
  // Both workers measured (their shards are in separate folders).
  EXPECT_TRUE(fs::exists(o.work_dir + "/worker0/softmax_model_round0.jsonl"));
  EXPECT_TRUE(fs::exists(o.work_dir + "/worker1/softmax_model_round0.jsonl"));
  // The candidates were built by kiln tune (in work/build), not by the workers, which measured them.
  for (const char* worker : {"/worker0", "/worker1"}) {
    for (const auto& e : fs::directory_iterator(o.work_dir + worker)) {
      EXPECT_NE(e.path().filename().string().rfind("cand_", 0), 0u) << "a worker built " << e.path();
    }
  }
  int libraries = 0;
  for (const auto& e : fs::directory_iterator(o.work_dir + "/build")) libraries += e.path().extension() == ".so";
  EXPECT_EQ(libraries, 4);
  EXPECT_NE(text_of(o.work_dir + "/rounds.log").find("softmax_model round 0: 4 candidates built in "), std::string::npos);
  // ... against one reference, computed by kiln tune beside the build; the workers read it.
  int references = 0;
  for (const auto& e : fs::directory_iterator(o.work_dir + "/reference")) references += e.path().extension() == ".expected";
  EXPECT_EQ(references, 1);
  Database db;
  db.load(o.records);
  ASSERT_EQ(db.records().size(), 4u);
  for (const Record& rec : db.records()) {
    EXPECT_EQ(rec.status, "ok") << rec.error;
    EXPECT_EQ(rec.target, "cpu");
    EXPECT_GT(rec.repeats, 0);
    EXPECT_LE(rec.min_us, rec.median_us);
    EXPECT_LE(rec.median_us, rec.p90_us);
  }
  const std::string md = report_markdown(reports, o);
  EXPECT_NE(md.find("| softmax_model | 4x64->4x64 | float32->float32 |"), std::string::npos) << md;

  // A second run reuses the records: the four points are not measured again.
  o.strategy.trials = 2;
  o.strategy.batch = 2;
  const std::vector<KernelReport> again = tune_model(o);
  Database db2;
  db2.load(o.records);
  EXPECT_EQ(db2.records().size(), 4u + static_cast<size_t>(again[0].trials));
  std::set<std::string> points;
  for (const Record& rec : db2.records()) EXPECT_TRUE(points.insert(candidate_text(rec.knobs)).second) << candidate_text(rec.knobs);

  // kiln compile's lookup picks the fastest.
  const ChosenSchedule chosen = choose_schedule(db2, test::only_kernel(test::softmax_graph(4, 64, DType::Float32)),
                                                codegen::Target::Cpu, "");
  ASSERT_NE(chosen.record, nullptr) << chosen.note;
  for (const Record& rec : db2.records()) EXPECT_LE(chosen.record->median_us, rec.median_us);
  EXPECT_FALSE(chosen.cpu_flags.empty());
}

// Two kernels on two workers are tuned at once, one per worker; each kernel's reference outputs are
// computed once and reused from the shared reference folder in the next round.
TEST(Tuner, KernelsAreTunedConcurrentlyOnePerWorker) {
  if (!fs::exists(kiln_binary())) GTEST_SKIP() << "the kiln binary is not built (" << kiln_binary() << ")";
  const std::string dir = test::temp_dir("tuner_two");
  const std::string model = dir + "/two.onnx";
  save_onnx(test::two_kernel_graph(8, 64, DType::Float32), model);
  TuneOptions o = cpu_options(dir, model);
  o.nodes = {"softmax", "sum"};
  o.strategy.trials = 4;
  o.strategy.batch = 2;  // two rounds each
  const std::vector<KernelReport> reports = tune_model(o);
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_EQ(reports[0].kernel, "softmax");
  EXPECT_EQ(reports[1].kernel, "sum");
  for (const KernelReport& r : reports) {
    EXPECT_EQ(r.trials, 4) << r.kernel;
    EXPECT_EQ(r.ok, 4) << r.kernel << ": " << r.note;
  }
  // Each kernel's rounds ran on one worker, and the two kernels on different workers.
  auto worker_of = [&](const std::string& kernel) {
    const bool in0 = fs::exists(o.work_dir + "/worker0/" + kernel + "_round1.jsonl");
    const bool in1 = fs::exists(o.work_dir + "/worker1/" + kernel + "_round1.jsonl");
    EXPECT_NE(in0, in1) << kernel;
    return in0 ? 0 : 1;
  };
  EXPECT_NE(worker_of("softmax"), worker_of("sum"));
  // The reference outputs were saved once per kernel.
  int cached = 0;
  for (const auto& e : fs::recursive_directory_iterator(o.work_dir)) {
    const std::string name = e.path().filename().string();
    if (name.size() > 9 && name.substr(name.size() - 9) == ".expected") ++cached;
  }
  EXPECT_EQ(cached, 2);
}

// A kernel whose knobs change none of its code (a bare float16 convolution: one template call) is
// reported not tuned, and nothing is built or measured (no GPU needed: no worker starts).
TEST(Tuner, KernelWithoutKnobsIsNotTuned) {
  const std::string dir = test::temp_dir("tuner_no_knobs");
  test::TestGraph t(17, false);
  // Three channels: the Hopper convolution never runs, so conv_wgmma is no knob either.
  const int x = t.input("x", DType::Float16, {ir::Expr(2), ir::Expr(3), ir::Expr(12), ir::Expr(12)});
  const int w = t.input("w", DType::Float16, {ir::Expr(32), ir::Expr(3), ir::Expr(3), ir::Expr(3)});
  t.output(t.node("conv", OpKind::Conv, {x, w}, {{"pads", test::ints_attr({1, 1, 1, 1})}}));
  t.graph.name = "conv";
  save_onnx(t.graph, dir + "/conv.onnx");
  TuneOptions o = cpu_options(dir, dir + "/conv.onnx");
  o.target = codegen::Target::Cuda;
  o.arch = "sm_90";
  o.kiln_exe = "/bin/false";  // a worker, if one started, would measure nothing
  const std::vector<KernelReport> reports = tune_model(o);
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].trials, 0);
  EXPECT_EQ(reports[0].note,
            "not tuned: no knob changes this kernel's code (its stages are template calls or in their epilogues); the "
            "default schedule stays");
  EXPECT_FALSE(fs::exists(o.work_dir + "/build")) << "a candidate was built";
  fs::remove_all(dir);
}

TEST(Tuner, WorkersThatFailAreRecordedAndNeverChosen) {
  const std::string dir = test::temp_dir("tuner_fail");
  const std::string model = dir + "/softmax.onnx";
  save_onnx(test::softmax_graph(4, 64, DType::Float32), model);
  TuneOptions o = cpu_options(dir, model);
  o.kiln_exe = "/bin/false";  // a worker that exits at once, measuring nothing
  o.strategy.patience = 1;
  const std::vector<KernelReport> reports = tune_model(o);
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].ok, 0);
  EXPECT_EQ(reports[0].best_us, 0);
  EXPECT_EQ(reports[0].note, "no candidate ran correctly; the default schedule stays");
  Database db;
  db.load(o.records);
  ASSERT_FALSE(db.records().empty());
  EXPECT_EQ(db.records()[0].status, "run_failed");
  EXPECT_NE(db.records()[0].error.find("the worker exited with status 1 before measuring it"), std::string::npos)
      << db.records()[0].error;
  EXPECT_FALSE(choose_schedule(db, test::only_kernel(test::softmax_graph(4, 64, DType::Float32)), codegen::Target::Cpu, "").record);
}

TEST(Tuner, WorkerTaskRoundTripAndErrors) {
  WorkerTask t;
  t.model = "m.onnx", t.kernel = "k", t.target = codegen::Target::Cpu, t.arch = "cpu", t.work_dir = "w";
  t.candidates = {{{"opt_level", 3}}, {{"opt_level", 1}, {"native", 1}}};
  const WorkerTask back = task_from_json(task_to_json(t), "t.json");
  EXPECT_EQ(back.candidates, t.candidates);
  EXPECT_EQ(back.target, codegen::Target::Cpu);
  EXPECT_TRUE(back.built.empty()) << "a task without libraries: the worker builds";
  // Candidates kiln tune built: their libraries (or why not) go with the task.
  t.built.resize(2);
  t.built[0].library = "/w/cand_1.so", t.built[0].function = "k", t.built[0].registers = 40;
  t.built[1].function = "k", t.built[1].error = "too many registers", t.built[1].illegal = true;
  const WorkerTask with = task_from_json(task_to_json(t), "t.json");
  ASSERT_EQ(with.built.size(), 2u);
  EXPECT_EQ(with.built[0].library, "/w/cand_1.so");
  EXPECT_EQ(with.built[0].registers, 40);
  EXPECT_EQ(with.built[0].knobs, t.candidates[0]);
  EXPECT_TRUE(with.built[1].illegal);
  EXPECT_EQ(with.built[1].error, "too many registers");
  t.built.pop_back();
  try {
    task_from_json(task_to_json(t), "t.json");
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("t.json: \"built\" has 1 entries for 2 candidates"), std::string::npos) << e.what();
  }
  try {
    task_from_json(R"({"model":"m","nodes":[],"kernel":"k","target":"tpu","arch":"x","work_dir":"w","candidates":[]})", "t.json");
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("t.json: \"target\" is 'tpu' (expected cuda or cpu)"), std::string::npos) << e.what();
  }
}

// A task moved to a host without kiln tune's work folder names libraries that are not there: the
// worker builds the candidates itself, and says so.
TEST(Tuner, WorkerBuildsWhenTheLibrariesAreNotHere) {
  const std::string dir = test::temp_dir("tuner_moved");
  const std::string model = dir + "/softmax.onnx";
  save_onnx(test::softmax_graph(4, 64, DType::Float32), model);
  WorkerTask t;
  t.model = model, t.kernel = "softmax_model", t.target = codegen::Target::Cpu, t.arch = "cpu";
  t.work_dir = dir + "/worker0";
  t.build_jobs = 1;
  t.run.target = codegen::Target::Cpu, t.run.repeats = 2, t.run.warmup = 1;
  t.candidates = {search_space(test::only_kernel(test::softmax_graph(4, 64, DType::Float32)), codegen::Target::Cpu).default_candidate()};
  t.built.resize(1);
  t.built[0].library = dir + "/elsewhere/cand_0.so", t.built[0].function = "softmax_model";
  t.built[0].knobs = t.candidates[0];
  testing::internal::CaptureStderr();
  run_worker(t, dir + "/out.jsonl");
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find(dir + "/elsewhere/cand_0.so is not on this host; building the candidates here"), std::string::npos) << log;
  EXPECT_NE(log.find("tune-worker: 1 candidates: built in "), std::string::npos) << log;
  Database db;
  db.load(dir + "/out.jsonl");
  ASSERT_EQ(db.records().size(), 1u);
  EXPECT_EQ(db.records()[0].status, "ok") << db.records()[0].error;
}

// Workers share a GPU, template units and references through flock: a second holder waits, or with
// Mode::Try gives up at once; the lock goes with its holder.
TEST(FileLock, TryGivesUpWhileAnotherHoldsIt) {
  const std::string path = test::temp_dir("file_lock") + "/unit.lock";
  {
    const FileLock first(path, FileLock::Mode::Wait);
    ASSERT_TRUE(first.held()) << std::strerror(first.error());
    const FileLock second(path, FileLock::Mode::Try);  // another open file: flock treats it as another holder
    EXPECT_FALSE(second.held());
    EXPECT_EQ(second.error(), EWOULDBLOCK);
  }
  const FileLock third(path, FileLock::Mode::Try);
  EXPECT_TRUE(third.held());
  const FileLock nowhere("/nonexistent-folder/x.lock", FileLock::Mode::Try);
  EXPECT_FALSE(nowhere.held());
  EXPECT_EQ(nowhere.error(), ENOENT);
}

TEST(Runner, OutputsMatchNamesTheFirstBadElement) {
  HostTensor want(DType::Float32, {3}), got(DType::Float32, {3});
  for (int i = 0; i < 3; ++i) want.set_double(i, i + 1.0), got.set_double(i, i + 1.0);
  std::string error;
  EXPECT_TRUE(outputs_match(got, want, error)) << error;
  got.set_double(2, 3.5);
  EXPECT_FALSE(outputs_match(got, want, error));
  EXPECT_NE(error.find("element 2 is 3.500000, expected 3.000000"), std::string::npos) << error;
  // Small outputs (a softmax over a long row) are compared at their own scale: zeros are wrong.
  HostTensor small(DType::Float16, {2}), zeros(DType::Float16, {2});
  small.set_double(0, 3e-5), small.set_double(1, 6e-5);
  EXPECT_FALSE(outputs_match(zeros, small, error));
  EXPECT_TRUE(outputs_match(small, small, error)) << error;
}

}  // namespace
}  // namespace kiln::tune
