// Contraction and pooling op definitions: error messages for mismatched operands and values on
// the CPU reference.
#include <gtest/gtest.h>

#include "TestGraph.h"
#include "kiln/ops/GraphTensors.h"
#include "kiln/runtime/GraphRunner.h"
#include "kiln/support/Error.h"

namespace kiln {
namespace {

using test::OpsTestGraph;

TEST(MatMul, InnerDimensionMismatch) {
  OpsTestGraph b;
  const int a = b.input("a", DType::Float32, {2, 3});
  const int c = b.input("b", DType::Float32, {4, 5});
  b.output(b.node("mm", OpKind::MatMul, {a, c}));
  EXPECT_EQ(b.error(),
            "node 'mm' (MatMul): inner dimensions do not match: A [2, 3] has 3 columns but B [4, 5] has 4 rows");
}

TEST(MatMul, BatchBroadcastAndVector) {
  OpsTestGraph b;
  const ir::Expr batch = b.graph.symbol("batch");
  const int a = b.input("a", DType::Float32, {batch, 1, 2, 3});
  const int v = b.input("v", DType::Float32, {3});
  const int y = b.node("mv", OpKind::MatMul, {a, v});
  b.output(y);
  ops::infer_types(b.graph);
  EXPECT_EQ(to_string(*b.graph.values[y].type), "float32[batch, 1, 2]");
  std::vector<HostTensor> out = run_graph_on_cpu(
      b.graph, {{"a", test::float_tensor({1, 1, 2, 3}, {1, 2, 3, 4, 5, 6})}, {"v", test::float_tensor({3}, {1, 0, -1})}});
  EXPECT_EQ(test::values_of(out[0]), (std::vector<double>{-2, -2}));
}

TEST(MatMul, Float16AccumulatesInFloat32) {
  OpsTestGraph b;
  const int a = b.input("a", DType::Float16, {1, 3});
  const int c = b.input("b", DType::Float16, {3, 1});
  b.output(b.node("mm", OpKind::MatMul, {a, c}));
  HostTensor x(DType::Float16, {1, 3}), w(DType::Float16, {3, 1});
  // 2048 + 1 + 1: float16 steps by 2 above 2048, so accumulating in float16 would lose both ones.
  for (int k = 0; k < 3; ++k) w.set_double(k, 1.0);
  x.set_double(0, 2048.0);
  x.set_double(1, 1.0);
  x.set_double(2, 1.0);
  std::vector<HostTensor> out = run_graph_on_cpu(b.graph, {{"a", x}, {"b", w}});
  EXPECT_EQ(out[0].dtype(), DType::Float16);
  EXPECT_EQ(out[0].get_double(0), 2050.0);
}

TEST(Conv, ChannelMismatch) {
  OpsTestGraph b;
  const int x = b.input("x", DType::Float32, {1, 3, 5, 5});
  const int w = b.input("w", DType::Float32, {8, 4, 3, 3});
  b.output(b.node("conv", OpKind::Conv, {x, w}));
  EXPECT_EQ(b.error(),
            "node 'conv' (Conv): X [1, 3, 5, 5] has 3 channels but W [8, 4, 3, 3] expects 4 (4 per group x group 1)");
}

TEST(Conv, PaddedSumOfNeighbours) {
  OpsTestGraph b;
  const int x = b.input("x", DType::Float32, {1, 1, 3});
  const int w = b.input("w", DType::Float32, {1, 1, 3});
  b.output(b.node("conv", OpKind::Conv, {x, w}, {{"pads", OpsTestGraph::ints_attr({1, 1})}}));
  std::vector<HostTensor> out = run_graph_on_cpu(
      b.graph, {{"x", test::float_tensor({1, 1, 3}, {1, 2, 3})}, {"w", test::float_tensor({1, 1, 3}, {1, 1, 1})}});
  EXPECT_EQ(test::values_of(out[0]), (std::vector<double>{3, 6, 5}));
}

TEST(MaxPool, IndicesPointAtTheMaximum) {
  OpsTestGraph b;
  const int x = b.input("x", DType::Float32, {1, 1, 4});
  b.node("pool", OpKind::MaxPool, {x}, {{"kernel_shape", OpsTestGraph::ints_attr({2})},
                                        {"strides", OpsTestGraph::ints_attr({2})}}, 2);
  b.output(b.graph.nodes.back().outputs[0]);
  b.output(b.graph.nodes.back().outputs[1]);
  std::vector<HostTensor> out = run_graph_on_cpu(b.graph, {{"x", test::float_tensor({1, 1, 4}, {1, 5, 7, 2})}});
  EXPECT_EQ(test::values_of(out[0]), (std::vector<double>{5, 7}));
  EXPECT_EQ(test::values_of(out[1]), (std::vector<double>{1, 2}));
}

}  // namespace
}  // namespace kiln
