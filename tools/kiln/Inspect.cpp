// kiln inspect model.onnx: the graph with inferred dtypes and shapes (symbols kept), and which
// nodes kiln supports.
#include <iostream>

#include "Commands.h"
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

int run_inspect(const std::string& path) {
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
  return 0;
}

}  // namespace

void register_inspect(CLI::App& app) {
  auto path = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand(
      "inspect",
      "Print the model's graph with the dtypes and shapes kiln infers (symbolic dims such as\n"
      "batch or seq stay symbolic), and mark the nodes kiln can compile ([ok]) or not ([--]).");
  cmd->add_option("model", *path, "The .onnx file")->required();
  cmd->callback([path] { set_exit_code(run_inspect(*path)); });
}

}  // namespace kiln::cli
