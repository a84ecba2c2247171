#include "kiln/runtime/GraphRunner.h"

#include "kiln/lower/Lower.h"
#include "kiln/runtime/Interpreter.h"
#include "kiln/support/Error.h"

namespace kiln {

std::vector<HostTensor> run_graph_on_cpu(const Graph& graph, const std::map<std::string, HostTensor>& inputs,
                                         const ops::BuildOptions& options) {
  ops::GraphTensors built = ops::build_graph_tensors(graph, options);
  std::vector<te::Tensor> outputs;
  for (int v : graph.outputs) {
    if (!built.tensors[v].defined()) user_error("graph output '{}' is not computed", graph.values[v].name);
    outputs.push_back(built.tensors[v]);
  }
  std::vector<HostTensor> feeds;
  for (size_t k = 0; k < built.placeholders.size(); ++k) {
    if (built.data[k]) {
      feeds.push_back(*built.data[k]);
      continue;
    }
    const std::string& name = built.placeholders[k].name();
    auto it = inputs.find(name);
    if (it == inputs.end()) user_error("no value given for graph input '{}'", name);
    feeds.push_back(it->second);
  }
  // As the CPU backend lowers (codegen::lower_kernel): a Conv's or MatMul's elementwise operand is
  // computed once per element, not at every read.
  LowerOptions lowering;
  lowering.materialize_reread = true;
  LoweredFunc func = lower(graph.name.empty() ? "graph" : graph.name, built.placeholders, outputs, Schedule(), lowering);
  return interpret(func, feeds);
}

}  // namespace kiln
