// If, Loop and Scan: subgraphs imported with their captures, resolved at compile time (If by its
// known condition, Loop and Scan unrolled) and run on the CPU reference against hand-computed
// values; what kiln cannot resolve is an UnsupportedError naming the node.
#include <gtest/gtest.h>

#include "../onnx/ModelBuilder.h"
#include "TestGraph.h"
#include "kiln/onnx/Export.h"
#include "kiln/onnx/Import.h"

namespace kiln {
namespace {

using testing::ModelBuilder;
constexpr int32_t kFloat = onnx::TensorProto::FLOAT;
constexpr int32_t kInt64 = onnx::TensorProto::INT64;
constexpr int32_t kBool = onnx::TensorProto::BOOL;

void set_value_info(onnx::ValueInfoProto* vi, const std::string& name, int32_t elem_type,
                    const std::vector<int64_t>& dims) {
  vi->set_name(name);
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem_type);
  auto* shape = tt->mutable_shape();
  for (int64_t d : dims) shape->add_dim()->set_dim_value(d);
}

onnx::NodeProto* add_node(onnx::GraphProto& g, const std::string& op,
                          const std::vector<std::string>& in, const std::vector<std::string>& out) {
  auto* n = g.add_node();
  n->set_op_type(op);
  for (const auto& i : in) n->add_input(i);
  for (const auto& o : out) n->add_output(o);
  return n;
}

onnx::GraphProto& add_graph_attr(onnx::NodeProto& n, const std::string& name) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::GRAPH);
  a->mutable_g()->set_name(name);
  return *a->mutable_g();
}

HostTensor scalar_bool(bool v) {
  HostTensor t(DType::Bool, {});
  t.set_int(0, v);
  return t;
}

std::string error_of(const Graph& g, const ops::BuildOptions& options) {
  try {
    ops::build_graph_tensors(g, options);
  } catch (const UserError& e) {
    return e.what();
  }
  return "no error";
}

// y = cond ? x + 1 : x * w, the branches reading x (and w) from the main graph.
ModelBuilder if_model() {
  ModelBuilder m(17);
  m.input("cond", kBool, {}).input("x", kFloat, {2}).output("y", kFloat, {2});
  m.initializer("w", test::float_tensor({2}, {3, 4}));
  m.initializer("one", test::float_tensor({}, {1}));
  auto& node = m.node("If", {"cond"}, {"y"}, "choose");
  onnx::GraphProto& then_g = add_graph_attr(node, "then_branch");
  add_node(then_g, "Add", {"x", "one"}, {"then_y"});
  set_value_info(then_g.add_output(), "then_y", kFloat, {2});
  onnx::GraphProto& else_g = add_graph_attr(node, "else_branch");
  add_node(else_g, "Mul", {"x", "w"}, {"else_y"});
  set_value_info(else_g.add_output(), "else_y", kFloat, {2});
  return m;
}

TEST(ControlFlow, IfCapturesOuterValuesAndTakesTheKnownBranch) {
  Graph g = load_onnx_from_bytes(if_model().bytes());
  ASSERT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.nodes[0].op, OpKind::If);
  ASSERT_EQ(g.nodes[0].implicit_inputs.size(), 3u);  // x, one, w
  const HostTensor x = test::float_tensor({2}, {1, 2});
  for (bool cond : {true, false}) {
    ops::BuildOptions options;
    options.specialize = {{"cond", scalar_bool(cond)}};
    const std::vector<HostTensor> out =
        run_graph_on_cpu(g, {{"cond", scalar_bool(cond)}, {"x", x}}, options);
    const std::vector<double> expected =
        cond ? std::vector<double>{2, 3} : std::vector<double>{3, 8};
    EXPECT_EQ(test::values_of(out[0]), expected) << "cond " << cond;
  }
}

TEST(ControlFlow, IfWithRunTimeConditionIsUnsupported) {
  Graph g = load_onnx_from_bytes(if_model().bytes());
  EXPECT_EQ(error_of(g, {}),
            "node 'choose' (If): the condition (input 0) is computed at run time; kiln compiles an "
            "If only when its "
            "condition is known when compiling (the IR has no branches)");
}

TEST(ControlFlow, SubgraphsSurviveExport) {
  Graph g = load_onnx_from_bytes(if_model().bytes());
  Graph again = load_onnx_from_bytes(serialize_onnx(g));
  ASSERT_EQ(again.nodes.size(), 1u);
  const Graph& then_g = again.nodes[0].attr_graph("then_branch");
  EXPECT_EQ(then_g.captures.size(), 2u);  // x, one
  EXPECT_EQ(again.nodes[0].implicit_inputs.size(), 3u);
}

