#pragma once
// Code generation: lowered functions to source text, through one printer hierarchy
// (src/codegen/CodePrinter.h: a C printer that owns indentation, names, temporaries and scopes;
// CppPrinter for the CPU backend and CudaPrinter for CUDA override only its hooks).
//
// Every generated function is exported through the kernel contract (runtime/kiln_abi.h):
//   int32_t kiln_<name>(const DLTensor* args, int32_t num_args, void* workspace, void* stream);
//   const KilnSignature* kiln_signature_<name>(void);
// and under TVM-FFI's stable C ABI as `__tvm_ffi_<name>` (KILN_TVM_FFI_EXPORT of
// runtime/tvm_ffi_export.h, so `tvm_ffi.load_module` loads generated libraries), and every generated library exports, once, `kiln_library_functions` (its table of functions)
// and `const char* kiln_last_error(void)`.
// Generated sources include "kiln/runtime/validate.h" and "kiln/codegen/runtime/kiln_cpu.h" or
// "kiln_cuda.cuh"; support_files() gives their text, to be written next to the sources.
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "kiln/lower/LoweredFunc.h"

namespace kiln::codegen {

enum class Target : uint8_t { Cpu, Cuda };
const char* target_name(Target target);

struct ModuleOptions {
  // Also define the library entry points kiln_library_functions() and kiln_last_error() in this
  // translation unit (exactly one TU of a library does). The table lists this TU's functions and
  // `other_functions` (C identifiers of functions defined in the library's other TUs).
  bool define_last_error = true;
  std::vector<std::string> other_functions;
  // A line printed at the top (what generated it: command, model).
  std::string banner;
  // Per function name: indices into its inputs of the tensors the library owns (a model
  // library's weights and constants, package/ModelLibrary.h). They are not parameters: the entry
  // point takes them, in this order, from kiln_model_constants() (runtime/kiln_model.h).
  std::map<std::string, std::vector<int>> library_constants;
  // CUDA: when set, each GEMM template call (the instantiations of kernels/gemm that take most of
  // a build) is compiled in a translation unit of its own, appended here: the unit defines
  // `<kernel>_launch` and the module calls it. A unit's text depends only on its contraction, so a
  // build cache reuses its object across libraries that differ elsewhere (tune/Builder.cpp).
  std::vector<std::string>* template_units = nullptr;
};

// One translation unit holding `funcs` (C++ for Cpu, CUDA C++ for Cuda). UnsupportedError when a
// function uses a dtype the target cannot print (float8).
std::string generate_module(const std::vector<LoweredFunc>& funcs, Target target,
                            const ModuleOptions& options = ModuleOptions());

// A TU that defines only the library entry points (kiln_library_functions over `functions`,
// defined in other TUs, and kiln_last_error), for libraries built from one TU per function.
std::string generate_library_module(Target target, const std::vector<std::string>& functions);
// The same with an empty function table (kept for callers written before the table existed).
std::string generate_last_error_module(Target target);

// The machine-readable signature of `func` (schema: docs/ARCHITECTURE.md); `library_constants`
// as in ModuleOptions.
std::string signature_json(const LoweredFunc& func, Target target, const std::vector<int>& library_constants = {});

// The C identifier kiln uses for a model-derived name ("conv1/Relu:0" -> "conv1_Relu_0").
std::string c_identifier(const std::string& name);

// The text of a boilerplate template ("templates/CMakeLists.txt.in"), @NAME@-style placeholders.
const std::string& embedded_template(const std::string& name);

// Files generated code includes, as (relative path under an include folder, text).
std::vector<std::pair<std::string, std::string>> support_files();

}  // namespace kiln::codegen
