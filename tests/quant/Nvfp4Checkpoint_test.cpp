// NVFP4 Hugging Face checkpoints (Model Optimizer's and llm-compressor's tensor names), written
// here as safetensors files from kiln's own quantizer output, as the source of QuantLinear
// weights: the bytes must be bit-identical to what `kiln quantize` writes for the same weights.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <unistd.h>

#include "kiln/quant/Nvfp4Checkpoint.h"
#include "kiln/quant/Quantize.h"
#include "kiln/quant/QuantizeModel.h"
#include "kiln/quant/SafeTensors.h"
#include "kiln/support/Error.h"

namespace kiln {
namespace {

struct Entry {
  std::string name, dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

// A safetensors file: header length, JSON header, data.
void write_safetensors(const std::filesystem::path& path, const std::vector<Entry>& entries) {
  std::string header = "{\"__metadata__\":{\"format\":\"pt\"}";
  uint64_t offset = 0;
  for (const Entry& e : entries) {
    header += ",\"" + e.name + "\":{\"dtype\":\"" + e.dtype + "\",\"shape\":[";
    for (size_t i = 0; i < e.shape.size(); ++i) header += (i ? "," : "") + std::to_string(e.shape[i]);
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + e.bytes.size()) + "]}";
    offset += e.bytes.size();
  }
  header += "}";
  std::ofstream out(path, std::ios::binary);
  const uint64_t len = header.size();
  for (int i = 0; i < 8; ++i) out.put(static_cast<char>((len >> (8 * i)) & 0xff));
  out << header;
  for (const Entry& e : entries) out.write(reinterpret_cast<const char*>(e.bytes.data()), static_cast<std::streamsize>(e.bytes.size()));
}

std::vector<uint8_t> f32_bytes(float v) {
  std::vector<uint8_t> b(4);
  std::memcpy(b.data(), &v, 4);
  return b;
}

std::vector<float> random_rows(int64_t n, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 0.05f);
  std::vector<float> w(static_cast<size_t>(n * k));
  for (float& v : w) v = dist(rng);
  return w;
}

class Nvfp4Checkpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("kiln_nvfp4_ckpt_" + std::to_string(::getpid()) + "_" +
                                                     ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

// y = MatMul(x, W^T [k, n]) with the weight initializer named `name`.
Graph matmul_model(const std::string& name, const std::vector<float>& rows, int64_t n, int64_t k) {
  Graph g;
  g.opset = 17;
  auto add = [&](const std::string& vname, std::vector<int64_t> shape) {
    Value v;
    v.name = vname;
    std::vector<ir::Expr> dims;
    for (int64_t d : shape) dims.push_back(ir::Expr(d));
    v.type = TensorType{DType::Float32, dims};
    g.values.push_back(v);
    return static_cast<int>(g.values.size()) - 1;
  };
  const int x = add("x", {1, k}), w = add(name, {k, n}), y = add("y", {1, n});
  HostTensor wt(DType::Float32, {k, n});
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c) wt.set_double(c * n + r, rows[r * k + c]);
  g.values[w].constant = wt;
  g.values[y].producer = 0;
  Node node;
  node.name = "proj";
  node.op = OpKind::MatMul;
  node.op_type = "MatMul";
  node.inputs = {x, w};
  node.outputs = {y};
  g.nodes.push_back(node);
  g.inputs = {x};
  g.outputs = {y};
  return g;
}

std::vector<std::vector<uint8_t>> quant_linear_bytes(const Graph& g) {
  for (const Node& node : g.nodes) {
    if (node.op != OpKind::QuantLinear) continue;
    std::vector<std::vector<uint8_t>> out;
    for (size_t i = 1; i < node.inputs.size(); ++i) {
      const HostTensor& t = *g.values[node.inputs[i]].constant;
      out.emplace_back(t.data(), t.data() + t.num_bytes());
    }
    return out;
  }
  ADD_FAILURE() << "no QuantLinear node";
  return {};
}

TEST_F(Nvfp4Checkpoint, ModelOptCheckpointGivesTheBytesKilnQuantizeWrites) {
  const int64_t n = 32, k = 64;
  const std::vector<float> rows = random_rows(n, k, 5);
  const quant::QuantizedWeight q = quant::quantize(rows, n, k, {});
  // Two projections, each with its own weight_scale_2 (Model Optimizer keeps one per shard).
  const quant::QuantizedWeight q2 = quant::quantize(random_rows(n, k, 6), n, k, {});
  write_safetensors(dir_ / "model.safetensors",
                    {{"mlp.up_proj.weight", "U8", {n, k / 2}, q.data},
                     {"mlp.up_proj.weight_scale", "F8_E4M3", {n, k / 16}, q.scales},
                     {"mlp.up_proj.weight_scale_2", "F32", {}, f32_bytes(q.tensor_scale)},
                     {"mlp.up_proj.input_scale", "F32", {}, f32_bytes(1.0f)},
                     {"mlp.gate_proj.weight", "U8", {n, k / 2}, q2.data},
                     {"mlp.gate_proj.weight_scale", "F8_E4M3", {n, k / 16}, q2.scales},
                     {"mlp.gate_proj.weight_scale_2", "F32", {1}, f32_bytes(q2.tensor_scale)}});
  std::ofstream(dir_ / "hf_quant_config.json") << R"({"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "NVFP4", "group_size": 16}})";
  const auto layers = quant::read_nvfp4_checkpoint((dir_ / "model.safetensors").string());
  ASSERT_EQ(layers.size(), 2u);
  EXPECT_EQ(layers.at("mlp.gate_proj.weight").tensor_scale, q2.tensor_scale) << "per-projection scale kept";

  Graph from_ckpt = matmul_model("mlp.up_proj.weight", rows, n, k);
  quant::QuantizeModelOptions options;
  options.prequantized = layers;
  const quant::QuantizeModelReport report = quant::quantize_model(from_ckpt, options);
  ASSERT_EQ(report.from_checkpoint, std::vector<std::string>{"proj"});
  Graph quantized = matmul_model("mlp.up_proj.weight", rows, n, k);
  quant::quantize_model(quantized, {});
  EXPECT_EQ(quant_linear_bytes(from_ckpt), quant_linear_bytes(quantized)) << "data, scales, tensor scale";
}

