// Einsum definition: error messages, and values on the CPU reference (implicit output,
// ellipsis broadcasting, a diagonal).
#include <gtest/gtest.h>

#include "TestGraph.h"
#include "kiln/runtime/GraphRunner.h"

namespace kiln {
namespace {

using test::OpsTestGraph;

TEST(Einsum, TermRankMismatch) {
  OpsTestGraph b(12);
  b.output(b.node("e", OpKind::Einsum, {b.input("x", DType::Float32, {2, 3})}, {{"equation", test::string_attr("ijk->i")}}));
  EXPECT_EQ(b.error(), "node 'e' (Einsum): equation term 'ijk' has 3 labels but its input has rank 2");
}

TEST(Einsum, LabelExtentsDisagree) {
  OpsTestGraph b(12);
  b.output(b.node("e", OpKind::Einsum, {b.input("x", DType::Float32, {2, 3}), b.input("y", DType::Float32, {4, 2})},
                  {{"equation", test::string_attr("ij,jk")}}));
  EXPECT_EQ(b.error(), "node 'e' (Einsum): label 'j' has extents 3 and 4 in equation 'ij,jk'");
}

TEST(Einsum, ImplicitOutputIsAlphabetical) {
  OpsTestGraph b(12);
  const int x = b.input("x", DType::Float32, {2, 3});
  b.output(b.node("e", OpKind::Einsum, {x}, {{"equation", test::string_attr("ji")}}));  // a transpose
  std::vector<HostTensor> out = run_graph_on_cpu(b.graph, {{"x", test::float_tensor({2, 3}, {0, 1, 2, 3, 4, 5})}});
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(test::values_of(out[0]), (std::vector<double>{0, 3, 1, 4, 2, 5}));
}

TEST(Einsum, EllipsisTrace) {
  OpsTestGraph b(12);
  const int x = b.input("x", DType::Float32, {2, 2, 2});
  b.output(b.node("e", OpKind::Einsum, {x}, {{"equation", test::string_attr("...ii->...")}}));
  std::vector<HostTensor> out =
      run_graph_on_cpu(b.graph, {{"x", test::float_tensor({2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8})}});
  EXPECT_EQ(test::values_of(out[0]), (std::vector<double>{5, 13}));
}

}  // namespace
}  // namespace kiln