// Loop M times: s = s + i (carried), scan output i * s; the body reads `scale` from the main graph.
ModelBuilder loop_model(bool with_trip_count) {
  ModelBuilder m(17);
  m.input("m", kInt64, {})
      .input("s0", kFloat, {})
      .output("s", kFloat, {})
      .output("scan", kFloat, {3});
  m.initializer("scale", test::float_tensor({}, {2}));
  auto& node = m.node("Loop", {with_trip_count ? "m" : "", "", "s0"}, {"s", "scan"}, "loop");
  onnx::GraphProto& body = add_graph_attr(node, "body");
  set_value_info(body.add_input(), "i", kInt64, {});
  set_value_info(body.add_input(), "c", kBool, {});
  set_value_info(body.add_input(), "s_in", kFloat, {});
  add_node(body, "Cast", {"i"}, {"i_f"})->add_attribute()->CopyFrom([] {
    onnx::AttributeProto a;
    a.set_name("to");
    a.set_type(onnx::AttributeProto::INT);
    a.set_i(onnx::TensorProto::FLOAT);
    return a;
  }());
  add_node(body, "Add", {"s_in", "i_f"}, {"s_out"});
  add_node(body, "Mul", {"i_f", "scale"}, {"scan_out"});
  add_node(body, "Identity", {"c"}, {"c_out"});
  set_value_info(body.add_output(), "c_out", kBool, {});
  set_value_info(body.add_output(), "s_out", kFloat, {});
  set_value_info(body.add_output(), "scan_out", kFloat, {});
  return m;
}

TEST(ControlFlow, LoopWithKnownTripCountIsUnrolled) {
  Graph g = load_onnx_from_bytes(loop_model(true).bytes());
  HostTensor m(DType::Int64, {});
  m.set_int(0, 3);
  ops::BuildOptions options;
  options.specialize = {{"m", m}};
  const std::vector<HostTensor> out =
      run_graph_on_cpu(g, {{"m", m}, {"s0", test::float_tensor({}, {10})}}, options);
  EXPECT_EQ(test::values_of(out[0]), (std::vector<double>{13}));       // 10 + 0 + 1 + 2
  EXPECT_EQ(test::values_of(out[1]), (std::vector<double>{0, 2, 4}));  // i * scale
}

TEST(ControlFlow, LoopErrors) {
  Graph run_time = load_onnx_from_bytes(loop_model(true).bytes());
  EXPECT_EQ(
      error_of(run_time, {}),
      "node 'loop' (Loop): the trip count M (input 0) is computed at run time; kiln unrolls a Loop "
      "only when "
      "its trip count or condition is known when compiling (the IR has no sequential construct)");
  Graph endless = load_onnx_from_bytes(loop_model(false).bytes());
  EXPECT_EQ(error_of(endless, {}),
            "node 'loop' (Loop): has neither a trip count (input 0) nor a condition (input 1): it "
            "never ends");
}

// Scan (opset 9+): a running sum over the rows of x, scanned backward; the outputs are the final
// sum and the per-step sums (in step order, not reversed).
TEST(ControlFlow, ScanReverseRunningSum) {
  ModelBuilder m(11);
  m.input("init", kFloat, {2})
      .input("x", kFloat, {3, 2})
      .output("final", kFloat, {2})
      .output("sums", kFloat, {3, 2});
  auto& node = m.node("Scan", {"init", "x"}, {"final", "sums"}, "scan");
  testing::add_attr(node, "num_scan_inputs", int64_t{1});
  testing::add_attr(node, "scan_input_directions", std::vector<int64_t>{1});
  onnx::GraphProto& body = add_graph_attr(node, "body");
  set_value_info(body.add_input(), "acc", kFloat, {2});
  set_value_info(body.add_input(), "row", kFloat, {2});
  add_node(body, "Add", {"acc", "row"}, {"acc_out"});
  add_node(body, "Identity", {"acc_out"}, {"step_out"});
  set_value_info(body.add_output(), "acc_out", kFloat, {2});
  set_value_info(body.add_output(), "step_out", kFloat, {2});
  Graph g = load_onnx_from_bytes(m.bytes());
  const std::vector<HostTensor> out =
      run_graph_on_cpu(g, {{"init", test::float_tensor({2}, {0, 100})},
                           {"x", test::float_tensor({3, 2}, {1, 2, 3, 4, 5, 6})}});
  EXPECT_EQ(test::values_of(out[0]), (std::vector<double>{9, 112}));
  EXPECT_EQ(test::values_of(out[1]), (std::vector<double>{5, 106, 8, 110, 9, 112}));
}

TEST(ControlFlow, SubgraphReadingAnUnknownNameNamesTheSubgraph) {
  ModelBuilder m = if_model();
  auto* then_g = m.graph().mutable_node(0)->mutable_attribute(0)->mutable_g();
  then_g->mutable_node(0)->set_input(1, "nowhere");
  then_g->mutable_node(0)->set_name("add");
  try {
    load_onnx_from_bytes(m.bytes());
    ADD_FAILURE() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_EQ(std::string(e.what()),
              "in attribute 'then_branch' of node 'choose' (If): node 'add' (Add): input 1 "
              "'nowhere' is not produced "
              "by any node, initializer or graph input");
  }
}

}  // namespace
}  // namespace kiln
