// Normalization op definitions: error messages for bad axes and parameters, and values on the
// CPU reference (the opset-13 change of Softmax's axis semantics, LayerNormalization's outputs).
#include <gtest/gtest.h>

#include <cmath>

#include "TestGraph.h"

namespace kiln {
namespace {

using test::NodeTestGraph;

TEST(Normalization, SoftmaxAxisOutOfRange) {
  NodeTestGraph g(13);
  g.node("s", OpKind::Softmax, {g.input("x", DType::Float32, {2, 3})}, {{"axis", test::int_attr(2)}});
  EXPECT_EQ(g.error(),
            "node 's' (Softmax): attribute 'axis' 2 is out of range for a tensor of rank 2 (expected [-2, 2))");
}

TEST(Normalization, SoftmaxRejectsIntegers) {
  NodeTestGraph g(13);
  g.node("s", OpKind::LogSoftmax, {g.input("x", DType::Int64, {2, 3})});
  EXPECT_EQ(g.error(),
            "node 's' (LogSoftmax): input 0 has dtype int64, expected one of: float16, bfloat16, float32, float64");
}

TEST(Normalization, LayerNormScaleDtypeMustMatch) {
  NodeTestGraph g(17);
  g.node("ln", OpKind::LayerNormalization, {g.input("x", DType::Float32, {2, 3}), g.input("w", DType::Float16, {3})});
  EXPECT_EQ(g.error(),
            "node 'ln' (LayerNormalization): input 1 has dtype float16 but input 0 has dtype float32; they must match");
}

TEST(Normalization, LayerNormScaleRank) {
  NodeTestGraph g(17);
  g.node("ln", OpKind::LayerNormalization, {g.input("x", DType::Float32, {2, 3}), g.input("w", DType::Float32, {2, 3})});
  EXPECT_EQ(g.error(),
            "node 'ln' (LayerNormalization): Scale and B must broadcast to the normalized shape (the last 1 dims), "
            "but one has rank 2");
}

TEST(Normalization, BatchNormParameterLength) {
  NodeTestGraph g(15);
  const int x = g.input("x", DType::Float32, {1, 3, 2});
  g.node("bn", OpKind::BatchNormalization,
         {x, g.input("s", DType::Float32, {3}), g.input("b", DType::Float32, {3}), g.input("m", DType::Float32, {4}),
          g.input("v", DType::Float32, {3})});
  EXPECT_EQ(g.error(), "node 'bn' (BatchNormalization): input 3 (mean) has 4 elements but the input has 3 channels");
}

// Inference with the four parameters known (initializers): one float32 scale and shift per channel
// (two constants of the node, no sqrt left per element), the same values as the formula; a
// channel with var + epsilon <= 0, or a parameter that is a graph input, keeps the formula.
TEST(Normalization, BatchNormWithConstantParametersIsOneScaleAndShift) {
  const std::vector<double> xs = {1, -2, 3, 0.5, 4, -1, 2, 7, -3, 0, 5, 1};  // [2, 3, 2]
  const double eps = 1e-5, s[] = {2, 0.5, -1}, b[] = {1, 0, 3}, m[] = {0.5, -1, 2}, v[] = {4, 0.25, 9};
  auto graph = [&](bool var_constant, double var0) {
    NodeTestGraph g(15);
    const int x = g.input("x", DType::Float32, {2, 3, 2});
    const int var = var_constant ? g.constant("v", test::tensor(DType::Float32, {3}, {var0, v[1], v[2]}))
                                 : g.input("v", DType::Float32, {3});
    g.node("bn", OpKind::BatchNormalization,
           {x, g.constant("s", test::tensor(DType::Float32, {3}, {s[0], s[1], s[2]})),
            g.constant("b", test::tensor(DType::Float32, {3}, {b[0], b[1], b[2]})),
            g.constant("m", test::tensor(DType::Float32, {3}, {m[0], m[1], m[2]})), var});
    return g;
  };
  auto folded = [](const Graph& g) {
    const ops::GraphTensors built = ops::build_graph_tensors(g);
    int found = 0;
    for (const te::Tensor& p : built.placeholders)
      if (p.name() == "bn_out0_bn_scale" || p.name() == "bn_out0_bn_shift") ++found;
    return found;
  };
  NodeTestGraph g = graph(true, v[0]);
  EXPECT_EQ(folded(g.graph), 2);
  const std::vector<double> y =
      test::values_of(run_graph_on_cpu(g.graph, {{"x", test::tensor(DType::Float32, {2, 3, 2}, xs)}})[0]);
  ASSERT_EQ(y.size(), xs.size());
  for (size_t k = 0; k < xs.size(); ++k) {
    const size_t c = k / 2 % 3;
    EXPECT_NEAR(y[k], (xs[k] - m[c]) / std::sqrt(v[c] + eps) * s[c] + b[c], 1e-5) << k;
  }
  EXPECT_EQ(folded(graph(true, -1).graph), 0);  // var + epsilon < 0 in channel 0: the formula (NaN)
  EXPECT_EQ(folded(graph(false, 0).graph), 0);  // var a graph input
}

// Training mode: the batch's mean and population variance per channel normalize x, and the running
// statistics move by 1 - momentum towards them.
TEST(Normalization, BatchNormTrainingUsesBatchStatistics) {
  NodeTestGraph g(15);
  std::vector<int> in = {g.input("x", DType::Float32, {2, 1, 2})};
  for (const char* name : {"s", "b", "m", "v"}) in.push_back(g.input(name, DType::Float32, {1}));
  g.node("bn", OpKind::BatchNormalization, in,
         {{"training_mode", test::int_attr(1)},
          {"epsilon", test::float_attr(0)},
          {"momentum", test::float_attr(0.5)}},
         3);
  const std::vector<HostTensor> out =
      run_graph_on_cpu(g.graph, {{"x", test::float_tensor({2, 1, 2}, {1, 3, 5, 7})},
                                 {"s", test::float_tensor({1}, {2})},
                                 {"b", test::float_tensor({1}, {1})},
                                 {"m", test::float_tensor({1}, {0})},
                                 {"v", test::float_tensor({1}, {1})}});
  // mean 4, variance (9 + 1 + 1 + 9) / 4 = 5.
  const double sd = std::sqrt(5.0);
  const std::vector<double> y = test::values_of(out[0]);
  const double xs[] = {1, 3, 5, 7};
  for (int k = 0; k < 4; ++k) EXPECT_NEAR(y[k], (xs[k] - 4) / sd * 2 + 1, 1e-5) << k;
  EXPECT_NEAR(test::values_of(out[1])[0], 2.0, 1e-6);  // 0 * 0.5 + 4 * 0.5
  EXPECT_NEAR(test::values_of(out[2])[0], 3.0, 1e-6);  // 1 * 0.5 + 5 * 0.5
}

TEST(Normalization, BatchNormTrainingModeBeforeOpset14IsAnError) {
  NodeTestGraph g(13);
  std::vector<int> in = {g.input("x", DType::Float32, {1, 2})};
  for (const char* name : {"s", "b", "m", "v"}) in.push_back(g.input(name, DType::Float32, {2}));
  g.node("bn", OpKind::BatchNormalization, in, {{"training_mode", test::int_attr(1)}});
  EXPECT_EQ(g.error(),
            "node 'bn' (BatchNormalization): attribute 'training_mode' exists from opset 14; the "
            "model uses opset 13");
}

// Before opset 13, Softmax normalizes over every dim from `axis` on (a coerced 2-D view).
TEST(Normalization, SoftmaxCoercedBeforeOpset13) {
  const HostTensor data = test::tensor(DType::Float32, {1, 2, 2}, {0, 0, 0, 0});
  for (int64_t opset : {11, 13}) {
    NodeTestGraph g(opset);
    g.node("s", OpKind::Softmax, {g.input("x", DType::Float32, {1, 2, 2})}, {{"axis", test::int_attr(1)}});
    const auto out = run_graph_on_cpu(g.graph, {{"x", data}});
    const double want = opset < 13 ? 0.25 : 0.5;
    for (double v : test::values_of(out[0])) EXPECT_NEAR(v, want, 1e-6) << "opset " << opset;
  }
}

TEST(Normalization, LayerNormMeanAndInvStdDev) {
  NodeTestGraph g(17);
  const int x = g.input("x", DType::Float32, {2, 2});
  const int w = g.constant("w", test::tensor(DType::Float32, {2}, {1, 2}));
  g.node("ln", OpKind::LayerNormalization, {x, w}, {{"epsilon", test::int_attr(0)}}, 3);
  g.graph.nodes.back().attributes["epsilon"].kind = Attribute::Kind::Float;
  const auto out = run_graph_on_cpu(g.graph, {{"x", test::tensor(DType::Float32, {2, 2}, {1, 3, 2, 6})}});
  EXPECT_EQ(test::values_of(out[0]), (std::vector<double>{-1, 2, -1, 2}));
  EXPECT_EQ(out[1].shape(), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(test::values_of(out[1]), (std::vector<double>{2, 4}));
  EXPECT_EQ(test::values_of(out[2]), (std::vector<double>{1, 0.5}));
}

}  // namespace
}  // namespace kiln