TEST_F(Nvfp4Checkpoint, LlmCompressorGlobalScaleIsInverted) {
  const int64_t n = 16, k = 32;
  const quant::QuantizedWeight q = quant::quantize(random_rows(n, k, 9), n, k, {});
  const float global = 1.0f / q.tensor_scale;
  write_safetensors(dir_ / "model.safetensors", {{"fc.weight_packed", "U8", {n, k / 2}, q.data},
                                                  {"fc.weight_scale", "F8_E4M3", {n, k / 16}, q.scales},
                                                  {"fc.weight_global_scale", "F32", {1}, f32_bytes(global)}});
  const auto layers = quant::read_nvfp4_checkpoint((dir_ / "model.safetensors").string());
  ASSERT_EQ(layers.count("fc.weight"), 1u);
  const quant::QuantizedWeight& got = layers.at("fc.weight");
  EXPECT_EQ(got.data, q.data);
  EXPECT_EQ(got.scales, q.scales);
  EXPECT_EQ(got.tensor_scale, 1.0f / global);
  EXPECT_NEAR(got.tensor_scale, q.tensor_scale, 1e-6 * q.tensor_scale);
}

TEST_F(Nvfp4Checkpoint, ShapeMismatchWithTheModelIsAUserError) {
  const int64_t n = 16, k = 32;
  const quant::QuantizedWeight q = quant::quantize(random_rows(n, k, 1), n, k, {});
  write_safetensors(dir_ / "m.safetensors", {{"w.weight", "U8", {n, k / 2}, q.data},
                                              {"w.weight_scale", "F8_E4M3", {n, k / 16}, q.scales},
                                              {"w.weight_scale_2", "F32", {}, f32_bytes(q.tensor_scale)}});
  Graph g = matmul_model("w.weight", random_rows(2 * n, k, 2), 2 * n, k);
  quant::QuantizeModelOptions options;
  options.prequantized = quant::read_nvfp4_checkpoint((dir_ / "m.safetensors").string());
  try {
    quant::quantize_model(g, options);
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_STREQ(e.what(), "node 'proj': the checkpoint's 'w.weight' is [16, 32] (N x K), the model's weight is [32, 32]");
  }
}

TEST_F(Nvfp4Checkpoint, BadFilesAndOtherAlgorithmsAreUserErrors) {
  std::ofstream(dir_ / "short.safetensors") << "abc";
  EXPECT_THROW(quant::SafeTensorsFile((dir_ / "short.safetensors").string()), UserError);
  write_safetensors(dir_ / "bad.safetensors", {{"w.weight", "U8", {4, 4}, std::vector<uint8_t>(8)}});
  try {
    quant::SafeTensorsFile f((dir_ / "bad.safetensors").string());
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 'w.weight' (U8 16) holds 8 bytes, expected 16"), std::string::npos) << e.what();
  }
  write_safetensors(dir_ / "ok.safetensors", {});
  std::ofstream(dir_ / "hf_quant_config.json") << R"({"quantization": {"quant_algo": "FP8"}})";
  try {
    quant::read_nvfp4_checkpoint((dir_ / "ok.safetensors").string());
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_STREQ(e.what(), "the checkpoint's config says quant_algo 'FP8'; kiln reads NVFP4 checkpoints (quant_algo 'NVFP4')");
  }
}

}  // namespace
}  // namespace kiln
