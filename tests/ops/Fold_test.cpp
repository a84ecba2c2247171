// Col2Im and MaxUnpool on the CPU reference against hand-computed images, and their shape errors.
#include <gtest/gtest.h>

#include "TestGraph.h"

namespace kiln {
namespace {

using test::OpsTestGraph;

// A 1x3 image from 2-wide blocks at stride 1: the middle pixel is covered by both blocks.
TEST(Fold, Col2ImSumsOverlappingBlocks) {
  OpsTestGraph b;
  const int x = b.input("x", DType::Float32, {1, 2, 2});  // [N, C * 2, L = 2 blocks]
  b.output(b.node("c", OpKind::Col2Im, {x, b.ints("image", {1, 3}), b.ints("block", {1, 2})}));
  // Column k of x is block k: block 0 = (1, 2) at pixels 0-1, block 1 = (10, 20) at pixels 1-2.
  const std::vector<HostTensor> out =
      run_graph_on_cpu(b.graph, {{"x", test::float_tensor({1, 2, 2}, {1, 10, 2, 20})}});
  EXPECT_EQ(test::values_of(out[0]), (std::vector<double>{1, 12, 20}));
}

TEST(Fold, Col2ImBlockCountMismatch) {
  OpsTestGraph b;
  const int x = b.input("x", DType::Float32, {1, 2, 3});
  b.output(b.node("c", OpKind::Col2Im, {x, b.ints("image", {1, 3}), b.ints("block", {1, 2})}));
  EXPECT_EQ(b.error(),
            "node 'c' (Col2Im): input dim 2 of [1, 2, 3] must be the number of sliding blocks, 2");
}

TEST(Fold, MaxUnpoolPlacesValuesAtTheirIndices) {
  OpsTestGraph b;
  const int x = b.input("x", DType::Float32, {1, 1, 2});
  const int i = b.input("i", DType::Int64, {1, 1, 2});
  b.output(b.node("u", OpKind::MaxUnpool, {x, i},
                  {{"kernel_shape", test::ints_attr({2})}, {"strides", test::ints_attr({2})}}));
  const std::vector<HostTensor> out =
      run_graph_on_cpu(b.graph, {{"x", test::float_tensor({1, 1, 2}, {5, 7})},
                                 {"i", test::tensor(DType::Int64, {1, 1, 2}, {1, 2})}});
  EXPECT_EQ(test::values_of(out[0]), (std::vector<double>{0, 5, 7, 0}));
}

}  // namespace
}  // namespace kiln
