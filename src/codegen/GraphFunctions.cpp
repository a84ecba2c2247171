#include "kiln/codegen/GraphFunctions.h"

#include <set>

#include "kiln/ir/IRVisitor.h"
#include "kiln/lower/Lower.h"
#include "kiln/schedule/Defaults.h"
#include "kiln/support/Error.h"

namespace kiln::codegen {

namespace {

class UsedBuffers : public ir::IRVisitor {
 public:
  std::set<const ir::BufferNode*> used;
  using ir::IRVisitor::visit;

 protected:
  void visit(const ir::Load* op) override {
    used.insert(op->buffer.get());
    ir::IRVisitor::visit(op);
  }
};

// Inputs whose values were known when compiling and that no stage reads (a ReduceSum's axes, a
// Reshape's shape) are not parameters: callers should not pass what the kernel never reads.
void drop_unread_constants(GraphFunction& f) {
  UsedBuffers used;
  used.visit(f.func.body);
  std::set<const ir::BufferNode*> outputs;
  for (const ir::Buffer& b : f.func.outputs) outputs.insert(b.get());
  std::vector<ir::Buffer> inputs;
  std::vector<std::optional<HostTensor>> known;
  for (size_t k = 0; k < f.func.inputs.size(); ++k) {
    const ir::Buffer& b = f.func.inputs[k];
    if (f.known_inputs[k] && !used.used.count(b.get()) && !outputs.count(b.get())) continue;
    inputs.push_back(b);
    known.push_back(f.known_inputs[k]);
  }
  f.func.inputs = inputs;
  f.known_inputs = known;
}

}  // namespace

std::vector<KernelDefinition> kernel_definitions(const Graph& graph, const std::string& name,
                                                 const std::vector<std::string>& node_names,
                                                 const ops::BuildOptions& options) {
  std::vector<std::string> unknown;
  for (const std::string& n : node_names) {
    if (graph.find_node(n) < 0) unknown.push_back("'" + n + "'");
  }
  if (!unknown.empty()) {
    std::string list, known;
    for (const std::string& u : unknown) list += (list.empty() ? "" : ", ") + u;
    for (size_t k = 0; k < graph.nodes.size() && k < 20; ++k) known += (k ? ", " : "") + graph.nodes[k].name;
    user_error("--nodes: no node named {} in the model (its nodes: {}{})", list, known,
               graph.nodes.size() > 20 ? ", ..." : "");
  }
  ops::GraphTensors built = ops::build_graph_tensors(graph, options);
  std::vector<KernelDefinition> kernels;
  if (node_names.empty()) {
    KernelDefinition k;
    k.name = c_identifier(name);
    for (int v : graph.outputs) {
      if (!built.tensors[v].defined()) user_error("graph output '{}' is not computed", graph.values[v].name);
      k.outputs.push_back(built.tensors[v]);
    }
    k.inputs = built.placeholders;
    for (const Node& n : graph.nodes) k.nodes.push_back(n.name);
    k.known_inputs = built.data;
    kernels.push_back(std::move(k));
    return kernels;
  }
  for (const std::string& node_name : node_names) {
    const Node& node = graph.nodes[graph.find_node(node_name)];
    KernelDefinition k;
    k.name = c_identifier(node.name);
    std::vector<int> reads = node.inputs;  // and what its subgraphs read from the graph
    reads.insert(reads.end(), node.implicit_inputs.begin(), node.implicit_inputs.end());
    for (int v : reads) {
      if (v < 0) continue;
      const te::Tensor& t = built.tensors[v];
      bool seen = false;
      for (const te::Tensor& in : k.inputs) seen = seen || in.same_as(t);
      if (!seen && t.defined()) k.inputs.push_back(t);
    }
    for (int v : node.outputs) {
      if (v >= 0 && built.tensors[v].defined()) k.outputs.push_back(built.tensors[v]);
    }
    // Constants made inside the node (a subgraph's initializers) are inputs with known data.
    for (const te::Tensor& t : te::topological_order(k.outputs, k.inputs)) {
      bool is_output = false;
      for (const te::Tensor& out : k.outputs) is_output = is_output || out.same_as(t);
      if (!t.is_placeholder() || is_output) continue;
      for (size_t i = 0; i < built.placeholders.size(); ++i) {
        if (built.placeholders[i].same_as(t) && built.data[i]) k.inputs.push_back(t);
      }
    }
    for (const te::Tensor& t : k.inputs) {
      std::optional<HostTensor> data;
      for (size_t i = 0; i < built.placeholders.size(); ++i) {
        if (built.placeholders[i].same_as(t)) data = built.data[i];
      }
      k.known_inputs.push_back(data);
    }
    k.nodes = {node.name};
    kernels.push_back(std::move(k));
  }
  return kernels;
}

GraphFunction lower_kernel(const KernelDefinition& kernel, Target target, const Schedule* schedule) {
  GraphFunction f;
  const Schedule chosen = schedule ? *schedule
                          : target == Target::Cuda ? default_gpu_schedule(kernel.inputs, kernel.outputs)
                                                   : Schedule();
  LowerOptions options;
  options.materialize_reread = target == Target::Cpu && schedule == nullptr;
  f.func = lower(kernel.name, kernel.inputs, kernel.outputs, chosen, options);
  f.nodes = kernel.nodes;
  f.known_inputs = kernel.known_inputs;
  drop_unread_constants(f);
  return f;
}

std::vector<GraphFunction> lower_graph(const Graph& graph, Target target, const std::string& name,
                                       const std::vector<std::string>& node_names, const ops::BuildOptions& options) {
  std::vector<GraphFunction> functions;
  for (const KernelDefinition& k : kernel_definitions(graph, name, node_names, options)) {
    functions.push_back(lower_kernel(k, target));
  }
  return functions;
}

}  // namespace kiln::codegen
