// Model Optimizer-style NVFP4 ONNX models (FLOAT4E2M1 weights behind blocked DequantizeLinear),
// built here from kiln's own quantizer output, rewritten to kiln.QuantLinear: the packed bytes,
// scales and tensor scale must be bit-identical to what `kiln quantize` writes for the same float
// weights. FLOAT4E2M1 (23) and FLOAT8E4M3FN (17) initializers are written by data type number,
// which the protobuf classes accept whatever onnx version generated them.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <unistd.h>

#include "../onnx/ModelBuilder.h"
#include "kiln/onnx/Import.h"
#include "kiln/quant/PrequantizedOnnx.h"
#include "kiln/quant/Quantize.h"
#include "kiln/quant/QuantizeModel.h"
#include "kiln/support/Error.h"

namespace kiln {
namespace {

constexpr int32_t kFloat = 1, kFloat8E4M3FN = 17, kFloat4E2M1 = 23;

std::vector<float> random_rows(int64_t n, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 0.05f);
  std::vector<float> w(static_cast<size_t>(n * k));
  for (float& v : w) v = dist(rng);
  return w;
}

onnx::TensorProto& raw_initializer(testing::ModelBuilder& b, const std::string& name, int32_t type, std::vector<int64_t> dims,
                                   const void* data, size_t bytes) {
  auto* t = b.graph().add_initializer();
  t->set_name(name);
  t->set_data_type(type);
  for (int64_t d : dims) t->add_dims(d);
  t->set_raw_data(data, bytes);
  return *t;
}

// As onnx.helper.make_tensor stores FLOAT4E2M1 / FLOAT8E4M3FN without raw=True: one byte per
// int32_data entry.
onnx::TensorProto& int32_initializer(testing::ModelBuilder& b, const std::string& name, int32_t type, std::vector<int64_t> dims,
                                     const std::vector<uint8_t>& bytes) {
  auto* t = b.graph().add_initializer();
  t->set_name(name);
  t->set_data_type(type);
  for (int64_t d : dims) t->add_dims(d);
  for (uint8_t v : bytes) t->add_int32_data(v);
  return *t;
}

onnx::AttributeProto& int_attr(onnx::NodeProto& n, const std::string& name, int64_t v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
  return *a;
}

// [n, k] nibbles (element 2j low) -> [k, n] in the same packing; E4M3 [n, k/16] -> [k/16, n].
std::vector<uint8_t> transpose_nibbles(const std::vector<uint8_t>& d, int64_t n, int64_t k) {
  std::vector<uint8_t> out(d.size(), 0);
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t c = 0; c < k; ++c) {
      const int64_t s = r * k + c, t = c * n + r;
      const uint8_t v = (d[s / 2] >> (4 * (s % 2))) & 0xf;
      out[t / 2] |= static_cast<uint8_t>(v << (4 * (t % 2)));
    }
  }
  return out;
}
std::vector<uint8_t> transpose_bytes(const std::vector<uint8_t>& d, int64_t rows, int64_t cols) {
  std::vector<uint8_t> out(d.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out[c * rows + r] = d[r * cols + c];
  return out;
}

// The QuantLinear node of a graph and its constant inputs' bytes.
struct QuantLinearBytes {
  std::vector<uint8_t> data, scales, tensor_scale;
  std::map<std::string, Attribute> attributes;
  int num_inputs = 0;
};
QuantLinearBytes quant_linear_of(const Graph& g) {
  QuantLinearBytes out;
  int found = 0;
  for (const Node& node : g.nodes) {
    if (node.op != OpKind::QuantLinear) continue;
    ++found;
    auto bytes = [&](int i) {
      const HostTensor& t = *g.values[node.inputs[i]].constant;
      return std::vector<uint8_t>(t.data(), t.data() + t.num_bytes());
    };
    out.data = bytes(1);
    out.scales = bytes(2);
    out.tensor_scale = bytes(3);
    out.attributes = std::map<std::string, Attribute>(node.attributes.begin(), node.attributes.end());
    out.num_inputs = static_cast<int>(node.inputs.size());
  }
  EXPECT_EQ(found, 1) << "expected one kiln.QuantLinear node";
  return out;
}

// What `kiln quantize` writes for y = MatMul(x [1, k], W^T) with W [n, k] given as rows.
QuantLinearBytes kiln_quantize_reference(const std::vector<float>& rows, int64_t n, int64_t k) {
  testing::ModelBuilder b(21);
  b.input("x", kFloat, {1, k}).output("y", kFloat, {1, n});
  HostTensor wt(DType::Float32, {k, n});
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c) wt.set_double(c * n + r, rows[r * k + c]);
  b.initializer("w", wt);
  b.node("MatMul", {"x", "w"}, {"y"}, "proj");
  Graph g = load_onnx_from_bytes(b.bytes());
  quant::QuantizeModelOptions options;
  options.spec.format = quant::QuantFormat::NvFp4;
  quant::quantize_model(g, options);
  return quant_linear_of(g);
}

