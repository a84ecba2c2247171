#pragma once
// From a graph to the lowered functions that codegen prints: the whole graph as one function
// (elementwise chains fused by inlining, one kernel per remaining stage or per fused row group),
// or one function per chosen node. Schedules: the default GPU schedules for CUDA
// (schedule/Defaults.h), serial loops for the CPU reference.
#include <string>
#include <vector>

#include "kiln/codegen/Codegen.h"
#include "kiln/graph/Graph.h"
#include "kiln/lower/LoweredFunc.h"
#include "kiln/ops/GraphTensors.h"
#include "kiln/schedule/Schedule.h"

namespace kiln::codegen {

struct GraphFunction {
  LoweredFunc func;
  std::vector<std::string> nodes;  // the model nodes it implements
  // Values of inputs known when compiling (initializers, Constants), in func.inputs order;
  // undefined where the caller passes the tensor.
  std::vector<std::optional<HostTensor>> known_inputs;
};

// One function to generate, before lowering: its tensor expressions (the tuner lowers the same
// definition under many schedules; tune/).
struct KernelDefinition {
  std::string name;  // C identifier
  std::vector<te::Tensor> inputs, outputs;
  std::vector<std::string> nodes;
  std::vector<std::optional<HostTensor>> known_inputs;  // in `inputs` order
};

// The functions lower_graph makes, not yet lowered (same rules, same errors).
std::vector<KernelDefinition> kernel_definitions(const Graph& graph, const std::string& name,
                                                 const std::vector<std::string>& node_names = {},
                                                 const ops::BuildOptions& options = ops::BuildOptions());

// Lowers one definition: with `schedule` when given (a tuned one), else the default for the
// target (default GPU schedules for CUDA, serial loops for the CPU reference).
GraphFunction lower_kernel(const KernelDefinition& kernel, Target target, const Schedule* schedule = nullptr);

// `node_names` empty: the whole graph as one function named after `name`. Otherwise one
// function per node; an unknown node name is a UserError listing every unknown name.
std::vector<GraphFunction> lower_graph(const Graph& graph, Target target, const std::string& name,
                                       const std::vector<std::string>& node_names = {},
                                       const ops::BuildOptions& options = ops::BuildOptions());

}  // namespace kiln::codegen
