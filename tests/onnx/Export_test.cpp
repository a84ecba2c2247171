#include "kiln/onnx/Export.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "ModelBuilder.h"
#include "kiln/onnx/Import.h"
#include "kiln/support/Error.h"

namespace kiln {
namespace {

using testing::TempDir;

const char* const kNodeTests = "/usr/share/libonnx-testdata/data/node";

// Runs onnx.checker (full check) when Python's onnx package is there; "" when it passed.
std::optional<std::string> python_onnx_check(const std::string& path) {
  static const bool have_onnx = std::system("python3 -c 'import onnx' >/dev/null 2>&1") == 0;
  if (!have_onnx) return std::nullopt;
  const std::string cmd = "python3 -c 'import onnx,sys; onnx.checker.check_model(sys.argv[1], full_check=True)' '" +
                          path + "' 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  std::string out;
  char buf[512];
  while (size_t n = fread(buf, 1, sizeof(buf), pipe)) out.append(buf, n);
  const int rc = pclose(pipe);
  return rc == 0 ? std::string() : "onnx.checker failed: " + out;
}

// Compares what the importer sees in two graphs: nodes, attributes, values and types.
void expect_same_graph(const Graph& a, const Graph& b) {
  ASSERT_EQ(a.nodes.size(), b.nodes.size());
  EXPECT_EQ(a.opset, b.opset);
  for (size_t i = 0; i < a.nodes.size(); ++i) {
    const Node &x = a.nodes[i], &y = b.nodes[i];
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.op, y.op);
    EXPECT_EQ(x.op_type, y.op_type);
    EXPECT_EQ(x.domain, y.domain);
    ASSERT_EQ(x.attributes.size(), y.attributes.size()) << x.describe();
    for (const auto& [name, attr] : x.attributes) {
      const Attribute* other = y.attr(name, attr.kind);
      ASSERT_NE(other, nullptr) << x.describe() << " " << name;
      EXPECT_EQ(attr.i, other->i);
      EXPECT_EQ(static_cast<float>(attr.f), static_cast<float>(other->f));
      EXPECT_EQ(attr.ints, other->ints);
      EXPECT_EQ(attr.s, other->s);
      EXPECT_EQ(attr.tensor.describe(), other->tensor.describe());
    }
  }
  ASSERT_EQ(a.inputs.size(), b.inputs.size());
  ASSERT_EQ(a.outputs.size(), b.outputs.size());
  for (const Value& v : a.values) {
    const int j = b.find_value(v.name);
    ASSERT_GE(j, 0) << v.name;
    const Value& w = b.values[j];
    EXPECT_EQ(v.type.has_value(), w.type.has_value()) << v.name;
    if (v.type && w.type) {
      EXPECT_EQ(to_string(*v.type), to_string(*w.type)) << v.name;
    }
    ASSERT_EQ(v.constant.has_value(), w.constant.has_value()) << v.name;
    if (v.constant) {
      ASSERT_EQ(v.constant->num_bytes(), w.constant->num_bytes());
      EXPECT_EQ(0, std::memcmp(v.constant->data(), w.constant->data(), v.constant->num_bytes())) << v.name;
    }
  }
}

TEST(Export, NodeTestModelsRoundTripAndPassTheChecker) {
  for (const char* name : {"test_conv_with_strides_padding", "test_layer_normalization_4d_axis0",
                           "test_gemm_default_no_bias", "test_softmax_axis_1", "test_constant",
                           "test_maxpool_2d_pads", "test_batchnorm_epsilon", "test_slice"}) {
    SCOPED_TRACE(name);
    const std::string src = std::string(kNodeTests) + "/" + name + "/model.onnx";
    if (!std::filesystem::exists(src)) GTEST_SKIP() << src << " is missing (libonnx-testdata not installed)";
    const Graph g = load_onnx(src);
    TempDir dir(name);
    save_onnx(g, dir.file("model.onnx"));
    expect_same_graph(g, load_onnx(dir.file("model.onnx")));
    if (auto check = python_onnx_check(dir.file("model.onnx"))) {
      EXPECT_EQ(*check, "");
    }
  }
}

TEST(Export, LargeInitializersGoToAnExternalFile) {
  testing::ModelBuilder m;
  m.input("x", onnx::TensorProto::FLOAT, {"batch", 64}).output("y", onnx::TensorProto::FLOAT, {"batch", 32});
  m.initializer("w", testing::iota_tensor(DType::Float32, {64, 32}));
  m.initializer("b", testing::iota_tensor(DType::Float32, {32}));
  m.node("MatMul", {"x", "w"}, {"h"}, "mm");
  m.node("Add", {"h", "b"}, {"y"}, "add");
  const Graph g = load_onnx_from_bytes(m.bytes());
  TempDir dir("external");
  ExportOptions options;
  options.external_data_file = "model.weights";
  save_onnx(g, dir.file("model.onnx"), options);
  EXPECT_EQ(std::filesystem::file_size(dir.file("model.weights")), 64u * 32u * 4u);  // b (128 bytes) stays inline
  EXPECT_LT(std::filesystem::file_size(dir.file("model.onnx")), 1024u);
  expect_same_graph(g, load_onnx(dir.file("model.onnx")));
  if (auto check = python_onnx_check(dir.file("model.onnx"))) {
      EXPECT_EQ(*check, "");
    }
}

TEST(Export, CustomDomainNodesGetOpsetImports) {
  testing::ModelBuilder m(21);
  m.input("x", onnx::TensorProto::FLOAT, {4, 64}).output("y", onnx::TensorProto::FLOAT, {4, 16});
  m.initializer("w", testing::iota_tensor(DType::UInt8, {16, 32}));
  auto& n = m.node("QuantLinear", {"x", "w"}, {"y"}, "ql");
  n.set_domain("kiln");
  testing::add_attr(n, "bits", int64_t{4});
  auto& p = m.node("MyPlugin", {"y"}, {"z"}, "plugin");
  p.set_domain("trt.plugins");
  const Graph g = load_onnx_from_bytes(m.bytes());
  EXPECT_EQ(g.nodes[0].op, OpKind::QuantLinear);
  ExportOptions options;
  options.domain_versions["trt.plugins"] = 3;
  const onnx::ModelProto proto = model_proto_from_graph(g, options);
  EXPECT_EQ(proto.ir_version(), 10);
  ASSERT_EQ(proto.opset_import_size(), 3);
  EXPECT_EQ(proto.opset_import(1).domain(), "kiln");
  EXPECT_EQ(proto.opset_import(1).version(), 1);
  EXPECT_EQ(proto.opset_import(2).domain(), "trt.plugins");
  EXPECT_EQ(proto.opset_import(2).version(), 3);
  EXPECT_EQ(proto.graph().node(0).domain(), "kiln");
  expect_same_graph(g, load_onnx_from_bytes(serialize_onnx(g, options)));
}

}  // namespace
}  // namespace kiln
