#pragma once
// Builds candidates of one kernel (TVM MetaSchedule's "builder"): each candidate is lowered under
// its schedule and printed (`jobs` at a time), candidates whose generated source is the
// same as an earlier one's are not built twice, and the sources are compiled into one shared
// library each, `jobs` compilers at a time (nvcc with -Xptxas -v, whose register and spill report
// is kept; or the host compiler for the CPU target).
// CUDA: the template calls (GEMM, convolution, attention) are printed as translation units of their own
// (ModuleOptions::template_units) and compiled once into `object_cache`, keyed by their text and
// flags: candidates that change only other kernels' knobs (and every later round and worker)
// link the cached objects, so a model's contractions are not recompiled for each candidate.
#include <string>
#include <vector>

#include "kiln/codegen/GraphFunctions.h"
#include "kiln/tune/SearchSpace.h"

namespace kiln::tune {

struct BuildRequest {
  codegen::Target target = codegen::Target::Cuda;
  std::string arch = "sm_90";
  std::string work_dir;  // sources, libraries and logs go here
  int jobs = 4;
  std::string object_cache;  // CUDA: compiled template units ("" = <work_dir>/objects)
};

struct BuiltCandidate {
  Candidate knobs;
  std::string library;  // "" when the build failed
  std::string function; // the C identifier of the kernel's entry point
  std::string error;    // why it did not build, or why it is illegal
  bool illegal = false;
  int same_as = -1;     // index of an earlier candidate with the same source (not built again)
  int registers = -1, spill_bytes = -1;  // max over the candidate's generated kernels (CUDA; not the templates')
};

// Where a build's time went (wall seconds; a compile's seconds are its own, run beside others).
struct BuildTimes {
  double lowering_s = 0;  // lowering and printing every candidate (`jobs` threads)
  double compile_s = 0;   // the template units and the candidates' own units, in one pool
  double link_s = 0;
  int units = 0, candidates = 0;  // compiled by this build
  int reused = 0;                 // candidates whose library an earlier build in the folder left
  double units_s = 0, longest_unit_s = 0;
  double candidates_s = 0, longest_candidate_s = 0;
};

std::vector<BuiltCandidate> build_candidates(const codegen::KernelDefinition& kernel, const SearchSpace& space,
                                             const std::vector<Candidate>& candidates, const BuildRequest& request,
                                             BuildTimes* times = nullptr);

// The reference's source: the C++ of a kernel's CPU lowering (serial loops, exact division).
std::string reference_source(const LoweredFunc& cpu_func);
// That source built with the host compiler into `work_dir` once (reused when present); the
// library's path. Lowers nothing, so it may run beside another thread's lowering.
std::string build_reference(const std::string& source, const std::string& work_dir);

// Parses nvcc -Xptxas -v output: the largest register count and spill bytes of the functions whose
// name starts with `kernels` (mangled or extern "C"; "" for every kernel); -1 where none was reported.
void parse_ptxas_report(const std::string& log, const std::string& kernels, int& registers, int& spill_bytes);

}  // namespace kiln::tune
