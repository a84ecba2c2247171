// The example models that examples/make_examples.py writes (committed, so no Python is needed).
#include <gtest/gtest.h>

#include "kiln/onnx/Export.h"
#include "kiln/onnx/Import.h"

namespace kiln {
namespace {

const std::string kExamples = std::string(KILN_SOURCE_DIR) + "/examples/";

TEST(Examples, GemmaMlpLoadsWithSymbolicDims) {
  const Graph g = load_onnx(kExamples + "gemma_mlp.onnx");
  EXPECT_TRUE(unsupported_ops(g).empty());
  EXPECT_EQ(g.opset, 17);
  ASSERT_EQ(g.inputs.size(), 1u);
  EXPECT_EQ(to_string(*g.values[g.inputs[0]].type), "float32[batch, seq, 64]");
  ASSERT_EQ(g.outputs.size(), 2u);
  EXPECT_EQ(to_string(*g.values[g.outputs[1]].type), "float32[batch, seq, 64]");
  EXPECT_EQ(g.values[g.find_value("w_gate")].constant->describe(), "float32[64, 256]");
  EXPECT_EQ(g.values[g.find_value("w_down")].constant->describe(), "float32[256, 64]");
  EXPECT_EQ(g.nodes.front().op, OpKind::LayerNormalization);
  EXPECT_EQ(g.nodes.back().op, OpKind::Softmax);
  EXPECT_EQ(g.symbols().size(), 2u);
}

TEST(Examples, SmallCnnLoads) {
  const Graph g = load_onnx(kExamples + "small_cnn.onnx");
  EXPECT_TRUE(unsupported_ops(g).empty());
  std::vector<OpKind> ops;
  for (const Node& n : g.nodes) ops.push_back(n.op);
  EXPECT_EQ(ops, (std::vector<OpKind>{OpKind::Conv, OpKind::BatchNormalization, OpKind::Relu, OpKind::MaxPool,
                                      OpKind::Conv, OpKind::Relu, OpKind::GlobalAveragePool, OpKind::Flatten,
                                      OpKind::Gemm}));
  const Node& conv1 = g.nodes[g.find_node("conv1")];
  EXPECT_EQ(conv1.attr_ints("pads", {}), (std::vector<int64_t>{1, 1, 1, 1}));
  EXPECT_EQ(to_string(*g.values[g.outputs[0]].type), "float32[batch, 10]");
  // Export and import again: same nodes.
  const Graph again = load_onnx_from_bytes(serialize_onnx(g));
  ASSERT_EQ(again.nodes.size(), g.nodes.size());
  EXPECT_EQ(again.nodes[1].attr_float("epsilon", 0), g.nodes[1].attr_float("epsilon", 0));
}

}  // namespace
}  // namespace kiln
