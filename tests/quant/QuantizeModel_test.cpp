// kiln quantize's graph rewrite and kiln.QuantLinear's definition, checked against the quant
// library's CPU reference (dequantize, then fp64 matmul) on random weights.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>

#include "kiln/onnx/Export.h"
#include "kiln/onnx/Import.h"
#include "kiln/quant/LinearReference.h"
#include "kiln/quant/QuantizeModel.h"
#include "kiln/runtime/GraphRunner.h"
#include "kiln/support/Error.h"

namespace kiln {
namespace {

HostTensor random_tensor(DType dtype, std::vector<int64_t> shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  HostTensor t(dtype, std::move(shape));
  for (int64_t i = 0; i < t.num_elements(); ++i) t.set_double(i, dist(rng));
  return t;
}

int add_value(Graph& g, const std::string& name, DType dtype, std::vector<int64_t> shape) {
  Value v;
  v.name = name;
  std::vector<ir::Expr> dims;
  for (int64_t d : shape) dims.push_back(ir::Expr(d));
  v.type = TensorType{dtype, dims};
  g.values.push_back(v);
  return static_cast<int>(g.values.size()) - 1;
}

// y = MatMul(x [m, k], W [k, n]) with W a constant.
Graph matmul_graph(int64_t m, int64_t k, int64_t n, const HostTensor& w) {
  Graph g;
  g.opset = 17;
  const int x = add_value(g, "x", DType::Float32, {m, k});
  const int wv = add_value(g, "w", DType::Float32, {k, n});
  g.values[wv].constant = w;
  const int y = add_value(g, "y", DType::Float32, {m, n});
  g.values[y].producer = 0;
  Node node;
  node.name = "proj";
  node.op = OpKind::MatMul;
  node.op_type = "MatMul";
  node.inputs = {x, wv};
  node.outputs = {y};
  g.nodes.push_back(node);
  g.inputs = {x};
  g.outputs = {y};
  return g;
}

struct Case {
  quant::QuantFormat format;
  int64_t group;
};

class QuantizeModelTest : public ::testing::TestWithParam<Case> {};

TEST_P(QuantizeModelTest, QuantLinearMatchesTheReferenceOnRandomData) {
  const int64_t m = 3, k = 128, n = 24;
  const HostTensor w = random_tensor(DType::Float32, {k, n}, 7);
  Graph g = matmul_graph(m, k, n, w);
  quant::QuantizeModelOptions options;
  options.spec.format = GetParam().format;
  options.spec.group = GetParam().group;
  quant::QuantizeModelReport report = quant::quantize_model(g, options);
  ASSERT_EQ(report.layers.size(), 1u);
  EXPECT_EQ(g.nodes[0].op, OpKind::QuantLinear);
  EXPECT_GT(report.layers[0].error.relative_l2, 0.0);
  EXPECT_LT(report.layers[0].error.relative_l2, 0.2);

  // The same quantization, through the library, for the reference.
  std::vector<float> rows(n * k);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c) rows[r * k + c] = static_cast<float>(w.get_double(c * n + r));
  quant::QuantizedWeight q = quant::quantize(rows, n, k, options.spec);

