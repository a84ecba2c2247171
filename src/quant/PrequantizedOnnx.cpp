#include "kiln/quant/PrequantizedOnnx.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <set>

#include "kiln/onnx/Import.h"
#include "kiln/quant/QuantizedWeight.h"
#include "kiln/support/Error.h"

namespace kiln::quant {
namespace {

constexpr int32_t kOnnxFloat = 1, kOnnxUInt8 = 2, kOnnxFloat16 = 10, kOnnxBFloat16 = 16;
constexpr int32_t kOnnxFloat8E4M3FN = 17, kOnnxFloat4E2M1 = 23;

bool is_default_domain(const std::string& d) { return d.empty() || d == "ai.onnx"; }

const onnx::AttributeProto* find_attr(const onnx::NodeProto& node, const std::string& name) {
  for (const auto& a : node.attribute()) {
    if (a.name() == name) return &a;
  }
  return nullptr;
}
int64_t attr_int(const onnx::NodeProto& node, const std::string& name, int64_t fallback) {
  const auto* a = find_attr(node, name);
  return a ? a->i() : fallback;
}
float attr_float(const onnx::NodeProto& node, const std::string& name, float fallback) {
  const auto* a = find_attr(node, name);
  return a ? a->f() : fallback;
}

// The graph's tensors: which initializer, which node produces, which nodes read each name.
struct Index {
  std::map<std::string, int> initializer;
  std::map<std::string, int> producer;
  std::map<std::string, std::vector<int>> consumers;
  std::set<std::string> graph_outputs;

