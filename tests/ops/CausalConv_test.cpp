// CausalConvWithState on the CPU reference: the past state is read before the input, and the
// present state is the last k - 1 positions.
#include <gtest/gtest.h>

#include "TestGraph.h"

namespace kiln {
namespace {

using test::OpsTestGraph;

TEST(CausalConv, PastStateAndPresentState) {
  OpsTestGraph b;
  const int x = b.input("x", DType::Float32, {1, 1, 3});
  const int w = b.input("w", DType::Float32, {1, 1, 2});
  const int past = b.input("past", DType::Float32, {1, 1, 1});
  const int y = b.node("c", OpKind::CausalConvWithState, {x, w, -1, past}, {}, 2);
  b.output(y);
  b.output(y + 1);
  const std::vector<HostTensor> out =
      run_graph_on_cpu(b.graph, {{"x", test::float_tensor({1, 1, 3}, {1, 2, 3})},
                                 {"w", test::float_tensor({1, 1, 2}, {10, 1})},
                                 {"past", test::float_tensor({1, 1, 1}, {5})}});
  // padded = [5, 1, 2, 3]: y[l] = 10 * padded[l] + padded[l + 1].
  EXPECT_EQ(test::values_of(out[0]), (std::vector<double>{51, 12, 23}));
  EXPECT_EQ(test::values_of(out[1]), (std::vector<double>{3}));
}

TEST(CausalConv, PastStateOfTheWrongLength) {
  OpsTestGraph b;
  const int x = b.input("x", DType::Float32, {1, 1, 3});
  const int w = b.input("w", DType::Float32, {1, 1, 3});
  b.output(b.node("c", OpKind::CausalConvWithState,
                  {x, w, -1, b.input("past", DType::Float32, {1, 1, 1})}, {}, 2));
  EXPECT_EQ(b.error(),
            "node 'c' (CausalConvWithState): past_state [1, 1, 1] must have shape [batch_size, "
            "channels, 2] (k - 1 "
            "positions)");
}

}  // namespace
}  // namespace kiln
