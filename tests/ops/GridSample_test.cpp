// GridSample definition: error messages, and values on the CPU reference (border padding,
// align_corners).
#include <gtest/gtest.h>

#include "TestGraph.h"
#include "kiln/runtime/GraphRunner.h"

namespace kiln {
namespace {

using test::OpsTestGraph;

TEST(GridSample, GridShape) {
  OpsTestGraph b(16);
  const int x = b.input("x", DType::Float32, {1, 1, 2, 2});
  b.output(b.node("g", OpKind::GridSample, {x, b.input("grid", DType::Float32, {1, 3, 3, 3})}));
  EXPECT_EQ(b.error(),
            "node 'g' (GridSample): grid [1, 3, 3, 3] must have shape [N, out dims..., 2] for input [1, 1, 2, 2]");
}

TEST(GridSample, OpsetSixteenModeNames) {
  OpsTestGraph b(16);
  const int x = b.input("x", DType::Float32, {1, 1, 2, 2});
  b.output(b.node("g", OpKind::GridSample, {x, b.input("grid", DType::Float32, {1, 1, 1, 2})},
                  {{"mode", test::string_attr("linear")}}));
  EXPECT_EQ(b.error(), "node 'g' (GridSample): attribute 'mode' is 'linear', expected bilinear, nearest or bicubic");
}

TEST(GridSample, BorderAlignCorners) {
  OpsTestGraph b(16);
  const int x = b.input("x", DType::Float32, {1, 1, 2, 2});
  const int grid = b.input("grid", DType::Float32, {1, 1, 3, 2});
  b.output(b.node("g", OpKind::GridSample, {x, grid},
                  {{"align_corners", test::int_attr(1)}, {"padding_mode", test::string_attr("border")}}));
  // (x, y) = (-1, -1) is pixel (0, 0); (0, 0) the center; (3, 1) beyond the right edge clamps to x = 1.
  std::vector<HostTensor> out = run_graph_on_cpu(
      b.graph, {{"x", test::float_tensor({1, 1, 2, 2}, {1, 2, 3, 4})},
                {"grid", test::float_tensor({1, 1, 3, 2}, {-1, -1, 0, 0, 3, 1})}});
  EXPECT_EQ(test::values_of(out[0]), (std::vector<double>{1, 2.5, 4}));
}

}  // namespace
}  // namespace kiln
