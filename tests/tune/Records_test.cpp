#include "kiln/tune/Records.h"

#include <gtest/gtest.h>

#include <fstream>

#include "TuneTestModels.h"
#include "kiln/tune/Apply.h"

namespace kiln::tune {
namespace {

Record make(const std::string& device, const std::string& arch, double us, const std::string& status = "ok") {
  Record r;
  r.kernel = "softmax";
  r.key = {"00112233aabbccdd", "float16->float16", "8x64->8x64"};
  r.target = "cuda", r.arch = arch, r.device = device;
  r.knobs = {{"row_threads", static_cast<int64_t>(us)}};
  r.status = status;
  if (status == "ok") r.median_us = us, r.min_us = us, r.p90_us = us, r.repeats = 5;
  else r.error = "boom";
  return r;
}

TEST(Records, JsonRoundTrip) {
  Record r = make("NVIDIA H200", "sm_90", 41.5);
  r.registers = 40, r.spill_bytes = 0, r.time = "2026-11-23T04:00:00Z";
  const Record back = record_from_json(record_to_json(r), "x:1");
  EXPECT_EQ(record_to_json(back), record_to_json(r));
  EXPECT_EQ(back.knobs, r.knobs);
  EXPECT_DOUBLE_EQ(back.median_us, 41.5);
}

TEST(Records, BadLinesNameTheirPlace) {
  try {
    record_from_json("{\"hash\": \"x\"}", "records.jsonl:7");
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("records.jsonl:7: tuning record without \"dtypes\""), std::string::npos) << e.what();
  }
  try {
    record_from_json("not json", "r.jsonl:2");
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("r.jsonl:2: not a tuning record"), std::string::npos) << e.what();
  }
}

TEST(Records, BestPrefersSameDeviceThenArchAndNeverFailed) {
  Database db;
  db.add(make("NVIDIA H100", "sm_90", 10));
  db.add(make("NVIDIA H200", "sm_90", 30));
  db.add(make("NVIDIA H200", "sm_90", 20));
  db.add(make("NVIDIA H200", "sm_90", 5, "wrong"));
  db.add(make("NVIDIA A100", "sm_80", 1));
  const KernelKey key = db.records()[0].key;
  ASSERT_NE(db.best(key, "cuda", "sm_90", "NVIDIA H200"), nullptr);
  EXPECT_DOUBLE_EQ(db.best(key, "cuda", "sm_90", "NVIDIA H200")->median_us, 20);
  EXPECT_DOUBLE_EQ(db.best(key, "cuda", "sm_90", "")->median_us, 10);  // same arch, any device
  EXPECT_EQ(db.best(key, "cuda", "sm_120", ""), nullptr);
  EXPECT_EQ(db.best(key, "cpu", "sm_90", ""), nullptr);
  Record other_version = make("NVIDIA H200", "sm_90", 2);
  other_version.space_version = kSpaceVersion + 1;
  db.add(other_version);
  EXPECT_DOUBLE_EQ(db.best(key, "cuda", "sm_90", "NVIDIA H200")->median_us, 20);
}

TEST(Records, FilesFromSeveralRunsMerge) {
  const std::string dir = test::temp_dir("records");
  Database::append(dir + "/a.jsonl", {make("NVIDIA H200", "sm_90", 30)});
  Database::append(dir + "/a.jsonl", {make("NVIDIA H200", "sm_90", 25)});
  Database::append(dir + "/b.jsonl", {make("NVIDIA H100", "sm_90", 12)});
  std::ofstream(dir + "/notes.txt") << "not records";
  Database db;
  db.load(dir);
  ASSERT_EQ(db.records().size(), 3u);
  EXPECT_DOUBLE_EQ(db.best(db.records()[0].key, "cuda", "sm_90", "NVIDIA H200")->median_us, 25);
  Database missing;
  missing.load(dir + "/none.jsonl");
  EXPECT_TRUE(missing.records().empty());
}

TEST(Records, CompileUsesTheBestRecordOrSaysWhyNot) {
  const codegen::KernelDefinition kernel = test::only_kernel(test::softmax_graph(8, 1024, DType::Float16));
  Database db;
  ChosenSchedule none = choose_schedule(db, kernel, codegen::Target::Cuda, "sm_90");
  EXPECT_FALSE(none.schedule);
  EXPECT_NE(none.note.find("default schedule (no usable tuning record for hash " + kernel_key(kernel).hash), std::string::npos) << none.note;
  Record r = make("NVIDIA H200", "sm_90", 7);
  r.key = kernel_key(kernel);
  r.knobs = {{"row_threads", 512}, {"row_cache_bytes", 256}, {"vector_bytes", 16}};
  db.add(r);
  ChosenSchedule chosen = choose_schedule(db, kernel, codegen::Target::Cuda, "sm_90");
  ASSERT_TRUE(chosen.schedule);
  bool found = false;
  for (const te::Tensor& t : kernel.outputs) {
    for (const te::Tensor& s : te::topological_order({t}, kernel.inputs)) {
      if (const StageSchedule* st = chosen.schedule->find(s.name()); st && st->reduce_threads > 0) {
        EXPECT_EQ(st->reduce_threads, 512);
        found = true;
      }
    }
  }
  EXPECT_TRUE(found);
  EXPECT_NE(chosen.note.find("tuned schedule `row_cache_bytes=256 row_threads=512 vector_bytes=16`"), std::string::npos) << chosen.note;
}

}  // namespace
}  // namespace kiln::tune
