// Scatter/GatherND/OneHot/Compress definitions: error messages, and values on the CPU reference
// (duplicate indices: 'none' keeps the last update, 'add' sums them).
#include <gtest/gtest.h>

#include "TestGraph.h"
#include "kiln/runtime/GraphRunner.h"

namespace kiln {
namespace {

using test::OpsTestGraph;

TEST(ScatterElements, UnknownReduction) {
  OpsTestGraph b(18);
  const int x = b.input("x", DType::Float32, {4});
  b.output(b.node("s", OpKind::ScatterElements, {x, b.ints("i", {1}), b.input("u", DType::Float32, {1})},
                  {{"reduction", test::string_attr("mean")}}));
  EXPECT_EQ(b.error(), "node 's' (ScatterElements): attribute 'reduction' is 'mean', expected none, add, mul, max or min");
}

TEST(ScatterElements, DuplicateIndices) {
  for (auto [reduction, expected] : std::vector<std::pair<std::string, std::vector<double>>>{
           {"none", {0, 3, 0, 0}}, {"add", {0, 6, 0, 0}}, {"max", {0, 3, 0, 0}}}) {
    OpsTestGraph b(18);
    const int x = b.input("x", DType::Float32, {4});
    const int u = b.input("u", DType::Float32, {3});
    b.output(b.node("s", OpKind::ScatterElements, {x, b.ints("i", {1, -3, 1}), u},
                    {{"reduction", test::string_attr(reduction)}}));
    std::vector<HostTensor> out = run_graph_on_cpu(
        b.graph, {{"x", test::float_tensor({4}, {0, 0, 0, 0})}, {"u", test::float_tensor({3}, {1, 2, 3})}});
    EXPECT_EQ(test::values_of(out[0]), expected) << reduction;
  }
}

TEST(ScatterND, UpdatesRank) {
  OpsTestGraph b(18);
  const int x = b.input("x", DType::Float32, {4, 3});
  const int i = b.input("i", DType::Int64, {2, 1});
  b.output(b.node("s", OpKind::ScatterND, {x, i, b.input("u", DType::Float32, {2})}));
  EXPECT_EQ(b.error(),
            "node 's' (ScatterND): updates [2] must have rank 2 (indices' rank - 1 + data's rank - 1), got 1");
}

TEST(GatherND, BatchDimsOutOfRange) {
  OpsTestGraph b(13);
  const int x = b.input("x", DType::Float32, {2, 2});
  b.output(b.node("g", OpKind::GatherND, {x, b.input("i", DType::Int64, {2, 1})},
                  {{"batch_dims", test::int_attr(2)}}));
  EXPECT_EQ(b.error(), "node 'g' (GatherND): attribute 'batch_dims' is 2, expected [0, 2)");
}

TEST(OneHot, ValuesMustHoldTwo) {
  OpsTestGraph b(11);
  const int x = b.input("x", DType::Int64, {3});
  b.output(b.node("o", OpKind::OneHot, {x, b.ints("depth", {4}), b.input("v", DType::Float32, {3})}));
  EXPECT_EQ(b.error(), "node 'o' (OneHot): input 2 ('values') [3] must hold two values: [off_value, on_value]");
}

TEST(Compress, UnknownConditionIsUnsupported) {
  OpsTestGraph b(11);
  const int x = b.input("x", DType::Float32, {3});
  b.output(b.node("c", OpKind::Compress, {x, b.input("cond", DType::Bool, {3})}));
  EXPECT_EQ(b.error(),
            "node 'c' (Compress): the condition (input 1) is not known when compiling; the output's size depends on "
            "its values");
}

TEST(Compress, KnownConditionSelects) {
  OpsTestGraph b(11);
  const int x = b.input("x", DType::Float32, {2, 3});
  HostTensor cond(DType::Bool, {3});
  cond.set_int(0, 1);
  cond.set_int(1, 0);
  cond.set_int(2, 1);
  b.output(b.node("c", OpKind::Compress, {x, b.constant("cond", cond)}, {{"axis", test::int_attr(1)}}));
  std::vector<HostTensor> out = run_graph_on_cpu(b.graph, {{"x", test::float_tensor({2, 3}, {0, 1, 2, 3, 4, 5})}});
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(test::values_of(out[0]), (std::vector<double>{0, 2, 3, 5}));
}

TEST(TopK, UnknownKIsUnsupported) {
  OpsTestGraph b(11);
  const int x = b.input("x", DType::Float32, {5});
  b.output(b.node("t", OpKind::TopK, {x, b.input("k", DType::Int64, {1})}, {}, 2));
  EXPECT_EQ(b.error(), "node 't' (TopK): K (input 1) is not known when compiling; it is the size of the outputs");
}

TEST(TopK, KLargerThanTheAxis) {
  OpsTestGraph b(11);
  const int x = b.input("x", DType::Float32, {5});
  b.output(b.node("t", OpKind::TopK, {x, b.ints("k", {6})}, {}, 2));
  EXPECT_EQ(b.error(), "node 't' (TopK): k is 6 but dimension 0 of [5] has only 5 elements");
}

TEST(TopK, TiesKeepTheLowerIndexFirst) {
  OpsTestGraph b(11);
  const int x = b.input("x", DType::Float32, {5});
  const int values = b.node("t", OpKind::TopK, {x, b.ints("k", {3})}, {{"largest", test::int_attr(0)}}, 2);
  b.output(values);
  b.output(values + 1);
  std::vector<HostTensor> out = run_graph_on_cpu(b.graph, {{"x", test::float_tensor({5}, {3, 1, 2, 1, 0})}});
  EXPECT_EQ(test::values_of(out[0]), (std::vector<double>{0, 1, 1}));
  EXPECT_EQ(test::values_of(out[1]), (std::vector<double>{4, 1, 3}));
}

}  // namespace
}  // namespace kiln
