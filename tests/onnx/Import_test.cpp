#include "kiln/onnx/Import.h"

#include <gtest/gtest.h>

#include <fstream>

#include "ModelBuilder.h"
#include "kiln/ir/IRPrinter.h"
#include "kiln/support/Error.h"

namespace kiln {
namespace {

using testing::ModelBuilder;
using testing::TempDir;
constexpr int32_t kFloat = onnx::TensorProto::FLOAT;

// The UserError message of `f`, or a failure when it throws nothing or something else.
template <typename F>
std::string user_error_of(F&& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected a UserError, got: " << e.what();
    return "";
  }
  ADD_FAILURE() << "expected a UserError, nothing was thrown";
  return "";
}

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << "message: " << (haystack)

// x[batch, seq, 4] -> MatMul(w: 4x8) -> Relu -> y, with the nodes listed out of order.
ModelBuilder mlp_model() {
  ModelBuilder m;
  m.input("x", kFloat, {"batch", "seq", 4}).output("y", kFloat, {"batch", "seq", 8});
  m.initializer("w", testing::iota_tensor(DType::Float32, {4, 8}));
  m.node("Relu", {"h"}, {"y"}, "relu");
  m.node("MatMul", {"x", "w"}, {"h"}, "matmul");
  return m;
}

TEST(Import, TypesOpsInitializersAndOrder) {
  Graph g = load_onnx_from_bytes(mlp_model().bytes());
  EXPECT_EQ(g.opset, 17);
  ASSERT_EQ(g.nodes.size(), 2u);
  EXPECT_EQ(g.nodes[0].name, "matmul");  // sorted: the producer of h first
  EXPECT_EQ(g.nodes[0].op, OpKind::MatMul);
  EXPECT_EQ(g.nodes[1].op, OpKind::Relu);
  ASSERT_EQ(g.inputs.size(), 1u);
  const Value& x = g.values[g.inputs[0]];
  ASSERT_TRUE(x.type);
  EXPECT_EQ(to_string(*x.type), "float32[batch, seq, 4]");
  EXPECT_TRUE(x.type->shape[0].same_as(g.symbol("batch")));
  const Value& w = g.values[g.find_value("w")];
  ASSERT_TRUE(w.constant);
  EXPECT_EQ(w.constant->describe(), "float32[4, 8]");
  EXPECT_EQ(w.constant->get_double(9), 2.0);
  EXPECT_EQ(g.values[g.find_value("h")].producer, 0);
  EXPECT_EQ(g.values[g.outputs[0]].producer, 1);
  EXPECT_TRUE(unsupported_ops(g).empty());
}

TEST(Import, MissingDimsBecomeFreshSymbolsAndNamelessNodesGetNames) {
  ModelBuilder m;
  m.input("x", kFloat, {"", 3}).output("y", kFloat, {"", 3});
  m.node("Relu", {"x"}, {"r"});
  m.node("Neg", {"r"}, {"y"}, "Relu_0");  // the name a nameless node would get
  Graph g = load_onnx_from_bytes(m.bytes());
  EXPECT_EQ(to_string(*g.values[g.inputs[0]].type), "float32[x_d0, 3]");
  EXPECT_EQ(g.nodes[0].name, "Relu_0_");
  EXPECT_EQ(g.nodes[1].name, "Relu_0");
}

TEST(Import, TypedAttributesAndTensorAttributes) {
  ModelBuilder m;
  m.input("x", kFloat, {2, 3}).output("y", kFloat, {3, 2});
  auto& t = m.node("Transpose", {"x"}, {"y"}, "tr");
  testing::add_attr(t, "perm", std::vector<int64_t>{1, 0});
  auto& c = m.node("Constant", {}, {"k"}, "const");
  auto* a = c.add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  *a->mutable_t() = tensor_to_proto(testing::iota_tensor(DType::Int64, {3}), "");
  Graph g = load_onnx_from_bytes(m.bytes());
  const Node& tr = g.nodes[g.find_node("tr")];
  EXPECT_EQ(tr.attr_ints("perm", {}), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(tr.attr_int("missing", 7), 7);
  EXPECT_CONTAINS(user_error_of([&] { tr.attr_int("perm", 0); }),
                  "node 'tr' (Transpose): attribute 'perm' is of kind ints, expected int");
  const Attribute* value = g.nodes[g.find_node("const")].attr("value", Attribute::Kind::Tensor);
  ASSERT_NE(value, nullptr);
  EXPECT_EQ(value->tensor.describe(), "int64[3]");
  EXPECT_EQ(value->tensor.get_int(2), 2);
}

TEST(Import, UnsupportedOpsAreListedAllAtOnce) {
  ModelBuilder m;
  m.input("x", kFloat, {2}).output("y", kFloat, {2});
  m.node("FancyOp", {"x"}, {"a"}, "f1");
  m.node("FancyOp", {"a"}, {"b"}, "f2");
  m.node("Relu", {"b"}, {"c"}, "r");
  m.node("Frobnicate", {"c"}, {"y"}, "fr").set_domain("com.example");
  Graph g = load_onnx_from_bytes(m.bytes());
  EXPECT_EQ(g.nodes[0].op, OpKind::Unsupported);
  EXPECT_EQ(g.nodes[0].op_type, "FancyOp");
  const auto lines = unsupported_ops(g);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0], "FancyOp: nodes 'f1', 'f2'");
  EXPECT_EQ(lines[1], "com.example.Frobnicate: node 'fr'");
}