void expect_same(const QuantLinearBytes& got, const QuantLinearBytes& want) {
  EXPECT_EQ(got.data, want.data) << "packed E2M1 bytes differ";
  EXPECT_EQ(got.scales, want.scales) << "E4M3 block scales differ";
  EXPECT_EQ(got.tensor_scale, want.tensor_scale) << "tensor scale differs";
  for (const char* a : {"in_features", "out_features", "block_size"}) {
    ASSERT_TRUE(got.attributes.count(a) && want.attributes.count(a)) << a;
    EXPECT_EQ(got.attributes.at(a).i, want.attributes.at(a).i) << a;
  }
  EXPECT_EQ(got.attributes.at("format").s, "nvfp4");
}

TEST(PrequantizedOnnx, TwoLevelScalesThroughTransposeGiveKilnQuantizesBytes) {
  const int64_t n = 48, k = 64;
  const std::vector<float> rows = random_rows(n, k, 7);
  const quant::QuantizedWeight q = quant::quantize(rows, n, k, {});
  // Model Optimizer's export: DQ(E4M3 scales, fp32 scale_2) -> DQ(FP4 [n, k], axis 1, block 16)
  // -> Transpose -> MatMul. Opset 21 so that the rewritten model imports (kiln stops at 21).
  testing::ModelBuilder b(21);
  b.input("x", kFloat, {1, k}).output("y", kFloat, {1, n});
  raw_initializer(b, "w_fp4", kFloat4E2M1, {n, k}, q.data.data(), q.data.size());
  raw_initializer(b, "w_scale", kFloat8E4M3FN, {n, k / 16}, q.scales.data(), q.scales.size());
  raw_initializer(b, "w_scale_2", kFloat, {}, &q.tensor_scale, sizeof(float));
  b.node("DequantizeLinear", {"w_scale", "w_scale_2"}, {"w_scale_f32"}, "dq_scale");
  auto& dq = b.node("DequantizeLinear", {"w_fp4", "w_scale_f32"}, {"w_dq"}, "dq_weight");
  int_attr(dq, "axis", 1);
  int_attr(dq, "block_size", 16);
  auto& tr = b.node("Transpose", {"w_dq"}, {"w_t"}, "transpose");
  auto* perm = tr.add_attribute();
  perm->set_name("perm");
  perm->set_type(onnx::AttributeProto::INTS);
  perm->add_ints(1);
  perm->add_ints(0);
  b.node("MatMul", {"x", "w_t"}, {"y"}, "proj");

  onnx::ModelProto model = b.model();
  const quant::PrequantizedReport report = quant::rewrite_prequantized_nvfp4(model, {});
  ASSERT_EQ(report.layers.size(), 1u) << (report.skipped.empty() ? "" : report.skipped[0]);
  EXPECT_EQ(model.graph().node_size(), 1) << "the DequantizeLinear and Transpose nodes should be gone";
  for (const auto& t : model.graph().initializer()) {
    EXPECT_NE(t.data_type(), kFloat4E2M1) << t.name();
    EXPECT_NE(t.data_type(), kFloat8E4M3FN) << t.name();
  }
  Graph g = load_onnx_from_bytes(model.SerializeAsString());
  expect_same(quant_linear_of(g), kiln_quantize_reference(rows, n, k));
}

TEST(PrequantizedOnnx, LoadOnnxPrequantizedRewritesOnLoad) {
  const int64_t n = 16, k = 32;
  const quant::QuantizedWeight q = quant::quantize(random_rows(n, k, 4), n, k, {});
  testing::ModelBuilder b(21);
  b.input("x", kFloat, {1, k}).output("y", kFloat, {1, n});
  raw_initializer(b, "w_fp4", kFloat4E2M1, {n, k}, q.data.data(), q.data.size());
  raw_initializer(b, "w_scale", kFloat8E4M3FN, {n, k / 16}, q.scales.data(), q.scales.size());
  auto& dq = b.node("DequantizeLinear", {"w_fp4", "w_scale"}, {"w_dq"}, "dq_weight");
  int_attr(dq, "axis", 1);
  int_attr(dq, "block_size", 16);
  auto& gemm = b.node("Gemm", {"x", "w_dq"}, {"y"}, "fc");
  int_attr(gemm, "transB", 1);
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("kiln_prequantized_" + std::to_string(::getpid()) + ".onnx");
  b.save(path.string());
  quant::PrequantizedReport report;
  const Graph g = quant::load_onnx_prequantized(path.string(), &report);
  std::filesystem::remove(path);
  EXPECT_EQ(report.layers, std::vector<std::string>{"fc"});
  EXPECT_EQ(quant_linear_of(g).data, q.data);
}

