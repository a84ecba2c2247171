#include "kiln/quant/QuantizeModel.h"

#include <algorithm>
#include <set>

#include "kiln/support/Error.h"

namespace kiln::quant {
namespace {

struct Candidate {
  int weight = -1;        // value id of the constant weight
  bool transposed = false;  // true: stored [N, K] (Gemm transB=1); false: [K, N]
  int bias = -1;          // value id of a constant [N] bias, or -1
};

// Why `node` cannot be quantized, or "" with `c` filled in.
std::string eligibility(const Graph& graph, const Node& node, Candidate& c) {
  if (node.op != OpKind::MatMul && node.op != OpKind::Gemm) return "not a MatMul or Gemm";
  if (node.inputs.size() < 2 || node.inputs[1] < 0) return "no weight input";
  const Value& w = graph.values[node.inputs[1]];
  if (!w.constant) return "its weight '" + w.name + "' is not a constant";
  const HostTensor& t = *w.constant;
  if (t.ndim() != 2) return "its weight '" + w.name + "' is not 2-D";
  if (!is_float(t.dtype()) || dtype_bits(t.dtype()) < 16) return "its weight '" + w.name + "' is not float";
  c.weight = node.inputs[1];
  if (node.op == OpKind::Gemm) {
    if (node.attr_int("transA", 0) != 0) return "Gemm with transA=1";
    if (node.attr_float("alpha", 1.0) != 1.0) return "Gemm with alpha != 1";
    c.transposed = node.attr_int("transB", 0) != 0;
    if (node.inputs.size() > 2 && node.inputs[2] >= 0) {
      if (node.attr_float("beta", 1.0) != 1.0) return "Gemm with beta != 1";
      const Value& bias = graph.values[node.inputs[2]];
      const int64_t n = t.shape()[c.transposed ? 0 : 1];
      if (!bias.constant || bias.constant->ndim() != 1 || bias.constant->shape()[0] != n) {
        return "Gemm whose C is not a constant [N] bias";
      }
      c.bias = node.inputs[2];
    }
  }
  return "";
}

int add_constant(Graph& graph, const std::string& name, HostTensor data) {
  Value v;
  v.name = name;
  std::vector<ir::Expr> shape;
  for (int64_t d : data.shape()) shape.push_back(ir::Expr(d));
  v.type = TensorType{data.dtype(), shape};
  v.constant = std::move(data);
  graph.values.push_back(std::move(v));
  return static_cast<int>(graph.values.size()) - 1;
}

HostTensor bytes_tensor(DType dtype, std::vector<int64_t> shape, const std::vector<uint8_t>& bytes) {
  HostTensor t(dtype, std::move(shape));
  KILN_ASSERT(t.num_bytes() == bytes.size(), "packed size mismatch");
  std::copy(bytes.begin(), bytes.end(), t.data());
  return t;
}

const char* format_attr(QuantFormat f) {
  switch (f) {
    case QuantFormat::NvFp4: return "nvfp4";
    case QuantFormat::MxFp4: return "mxfp4";
    case QuantFormat::Int4: return "int4";
  }
  return "?";
}

}  // namespace

QuantizeModelReport quantize_model(Graph& graph, const QuantizeModelOptions& options) {
  QuantizeModelReport report;
  std::set<std::string> wanted(options.nodes.begin(), options.nodes.end());
  for (const std::string& name : wanted) {
    if (graph.find_node(name) < 0) user_error("--nodes names '{}', but the model has no node of that name", name);
  }
  std::vector<int> uses(graph.values.size(), 0);
  for (const Node& node : graph.nodes) {
    for (int v : node.inputs) {
      if (v >= 0) ++uses[v];
    }
  }
  for (Node& node : graph.nodes) {
    if (!wanted.empty() && !wanted.count(node.name)) continue;
    if (node.op != OpKind::MatMul && node.op != OpKind::Gemm) {
      if (!wanted.empty()) user_error("node '{}' is a {}, not a MatMul or Gemm; only those can be quantized", node.name, node.op_type);
      continue;
    }
    Candidate c;
    const std::string why = eligibility(graph, node, c);
    if (!why.empty()) {
      if (!wanted.empty()) user_error("node '{}' cannot be quantized: {}", node.name, why);
      report.skipped.push_back(node.name + " (" + why + ")");
      continue;
    }
    const HostTensor& w = *graph.values[c.weight].constant;
    const int64_t n = w.shape()[c.transposed ? 0 : 1], k = w.shape()[c.transposed ? 1 : 0];
    std::vector<float> rows(static_cast<size_t>(n * k));  // W [n, k], y = x · Wᵀ
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t col = 0; col < k; ++col) {
        rows[r * k + col] = static_cast<float>(w.get_double(c.transposed ? r * k + col : col * n + r));
      }
    }
    QuantizedWeight q;
    const auto pre = options.prequantized.find(graph.values[c.weight].name);
    if (pre != options.prequantized.end()) {
      q = pre->second;
      if (q.n != n || q.k != k) {
        user_error("node '{}': the checkpoint's '{}' is [{}, {}] (N x K), the model's weight is [{}, {}]", node.name, pre->first, q.n,
                   q.k, n, k);
      }
      report.from_checkpoint.push_back(node.name);
    } else {
      try {
        q = quantize(rows, n, k, options.spec);
      } catch (const UserError& e) {
        user_error("node '{}': {}", node.name, e.what());
      }
    }
    LayerReport layer{node.name, n, k, quantization_error(rows, q)};
    report.weight_bytes_before += static_cast<int64_t>(w.num_bytes());
    report.weight_bytes_after += static_cast<int64_t>(q.data.size() + q.scales.size() + q.zeros.size());

