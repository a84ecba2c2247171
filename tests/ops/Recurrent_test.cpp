// RNN/GRU/LSTM definitions: error messages, symbolic sequence lengths as unsupported, and a
// two-step RNN on the CPU reference against a hand computation.
#include <gtest/gtest.h>

#include <cmath>

#include "TestGraph.h"
#include "kiln/runtime/GraphRunner.h"

namespace kiln {
namespace {

using test::OpsTestGraph;

TEST(Recurrent, SymbolicSequenceIsUnsupported) {
  OpsTestGraph b(14);
  const int x = b.input("x", DType::Float32, {b.graph.symbol("seq"), 1, 2});
  b.output(b.node("r", OpKind::RNN, {x, b.input("w", DType::Float32, {1, 3, 2}), b.input("r", DType::Float32, {1, 3, 3})},
                  {{"hidden_size", test::int_attr(3)}}, 2));
  EXPECT_EQ(b.error(),
            "node 'r' (RNN): the sequence length (dim 0 of [seq, 1, 2]) is symbolic; kiln unrolls recurrences over "
            "known lengths");
}

TEST(Recurrent, WeightShape) {
  // GRU needs 3 * hidden rows in W: 4 rows do not fit hidden 2.
  OpsTestGraph b(14);
  const int x = b.input("x", DType::Float32, {2, 1, 2});
  b.output(b.node("g", OpKind::GRU, {x, b.input("w", DType::Float32, {1, 4, 2}), b.input("r", DType::Float32, {1, 6, 2})},
                  {{"hidden_size", test::int_attr(2)}}, 2));
  EXPECT_EQ(b.error(), "node 'g' (GRU): W [1, 4, 2] must have shape [1, 6, 2]");
}

TEST(Recurrent, RnnTwoSteps) {
  OpsTestGraph b(14);
  const int x = b.input("x", DType::Float32, {2, 1, 1});
  const int y = b.node("r", OpKind::RNN,
                       {x, b.constant("w", test::float_tensor({1, 1, 1}, {0.5})),
                        b.constant("r", test::float_tensor({1, 1, 1}, {2.0}))},
                       {{"hidden_size", test::int_attr(1)}}, 2);
  b.output(y);
  b.output(y + 1);
  std::vector<HostTensor> out = run_graph_on_cpu(b.graph, {{"x", test::float_tensor({2, 1, 1}, {1, -1})}});
  const double h1 = std::tanh(0.5), h2 = std::tanh(-0.5 + 2 * h1);
  ASSERT_EQ(out[0].num_elements(), 2);
  EXPECT_NEAR(out[0].get_double(0), h1, 1e-6);
  EXPECT_NEAR(out[0].get_double(1), h2, 1e-6);
  EXPECT_NEAR(out[1].get_double(0), h2, 1e-6);
}

}  // namespace
}  // namespace kiln
