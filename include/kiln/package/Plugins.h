#pragma once
// TensorRT plugin packages from chosen nodes of an ONNX model (`kiln plugins`, issue 3).
//
// Each selected node, or each connected group of selected nodes with `fuse`, becomes one
// TensorRT 10 IPluginV3 plugin whose enqueue calls the group's generated CUDA kernel through the
// kernel contract (runtime/kiln_abi.h), one kernel per dtype variant. The output folder holds
// one self-contained package per plugin, one combined library for all of them, the rewritten
// ONNX model whose replaced nodes name the plugins (package/PluginNodes.h says how it still runs
// on kiln's CPU backend), and report.md / report.json. Everything is written to a temporary
// folder beside the output and renamed into place only when complete.
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kiln/codegen/GraphFunctions.h"

#include "kiln/ir/Type.h"

namespace kiln::package {

struct PluginOptions {
  std::vector<std::string> nodes;     // node names to replace
  std::vector<std::string> op_types;  // and every node of these op types
  bool fuse = false;                  // one plugin per connected group of selected nodes
  std::vector<int> archs = {90};      // CUDA SM versions (90 = sm_90)
  std::vector<DType> dtypes = {DType::Float32, DType::Float16, DType::BFloat16};
  std::string plugin_namespace;       // "" = TensorRT's default namespace
  std::string prefix = "kiln_";       // plugin names are <prefix><node or group name>
  std::string plugin_version = "1";
  // Build the libraries right away (needs nvcc and TensorRT headers; a clear error when absent).
  bool build = true;
  std::string tensorrt_root;          // "" = $TENSORRT_ROOT
  std::string nvcc;                   // "" = $CUDACXX, PATH, /usr/local/cuda/bin/nvcc
  int build_jobs = 2;
  // Values of the symbolic dims for test data ({} = 2, 3, 4, ... in order of appearance).
  std::vector<std::pair<std::string, int64_t>> test_symbols;
  std::function<void(const std::string&)> progress;  // one line per step; may be empty
  // A tuned schedule for a kernel (kiln plugins --records: tune/Apply.h), or none for the default;
  // `note` says which, for the report. Empty: default schedules.
  std::function<std::optional<Schedule>(const codegen::KernelDefinition&, std::string& note)> schedule_for;
};

struct PluginSummary {
  std::string name;
  std::vector<std::string> replaced_nodes;
  std::vector<std::string> inputs, outputs;  // plugin input / output value names
  std::vector<std::string> fields;           // "axis: INT32 [-1]"
  std::vector<std::string> dtypes;
  std::string library;  // path of lib<plugin>.so when built, else ""
  // The kernel-contract functions (kiln_<fn>, one per dtype) and the sources that build them
  // alone into a kiln library (<plugin>_kernels.cu + <plugin>_kernel_library.cu, headers in
  // <plugin>/common/include), loadable by kiln.load and tvm_ffi.load_module: for benchmarks.
  std::vector<std::string> functions;
  std::vector<std::string> kernel_sources;  // relative to the output folder
  std::vector<std::string> schedule_notes;  // per function: tuned or default schedule (schedule_for)
};

struct PluginsResult {
  std::string out_dir;
  std::string rewritten_model;   // <out>/<model>.plugins.onnx
  std::string combined_library;  // <out>/lib/lib<prefix>plugins.so when built
  std::vector<PluginSummary> plugins;
  bool built = false;
};

// UserError: unknown node name or op type, nothing selected, an op kiln cannot generate, a dtype
// an op cannot take, a fused group that is not convex, missing nvcc or TensorRT headers when
// building, a failed build (with its log's path).
PluginsResult make_plugins(const std::string& model_path, const std::string& out_dir, const PluginOptions& options);

// "fp32,fp16,bf16" (also float32, float16, bfloat16) -> dtypes; UserError names a bad entry.
std::vector<DType> parse_plugin_dtypes(const std::string& list);
// "sm_90,sm_110" (also 90, sm90) -> {90, 110}.
std::vector<int> parse_plugin_archs(const std::string& list);

}  // namespace kiln::package