TEST(Import, KnownOpWithUnrepresentableAttributeIsUnsupportedWithReason) {
  ModelBuilder m;
  m.output("y", kFloat, {2});
  auto& c = m.node("Constant", {}, {"y"}, "c");
  auto* a = c.add_attribute();
  a->set_name("sparse_value");
  a->set_type(onnx::AttributeProto::SPARSE_TENSOR);
  Graph g = load_onnx_from_bytes(m.bytes());
  ASSERT_EQ(unsupported_ops(g).size(), 1u);
  EXPECT_CONTAINS(unsupported_ops(g)[0], "Constant (attribute 'sparse_value' of node 'c' (Constant) is of type "
                                         "SPARSE_TENSOR, which kiln does not support): node 'c'");
}

TEST(ImportErrors, MissingInputNamesNodeAndInput) {
  ModelBuilder m;
  m.input("x", kFloat, {2}).output("y", kFloat, {2});
  m.node("Add", {"x", "nowhere"}, {"y"}, "add1");
  EXPECT_CONTAINS(user_error_of([&] { load_onnx_from_bytes(m.bytes()); }),
                  "node 'add1' (Add): input 1 'nowhere' is not produced by any node, initializer or graph input");
}

TEST(ImportErrors, CycleNamesItsNodes) {
  ModelBuilder m;
  m.input("x", kFloat, {2}).output("y", kFloat, {2});
  m.node("Add", {"x", "c"}, {"a"}, "n_a");
  m.node("Relu", {"a"}, {"b"}, "n_b");
  m.node("Relu", {"b"}, {"c"}, "n_c");
  m.node("Relu", {"c"}, {"y"}, "n_y");
  EXPECT_CONTAINS(user_error_of([&] { load_onnx_from_bytes(m.bytes()); }),
                  "the graph has a cycle: 'n_a' -> 'n_b' -> 'n_c' -> 'n_a'");
}

TEST(ImportErrors, DuplicateOutputName) {
  ModelBuilder m;
  m.input("x", kFloat, {2}).output("y", kFloat, {2});
  m.node("Relu", {"x"}, {"y"}, "first");
  m.node("Neg", {"x"}, {"y"}, "second");
  EXPECT_CONTAINS(user_error_of([&] { load_onnx_from_bytes(m.bytes()); }),
                  "value 'y' is defined twice (by node 'first' (Relu) and by node 'second' (Neg))");
}

TEST(ImportErrors, GraphOutputNothingProduces) {
  ModelBuilder m;
  m.input("x", kFloat, {2}).output("ghost", kFloat, {2});
  EXPECT_CONTAINS(user_error_of([&] { load_onnx_from_bytes(m.bytes()); }),
                  "graph output 'ghost' is not produced by any node");
}