TEST(PrequantizedOnnx, KByNWeightWithBlocksAlongAxis0AndOneLevelScale) {
  const int64_t n = 32, k = 96;
  const std::vector<float> rows = random_rows(n, k, 11);
  quant::QuantizedWeight q = quant::quantize(rows, n, k, {});
  // One-level: the E4M3 scales feed the weight's DequantizeLinear directly (tensor scale 1), so
  // the comparison is with kiln's bytes and a tensor scale of 1.
  const std::vector<uint8_t> w_kn = transpose_nibbles(q.data, n, k);
  const std::vector<uint8_t> s_kn = transpose_bytes(q.scales, n, k / 16);
  testing::ModelBuilder b(21);
  b.input("x", kFloat, {1, k}).output("y", kFloat, {1, n});
  raw_initializer(b, "w_fp4", kFloat4E2M1, {k, n}, w_kn.data(), w_kn.size());
  raw_initializer(b, "w_scale", kFloat8E4M3FN, {k / 16, n}, s_kn.data(), s_kn.size());
  auto& dq = b.node("DequantizeLinear", {"w_fp4", "w_scale"}, {"w_dq"}, "dq_weight");
  int_attr(dq, "axis", 0);
  int_attr(dq, "block_size", 16);
  b.node("MatMul", {"x", "w_dq"}, {"y"}, "proj");
  onnx::ModelProto model = b.model();
  const quant::PrequantizedReport report = quant::rewrite_prequantized_nvfp4(model, {});
  ASSERT_EQ(report.layers.size(), 1u) << (report.skipped.empty() ? "" : report.skipped[0]);
  const QuantLinearBytes got = quant_linear_of(load_onnx_from_bytes(model.SerializeAsString()));
  EXPECT_EQ(got.data, q.data);
  EXPECT_EQ(got.scales, q.scales);
  const float one = 1.0f;
  EXPECT_EQ(got.tensor_scale, std::vector<uint8_t>(reinterpret_cast<const uint8_t*>(&one), reinterpret_cast<const uint8_t*>(&one) + 4));
}

TEST(PrequantizedOnnx, GemmTransBWithBiasAndInt32DataKeepsTheBias) {
  const int64_t n = 16, k = 32;
  const std::vector<float> rows = random_rows(n, k, 3);
  const quant::QuantizedWeight q = quant::quantize(rows, n, k, {});
  testing::ModelBuilder b(21);
  b.input("x", kFloat, {1, k}).output("y", kFloat, {1, n});
  int32_initializer(b, "w_fp4", kFloat4E2M1, {n, k}, q.data);
  int32_initializer(b, "w_scale", kFloat8E4M3FN, {n, k / 16}, q.scales);
  raw_initializer(b, "w_scale_2", kFloat, {}, &q.tensor_scale, sizeof(float));
  b.initializer("bias", HostTensor(DType::Float32, {n}));
  b.node("DequantizeLinear", {"w_scale", "w_scale_2"}, {"s"});
  auto& dq = b.node("DequantizeLinear", {"w_fp4", "s"}, {"w_dq"});
  int_attr(dq, "axis", 1);
  int_attr(dq, "block_size", 16);
  auto& gemm = b.node("Gemm", {"x", "w_dq", "bias"}, {"y"}, "fc");
  int_attr(gemm, "transB", 1);
  onnx::ModelProto model = b.model();
  ASSERT_EQ(quant::rewrite_prequantized_nvfp4(model, {}).layers.size(), 1u);
  const Graph g = load_onnx_from_bytes(model.SerializeAsString());
  const QuantLinearBytes got = quant_linear_of(g);
  EXPECT_EQ(got.num_inputs, 5) << "x, data, scales, tensor scale, bias";
  EXPECT_EQ(got.data, q.data);
  EXPECT_EQ(got.scales, q.scales);
}

TEST(PrequantizedOnnx, OtherBlockSizesAreLeftAloneWithTheReason) {
  const int64_t n = 16, k = 64;
  std::vector<uint8_t> w(static_cast<size_t>(n * k / 2), 0x21), s(static_cast<size_t>(n * k / 32), 0x38);
  testing::ModelBuilder b(21);
  b.input("x", kFloat, {1, k}).output("y", kFloat, {1, n});
  raw_initializer(b, "w_fp4", kFloat4E2M1, {n, k}, w.data(), w.size());
  raw_initializer(b, "w_scale", kFloat8E4M3FN, {n, k / 32}, s.data(), s.size());
  auto& dq = b.node("DequantizeLinear", {"w_fp4", "w_scale"}, {"w_dq"}, "dq32");
  int_attr(dq, "axis", 1);
  int_attr(dq, "block_size", 32);
  auto& gemm = b.node("Gemm", {"x", "w_dq"}, {"y"}, "fc");
  int_attr(gemm, "transB", 1);
  onnx::ModelProto model = b.model();
  const quant::PrequantizedReport report = quant::rewrite_prequantized_nvfp4(model, {});
  EXPECT_TRUE(report.layers.empty());
  ASSERT_EQ(report.skipped.size(), 1u);
  EXPECT_EQ(report.skipped[0], "dq32 (block_size is not 16 (NVFP4))");
  EXPECT_EQ(model.graph().node_size(), 2) << "nothing rewritten";
}

}  // namespace
}  // namespace kiln
