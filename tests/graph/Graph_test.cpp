#include "kiln/graph/Graph.h"

#include <gtest/gtest.h>

#include "kiln/graph/TopoSort.h"
#include "kiln/support/Error.h"

namespace kiln {
namespace {

TEST(OpKind, NamesRoundTripThroughTheTable) {
  EXPECT_EQ(op_kind_from_onnx("", "Conv"), OpKind::Conv);
  EXPECT_EQ(op_kind_from_onnx("ai.onnx", "Conv"), OpKind::Conv);
  EXPECT_EQ(op_kind_from_onnx("kiln", "QuantLinear"), OpKind::QuantLinear);
  EXPECT_EQ(op_kind_from_onnx("", "QuantLinear"), std::nullopt);
  EXPECT_EQ(op_kind_from_onnx("", "SequenceAt"), std::nullopt);
  EXPECT_EQ(op_kind_name(OpKind::LayerNormalization), "LayerNormalization");
  EXPECT_EQ(op_kind_domain(OpKind::QuantLinear), "kiln");
  EXPECT_EQ(op_kind_name(OpKind::Unsupported), "Unsupported");
}

TEST(Graph, SymbolsAreOnePerName) {
  Graph g;
  EXPECT_TRUE(g.symbol("batch").same_as(g.symbol("batch")));
  EXPECT_FALSE(g.symbol("batch").same_as(g.symbol("seq")));
  EXPECT_EQ(g.symbols().size(), 2u);
}

TEST(Graph, AttributeAccessorsCheckTheKind) {
  Node n;
  n.name = "sm";
  n.op = OpKind::Softmax;
  n.op_type = "Softmax";
  Attribute axis;
  axis.kind = Attribute::Kind::Float;
  axis.f = 1.0;
  n.attributes["axis"] = axis;
  EXPECT_EQ(n.attr_float("axis", 0), 1.0);
  EXPECT_EQ(n.attr_string("mode", "x"), "x");
  try {
    n.attr_int("axis", -1);
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_STREQ(e.what(), "node 'sm' (Softmax): attribute 'axis' is of kind float, expected int");
  }
}

Node make_node(const std::string& name, OpKind op, std::vector<int> inputs, std::vector<int> outputs) {
  Node n;
  n.name = name;
  n.op = op;
  n.op_type = std::string(op_kind_name(op));
  n.inputs = std::move(inputs);
  n.outputs = std::move(outputs);
  return n;
}

// a -> n0 -> b -> n1 -> c, with the nodes stored reversed.
Graph two_node_chain() {
  Graph g;
  g.values.resize(3);
  g.values[0].name = "a";
  g.values[1].name = "b";
  g.values[2].name = "c";
  g.nodes = {make_node("n1", OpKind::Relu, {1}, {2}), make_node("n0", OpKind::Neg, {0}, {1})};
  g.values[1].producer = 1;
  g.values[2].producer = 0;
  return g;
}

TEST(TopoSort, ReordersAndRenumbersProducers) {
  Graph g = two_node_chain();
  sort_topologically(g);
  EXPECT_EQ(g.nodes[0].name, "n0");
  EXPECT_EQ(g.values[1].producer, 0);
  EXPECT_EQ(g.values[2].producer, 1);
  EXPECT_EQ(g.find_node("n1"), 1);
  EXPECT_EQ(g.find_value("c"), 2);
  EXPECT_EQ(g.find_value("zzz"), -1);
}

TEST(TopoSort, SelfLoopIsACycle) {
  Graph g = two_node_chain();
  g.nodes[0].inputs = {2};  // n1 reads its own output
  try {
    sort_topologically(g);
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_STREQ(e.what(), "the graph has a cycle: 'n1' -> 'n1'; expected an acyclic graph");
  }
}

}  // namespace
}  // namespace kiln