  const HostTensor x = random_tensor(DType::Float32, {m, k}, 11);
  std::vector<float> xs(m * k);
  for (int64_t i = 0; i < m * k; ++i) xs[i] = static_cast<float>(x.get_double(i));
  const std::vector<double> want = quant::linear_reference(xs, m, q);
  const std::vector<HostTensor> got = run_graph_on_cpu(g, {{"x", x}});
  ASSERT_EQ(got[0].shape(), std::vector<int64_t>({m, n}));
  double err = 0, norm = 0;
  for (int64_t i = 0; i < m * n; ++i) {
    err += (got[0].get_double(i) - want[i]) * (got[0].get_double(i) - want[i]);
    norm += want[i] * want[i];
  }
  EXPECT_LT(std::sqrt(err / norm), 1e-5) << "QuantLinear's expression disagrees with quant::linear_reference";
}

INSTANTIATE_TEST_SUITE_P(Formats, QuantizeModelTest,
                         ::testing::Values(Case{quant::QuantFormat::NvFp4, 0}, Case{quant::QuantFormat::MxFp4, 0},
                                           Case{quant::QuantFormat::Int4, 32}, Case{quant::QuantFormat::Int4, 128}));

TEST(QuantizeModel, Float16ActivationsAndTensorScaleAsAPluginPassesThem) {
  // A TensorRT plugin built for float16 passes every float input as float16, the tensor scale too.
  const int64_t m = 2, k = 64, n = 16;
  Graph g = matmul_graph(m, k, n, random_tensor(DType::Float32, {k, n}, 9));
  const HostTensor x32 = random_tensor(DType::Float32, {m, k}, 4);
  quant::quantize_model(g, {});
  const std::vector<HostTensor> want = run_graph_on_cpu(g, {{"x", x32}});
  HostTensor x16(DType::Float16, {m, k});
  for (int64_t i = 0; i < m * k; ++i) x16.set_double(i, x32.get_double(i));
  g.values[g.inputs[0]].type->dtype = DType::Float16;
  for (Value& v : g.values) {
    if (v.name == "w_tensor_scale") {
      HostTensor s16(DType::Float16, {1});
      s16.set_double(0, v.constant->get_double(0));
      v.constant = s16;
      v.type->dtype = DType::Float16;
    }
  }
  const std::vector<HostTensor> got = run_graph_on_cpu(g, {{"x", x16}});
  ASSERT_EQ(got[0].dtype(), DType::Float16);
  double err = 0, norm = 0;
  for (int64_t i = 0; i < m * n; ++i) {
    err += (got[0].get_double(i) - want[0].get_double(i)) * (got[0].get_double(i) - want[0].get_double(i));
    norm += want[0].get_double(i) * want[0].get_double(i);
  }
  EXPECT_LT(std::sqrt(err / norm), 5e-3);
}

TEST(QuantizeModel, QuantizesAModelWithExternalDataAndWritesExternalData) {
  const int64_t m = 2, k = 64, n = 16;
  const auto dir = std::filesystem::temp_directory_path() / ("kiln_quant_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  ExportOptions out;
  out.domain_versions["kiln"] = 1;
  out.external_data_threshold = 16;
  // The input model keeps its weight in an external data file.
  out.external_data_file = "float.onnx.data";
  save_onnx(matmul_graph(m, k, n, random_tensor(DType::Float32, {k, n}, 3)), (dir / "float.onnx").string(), out);
  ASSERT_TRUE(std::filesystem::exists(dir / "float.onnx.data"));
  Graph g = load_onnx((dir / "float.onnx").string());
  ASSERT_EQ(quant::quantize_model(g, {}).layers.size(), 1u);
  const HostTensor x = random_tensor(DType::Float32, {m, k}, 5);
  const std::vector<HostTensor> before = run_graph_on_cpu(g, {{"x", x}});
  out.external_data_file = "model.onnx.data";
  save_onnx(g, (dir / "model.onnx").string(), out);
  ASSERT_TRUE(std::filesystem::exists(dir / "model.onnx.data"));
  Graph loaded = load_onnx((dir / "model.onnx").string());
  const std::vector<HostTensor> after = run_graph_on_cpu(loaded, {{"x", x}});
  for (int64_t i = 0; i < m * n; ++i) EXPECT_EQ(before[0].get_double(i), after[0].get_double(i)) << "element " << i;
  std::filesystem::remove_all(dir);
}

TEST(QuantizeModel, UnknownOrIneligibleNodesAreClearErrors) {
  Graph g = matmul_graph(2, 64, 16, random_tensor(DType::Float32, {64, 16}, 1));
  quant::QuantizeModelOptions options;
  options.nodes = {"nope"};
  try {
    quant::quantize_model(g, options);
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_STREQ(e.what(), "--nodes names 'nope', but the model has no node of that name");
  }
  g.values[1].constant.reset();  // the weight becomes a runtime input
  options.nodes = {"proj"};
  try {
    quant::quantize_model(g, options);
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_STREQ(e.what(), "node 'proj' cannot be quantized: its weight 'w' is not a constant");
  }
}

TEST(QuantizeModel, KNotAMultipleOfTheBlockIsAnErrorNamingTheNode) {
  Graph g = matmul_graph(2, 40, 16, random_tensor(DType::Float32, {40, 16}, 1));
  quant::QuantizeModelOptions options;
  options.spec.format = quant::QuantFormat::MxFp4;
  try {
    quant::quantize_model(g, options);
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("node 'proj': "), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kiln
