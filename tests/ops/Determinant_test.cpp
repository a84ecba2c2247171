// Det on the CPU reference (a batch of 3x3 matrices) and its limits.
#include <gtest/gtest.h>

#include "TestGraph.h"

namespace kiln {
namespace {

using test::OpsTestGraph;

TEST(Determinant, BatchOf3x3) {
  OpsTestGraph b;
  b.output(b.node("d", OpKind::Det, {b.input("x", DType::Float32, {2, 3, 3})}));
  const std::vector<HostTensor> out = run_graph_on_cpu(
      b.graph, {{"x", test::float_tensor({2, 3, 3}, {2, 0, 0, 0, 3, 0, 0, 0, 4,  // diagonal: 24
                                                     1, 2, 3, 4, 5, 6, 7, 8, 10})}});  // -3
  ASSERT_EQ(out[0].num_elements(), 2);
  EXPECT_NEAR(out[0].get_double(0), 24, 1e-5);
  EXPECT_NEAR(out[0].get_double(1), -3, 1e-5);
}

TEST(Determinant, Errors) {
  OpsTestGraph big;
  big.output(big.node("d", OpKind::Det, {big.input("x", DType::Float32, {6, 6})}));
  EXPECT_EQ(big.error(), "node 'd' (Det): 6x6 matrices (kiln computes determinants up to 5x5)");
  OpsTestGraph oblong;
  oblong.output(oblong.node("d", OpKind::Det, {oblong.input("x", DType::Float32, {2, 3})}));
  EXPECT_EQ(oblong.error(), "node 'd' (Det): input [2, 3] must hold square matrices");
}

}  // namespace
}  // namespace kiln
