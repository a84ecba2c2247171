#pragma once
// Building generated sources into shared libraries: nvcc for CUDA, the host C++ compiler for
// the CPU backend. Used by `kiln compile` and the CUDA test backend.
#include <string>
#include <vector>

#include "kiln/codegen/Codegen.h"

namespace kiln::codegen {

// nvcc from $KILN_NVCC, $CUDA_HOME/bin, PATH or /usr/local/cuda/bin; "" when there is none.
std::string find_nvcc();

// Writes support_files() under `dir`/include.
void write_support_files(const std::string& dir);

// A hex digest of support_files() (names and texts): what a build from generated sources depends on
// beyond their own text, so keys of built objects and libraries include it.
std::string support_files_digest();

struct BuildOptions {
  Target target = Target::Cuda;
  std::vector<std::string> archs = {"sm_90"};  // CUDA only
  std::string include_dir;                      // holds support_files()
  std::string log_path;                         // compiler output goes here
  std::vector<std::string> extra_flags;         // after the defaults ("-O3", "-Xptxas -v"; tune/)
  bool compile_only = false;                    // an object file (-c), not a shared library
};

// nvcc's target flags for `archs` ("sm_80", "sm_90", "sm_110", ...): one -gencode each. sm_90 is
// built as sm_90a (its machine code runs on sm_90 devices only, as sm_90's does) so that the
// Hopper contraction kernel (kernels/gemm/gemm_wgmma.cuh: wgmma, setmaxnreg) is compiled, and
// KILN_GEMM_SM90A tells the host code it is there.
std::string cuda_arch_flags(const std::vector<std::string>& archs);

// The command line that builds `sources` (or, with compile_only, one source) into shared library
// (object file) `output`. Sources may include object files built with compile_only.
std::string build_command(const std::vector<std::string>& sources, const std::string& output,
                          const BuildOptions& options);

// Runs build_command; UserError with the log's tail when the compiler fails or is missing.
void build_shared_library(const std::vector<std::string>& sources, const std::string& output,
                          const BuildOptions& options);

// Builds `sources` into shared library `output` with up to `jobs` compilers at once: each source
// into an object file in the folder `objects` beside `output` (<source file name>.o), then one link.
// The first failure is thrown (UserError, as build_shared_library) once the running compiles have
// finished. One job or one source: build_shared_library's single command.
void build_shared_library_parallel(const std::vector<std::string>& sources, const std::string& output,
                                   const BuildOptions& options, int jobs);

}  // namespace kiln::codegen
