#pragma once
// Runs a whole graph on a backend: builds its tensor expressions (ops/), lowers them, and runs
// the result. The CPU backend interprets the lowered IR; the CUDA backend (codegen/, on a GPU
// machine) compiles it.
#include <map>
#include <string>
#include <vector>

#include "kiln/graph/Graph.h"
#include "kiln/ops/GraphTensors.h"
#include "kiln/runtime/HostTensor.h"

namespace kiln {

// Runs `graph` on the CPU reference backend. `inputs` are keyed by graph input name; the result
// holds one tensor per graph output, in order.
std::vector<HostTensor> run_graph_on_cpu(const Graph& graph, const std::map<std::string, HostTensor>& inputs,
                                         const ops::BuildOptions& options = ops::BuildOptions());

}  // namespace kiln
