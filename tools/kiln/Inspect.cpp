// kiln inspect model.onnx: the graph with inferred dtypes and shapes (symbols kept), and which
// nodes kiln supports.
#include <iostream>

#include "Commands.h"
#include "kiln/codegen/GraphFunctions.h"
#include "kiln/ir/IRPrinter.h"
#include "kiln/ir/Simplify.h"
#include "kiln/onnx/Import.h"
#include "kiln/ops/GraphTensors.h"

namespace kiln::cli {

namespace {

std::string type_text(const te::Tensor& t) {
  std::string s = std::string(dtype_name(t.dtype())) + "[";
  for (int d = 0; d < t.ndim(); ++d) s += (d ? ", " : "") + ir::to_string(ir::simplify(t.shape(d)));
  return s + "]";
}

// The kernels of the whole graph under the default GPU schedule: each one's stage note says what
// it computes and which path the schedule chose, and why (a contraction template and its knobs,
// or the tiled/elementwise/row schedules).
void print_kernels(const Graph& graph) {
  const auto functions = codegen::lower_graph(graph, codegen::Target::Cuda, "model");
  std::cout << "kernels (default GPU schedule, whole graph):\n";
  for (const auto& f : functions) {
    for (size_t k = 0; k < f.func.stage_notes.size(); ++k) std::cout << "  " << k << ": " << f.func.stage_notes[k] << "\n";
  }
}

int run_inspect(const std::string& path, bool kernels) {
  Graph graph = load_onnx(path);
  ops::BuildOptions options;
  options.keep_going = true;
  ops::GraphTensors built = ops::build_graph_tensors(graph, options);
  auto value_text = [&](int v) {
    if (v < 0) return std::string("<none>");
    const te::Tensor& t = built.tensors[v];
    return graph.values[v].name + ": " + (t.defined() ? type_text(t) : std::string("?"));
  };
  size_t supported = 0;
  for (const std::string& e : built.node_errors) supported += e.empty();
  std::cout << path << ": " << graph.nodes.size() << " nodes, ai.onnx opset " << graph.opset << "; kiln supports "
            << supported << " of them\n";
  std::cout << "inputs:\n";
  for (int v : graph.inputs) std::cout << "  " << value_text(v) << "\n";
  std::cout << "nodes:\n";
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    const Node& node = graph.nodes[n];
    const bool ok = built.node_errors[n].empty();
    std::cout << (ok ? "  [ok] " : "  [--] ") << node.name << " (" << node.op_type << ")";
    std::string ins;
    for (int v : node.inputs) ins += (ins.empty() ? "" : ", ") + (v < 0 ? std::string("<none>") : graph.values[v].name);
    std::cout << "  " << ins << " ->";
    for (size_t k = 0; k < node.outputs.size(); ++k) std::cout << (k ? "," : "") << " " << value_text(node.outputs[k]);
    std::cout << "\n";
    if (!ok) std::cout << "         not supported: " << built.node_errors[n] << "\n";
  }
  std::cout << "outputs:\n";
  for (int v : graph.outputs) std::cout << "  " << value_text(v) << "\n";
  if (kernels) {
    if (supported != graph.nodes.size()) {
      std::cout << "kernels: not shown, " << graph.nodes.size() - supported << " node(s) are not supported\n";
      return 0;
    }
    print_kernels(graph);
  }
  return 0;
}

}  // namespace

void register_inspect(CLI::App& app) {
  auto path = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand(
      "inspect",
      "Print the model's graph with the dtypes and shapes kiln infers (symbolic dims such as\n"
      "batch or seq stay symbolic), and mark the nodes kiln can compile ([ok]) or not ([--]).");
  auto kernels = std::make_shared<bool>(false);
  cmd->add_option("model", *path, "The .onnx file")->required();
  cmd->add_flag("--kernels", *kernels,
                "Also list the kernels of the whole graph under the default GPU schedule, each with the "
                "path chosen for it and why (contraction templates: small-M or tensor-core kernel, tiles)");
  cmd->callback([path, kernels] { set_exit_code(run_inspect(*path, *kernels)); });
}

}  // namespace kiln::cli