TEST(ImportErrors, NegativeAndOverflowingDims) {
  ModelBuilder neg;
  neg.input("x", kFloat, {2, -3}).output("x", kFloat, {2, 3});
  EXPECT_CONTAINS(user_error_of([&] { load_onnx_from_bytes(neg.bytes()); }),
                  "graph input 'x': dim 1 is -3; expected a size >= 0");
  ModelBuilder big;
  big.input("x", kFloat, {int64_t{1} << 40, int64_t{1} << 40}).output("x", kFloat, {1});
  EXPECT_CONTAINS(user_error_of([&] { load_onnx_from_bytes(big.bytes()); }),
                  "graph input 'x': the product of its dims overflows int64");
  ModelBuilder init;
  init.output("w", kFloat, {1});
  auto& t = init.initializer("w", HostTensor(DType::Float32, {1}));
  t.clear_dims();
  t.add_dims(int64_t{1} << 62);
  t.add_dims(8);
  EXPECT_CONTAINS(user_error_of([&] { load_onnx_from_bytes(init.bytes()); }),
                  "initializer 'w': the product of its dims overflows int64");
}

TEST(ImportErrors, InitializerDataOfTheWrongSize) {
  ModelBuilder m;
  m.output("w", kFloat, {3});
  auto& t = m.initializer("w", HostTensor(DType::Float32, {2}));
  t.clear_dims();
  t.add_dims(3);
  EXPECT_CONTAINS(user_error_of([&] { load_onnx_from_bytes(m.bytes()); }),
                  "initializer 'w': raw_data holds 8 bytes, expected 12 (3 elements of float32)");
}

TEST(ImportErrors, UnsupportedDataTypeNamesTheTensor) {
  ModelBuilder m;
  m.input("s", onnx::TensorProto::STRING, {2}).output("s", onnx::TensorProto::STRING, {2});
  EXPECT_THROW(load_onnx_from_bytes(m.bytes()), UnsupportedError);
  EXPECT_CONTAINS(user_error_of([&] { load_onnx_from_bytes(m.bytes()); }),
                  "graph input 's': data type STRING is not supported");
}

TEST(ImportErrors, OpsetOutOfRange) {
  ModelBuilder old(9);  // older opsets load; ops check the forms they support
  old.input("x", kFloat, {2}).output("x", kFloat, {2});
  EXPECT_EQ(load_onnx_from_bytes(old.bytes()).opset, 9);
  ModelBuilder newest(28);
  newest.input("x", kFloat, {2}).output("x", kFloat, {2});
  EXPECT_EQ(load_onnx_from_bytes(newest.bytes()).opset, 28);
  ModelBuilder future(29);
  future.input("x", kFloat, {2}).output("y", kFloat, {2});
  future.node("Relu", {"x"}, {"y"}, "act");
  EXPECT_THROW(load_onnx_from_bytes(future.bytes()), UnsupportedError);
  EXPECT_CONTAINS(user_error_of([&] { load_onnx_from_bytes(future.bytes()); }),
                  "the model uses ai.onnx opset 29 (first node: 'act' (Relu)); kiln supports opsets 1 to 28");
  ModelBuilder zero(0);
  zero.input("x", kFloat, {2}).output("x", kFloat, {2});
  EXPECT_CONTAINS(user_error_of([&] { load_onnx_from_bytes(zero.bytes()); }),
                  "the model uses ai.onnx opset 0; expected an opset from 1 to 28");
}

