#include "kiln/codegen/GraphFunctions.h"

#include <set>

#include "kiln/ir/IRVisitor.h"
#include "kiln/lower/Lower.h"
#include "kiln/schedule/Defaults.h"
#include "kiln/support/Error.h"

namespace kiln::codegen {

namespace {

LoweredFunc lower_for(Target target, const std::string& name, const std::vector<te::Tensor>& inputs,
                      const std::vector<te::Tensor>& outputs) {
  const Schedule schedule = target == Target::Cuda ? default_gpu_schedule(inputs, outputs) : Schedule();
  return lower(c_identifier(name), inputs, outputs, schedule);
}

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

std::vector<GraphFunction> lower_graph(const Graph& graph, Target target, const std::string& name,
                                       const std::vector<std::string>& node_names, const ops::BuildOptions& options) {
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
  std::vector<GraphFunction> functions;
  if (node_names.empty()) {
    std::vector<te::Tensor> outputs;
    for (int v : graph.outputs) {
      if (!built.tensors[v].defined()) user_error("graph output '{}' is not computed", graph.values[v].name);
      outputs.push_back(built.tensors[v]);
    }
    GraphFunction f;
    f.func = lower_for(target, name, built.placeholders, outputs);
    for (const Node& n : graph.nodes) f.nodes.push_back(n.name);
    f.known_inputs = built.data;
    drop_unread_constants(f);
    functions.push_back(std::move(f));
    return functions;
  }
  for (const std::string& node_name : node_names) {
    const Node& node = graph.nodes[graph.find_node(node_name)];
    std::vector<te::Tensor> inputs, outputs;
    GraphFunction f;
    for (int v : node.inputs) {
      if (v < 0) continue;
      const te::Tensor& t = built.tensors[v];
      bool seen = false;
      for (const te::Tensor& in : inputs) seen = seen || in.same_as(t);
      if (!seen && t.defined()) inputs.push_back(t);
    }
    for (const te::Tensor& t : inputs) {
      std::optional<HostTensor> data;
      for (size_t k = 0; k < built.placeholders.size(); ++k) {
        if (built.placeholders[k].same_as(t)) data = built.data[k];
      }
      f.known_inputs.push_back(data);
    }
    for (int v : node.outputs) {
      if (v >= 0 && built.tensors[v].defined()) outputs.push_back(built.tensors[v]);
    }
    f.func = lower_for(target, node.name, inputs, outputs);
    f.nodes = {node.name};
    drop_unread_constants(f);
    functions.push_back(std::move(f));
  }
  return functions;
}

}  // namespace kiln::codegen
