// Resize/Upsample definitions: error messages for bad scales/sizes/attributes, symbolic resized
// dims as unsupported, and values on the CPU reference (nearest rounding, linear, integers).
#include <gtest/gtest.h>

#include "TestGraph.h"
#include "kiln/runtime/GraphRunner.h"

namespace kiln {
namespace {

using test::OpsTestGraph;

int floats(OpsTestGraph& b, const std::string& name, std::vector<int64_t> shape, std::vector<double> values) {
  return b.constant(name, test::float_tensor(std::move(shape), values));
}

TEST(Resize, ScalesAndSizesTogether) {
  OpsTestGraph b(13);
  const int x = b.input("x", DType::Float32, {1, 1, 2, 2});
  b.output(b.node("r", OpKind::Resize,
                  {x, -1, floats(b, "scales", {4}, {1, 1, 2, 2}), b.ints("sizes", {1, 1, 4, 4})}));
  EXPECT_EQ(b.error(), "node 'r' (Resize): both 'scales' and 'sizes' are given; exactly one is allowed");
}

TEST(Resize, ScalesLengthMustMatchRank) {
  OpsTestGraph b(13);
  const int x = b.input("x", DType::Float32, {1, 1, 2, 2});
  b.output(b.node("r", OpKind::Resize, {x, -1, floats(b, "scales", {2}, {2, 2})}));
  EXPECT_EQ(b.error(), "node 'r' (Resize): 'scales' has 2 values, expected 4 (one per input dimension)");
}

TEST(Resize, UnknownNearestMode) {
  OpsTestGraph b(13);
  const int x = b.input("x", DType::Float32, {1, 1, 2, 2});
  b.output(b.node("r", OpKind::Resize, {x, -1, floats(b, "scales", {4}, {1, 1, 2, 2})},
                  {{"nearest_mode", test::string_attr("nearest_even")}}));
  EXPECT_EQ(b.error(),
            "node 'r' (Resize): attribute 'nearest_mode' is 'nearest_even', expected round_prefer_floor, "
            "round_prefer_ceil, floor or ceil");
}

TEST(Resize, SymbolicResizedDimIsUnsupported) {
  OpsTestGraph b(13);
  const int x = b.input("x", DType::Float32, {1, 1, b.graph.symbol("h"), 2});
  b.output(b.node("r", OpKind::Resize, {x, -1, floats(b, "scales", {4}, {1, 1, 2, 2})}));
  EXPECT_EQ(b.error(), "node 'r' (Resize): resizing dimension 2 of [1, 1, h, 2], which is symbolic");
}

TEST(Resize, NearestRoundingModes) {
  // 3 -> 5 with asymmetric coordinates: x = o * 0.6 = 0, 0.6, 1.2, 1.8, 2.4.
  for (auto [mode, expected] : std::vector<std::pair<std::string, std::vector<double>>>{
           {"floor", {10, 10, 11, 11, 12}},
           {"ceil", {10, 11, 12, 12, 12}},
           {"round_prefer_floor", {10, 11, 11, 12, 12}}}) {
    OpsTestGraph b(13);
    const int x = b.input("x", DType::Int32, {3});
    b.output(b.node("r", OpKind::Resize, {x, -1, -1, b.ints("sizes", {5})},
                    {{"nearest_mode", test::string_attr(mode)},
                     {"coordinate_transformation_mode", test::string_attr("asymmetric")}}));
    std::vector<HostTensor> out = run_graph_on_cpu(b.graph, {{"x", test::tensor(DType::Int32, {3}, {10, 11, 12})}});
    EXPECT_EQ(test::values_of(out[0]), expected) << mode;
  }
}

TEST(Resize, LinearAlignCorners) {
  OpsTestGraph b(13);
  const int x = b.input("x", DType::Float32, {1, 3});
  b.output(b.node("r", OpKind::Resize, {x, -1, -1, b.ints("sizes", {1, 5})},
                  {{"mode", test::string_attr("linear")},
                   {"coordinate_transformation_mode", test::string_attr("align_corners")}}));
  std::vector<HostTensor> out = run_graph_on_cpu(b.graph, {{"x", test::float_tensor({1, 3}, {0, 4, 2})}});
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{1, 5}));
  EXPECT_EQ(test::values_of(out[0]), (std::vector<double>{0, 2, 4, 3, 2}));
}

TEST(Upsample, NearestRepeats) {
  OpsTestGraph b(9);
  const int x = b.input("x", DType::Float32, {2});
  b.output(b.node("u", OpKind::Upsample, {x, floats(b, "scales", {1}, {2})}));
  std::vector<HostTensor> out = run_graph_on_cpu(b.graph, {{"x", test::float_tensor({2}, {1, 2})}});
  EXPECT_EQ(test::values_of(out[0]), (std::vector<double>{1, 1, 2, 2}));
}

}  // namespace
}  // namespace kiln
