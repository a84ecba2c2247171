#pragma once
// The conformance runner's CUDA backend (runs on the GPU machine). Generating and compiling one
// library per test case would take hours, so it works in three passes over the cases:
//   1. generate: every case's graph is lowered with the default GPU schedules and printed as CUDA;
//   2. build: the functions go into a few large translation units compiled in parallel by nvcc;
//   3. run: each library is dlopen'ed and every case runs THROUGH THE KERNEL CONTRACT
//      (kiln_<name>(args, num_args, workspace, stream)) on device buffers, outputs poisoned first,
//      and its outputs are compared with the expected ones as on the CPU backend.
// The CUDA runtime is loaded with dlopen at run time, so kiln itself needs no GPU libraries to
// start (CI has none).
#include <string>
#include <vector>

#include "kiln/runtime/Conformance.h"

namespace kiln {

struct CudaTestOptions {
  std::string work_dir = "kiln-cuda-test";  // generated sources and libraries
  std::string arch = "sm_90";
  int translation_units = 16;
  int jobs = 16;  // parallel nvcc processes
  // Keep a translation unit's library from an earlier run in the same work_dir when its generated
  // source, the build's architecture and the headers it includes (codegen::support_files(): the
  // kernel templates) are byte-identical (a second pass under compute-sanitizer, or libraries built
  // ahead on another machine by the same kiln).
  bool reuse_built = false;
};

// What a translation unit's stamp file (library + ".stamp") holds once it is built for `arch`: the
// arch, then a digest of codegen::support_files(), so that a library built by a kiln with other
// kernel templates is not taken for current.
std::string build_stamp(const std::string& arch);

// Whether `library` was built from exactly `source_text` for `arch` by an earlier run: its source
// file holds the same text and its stamp file says build_stamp(arch).
bool built_library_current(const std::string& source_file, const std::string& source_text, const std::string& library,
                           const std::string& arch);

// Results in the order of `folders`. UserError when nvcc or the CUDA runtime is missing.
std::vector<CaseResult> run_test_cases_cuda(const std::vector<std::string>& folders, const CudaTestOptions& options);

}  // namespace kiln