    const std::string base = graph.values[c.weight].name;
    const DType scale_dtype = q.format == QuantFormat::Int4 ? q.scale_dtype : DType::UInt8;
    std::vector<int> inputs = {node.inputs[0]};
    inputs.push_back(add_constant(graph, base + "_q4", bytes_tensor(DType::UInt8, {n, k / 2}, q.data)));
    inputs.push_back(add_constant(graph, base + "_scales", bytes_tensor(scale_dtype, {n, k / q.group}, q.scales)));
    if (q.format == QuantFormat::NvFp4) {
      HostTensor ts(DType::Float32, {1});
      ts.set_double(0, q.tensor_scale);
      inputs.push_back(add_constant(graph, base + "_tensor_scale", ts));
    } else if (q.format == QuantFormat::Int4) {
      inputs.push_back(add_constant(graph, base + "_zeros", bytes_tensor(scale_dtype, {n, k / q.group}, q.zeros)));
    } else {
      inputs.push_back(-1);
    }
    if (c.bias >= 0) inputs.push_back(c.bias);
    while (inputs.back() < 0) inputs.pop_back();
    // The old weight goes when nothing else reads it.
    if (--uses[c.weight] == 0) {
      graph.values[c.weight].constant.reset();
      graph.values[c.weight].type.reset();
    }
    node.op = OpKind::QuantLinear;
    node.op_type = "QuantLinear";
    node.domain = "kiln";
    node.inputs = inputs;
    node.attributes.clear();
    auto int_attr = [](int64_t v) {
      Attribute a;
      a.kind = Attribute::Kind::Int;
      a.i = v;
      return a;
    };
    node.attributes["in_features"] = int_attr(k);
    node.attributes["out_features"] = int_attr(n);
    node.attributes["block_size"] = int_attr(q.group);
    Attribute fmt;
    fmt.kind = Attribute::Kind::String;
    fmt.s = format_attr(q.format);
    node.attributes["format"] = fmt;
    report.layers.push_back(layer);
    if (options.on_layer) options.on_layer(layer);
  }
  return report;
}

}  // namespace kiln::quant
