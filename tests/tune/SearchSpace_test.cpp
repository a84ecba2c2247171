#include "kiln/tune/SearchSpace.h"

#include <gtest/gtest.h>

#include "TuneTestModels.h"

namespace kiln::tune {
namespace {

TEST(SearchSpace, RowKernelHasRowKnobsAndLegalStartingPoints) {
  const SearchSpace s = search_space(test::only_kernel(test::softmax_graph(64, 4096, DType::Float16)), codegen::Target::Cuda);
  std::vector<std::string> names;
  for (const Knob& k : s.knobs) names.push_back(k.name);
  EXPECT_EQ(names, (std::vector<std::string>{"vector_bytes", "row_threads", "row_cache_bytes"}));
  EXPECT_EQ(s.row_columns, 4096);
  EXPECT_EQ(s.illegal_reason(s.default_candidate()), "");
  ASSERT_FALSE(s.known_good().empty());
  for (const Candidate& c : s.known_good()) EXPECT_EQ(s.illegal_reason(c), "") << candidate_text(c);
  // The default candidate is the default schedule.
  const DefaultScheduleOptions o = schedule_options(s.default_candidate());
  EXPECT_EQ(o.row_threads, 0);
  EXPECT_EQ(o.vector_bytes, 16);
  EXPECT_EQ(o.row_cache_bytes, DefaultScheduleOptions().row_cache_bytes);
}

TEST(SearchSpace, RejectsPointsOutsideAndOverLimits) {
  const SearchSpace s = search_space(test::only_kernel(test::softmax_graph(64, 65536, DType::Float32)), codegen::Target::Cuda);
  Candidate c = s.default_candidate();
  c["row_threads"] = 96;
  EXPECT_EQ(s.illegal_reason(c), "not a point of the space");
  // 65536 floats over 1024 threads: 256 bytes (64 registers) of row per thread, cached under a
  // 512-byte limit, plus the kernel's own registers: more than 64 per thread at 1024 threads.
  c = s.default_candidate();
  c["row_threads"] = 1024;
  c["row_cache_bytes"] = 512;
  EXPECT_NE(s.illegal_reason(c).find("exceeds the registers of an SM"), std::string::npos) << s.illegal_reason(c);
}

TEST(SearchSpace, ColumnReductionSharedMemoryLimit) {
  const SearchSpace s = search_space(test::only_kernel(test::column_sum_graph(256, 1024, DType::Float32)), codegen::Target::Cuda);
  Candidate c = s.default_candidate();
  ASSERT_TRUE(c.count("column_row_threads")) << candidate_text(c);
  c["column_threads"] = 128;
  c["column_row_threads"] = 16;
  EXPECT_EQ(s.illegal_reason(c), "2048 threads per block (at most 1024)");
  c["column_threads"] = 32;
  EXPECT_EQ(s.illegal_reason(c), "");
}

TEST(SearchSpace, CpuKnobsAreCompilerFlags) {
  const SearchSpace s = search_space(test::only_kernel(test::softmax_graph(4, 64, DType::Float32)), codegen::Target::Cpu);
  EXPECT_EQ(s.size(), 12);
  Candidate c = s.default_candidate();
  EXPECT_EQ(cpu_flags(c), (std::vector<std::string>{"-O2"}));
  c["opt_level"] = 3, c["native"] = 1, c["unroll"] = 1;
  EXPECT_EQ(cpu_flags(c), (std::vector<std::string>{"-O3", "-march=native", "-funroll-loops"}));
}

}  // namespace
}  // namespace kiln::tune
