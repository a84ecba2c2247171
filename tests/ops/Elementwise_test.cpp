// Elementwise op definitions: error messages for bad input, and values on the CPU reference for
// the cases where ONNX differs from the obvious C expression (integer Div/Mod signs, Clip bounds).
#include <gtest/gtest.h>

#include "TestGraph.h"
#include "kiln/ir/IRPrinter.h"

namespace kiln {
namespace {

using test::NodeTestGraph;

TEST(Elementwise, BinaryDtypeMismatchNamesBothDtypes) {
  NodeTestGraph g;
  g.node("a", OpKind::Add, {g.input("x", DType::Float32, {2}), g.input("y", DType::Int32, {2})});
  EXPECT_EQ(g.error(), "node 'a' (Add): input 1 has dtype int32 but input 0 has dtype float32; they must match");
}

TEST(Elementwise, BroadcastMismatchNamesShapesAndDimension) {
  NodeTestGraph g;
  g.node("m", OpKind::Mul, {g.input("x", DType::Float32, {2, 3}), g.input("y", DType::Float32, {4})});
  EXPECT_EQ(g.error(),
            "node 'm' (Mul): shapes [2, 3], [4] do not broadcast: dimension 1 is 3 in one input and 4 in another");
}

TEST(Elementwise, VariadicBroadcastMismatch) {
  NodeTestGraph g;
  g.node("s", OpKind::Sum,
         {g.input("x", DType::Float32, {3}), g.input("y", DType::Float32, {1, 3}), g.input("z", DType::Float32, {2, 2})});
  EXPECT_EQ(g.error(),
            "node 's' (Sum): shapes [3], [1, 3], [2, 2] do not broadcast: dimension 1 is 3 in one input and 2 in "
            "another");
}

TEST(Elementwise, FloatMathRejectsIntegers) {
  NodeTestGraph g;
  g.node("r", OpKind::Sqrt, {g.input("x", DType::Int32, {2})});
  EXPECT_EQ(g.error(), "node 'r' (Sqrt): input 0 has dtype int32, expected one of: float16, bfloat16, float32, float64");
}

TEST(Elementwise, LogicRejectsNonBool) {
  NodeTestGraph g;
  g.node("a", OpKind::And, {g.input("x", DType::Float32, {2}), g.input("y", DType::Float32, {2})});
  EXPECT_EQ(g.error(), "node 'a' (And): input 0 has dtype float32, expected one of: bool");
}

TEST(Elementwise, FloatModFollowsDivisorSignUnlessFmod) {
  NodeTestGraph g;
  const int x = g.input("x", DType::Float32, {2}), y = g.input("y", DType::Float32, {2});
  g.node("mod", OpKind::Mod, {x, y});
  g.node("fmod", OpKind::Mod, {x, y}, {{"fmod", test::int_attr(1)}});
  const auto out = run_graph_on_cpu(g.graph, {{"x", test::tensor(DType::Float32, {2}, {5.5, -5.5})},
                                              {"y", test::tensor(DType::Float32, {2}, {-2, 2})}});
  EXPECT_EQ(test::values_of(out[0]), (std::vector<double>{-0.5, 0.5}));
  EXPECT_EQ(test::values_of(out[1]), (std::vector<double>{1.5, -1.5}));
}

TEST(Elementwise, WhereBranchesMustMatch) {
  NodeTestGraph g;
  g.node("w", OpKind::Where,
         {g.input("c", DType::Bool, {2}), g.input("x", DType::Float32, {2}), g.input("y", DType::Int64, {2})});
  EXPECT_EQ(g.error(), "node 'w' (Where): input 1 has dtype float32 but input 2 has dtype int64; they must match");
}

TEST(Elementwise, BitShiftDirection) {
  NodeTestGraph g;
  g.node("b", OpKind::BitShift, {g.input("x", DType::UInt8, {2}), g.input("y", DType::UInt8, {2})},
         {{"direction", test::string_attr("UP")}});
  EXPECT_EQ(g.error(), "node 'b' (BitShift): attribute 'direction' is 'UP', expected 'LEFT' or 'RIGHT'");
}

TEST(Elementwise, PReluSlopeMustBroadcastToInput) {
  NodeTestGraph g;
  g.node("p", OpKind::PRelu, {g.input("x", DType::Float32, {2, 1}), g.input("s", DType::Float32, {3})});
  EXPECT_EQ(g.error(),
            "node 'p' (PRelu): slope does not broadcast to the input: dimension 1 of the input is 1 but the slope "
            "makes it 3");
}

TEST(Elementwise, ClipMinMustBeScalar) {
  NodeTestGraph g(13);
  g.node("c", OpKind::Clip, {g.input("x", DType::Float32, {4}), g.input("lo", DType::Float32, {2})});
  EXPECT_EQ(g.error(), "node 'c' (Clip): input 1 (min) must hold a single value, but its dimension 0 is 2");
}

TEST(Elementwise, DropoutTrainingModeIsUnsupported) {
  NodeTestGraph g(13);
  const int ratio = g.constant("ratio", test::tensor(DType::Float32, {}, {0.5}));
  const int training = g.constant("training", test::tensor(DType::Bool, {}, {1}));
  g.node("d", OpKind::Dropout, {g.input("x", DType::Float32, {4}), ratio, training});
  EXPECT_EQ(g.error(),
            "node 'd' (Dropout): training mode (input 'training_mode' is true) with a nonzero "
            "ratio is not "
            "supported (it draws random numbers); kiln compiles inference");
}

TEST(Elementwise, DropoutTrainingWithZeroRatioIsTheIdentity) {
  NodeTestGraph g(13);
  const int ratio = g.constant("ratio", test::tensor(DType::Float32, {}, {0.0}));
  const int training = g.constant("training", test::tensor(DType::Bool, {}, {1}));
  g.node("d", OpKind::Dropout, {g.input("x", DType::Float32, {3}), ratio, training}, {}, 2);
  const std::vector<HostTensor> out =
      run_graph_on_cpu(g.graph, {{"x", test::float_tensor({3}, {1, -2, 3})}});
  EXPECT_EQ(test::values_of(out[0]), (std::vector<double>{1, -2, 3}));
  EXPECT_EQ(test::values_of(out[1]), (std::vector<double>{1, 1, 1}));
}

TEST(Elementwise, BitCastKeepsTheBits) {
  NodeTestGraph g(26);
  g.node("b", OpKind::BitCast, {g.input("x", DType::Float32, {2})},
         {{"to", test::int_attr(6)}});  // INT32
  const std::vector<HostTensor> out =
      run_graph_on_cpu(g.graph, {{"x", test::float_tensor({2}, {1.0, -2.0})}});
  EXPECT_EQ(
      test::values_of(out[0]),
      (std::vector<double>{0x3f800000, static_cast<double>(static_cast<int32_t>(0xc0000000u))}));
}

TEST(Elementwise, BitCastNeedsOneWidth) {
  NodeTestGraph g(26);
  g.node("b", OpKind::BitCast, {g.input("x", DType::Float32, {2})},
         {{"to", test::int_attr(7)}});  // INT64
  EXPECT_EQ(g.error(),
            "node 'b' (BitCast): input 0 is float32 (32 bits) but 'to' is int64 (64 bits); "
            "expected types of the same "
            "width");
}

TEST(Elementwise, CastToStringIsUnsupported) {
  NodeTestGraph g;
  g.node("c", OpKind::Cast, {g.input("x", DType::Float32, {2})}, {{"to", test::int_attr(8)}});
  EXPECT_EQ(g.error(), "node 'c' (Cast): casting to ONNX data type STRING is not supported");
}

// ONNX integer Div truncates; Mod with fmod=0 takes the divisor's sign, with fmod=1 the dividend's.
TEST(Elementwise, IntegerDivAndModSigns) {
  NodeTestGraph g;
  const int x = g.input("x", DType::Int32, {4}), y = g.input("y", DType::Int32, {4});
  g.node("div", OpKind::Div, {x, y});
  g.node("mod", OpKind::Mod, {x, y});
  g.node("fmod", OpKind::Mod, {x, y}, {{"fmod", test::int_attr(1)}});
  const auto out = run_graph_on_cpu(g.graph, {{"x", test::tensor(DType::Int32, {4}, {7, -7, 7, -7})},
                                              {"y", test::tensor(DType::Int32, {4}, {2, 2, -2, -2})}});
  EXPECT_EQ(test::values_of(out[0]), (std::vector<double>{3, -3, -3, 3}));
  EXPECT_EQ(test::values_of(out[1]), (std::vector<double>{1, 1, -1, -1}));
  EXPECT_EQ(test::values_of(out[2]), (std::vector<double>{1, -1, 1, -1}));
}

TEST(Elementwise, ClipIntegerBoundsAndRoundHalfToEven) {
  NodeTestGraph g(13);
  const int lo = g.constant("lo", test::tensor(DType::Int8, {}, {-2}));
  const int hi = g.constant("hi", test::tensor(DType::Int8, {}, {3}));
  g.node("c", OpKind::Clip, {g.input("x", DType::Int8, {4}), lo, hi});
  g.node("r", OpKind::Round, {g.input("f", DType::Float32, {4})});
  const auto out = run_graph_on_cpu(g.graph, {{"x", test::tensor(DType::Int8, {4}, {-100, -1, 2, 100})},
                                              {"f", test::tensor(DType::Float32, {4}, {0.5, 1.5, 2.5, -2.5})}});
  EXPECT_EQ(test::values_of(out[0]), (std::vector<double>{-2, -1, 2, 3}));
  EXPECT_EQ(test::values_of(out[1]), (std::vector<double>{0, 2, 2, -2}));
}

// Single-element constants (initializers, Constant outputs) are literals in the element
// expressions, so the generated code neither loads them nor calls a general pow for x^2 or x^3
// (tanh-GELU as exporters write it); a value a caller passes (a graph input) stays a read.
TEST(Elementwise, SingleValueConstantsAreLiteralsAndSmallPowersAreProducts) {
  NodeTestGraph g;
  const int x = g.input("x", DType::Float32, {ir::Expr(3)});
  const int e = g.input("e", DType::Float32, {});
  const int three = g.constant("three", test::tensor(DType::Float32, {}, {3}));
  const int two = g.constant("two", test::tensor(DType::Int64, {}, {2}));
  const int c = g.constant("c", test::tensor(DType::Float32, {}, {0.5}));
  g.node("cube", OpKind::Pow, {x, three});
  g.node("square", OpKind::Pow, {x, two});
  g.node("general", OpKind::Pow, {x, e});
  g.node("scaled", OpKind::Mul, {x, c});
  const ops::GraphTensors built = ops::build_graph_tensors(g.graph);
  auto body = [&](int k) { return ir::to_string(built.tensors[g.graph.outputs[k]]->body); };
  for (int k : {0, 1, 3}) {
    EXPECT_EQ(body(k).find("pow"), std::string::npos) << body(k);
    EXPECT_EQ(body(k).find("three("), std::string::npos) << body(k);
    EXPECT_EQ(body(k).find("two("), std::string::npos) << body(k);
    EXPECT_EQ(body(k).find("c()"), std::string::npos) << body(k);
  }
  EXPECT_NE(body(3).find("0.5"), std::string::npos) << body(3);
  EXPECT_NE(body(2).find("pow"), std::string::npos) << body(2);
  EXPECT_NE(body(2).find("e()"), std::string::npos) << body(2);

  const auto out = run_graph_on_cpu(g.graph, {{"x", test::tensor(DType::Float32, {3}, {1.5, -2, 0.25})},
                                              {"e", test::tensor(DType::Float32, {}, {3})}});
  EXPECT_EQ(test::values_of(out[0]), (std::vector<double>{3.375, -8, 0.015625}));
  EXPECT_EQ(test::values_of(out[1]), (std::vector<double>{2.25, 4, 0.0625}));
  EXPECT_EQ(test::values_of(out[2]), test::values_of(out[0]));
  EXPECT_EQ(test::values_of(out[3]), (std::vector<double>{0.75, -1, 0.125}));
}

// A graph input with a default value (an initializer of the same name, IR < 4) may be
// overridden by its caller: it is read, not folded.
TEST(Elementwise, OverridableInitializerIsNotALiteral) {
  NodeTestGraph g;
  const int x = g.input("x", DType::Float32, {ir::Expr(2)});
  const int k = g.input("k", DType::Float32, {});
  g.graph.values[k].constant = test::tensor(DType::Float32, {}, {2});
  g.node("scaled", OpKind::Mul, {x, k});
  const ops::GraphTensors built = ops::build_graph_tensors(g.graph);
  const std::string body = ir::to_string(built.tensors[g.graph.outputs[0]]->body);
  EXPECT_NE(body.find("k()"), std::string::npos) << body;
}

// A 16-bit division by a literal is a product with the float32 reciprocal (no slow-path branch in a
// fused epilogue); float32 keeps the exact quotient, and a divisor a caller passes stays a division.
TEST(Elementwise, HalfDivisionByALiteralIsAProduct) {
  NodeTestGraph g;
  const int h = g.input("h", DType::Float16, {ir::Expr(2)});
  const int f = g.input("f", DType::Float32, {ir::Expr(2)});
  const int d = g.input("d", DType::Float16, {});
  g.node("half_div", OpKind::Div, {h, g.constant("c16", test::tensor(DType::Float16, {}, {4}))});
  g.node("float_div", OpKind::Div, {f, g.constant("c32", test::tensor(DType::Float32, {}, {4}))});
  g.node("input_div", OpKind::Div, {h, d});
  const ops::GraphTensors built = ops::build_graph_tensors(g.graph);
  auto body = [&](int k) { return ir::to_string(built.tensors[g.graph.outputs[k]]->body); };
  EXPECT_EQ(body(0).find(" / "), std::string::npos) << body(0);
  EXPECT_NE(body(0).find("0.25"), std::string::npos) << body(0);
  EXPECT_NE(body(1).find(" / 4"), std::string::npos) << body(1);
  EXPECT_NE(body(2).find(" / "), std::string::npos) << body(2);
  const auto out = run_graph_on_cpu(g.graph, {{"h", test::tensor(DType::Float16, {2}, {3, -10})},
                                              {"f", test::tensor(DType::Float32, {2}, {3, -10})},
                                              {"d", test::tensor(DType::Float16, {}, {4})}});
  EXPECT_EQ(test::values_of(out[0]), (std::vector<double>{0.75, -2.5}));
  EXPECT_EQ(test::values_of(out[1]), (std::vector<double>{0.75, -2.5}));
  EXPECT_EQ(test::values_of(out[2]), (std::vector<double>{0.75, -2.5}));
}

}  // namespace
}  // namespace kiln
