#pragma once
// The search space of one kernel (TVM MetaSchedule's "space generator"): the knobs that decide
// its schedule and the values each may take, with the legality rules known before building.
//  - CUDA: the fields of DefaultScheduleOptions (schedule/Defaults.h) that the kernel's stages use:
//    threads per block of elementwise stages, vector width, threads per row and register row
//    cache of row kernels, the split of column reductions. A candidate is a full assignment; its
//    schedule is default_gpu_schedule under those options. The contraction templates' tile /
//    stage / split-K knobs are added here as they become schedule data (see add_contraction_knobs).
//  - CPU (the generated C++ under the host compiler; used to test the tuner where there is no
//    GPU): optimization level, -march=native, -funroll-loops.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kiln/codegen/Codegen.h"
#include "kiln/codegen/GraphFunctions.h"
#include "kiln/schedule/Defaults.h"

namespace kiln::tune {

// A point of the space: knob name -> value. Ordered, so its text form is canonical.
using Candidate = std::map<std::string, int64_t>;
std::string candidate_text(const Candidate& c);  // "row_threads=512 vector_bytes=16"

struct Knob {
  std::string name;
  std::vector<int64_t> values;  // values[0] is the default
};

class SearchSpace {
 public:
  codegen::Target target = codegen::Target::Cuda;
  std::vector<Knob> knobs;

  Candidate default_candidate() const;
  // The hand-picked points tried first after the default (each legal).
  std::vector<Candidate> known_good() const { return known_good_; }
  // Why `c` cannot run ("" when it can): block sizes, shared memory, registers known before
  // building.
  std::string illegal_reason(const Candidate& c) const;
  bool contains(const Candidate& c) const;
  double size() const;  // number of points, legal or not

  // Threads per block of the candidate's largest block (CUDA), from its schedule.
  int64_t block_threads(const Candidate& c) const;

  // Filled by search_space().
  codegen::KernelDefinition kernel;
  int64_t row_columns = 0;         // elements per row of its row reduction (0: none)
  int64_t narrowest_input_bytes = 4;
  int64_t widest_input_bytes = 4;
  std::vector<Candidate> known_good_;
};

// The knobs of the kernel's stages, less those that change no code (each of their values printed
// from the default and from each hand-picked point, `jobs` at a time; a kernel whose every stage
// is a template call or in a template's epilogue may be left with none: nothing to tune).
SearchSpace search_space(const codegen::KernelDefinition& kernel, codegen::Target target, int jobs = 1);

// The schedule options a CUDA candidate stands for (knobs the space lacks keep their defaults).
DefaultScheduleOptions schedule_options(const Candidate& c);
// Host compiler flags of a CPU candidate.
std::vector<std::string> cpu_flags(const Candidate& c);

}  // namespace kiln::tune
