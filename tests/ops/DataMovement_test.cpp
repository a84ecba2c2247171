// Data-movement op definitions: error messages for bad input, symbolic shape inference through
// Shape -> Gather -> Concat -> Reshape, and values on the CPU reference.
#include <gtest/gtest.h>

#include "TestGraph.h"
#include "kiln/ops/GraphTensors.h"
#include "kiln/runtime/GraphRunner.h"
#include "kiln/support/Error.h"

namespace kiln {
namespace {

using test::OpsTestGraph;

TEST(Reshape, ImpossibleShapeNamesBothShapes) {
  OpsTestGraph b;
  const int x = b.input("x", DType::Float32, {2, 3});
  b.output(b.node("r", OpKind::Reshape, {x, b.ints("shape", {4, 2})}));
  EXPECT_EQ(b.error(), "node 'r' (Reshape): cannot reshape [2, 3] (6 elements) into [4, 2] (8 elements)");
}

TEST(Reshape, MinusOneThatDoesNotDivide) {
  OpsTestGraph b;
  const int x = b.input("x", DType::Float32, {2, 3});
  b.output(b.node("r", OpKind::Reshape, {x, b.ints("shape", {4, -1})}));
  EXPECT_EQ(b.error(),
            "node 'r' (Reshape): cannot reshape [2, 3] (6 elements) into [4, -1]: the element count is not a "
            "multiple of 4");
}

TEST(Reshape, ShapeInputThatIsNotKnown) {
  OpsTestGraph b;
  const int x = b.input("x", DType::Float32, {2, 3});
  const int shape = b.input("target", DType::Int64, {2});
  b.output(b.node("r", OpKind::Reshape, {x, shape}));
  EXPECT_EQ(b.error(),
            "node 'r' (Reshape): input 1 ('shape', value 'target') must be known when compiling (an initializer, a "
            "Constant, or computed from shapes); kiln specializes kernels on it");
}

TEST(Reshape, SymbolicShapeFromShapeGatherConcat) {
  OpsTestGraph b;
  const ir::Expr batch = b.graph.symbol("batch"), seq = b.graph.symbol("seq");
  const int x = b.input("x", DType::Float32, {batch, seq, 64});
  const int shape = b.node("shape", OpKind::Shape, {x});
  const int last = b.node("last", OpKind::Gather, {shape, b.ints("two", {2})});
  const int target = b.node("target", OpKind::Concat, {b.ints("minus_one", {-1}), last},
                             {{"axis", OpsTestGraph::int_attr(0)}});
  const int y = b.node("r", OpKind::Reshape, {x, target});
  b.output(y);
  ops::infer_types(b.graph);
  EXPECT_EQ(to_string(*b.graph.values[target].type), "int64[2]");
  EXPECT_EQ(to_string(*b.graph.values[y].type), "float32[(batch * seq), 64]");

  // And it runs: a [2, 3, 64] input becomes [6, 64] with the same elements.
  HostTensor in(DType::Float32, {2, 3, 64});
  for (int64_t i = 0; i < in.num_elements(); ++i) in.set_double(i, static_cast<double>(i));
  std::vector<HostTensor> out = run_graph_on_cpu(b.graph, {{"x", in}});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{6, 64}));
  EXPECT_EQ(out[0].get_double(383), 383.0);
}

// A Gather by a single known index (a literal re-indexing) checks the index when compiling;
// a negative one counts from the end.
TEST(Gather, KnownScalarIndexOutOfRangeNamesIndexAndExtent) {
  OpsTestGraph b;
  const int x = b.input("x", DType::Float32, {3, 2});
  b.output(b.node("g", OpKind::Gather, {x, b.constant("i", test::tensor(DType::Int64, {}, {3}))}));
  EXPECT_EQ(b.error(), "node 'g' (Gather): index 3 is out of range for axis 0 of extent 3");

  OpsTestGraph last;
  const int y = last.input("y", DType::Float32, {3, 2});
  last.output(last.node("g", OpKind::Gather, {y, last.constant("i", test::tensor(DType::Int64, {}, {-1}))}));
  const auto out = run_graph_on_cpu(last.graph, {{"y", test::float_tensor({3, 2}, {1, 2, 3, 4, 5, 6})}});
  EXPECT_EQ(test::values_of(out[0]), (std::vector<double>{5, 6}));
}

TEST(Concat, RankMismatch) {
  OpsTestGraph b;
  const int x = b.input("x", DType::Float32, {2, 3});
  const int y = b.input("y", DType::Float32, {2, 3, 1});
  b.output(b.node("c", OpKind::Concat, {x, y}, {{"axis", OpsTestGraph::int_attr(0)}}));
  EXPECT_EQ(b.error(),
            "node 'c' (Concat): input 1 has rank 3 ([2, 3, 1]) but input 0 has rank 2 ([2, 3]); Concat inputs must "
            "have equal rank");
}

TEST(Concat, OffAxisDimensionMismatch) {
  OpsTestGraph b;
  const int x = b.input("x", DType::Float32, {2, 3});
  const int y = b.input("y", DType::Float32, {2, 4});
  b.output(b.node("c", OpKind::Concat, {x, y}, {{"axis", OpsTestGraph::int_attr(0)}}));
  EXPECT_EQ(b.error(),
            "node 'c' (Concat): input 1 has shape [2, 4] but input 0 has shape [2, 3]: dimension 1 differs (4 vs 3) "
            "off the concatenation axis 0");
}

TEST(Transpose, PermuteValues) {
  OpsTestGraph b;
  const int x = b.input("x", DType::Float32, {2, 3});
  b.output(b.node("t", OpKind::Transpose, {x}, {{"perm", OpsTestGraph::ints_attr({1, 0})}}));
  std::vector<HostTensor> out = run_graph_on_cpu(b.graph, {{"x", test::float_tensor({2, 3}, {0, 1, 2, 3, 4, 5})}});
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(test::values_of(out[0]), (std::vector<double>{0, 3, 1, 4, 2, 5}));
}

TEST(Slice, NegativeStepReversesAndClamps) {
  OpsTestGraph b;
  const int x = b.input("x", DType::Float32, {5});
  const int y = b.node("s", OpKind::Slice, {x, b.ints("starts", {100}), b.ints("ends", {-100}),
                                            b.ints("axes", {0}), b.ints("steps", {-2})});
  b.output(y);
  std::vector<HostTensor> out = run_graph_on_cpu(b.graph, {{"x", test::float_tensor({5}, {0, 1, 2, 3, 4})}});
  EXPECT_EQ(test::values_of(out[0]), (std::vector<double>{4, 2, 0}));
}

TEST(Pad, ReflectAndEdge) {
  for (const char* mode : {"reflect", "edge"}) {
    OpsTestGraph b;
    const int x = b.input("x", DType::Float32, {3});
    Attribute m;
    m.kind = Attribute::Kind::String;
    m.s = mode;
    b.output(b.node("p", OpKind::Pad, {x, b.ints("pads", {2, 1})}, {{"mode", m}}));
    std::vector<HostTensor> out = run_graph_on_cpu(b.graph, {{"x", test::float_tensor({3}, {1, 2, 3})}});
    const std::vector<double> want = std::string(mode) == "reflect" ? std::vector<double>{3, 2, 1, 2, 3, 2}
                                                                    : std::vector<double>{1, 1, 1, 2, 3, 3};
    EXPECT_EQ(test::values_of(out[0]), want) << mode;
  }
}

}  // namespace
}  // namespace kiln