TEST(ImportErrors, TruncatedFileAndGarbage) {
  TempDir dir("trunc");
  const std::string bytes = mlp_model().bytes();
  int parse_errors = 0;
  // Every prefix is either a parse error or a model missing something; never a crash.
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::ofstream(dir.file("m.onnx"), std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(n));
    const std::string msg = user_error_of([&] { load_onnx(dir.file("m.onnx")); });
    EXPECT_CONTAINS(msg, dir.file("m.onnx") + ": ");
    parse_errors += msg.find("truncated, corrupt or not an ONNX model") != std::string::npos;
  }
  EXPECT_GT(parse_errors, static_cast<int>(bytes.size() / 2));
  std::ofstream(dir.file("garbage.onnx"), std::ios::binary) << "\xff\xff\xff\xff garbage, not a protobuf";
  EXPECT_CONTAINS(user_error_of([&] { load_onnx(dir.file("garbage.onnx")); }),
                  "cannot parse the model: the file is truncated, corrupt or not an ONNX model");
  EXPECT_CONTAINS(user_error_of([&] { load_onnx(dir.file("absent.onnx")); }), "absent.onnx: no such file");
}

// A model whose initializer 'w' lives in `location` at offset 0.
ModelBuilder external_model(const std::string& location, int64_t length) {
  ModelBuilder m;
  m.input("x", kFloat, {4}).output("y", kFloat, {4});
  m.node("Add", {"x", "w"}, {"y"}, "add");
  auto& t = m.initializer("w", HostTensor(DType::Float32, {4}));
  t.clear_raw_data();
  t.set_data_location(onnx::TensorProto::EXTERNAL);
  auto* loc = t.add_external_data();
  loc->set_key("location");
  loc->set_value(location);
  auto* len = t.add_external_data();
  len->set_key("length");
  len->set_value(std::to_string(length));
  return m;
}

TEST(Import, ExternalData) {
  TempDir dir("ext");
  const float w[4] = {1.5f, -2, 3, 4};
  std::ofstream(dir.file("weights.bin"), std::ios::binary).write(reinterpret_cast<const char*>(w), sizeof(w));
  external_model("weights.bin", 16).save(dir.file("m.onnx"));
  Graph g = load_onnx(dir.file("m.onnx"));
  const Value& v = g.values[g.find_value("w")];
  ASSERT_TRUE(v.constant);
  EXPECT_EQ(v.constant->get_double(0), 1.5);
  EXPECT_EQ(v.constant->get_double(3), 4.0);
}

TEST(ImportErrors, ExternalDataMissingShortOrEscaping) {
  TempDir dir("ext_bad");
  std::ofstream(dir.file("short.bin"), std::ios::binary) << "12345678";
  std::ofstream(dir.path().parent_path() / "kiln_outside.bin", std::ios::binary) << "0123456789abcdef";
  external_model("missing.bin", 16).save(dir.file("missing.onnx"));
  EXPECT_CONTAINS(user_error_of([&] { load_onnx(dir.file("missing.onnx")); }),
                  "initializer 'w': external data file 'missing.bin' does not exist");
  external_model("short.bin", 16).save(dir.file("short.onnx"));
  EXPECT_CONTAINS(user_error_of([&] { load_onnx(dir.file("short.onnx")); }),
                  "initializer 'w': external data 'short.bin' has 8 bytes after offset 0, expected 16");
  external_model("../kiln_outside.bin", 16).save(dir.file("escape.onnx"));
  EXPECT_CONTAINS(user_error_of([&] { load_onnx(dir.file("escape.onnx")); }),
                  "initializer 'w': external data location '../kiln_outside.bin' escapes the model's folder");
  external_model("/etc/passwd", 16).save(dir.file("absolute.onnx"));
  EXPECT_CONTAINS(user_error_of([&] { load_onnx(dir.file("absolute.onnx")); }),
                  "must be a relative path inside the model's folder");
  std::filesystem::create_symlink(dir.path().parent_path() / "kiln_outside.bin", dir.path() / "link.bin");
  external_model("link.bin", 16).save(dir.file("link.onnx"));
  EXPECT_CONTAINS(user_error_of([&] { load_onnx(dir.file("link.onnx")); }), "escapes the model's folder");
  EXPECT_CONTAINS(user_error_of([&] { load_onnx_from_bytes(external_model("w.bin", 16).bytes()); }),
                  "the model was not loaded from a file");
  std::filesystem::remove(dir.path().parent_path() / "kiln_outside.bin");
}

}  // namespace
}  // namespace kiln
