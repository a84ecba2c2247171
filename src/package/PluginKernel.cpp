#include "PluginKernel.h"

#include <map>

#include "kiln/ir/IROperator.h"
#include "kiln/ir/IRPrinter.h"
#include "kiln/ir/Simplify.h"
#include "kiln/lower/Lower.h"
#include "kiln/schedule/Defaults.h"
#include "kiln/ops/GraphTensors.h"
#include "kiln/support/Error.h"

namespace kiln::package {

namespace {

// kiln_trt::ShapeOpCode values.
enum : int { kConst = 0, kInputDim = 1, kAdd = 2, kSub = 3, kMul = 4, kFloorDiv = 5, kMax = 7, kMin = 8 };

class ShapeProgram {
 public:
  ShapeProgram(std::map<std::string, std::pair<int, int>> dims, std::string where)
      : dims_(std::move(dims)), where_(std::move(where)) {}

  void emit(const ir::Expr& e, std::vector<ShapeStep>& out) const {
    if (auto c = ir::as_const_int(e)) {
      out.push_back({kConst, *c, 0});
    } else if (const auto* v = e.as<ir::Variable>()) {
      auto it = dims_.find(v->name);
      if (it == dims_.end()) {
        throw UserError(where_ + ": output dim '" + v->name +
                        "' is not an input dim, so TensorRT cannot compute the output shape from the inputs");
      }
      out.push_back({kInputDim, it->second.first, it->second.second});
    } else if (!binary<ir::Add>(e, kAdd, out) && !binary<ir::Sub>(e, kSub, out) && !binary<ir::Mul>(e, kMul, out) &&
               !binary<ir::Div>(e, kFloorDiv, out) && !binary<ir::Max>(e, kMax, out) &&
               !binary<ir::Min>(e, kMin, out)) {
      throw UserError(where_ + ": output dim " + ir::to_string(e) + " cannot be written with TensorRT's IExprBuilder");
    }
  }

 private:
  template <typename T>
  bool binary(const ir::Expr& e, int code, std::vector<ShapeStep>& out) const {
    const T* op = e.as<T>();
    if (!op) return false;
    emit(op->a, out);
    emit(op->b, out);
    out.push_back({code, 0, 0});
    return true;
  }

  std::map<std::string, std::pair<int, int>> dims_;
  std::string where_;
};

}  // namespace

LoweredFunc lower_plugin_subgraph(const Graph& sub, const std::string& function_name, const PluginOptions* options,
                                  std::string* note) {
  ops::GraphTensors built = ops::build_graph_tensors(sub);
  std::vector<te::Tensor> inputs, outputs;
  for (size_t i = 0; i < sub.inputs.size(); ++i) inputs.push_back(built.placeholders[i]);
  for (int v : sub.outputs) {
    KILN_ASSERT(built.tensors[v].defined(), "output {} not built", sub.values[v].name);
    outputs.push_back(built.tensors[v]);
  }
  std::optional<Schedule> tuned;
  if (options && options->schedule_for) {
    codegen::KernelDefinition kernel;
    kernel.name = function_name, kernel.inputs = inputs, kernel.outputs = outputs;
    std::string why;
    tuned = options->schedule_for(kernel, why);
    if (note) *note = why;
  }
  LoweredFunc func = lower(function_name, inputs, outputs, tuned ? *tuned : default_gpu_schedule(inputs, outputs));
  std::string nodes;
  for (const Node& n : sub.nodes) nodes += (nodes.empty() ? "" : ", ") + n.name + " (" + n.op_type + ")";
  func.comment = "kiln plugins: " + nodes;
  return func;
}

int trt_data_type(DType dtype, const std::string& what) {
  switch (dtype) {
    case DType::Float32: return 0;
    case DType::Float16: return 1;
    case DType::Int8: return 2;
    case DType::Int32: return 3;
    case DType::UInt8: return 5;
    case DType::BFloat16: return 7;
    default:
      throw UserError(what + " has type " + std::string(dtype_name(dtype)) +
                      ", which TensorRT cannot pass to a plugin (expected float32, float16, bfloat16, int8, uint8 or int32)");
  }
}

std::vector<std::vector<std::vector<ShapeStep>>> output_shape_programs(const Graph& sub, const std::string& plugin) {
  std::map<std::string, std::pair<int, int>> dims;
  for (size_t i = 0; i < sub.inputs.size(); ++i) {
    const Value& v = sub.values[sub.inputs[i]];
    for (size_t d = 0; d < v.type->shape.size(); ++d) {
      if (const auto* var = v.type->shape[d].as<ir::Variable>()) {
        dims.emplace(var->name, std::make_pair(static_cast<int>(i), static_cast<int>(d)));
      }
    }
  }
  const ShapeProgram program(dims, "plugin " + plugin);
  std::vector<std::vector<std::vector<ShapeStep>>> result;
  for (int o : sub.outputs) {
    const Value& v = sub.values[o];
    KILN_ASSERT(v.type, "output {} has no type", v.name);
    std::vector<std::vector<ShapeStep>> shape;
    for (const ir::Expr& d : v.type->shape) {
      std::vector<ShapeStep> steps;
      program.emit(ir::simplify(d), steps);
      shape.push_back(std::move(steps));
    }
    result.push_back(std::move(shape));
  }
  return result;
}

}  // namespace kiln::package
