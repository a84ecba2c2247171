// Reduction op definitions: error messages for bad axes and dtypes, and values on the CPU
// reference (axes as attribute and as input, ArgMax ties, CumSum modes).
#include <gtest/gtest.h>

#include "TestGraph.h"

namespace kiln {
namespace {

using test::NodeTestGraph;

TEST(Reduction, AxisOutOfRange) {
  NodeTestGraph g(13);
  g.node("r", OpKind::ReduceMax, {g.input("x", DType::Float32, {2, 3})}, {{"axes", test::ints_attr({2})}});
  EXPECT_EQ(g.error(),
            "node 'r' (ReduceMax): axis 2 is out of range for a tensor of rank 2 (expected [-2, 2))");
}

TEST(Reduction, RepeatedAxis) {
  NodeTestGraph g(13);
  const int axes = g.constant("axes", test::tensor(DType::Int64, {2}, {1, -1}));
  g.node("r", OpKind::ReduceSum, {g.input("x", DType::Float32, {2, 3}), axes});
  EXPECT_EQ(g.error(), "node 'r' (ReduceSum): axis -1 is listed twice in 'axes'");
}

TEST(Reduction, AxesInputMustBeKnown) {
  NodeTestGraph g(18);
  g.node("r", OpKind::ReduceMean, {g.input("x", DType::Float32, {2, 3}), g.input("axes", DType::Int64, {1})});
  EXPECT_EQ(g.error(),
            "node 'r' (ReduceMean): input 1 ('axes', value 'axes') must be known when compiling (an initializer, a "
            "Constant, or computed from shapes); kiln specializes kernels on it");
}

TEST(Reduction, RejectsBool) {
  NodeTestGraph g(13);
  g.node("r", OpKind::ReduceSum, {g.input("x", DType::Bool, {2})});
  EXPECT_EQ(g.error(),
            "node 'r' (ReduceSum): input 0 has dtype bool, expected one of: int8, int16, int32, int64, uint8, uint16, "
            "uint32, uint64, float16, bfloat16, float32, float64");
}

TEST(Reduction, ArgMaxAxisOutOfRange) {
  NodeTestGraph g(13);
  g.node("a", OpKind::ArgMax, {g.input("x", DType::Float32, {2, 3})}, {{"axis", test::int_attr(-3)}});
  EXPECT_EQ(g.error(),
            "node 'a' (ArgMax): attribute 'axis' -3 is out of range for a tensor of rank 2 (expected [-2, 2))");
}

TEST(Reduction, KeepdimsShapesAndValues) {
  NodeTestGraph g(13);
  const int x = g.input("x", DType::Float16, {2, 3});
  g.node("sum", OpKind::ReduceSum, {x, g.constant("axes", test::tensor(DType::Int64, {1}, {1}))},
         {{"keepdims", test::int_attr(0)}});
  g.node("l2", OpKind::ReduceL2, {x}, {{"axes", test::ints_attr({0})}});
  g.node("lse", OpKind::ReduceLogSumExp, {x}, {{"keepdims", test::int_attr(0)}});
  const auto out = run_graph_on_cpu(g.graph, {{"x", test::tensor(DType::Float16, {2, 3}, {1, 2, 3, 3, 4, 0})}});
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{2}));
  EXPECT_EQ(test::values_of(out[0]), (std::vector<double>{6, 7}));
  EXPECT_EQ(out[1].shape(), (std::vector<int64_t>{1, 3}));
  EXPECT_NEAR(test::values_of(out[1])[0], std::sqrt(10.0), 1e-2);
  EXPECT_EQ(out[2].shape(), (std::vector<int64_t>{}));
  EXPECT_NEAR(test::values_of(out[2])[0], 4.6623, 1e-2);  // log(e + e^2 + 2 e^3 + e^4 + 1), float16
}

TEST(Reduction, ArgMaxTiesFirstOrLast) {
  NodeTestGraph g(13);
  const int x = g.input("x", DType::Int32, {2, 3});
  g.node("first", OpKind::ArgMax, {x}, {{"axis", test::int_attr(1)}, {"keepdims", test::int_attr(0)}});
  g.node("last", OpKind::ArgMin, {x}, {{"axis", test::int_attr(1)}, {"select_last_index", test::int_attr(1)}});
  const auto out = run_graph_on_cpu(g.graph, {{"x", test::tensor(DType::Int32, {2, 3}, {5, 1, 5, 0, 0, 7})}});
  EXPECT_EQ(out[0].dtype(), DType::Int64);
  EXPECT_EQ(test::values_of(out[0]), (std::vector<double>{0, 2}));
  EXPECT_EQ(out[1].shape(), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(test::values_of(out[1]), (std::vector<double>{1, 1}));
}

TEST(Reduction, CumSumExclusiveReverse) {
  NodeTestGraph g(14);
  const int x = g.input("x", DType::Float32, {4});
  const int axis = g.constant("axis", test::tensor(DType::Int32, {}, {0}));
  g.node("c", OpKind::CumSum, {x, axis}, {{"exclusive", test::int_attr(1)}, {"reverse", test::int_attr(1)}});
  const auto out = run_graph_on_cpu(g.graph, {{"x", test::tensor(DType::Float32, {4}, {1, 2, 3, 4})}});
  EXPECT_EQ(test::values_of(out[0]), (std::vector<double>{9, 7, 4, 0}));
}

}  // namespace
}  // namespace kiln
