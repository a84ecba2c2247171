// Serial reductions that walk an operand across rows run over a row of accumulators
// (src/lower/InterchangeReductions.h): the same results bit for bit, other reductions untouched.
#include <gtest/gtest.h>

#include <cstring>

#include "kiln/ir/IROperator.h"
#include "kiln/ir/IRPrinter.h"
#include "kiln/lower/Lower.h"
#include "kiln/runtime/Interpreter.h"
#include "LoweringCheck.h"

namespace kiln {
namespace {

using namespace ir;

void expect_bitwise_equal(const HostTensor& a, const HostTensor& b) {
  ASSERT_EQ(a.shape(), b.shape());
  ASSERT_EQ(a.num_bytes(), b.num_bytes());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.num_bytes()), 0);
}

// y[m, n] = sum_k tanh(x[m, k]) * w[k, n], as a MatMul of [K, N] weights after an inlined
// activation: the k loop reads w a row apart, the n loop reads it contiguously.
TEST(InterchangeReductions, MatMulOfRowMajorWeightsRunsOverARowOfAccumulators) {
  for (DType d : {DType::Float32, DType::Float16}) {
    te::Tensor x = te::placeholder("x", d, {Expr(3), Expr(37)});
    te::Tensor w = te::placeholder("w", d, {Expr(37), Expr(29)});
    te::Tensor a = te::compute("a", x.shape(), [&](const std::vector<Expr>& i) { return call(Intrinsic::Tanh, x(i)); });
    IterVar k = te::reduce_axis(37, "k");
    te::Tensor y = te::compute("y", {Expr(3), Expr(29)}, [&](const std::vector<Expr>& i) {
      return te::sum(cast(Type(DType::Float32), a({i[0], k.var})) * cast(Type(DType::Float32), w({k.var, i[1]})), {k});
    });
    LowerOptions plain;
    plain.interchange_reductions = false;
    const LoweredFunc before = lower("mm", {x, w}, {y}, Schedule(), plain);
    const LoweredFunc after = lower("mm", {x, w}, {y});
    const std::string text = to_string(after.body);
    EXPECT_NE(text.find("y_acc_row"), std::string::npos) << text;
    // tanh(x[m, k]) does not depend on n: computed once per k, outside the row loop.
    EXPECT_NE(text.find("let y_acc_k0"), std::string::npos) << text;
    EXPECT_EQ(to_string(before.body).find("_row"), std::string::npos);
    const std::vector<HostTensor> in = {test::random_tensor(d, {3, 37}, 1), test::random_tensor(d, {37, 29}, 2)};
    expect_bitwise_equal(interpret(after, in).at(0), interpret(before, in).at(0));
  }
}

// A row sum reads x contiguously along k already: left as it is. So is a reduction whose last
// spatial loop has one trip, or whose row of accumulators would not fit the limit.
TEST(InterchangeReductions, ReductionsAlongContiguousRowsAreLeftAlone) {
  te::Tensor x = te::placeholder("x", DType::Float32, {Expr(8), Expr(64)});
  IterVar k = te::reduce_axis(64, "k");
  te::Tensor s = te::compute("s", {Expr(8)}, [&](const std::vector<Expr>& i) { return te::sum(x({i[0], k.var}), {k}); });
  EXPECT_EQ(to_string(lower("rowsum", {x}, {s}).body).find("_row"), std::string::npos);

  IterVar r = te::reduce_axis(8, "r");
  te::Tensor c = te::compute("c", {Expr(1), Expr(64)}, [&](const std::vector<Expr>& i) { return te::sum(x({r.var, i[1]}), {r}); });
  const LoweredFunc columns = lower("colsum", {x}, {c});
  EXPECT_NE(to_string(columns.body).find("c_acc_row"), std::string::npos);  // down the columns: interchanged
  te::Tensor big = te::placeholder("big", DType::Float32, {Expr(2), Expr(20000)});
  te::Tensor cb = te::compute("cb", {Expr(20000)}, [&](const std::vector<Expr>& i) { return te::sum(big({r.var / 4, i[0]}), {r}); });
  EXPECT_EQ(to_string(lower("wide", {big}, {cb}).body).find("_row"), std::string::npos);  // 80 KB of accumulators
}

// A condition in the update (padding of a convolution) stays inside the row loop, and nothing
// under it is hoisted; results are still identical.
TEST(InterchangeReductions, ConditionalUpdatesKeepTheirCondition) {
  te::Tensor x = te::placeholder("x", DType::Float32, {Expr(12)});
  te::Tensor w = te::placeholder("w", DType::Float32, {Expr(3), Expr(10)});
  IterVar k = te::reduce_axis(3, "k");
  te::Tensor y = te::compute("y", {Expr(10)}, [&](const std::vector<Expr>& i) {
    const Expr at = i[0] + k.var - 1;
    return te::sum(select(at >= 0, x({max(at, Expr(0))}) * w({k.var, i[0]}), make_zero(Type(DType::Float32))), {k});
  });
  LowerOptions plain;
  plain.interchange_reductions = false;
  const LoweredFunc before = lower("pad", {x, w}, {y}, Schedule(), plain);
  const LoweredFunc after = lower("pad", {x, w}, {y});
  EXPECT_NE(to_string(after.body).find("y_acc_row"), std::string::npos) << to_string(after.body);
  const std::vector<HostTensor> in = {test::random_tensor(DType::Float32, {12}, 3), test::random_tensor(DType::Float32, {3, 10}, 4)};
  expect_bitwise_equal(interpret(after, in).at(0), interpret(before, in).at(0));
}

}  // namespace
}  // namespace kiln
