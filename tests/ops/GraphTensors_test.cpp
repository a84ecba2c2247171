// Building a whole graph: known-value tracking and inspection mode.
#include <gtest/gtest.h>

#include "TestGraph.h"

namespace kiln {
namespace {

TEST(GraphTensors, Float8ConstantsAreNotTrackedAsKnownValues) {
  // A float8 tensor has no IR constant form; building must not trip over it (it used to raise an
  // internal error in known-value tracking before any op ran).
  test::NodeTestGraph g(19);
  const int scales = g.constant("scales", HostTensor(DType::Float8E4M3, {4}));
  Attribute to;
  to.kind = Attribute::Kind::Int;
  to.i = 1;  // FLOAT
  g.node("cast", OpKind::Cast, {scales}, {{"to", to}});
  const std::string error = g.error();
  EXPECT_EQ(error.find("internal error"), std::string::npos) << error;
}

TEST(GraphTensors, KeepGoingRecordsWhyANodeWasNotBuilt) {
  test::NodeTestGraph g;
  const int x = g.input("x", DType::Float32, {ir::Expr(2), ir::Expr(3)});
  const int r = g.node("relu", OpKind::Relu, {x});
  g.graph.nodes.push_back(Node{});
  Node& custom = g.graph.nodes.back();
  custom.name = "mystery";
  custom.op = OpKind::Unsupported;
  custom.op_type = "FancyOp";
  custom.inputs = {r};
  ops::BuildOptions options;
  options.keep_going = true;
  ops::GraphTensors built = ops::build_graph_tensors(g.graph, options);
  ASSERT_EQ(built.node_errors.size(), 2u);
  EXPECT_EQ(built.node_errors[0], "");
  EXPECT_EQ(built.node_errors[1], "op not supported");
  options.keep_going = false;
  try {
    ops::build_graph_tensors(g.graph, options);
    FAIL() << "expected an UnsupportedError";
  } catch (const UnsupportedError& e) {
    EXPECT_STREQ(e.what(), "the model uses ops kiln does not support: FancyOp (1 node: mystery)");
  }
}

}  // namespace
}  // namespace kiln