  explicit Index(const onnx::GraphProto& g) {
    for (int i = 0; i < g.initializer_size(); ++i) initializer[g.initializer(i).name()] = i;
    for (int n = 0; n < g.node_size(); ++n) {
      for (const auto& o : g.node(n).output()) producer[o] = n;
      for (const auto& in : g.node(n).input()) {
        if (!in.empty()) consumers[in].push_back(n);
      }
    }
    for (const auto& o : g.output()) graph_outputs.insert(o.name());
  }
  // The one node reading `name`, if exactly one does and it is not a graph output.
  std::optional<int> sole_consumer(const std::string& name) const {
    auto it = consumers.find(name);
    if (it == consumers.end() || it->second.size() != 1 || graph_outputs.count(name)) return std::nullopt;
    return it->second[0];
  }
  const onnx::TensorProto* init(const onnx::GraphProto& g, const std::string& name) const {
    auto it = initializer.find(name);
    return it == initializer.end() ? nullptr : &g.initializer(it->second);
  }
};

int64_t numel(const onnx::TensorProto& t) {
  int64_t n = 1;
  for (int64_t d : t.dims()) n *= d;
  return n;
}

bool stored_raw(const onnx::TensorProto& t) {
  return t.has_raw_data() || t.data_location() == onnx::TensorProto::EXTERNAL;
}

// The stored bytes of an initializer whatever its data type: inline raw_data, external data, or
// int32_data holding one byte per entry (how onnx.helper.make_tensor stores FLOAT4E2M1, two
// elements per byte, and FLOAT8E4M3FN without raw=True), as `bytes` bytes.
std::vector<uint8_t> raw_bytes(const onnx::TensorProto& t, int64_t bytes, const ExternalDataSource& source) {
  if (!stored_raw(t)) {
    if (t.int32_data_size() != bytes) {
      user_error("initializer '{}' holds {} int32_data entries, expected {} (one byte each)", t.name(), t.int32_data_size(), bytes);
    }
    std::vector<uint8_t> out(static_cast<size_t>(bytes));
    for (int64_t i = 0; i < bytes; ++i) out[i] = static_cast<uint8_t>(t.int32_data(static_cast<int>(i)) & 0xff);
    return out;
  }
  onnx::TensorProto copy = t;
  copy.set_data_type(kOnnxUInt8);
  copy.clear_dims();
  copy.add_dims(bytes);
  const HostTensor h = tensor_from_proto(copy, source, "initializer '" + t.name() + "'");
  return std::vector<uint8_t>(h.data(), h.data() + h.num_bytes());
}

// One matched layer, before the rewrite.
struct Match {
  int weight_dq = -1, scale_dq = -1, transpose = -1, linear = -1;
  std::string fp4, e4m3, scale2;  // initializer names
  bool weight_is_nk = true;       // w_fp4 stored [N, K] (else [K, N])
  int64_t n = 0, k = 0;
};

// Why the FLOAT4E2M1 DequantizeLinear `dq` is not the pattern, or "" with `m` filled in.
std::string match_layer(const onnx::GraphProto& g, const Index& ix, int dq, Match& m) {
  const onnx::NodeProto& node = g.node(dq);
  m.weight_dq = dq;
  m.fp4 = node.input(0);
  const onnx::TensorProto& w = *ix.init(g, m.fp4);
  if (w.dims_size() != 2) return "its FLOAT4E2M1 weight is not 2-D";
  if (node.input_size() > 2 && !node.input(2).empty()) return "it has a zero point";
  if (attr_int(node, "block_size", 0) != 16) return "block_size is not 16 (NVFP4)";
  int64_t axis = attr_int(node, "axis", 1);
  if (axis < 0) axis += 2;
  if (node.input_size() < 2) return "it has no scale";
  // The scale: E4M3 directly, or DequantizeLinear(E4M3, scalar tensor scale).
  const std::string& s = node.input(1);
  if (const onnx::TensorProto* st = ix.init(g, s)) {
    if (st->data_type() != kOnnxFloat8E4M3FN) return "its block scale is not FLOAT8E4M3FN";
    m.e4m3 = s;
  } else if (auto p = ix.producer.find(s); p != ix.producer.end() && g.node(p->second).op_type() == "DequantizeLinear" &&
                                            is_default_domain(g.node(p->second).domain())) {
    const onnx::NodeProto& sd = g.node(p->second);
    const onnx::TensorProto* e = sd.input_size() > 0 ? ix.init(g, sd.input(0)) : nullptr;
    const onnx::TensorProto* s2 = sd.input_size() > 1 ? ix.init(g, sd.input(1)) : nullptr;
    if (!e || e->data_type() != kOnnxFloat8E4M3FN) return "its scale's DequantizeLinear does not read a FLOAT8E4M3FN initializer";
    if (!s2 || numel(*s2) != 1) return "its scale's DequantizeLinear has no scalar constant tensor scale";
    if (s2->data_type() != kOnnxFloat && s2->data_type() != kOnnxFloat16 && s2->data_type() != kOnnxBFloat16) {
      return "its tensor scale is not float, float16 or bfloat16";
    }
    if (sd.input_size() > 2 && !sd.input(2).empty()) return "its scale's DequantizeLinear has a zero point";
    if (!ix.sole_consumer(s)) return "its scale feeds other nodes too";
    m.scale_dq = p->second;
    m.e4m3 = sd.input(0);
    m.scale2 = sd.input(1);
  } else {
    return "its scale is neither a FLOAT8E4M3FN initializer nor DequantizeLinear(FLOAT8E4M3FN, tensor scale)";
  }
  // The consumer: [Transpose ->] MatMul (as B) or Gemm (as B).
  auto next = ix.sole_consumer(node.output(0));
  if (!next) return "its output does not feed exactly one node";
  bool transposed = false;
  std::string b = node.output(0);
  if (g.node(*next).op_type() == "Transpose") {
    const onnx::NodeProto& t = g.node(*next);
    const auto* perm = find_attr(t, "perm");
    if (perm && !(perm->ints_size() == 2 && perm->ints(0) == 1 && perm->ints(1) == 0)) return "its Transpose is not perm=[1, 0]";
    m.transpose = *next;
    transposed = true;
    b = t.output(0);
    next = ix.sole_consumer(b);
    if (!next) return "its Transpose's output does not feed exactly one node";
  }
  const onnx::NodeProto& lin = g.node(*next);
  if (!is_default_domain(lin.domain()) || (lin.op_type() != "MatMul" && lin.op_type() != "Gemm")) {
    return "it does not feed a MatMul or Gemm";
  }
  if (lin.input_size() < 2 || lin.input(1) != b) return "it is not the MatMul/Gemm's weight (second) input";
  bool b_is_nk = false;  // the operand as the MatMul/Gemm reads it: [K, N] unless Gemm transB=1
  if (lin.op_type() == "Gemm") {
    if (attr_int(lin, "transA", 0) != 0) return "Gemm with transA=1";
    if (attr_float(lin, "alpha", 1.0f) != 1.0f) return "Gemm with alpha != 1";
    if (lin.input_size() > 2 && !lin.input(2).empty() && attr_float(lin, "beta", 1.0f) != 1.0f) return "Gemm with beta != 1";
    b_is_nk = attr_int(lin, "transB", 0) != 0;
  }
  m.linear = *next;
  m.weight_is_nk = b_is_nk != transposed;
  const int64_t d0 = w.dims(0), d1 = w.dims(1);
  m.n = m.weight_is_nk ? d0 : d1;
  m.k = m.weight_is_nk ? d1 : d0;
  if (axis != (m.weight_is_nk ? 1 : 0)) return "its blocks do not run along K (the reduction axis)";
  if (m.k % 16 != 0) return "K is not a multiple of 16";
  const onnx::TensorProto& e = *ix.init(g, m.e4m3);
  const bool scale_shape_ok = e.dims_size() == 2 && (m.weight_is_nk ? (e.dims(0) == m.n && e.dims(1) == m.k / 16)
                                                                      : (e.dims(0) == m.k / 16 && e.dims(1) == m.n));
  if (!scale_shape_ok) return "its E4M3 scale's shape is not the weight's with K divided by 16";
  if (lin.op_type() == "Gemm" && lin.input_size() > 2 && !lin.input(2).empty()) {
    const onnx::TensorProto* bias = ix.init(g, lin.input(2));
    if (!bias || bias->dims_size() != 1 || bias->dims(0) != m.n) return "Gemm whose C is not a constant [N] bias";
  }
  return "";
}

// The layer's QuantizedWeight from the stored bytes (no arithmetic on the values).
QuantizedWeight read_weight(const onnx::GraphProto& g, const Index& ix, const Match& m, const ExternalDataSource& source) {
  QuantizedWeight q;
  q.format = QuantFormat::NvFp4;
  q.n = m.n;
  q.k = m.k;
  q.group = 16;
  q.scale_dtype = DType::Float8E4M3;
  const std::vector<uint8_t> fp4 = raw_bytes(*ix.init(g, m.fp4), m.n * m.k / 2, source);
  const std::vector<uint8_t> e4m3 = raw_bytes(*ix.init(g, m.e4m3), m.n * m.k / 16, source);
  if (m.weight_is_nk) {
    q.data = fp4;
    q.scales = e4m3;
  } else {  // stored [K, N]: element (k, n) at flat index k·N + n
    q.data.assign(static_cast<size_t>(m.n * m.k / 2), 0);
    for (int64_t r = 0; r < m.n; ++r) {
      for (int64_t c = 0; c < m.k; ++c) {
        const int64_t src = c * m.n + r;
        const uint8_t nib = (fp4[src / 2] >> (4 * (src & 1))) & 0xf;
        q.data[(r * m.k + c) / 2] |= static_cast<uint8_t>(nib << (4 * (c & 1)));
      }
    }
    q.scales.assign(static_cast<size_t>(m.n * m.k / 16), 0);
    for (int64_t r = 0; r < m.n; ++r) {
      for (int64_t b = 0; b < m.k / 16; ++b) q.scales[r * (m.k / 16) + b] = e4m3[b * m.n + r];
    }
  }
  q.tensor_scale = 1.0f;
  if (!m.scale2.empty()) {
    const HostTensor s2 = tensor_from_proto(*ix.init(g, m.scale2), source, "initializer '" + m.scale2 + "'");
    q.tensor_scale = static_cast<float>(s2.get_double(0));
  }
  check_quantized_weight(q, "node '" + g.node(m.linear).name() + "' weight");
  return q;
}

onnx::TensorProto bytes_proto(const std::string& name, int32_t data_type, std::vector<int64_t> dims, const void* data, size_t n) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(data_type);
  for (int64_t d : dims) t.add_dims(d);
  t.set_raw_data(data, n);
  return t;
}

void set_int_attr(onnx::NodeProto& node, const std::string& name, int64_t v) {
  auto* a = node.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

}  // namespace

PrequantizedReport rewrite_prequantized_nvfp4(onnx::ModelProto& model, const ExternalDataSource& source) {
  PrequantizedReport report;
  onnx::GraphProto& g = *model.mutable_graph();
  const Index ix(g);
  std::set<int> drop_nodes;
  std::set<std::string> maybe_drop_inits;
  std::vector<onnx::TensorProto> new_inits;
  for (int dq = 0; dq < g.node_size(); ++dq) {
    const onnx::NodeProto& node = g.node(dq);
    if (node.op_type() != "DequantizeLinear" || !is_default_domain(node.domain()) || node.input_size() < 1) continue;
    const onnx::TensorProto* w = ix.init(g, node.input(0));
    if (!w || w->data_type() != kOnnxFloat4E2M1) continue;
    Match m;
    const std::string why = match_layer(g, ix, dq, m);
    const std::string label = node.name().empty() ? "DequantizeLinear of '" + node.input(0) + "'" : node.name();
    if (!why.empty()) {
      report.skipped.push_back(label + " (" + why + ")");
      continue;
    }
    QuantizedWeight q;
    try {
      q = read_weight(g, ix, m, source);
    } catch (const UserError& e) {
      user_error("{}: {}", label, e.what());
    }
    onnx::NodeProto& lin = *g.mutable_node(m.linear);
    const std::string base = lin.input(1);
    new_inits.push_back(bytes_proto(base + "_q4", kOnnxUInt8, {q.n, q.k / 2}, q.data.data(), q.data.size()));
    new_inits.push_back(bytes_proto(base + "_scales", kOnnxUInt8, {q.n, q.k / 16}, q.scales.data(), q.scales.size()));
    new_inits.push_back(bytes_proto(base + "_tensor_scale", kOnnxFloat, {1}, &q.tensor_scale, sizeof(float)));
    const std::string x = lin.input(0);
    const std::string bias = lin.op_type() == "Gemm" && lin.input_size() > 2 ? lin.input(2) : "";
    lin.clear_input();
    lin.add_input(x);
    lin.add_input(base + "_q4");
    lin.add_input(base + "_scales");
    lin.add_input(base + "_tensor_scale");
    if (!bias.empty()) lin.add_input(bias);
    lin.set_op_type("QuantLinear");
    lin.set_domain("kiln");
    lin.clear_attribute();
    set_int_attr(lin, "in_features", q.k);
    set_int_attr(lin, "out_features", q.n);
    set_int_attr(lin, "block_size", 16);
    auto* f = lin.add_attribute();
    f->set_name("format");
    f->set_type(onnx::AttributeProto::STRING);
    f->set_s("nvfp4");
    drop_nodes.insert(m.weight_dq);
    if (m.scale_dq >= 0) drop_nodes.insert(m.scale_dq);
    if (m.transpose >= 0) drop_nodes.insert(m.transpose);
    maybe_drop_inits.insert({m.fp4, m.e4m3});
    if (!m.scale2.empty()) maybe_drop_inits.insert(m.scale2);
    report.layers.push_back(lin.name().empty() ? base : lin.name());
  }
  if (report.layers.empty()) return report;
  // Remove the matched nodes, then the initializers nothing reads any more.
  google::protobuf::RepeatedPtrField<onnx::NodeProto> kept;
  for (int i = 0; i < g.node_size(); ++i) {
    if (!drop_nodes.count(i)) *kept.Add() = g.node(i);
  }
  g.mutable_node()->Swap(&kept);
  std::set<std::string> still_read;
  for (const auto& n : g.node()) {
    for (const auto& in : n.input()) still_read.insert(in);
  }
  for (const auto& o : g.output()) still_read.insert(o.name());
  google::protobuf::RepeatedPtrField<onnx::TensorProto> inits;
  for (const auto& t : g.initializer()) {
    if (!(maybe_drop_inits.count(t.name()) && !still_read.count(t.name()))) *inits.Add() = t;
  }
  for (auto& t : new_inits) *inits.Add() = std::move(t);
  g.mutable_initializer()->Swap(&inits);
  bool has_kiln = false;
  for (const auto& o : model.opset_import()) has_kiln = has_kiln || o.domain() == "kiln";
  if (!has_kiln) {
    auto* o = model.add_opset_import();
    o->set_domain("kiln");
    o->set_version(1);
  }
  return report;
}

Graph load_onnx_prequantized(const std::string& path, PrequantizedReport* report) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return load_onnx(path);  // the importer says what is wrong with the path
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  onnx::ModelProto model;
  if (!model.ParseFromString(bytes)) return load_onnx(path);  // and with the file
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  PrequantizedReport r = rewrite_prequantized_nvfp4(model, ExternalDataSource{dir});
  const bool rewritten = !r.layers.empty();
  if (report) *report = std::move(r);
  if (!rewritten) return load_onnx(path);
  return load_onnx_from_bytes(model.SerializeAsString(), dir);
}

}  // namespace kiln::quant
