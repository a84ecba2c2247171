#include <gtest/gtest.h>

#include "kiln/ir/IROperator.h"
#include "kiln/ir/IRPrinter.h"
#include "kiln/lower/Lower.h"
#include "kiln/runtime/Interpreter.h"
#include "kiln/support/Error.h"

namespace kiln {
namespace {

using namespace ir;

HostTensor iota(DType dtype, std::vector<int64_t> shape, double start = 0.5, double step = 1.25) {
  HostTensor t(dtype, std::move(shape));
  for (int64_t i = 0; i < t.num_elements(); ++i) t.set_double(i, start + step * static_cast<double>(i % 7) - 3.0);
  return t;
}

// A tensor's element count where its shape simplifies to constants (te::constant_num_elements,
// which the reread rule and the quantization ops share), else none.
TEST(Lower, ConstantElementCountOfATensor) {
  Expr n = var("n");
  EXPECT_EQ(te::constant_num_elements(te::placeholder("a", DType::Float32, {Expr(8), Expr(64)})), 512);
  EXPECT_EQ(te::constant_num_elements(te::placeholder("b", DType::Float32, {n - n + 3, Expr(5)})), 15);
  EXPECT_EQ(te::constant_num_elements(te::placeholder("c", DType::Float32, {})), 1);
  EXPECT_FALSE(te::constant_num_elements(te::placeholder("d", DType::Float32, {n, Expr(64)})).has_value());
}

TEST(Lower, ElementwiseChainBecomesOneLoopNest) {
  te::Tensor a = te::placeholder("a", DType::Float32, {Expr(4), Expr(3)});
  te::Tensor b = te::compute("b", a.shape(), [&](const std::vector<Expr>& i) { return a(i) * 2; });
  te::Tensor c = te::compute("c", a.shape(), [&](const std::vector<Expr>& i) { return max(b(i), make_zero(DType::Float32)); });
  LoweredFunc f = lower("chain", {a}, {c});
  const std::string text = to_string(f.body);
  // One store (into c): b was inlined.
  EXPECT_EQ(text.find("b["), std::string::npos) << text;
  HostTensor in = iota(DType::Float32, {4, 3});
  std::vector<HostTensor> out = interpret(f, {in});
  ASSERT_EQ(out.size(), 1u);
  for (int64_t i = 0; i < in.num_elements(); ++i) {
    EXPECT_FLOAT_EQ(out[0].get_double(i), std::max(0.0, 2 * in.get_double(i))) << "element " << i;
  }
}

TEST(Lower, SmallTensorReadTwiceIsRecomputedNotStored) {
  // y = n * (n + 1) with n = (a - 1) * 3: n is read twice but cheap, so it is inlined (one loop
  // nest, no buffer for n), as a LayerNorm output is into the GELU terms that read it.
  te::Tensor a = te::placeholder("a", DType::Float32, {Expr(4), Expr(3)});
  te::Tensor n = te::compute("n", a.shape(), [&](const std::vector<Expr>& i) { return (a(i) - 1) * 3; });
  te::Tensor y = te::compute("y", a.shape(), [&](const std::vector<Expr>& i) { return n(i) * (n(i) + 1); });
  LoweredFunc f = lower("recompute", {a}, {y});
  const std::string text = to_string(f.body);
  EXPECT_EQ(text.find("n["), std::string::npos) << text;
  HostTensor in = iota(DType::Float32, {4, 3});
  std::vector<HostTensor> out = interpret(f, {in});
  for (int64_t i = 0; i < in.num_elements(); ++i) {
    const double v = (in.get_double(i) - 1) * 3;
    EXPECT_FLOAT_EQ(out[0].get_double(i), v * (v + 1)) << "element " << i;
  }
}

TEST(Lower, LargeTensorReadTwiceStaysABuffer) {
  // A body of well over the recompute budget read twice is computed once and stored.
  te::Tensor a = te::placeholder("a", DType::Float32, {Expr(8)});
  te::Tensor big = te::compute("big", a.shape(), [&](const std::vector<Expr>& i) {
    Expr e = a(i);
    for (int k = 0; k < 40; ++k) e = e * 3 + a(i);
    return e;
  });
  te::Tensor y = te::compute("y", a.shape(), [&](const std::vector<Expr>& i) { return big(i) - big(i) * big(i); });
  LoweredFunc f = lower("keep", {a}, {y});
  EXPECT_NE(to_string(f.body).find("big["), std::string::npos) << to_string(f.body);
}

// LowerOptions::materialize_reread (the CPU backend's): an injective tensor a matrix product
// reads once per output column (t = tanh(x), read 5 times per element) gets a stage of its own,
// so tanh runs once per element; a row reduction's operand (s = x * x, read once per element)
// stays inlined. The results are the same either way (each stage rounds as it did inlined).
TEST(Lower, ReductionOperandsReadManyTimesGetAStageOnRequest) {
  te::Tensor x = te::placeholder("x", DType::Float32, {Expr(3), Expr(8)});
  te::Tensor w = te::placeholder("w", DType::Float32, {Expr(8), Expr(5)});
  te::Tensor t = te::compute("t", x.shape(), [&](const std::vector<Expr>& i) { return call(Intrinsic::Tanh, x(i)); });
  IterVar k = te::reduce_axis(8, "k");
  te::Tensor y = te::compute("y", {Expr(3), Expr(5)}, [&](const std::vector<Expr>& i) { return te::sum(t({i[0], k.var}) * w({k.var, i[1]}), {k}); });
  te::Tensor s = te::compute("s", x.shape(), [&](const std::vector<Expr>& i) { return x(i) * x(i); });
  IterVar r = te::reduce_axis(8, "r");
  te::Tensor z = te::compute("z", {Expr(3)}, [&](const std::vector<Expr>& i) { return te::sum(s({i[0], r.var}), {r}); });
  LowerOptions materialize;
  materialize.materialize_reread = true;
  const LoweredFunc inlined = lower("mm", {x, w}, {y, z});
  const LoweredFunc staged = lower("mm", {x, w}, {y, z}, Schedule(), materialize);
  EXPECT_EQ(to_string(inlined.body).find("t["), std::string::npos) << to_string(inlined.body);
  EXPECT_NE(to_string(staged.body).find("t["), std::string::npos) << to_string(staged.body);
  EXPECT_EQ(to_string(staged.body).find("s["), std::string::npos) << to_string(staged.body);
  const HostTensor in = iota(DType::Float32, {3, 8}), weights = iota(DType::Float32, {8, 5}, 0.25, 0.5);
  const std::vector<HostTensor> a = interpret(inlined, {in, weights}), b = interpret(staged, {in, weights});
  ASSERT_EQ(a.size(), 2u);
  ASSERT_EQ(b.size(), 2u);
  for (size_t o = 0; o < 2; ++o)
    for (int64_t i = 0; i < a[o].num_elements(); ++i) EXPECT_EQ(a[o].get_double(i), b[o].get_double(i)) << "output " << o << " element " << i;
}

TEST(Lower, ReductionWithSymbolicRowsMatchesHandComputedSums) {
  Expr rows = var("rows");
  te::Tensor x = te::placeholder("x", DType::Float32, {rows, Expr(5)});
  ir::IterVar k = te::reduce_axis(5, "k");
  te::Tensor s = te::compute("s", {rows}, [&](const std::vector<Expr>& i) { return te::sum(x({i[0], k.var}), {k}); });
  LoweredFunc f = lower("rowsum", {x}, {s});
  ASSERT_EQ(f.symbols.size(), 1u);
  HostTensor in = iota(DType::Float32, {3, 5});
  std::vector<HostTensor> out = interpret(f, {in});
  ASSERT_EQ(out[0].shape(), std::vector<int64_t>({3}));
  for (int64_t r = 0; r < 3; ++r) {
    double want = 0;
    for (int64_t c = 0; c < 5; ++c) want += in.get_double(r * 5 + c);
    EXPECT_NEAR(out[0].get_double(r), want, 1e-5) << "row " << r;
  }
}

TEST(Lower, SplitScheduleWithRemainderComputesTheSameValues) {
  te::Tensor a = te::placeholder("a", DType::Int32, {Expr(10)});
  te::Tensor b = te::compute("b", a.shape(), [&](const std::vector<Expr>& i) { return a(i) + 7; });
  Schedule sched;
  sched.stage("b").transforms.push_back(LoopTransform::split("i0", 4));
  LoweredFunc f = lower("split", {a}, {b}, sched);
  const std::string text = to_string(f.body);
  EXPECT_NE(text.find("if ("), std::string::npos) << "10 is not a multiple of 4: a guard is needed\n" << text;
  HostTensor in(DType::Int32, {10});
  for (int i = 0; i < 10; ++i) in.set_int(i, i * 3 - 5);
  std::vector<HostTensor> out = interpret(f, {in});
  for (int i = 0; i < 10; ++i) EXPECT_EQ(out[0].get_int(i), i * 3 - 5 + 7) << "element " << i;
}

TEST(Lower, FuseThenSplitCoversEveryElementOnce) {
  te::Tensor a = te::placeholder("a", DType::Float32, {Expr(3), Expr(5)});
  te::Tensor b = te::compute("b", a.shape(), [&](const std::vector<Expr>& i) { return a(i) + 1; });
  Schedule sched;
  sched.stage("b").transforms = {LoopTransform::fuse("i0", "i1"), LoopTransform::split("i0.i1", 4)};
  LoweredFunc f = lower("fused", {a}, {b}, sched);
  HostTensor in = iota(DType::Float32, {3, 5});
  std::vector<HostTensor> out = interpret(f, {in});
  for (int64_t i = 0; i < 15; ++i) EXPECT_FLOAT_EQ(out[0].get_double(i), in.get_double(i) + 1) << "element " << i;
}

TEST(Interpreter, WrongInputShapeIsAUserErrorNamingTheInput) {
  te::Tensor a = te::placeholder("weights", DType::Float32, {Expr(4)});
  te::Tensor b = te::compute("b", a.shape(), [&](const std::vector<Expr>& i) { return a(i); });
  LoweredFunc f = lower("copy", {a}, {b});
  try {
    interpret(f, {HostTensor(DType::Float32, {5})});
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("input 'weights' has shape float32[5], but dimension 0 must be 4"),
              std::string::npos)
        << e.what();
  }
}

TEST(Interpreter, Float16ArithmeticRoundsEachResult) {
  te::Tensor a = te::placeholder("a", DType::Float16, {Expr(1)});
  te::Tensor b = te::compute("b", a.shape(), [&](const std::vector<Expr>& i) { return a(i) + a(i); });
  LoweredFunc f = lower("double_it", {a}, {b});
  HostTensor in(DType::Float16, {1});
  in.set_double(0, 1000.3);  // float16 holds 1000.5 (spacing 0.5 at this magnitude)
  std::vector<HostTensor> out = interpret(f, {in});
  EXPECT_EQ(out[0].get_double(0), 2001.0);
}

}  // namespace
}  // namespace kiln
