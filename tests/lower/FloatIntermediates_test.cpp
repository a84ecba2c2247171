// Float16/bfloat16 chains fused into one expression keep float32 intermediates where the schedule
// asks (Schedule::float_intermediates, src/lower/FloatIntermediates.h): the round trips through
// the half type disappear, what is stored is rounded once, and the results move toward the exact
// value. Without it, every op rounds (ONNX's per-op results, the CPU reference).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kiln/ir/IROperator.h"
#include "kiln/ir/IRPrinter.h"
#include "kiln/lower/Lower.h"
#include "kiln/runtime/Interpreter.h"
#include "LoweringCheck.h"

namespace kiln {
namespace {

using namespace ir;

int64_t count(const std::string& text, const std::string& what) {
  int64_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Interprets `f` on a float16 tensor of `values` (rounded to float16 as stored) and expects each
// result within tolerance(exact(v)) of exact(v), v the stored input; a NaN input must give NaN.
// Returns the largest difference seen.
template <typename Exact, typename Tolerance>
double expect_near_each(const LoweredFunc& f, const std::vector<double>& values, Exact exact, Tolerance tolerance) {
  const int64_t n = int64_t(values.size());
  HostTensor in(DType::Float16, {n});
  for (int64_t i = 0; i < n; ++i) in.set_double(i, values[size_t(i)]);
  const HostTensor out = interpret(f, {in}).at(0);
  double worst = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double v = in.get_double(i), got = out.get_double(i);
    if (std::isnan(v)) {
      EXPECT_TRUE(std::isnan(got));
      continue;
    }
    worst = std::max(worst, std::abs(got - exact(v)));
    EXPECT_NEAR(got, exact(v), tolerance(exact(v))) << "x = " << v;
  }
  return worst;
}

// y = (x * 1.1 + 0.3)^2 as three ops of dtype d, each computing in float32 and rounding its result
// to d, as kiln's ops are built; t1 and t2 are inlined into y.
TEST(FloatIntermediates, FusedHalfChainRoundsOnceWhereStored) {
  for (DType d : {DType::Float16, DType::BFloat16}) {
    SCOPED_TRACE(dtype_name(d));
    const Type f32(DType::Float32), half(d);
    const int64_t n = 512;
    te::Tensor x = te::placeholder("x", d, {Expr(n)});
    te::Tensor t1 = te::compute("t1", x.shape(), [&](const std::vector<Expr>& i) {
      return cast(half, cast(f32, x(i)) * FloatImm::make(f32, 1.1));
    });
    te::Tensor t2 = te::compute("t2", x.shape(), [&](const std::vector<Expr>& i) {
      return cast(half, cast(f32, t1(i)) + FloatImm::make(f32, 0.3));
    });
    te::Tensor y = te::compute("y", x.shape(), [&](const std::vector<Expr>& i) {
      return cast(half, cast(f32, t2(i)) * cast(f32, t2(i)));
    });
    Schedule rounded, relaxed;
    relaxed.float_intermediates = true;
    const LoweredFunc per_op = lower("chain", {x}, {y}, rounded);
    const LoweredFunc once = lower("chain", {x}, {y}, relaxed);
    const std::string round_trip = "float32(" + std::string(dtype_name(d)) + "(";
    EXPECT_GT(count(to_string(per_op.body), round_trip), 0) << to_string(per_op.body);
    EXPECT_EQ(count(to_string(once.body), round_trip), 0) << to_string(once.body);

    const HostTensor in = test::random_tensor(d, {n}, 7);
    const HostTensor a = interpret(per_op, {in}).at(0), b = interpret(once, {in}).at(0);
    // The float32 chain rounded once: within half an ulp of d (2^-11 relative for float16, 2^-8
    // for bfloat16) of the exact value, or for results near zero (x near -0.27) a step of
    // float16's subnormals (2^-24), float32's own rounding aside; per-op rounding is farther off
    // in total.
    const double half_ulp = d == DType::Float16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
    const double tiny = d == DType::Float16 ? std::ldexp(1.0, -24) : 1e-30;
    double err_per_op = 0, err_once = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double v = in.get_double(i), exact = (v * 1.1 + 0.3) * (v * 1.1 + 0.3);
      EXPECT_LE(std::abs(b.get_double(i) - exact), half_ulp * std::abs(exact) * 1.001 + tiny) << "x = " << v;
      err_per_op += std::abs(a.get_double(i) - exact), err_once += std::abs(b.get_double(i) - exact);
    }
    EXPECT_LT(err_once, err_per_op);
  }
}

// A stored intermediate still rounds: only round trips inside one expression are dropped, and a
// float32 value widened from a half input (x itself) stays as it is.
TEST(FloatIntermediates, StoredValuesAndInputsKeepTheirType) {
  const Type f32(DType::Float32), half(DType::Float16);
  te::Tensor x = te::placeholder("x", DType::Float16, {Expr(64)});
  te::Tensor t = te::compute("t", x.shape(), [&](const std::vector<Expr>& i) { return cast(half, cast(f32, x(i)) * FloatImm::make(f32, 3.0)); });
  Schedule relaxed;
  relaxed.float_intermediates = true;
  LowerOptions separate;
  separate.inline_injective = false;
  te::Tensor y = te::compute("y", x.shape(), [&](const std::vector<Expr>& i) { return cast(half, cast(f32, t(i)) + FloatImm::make(f32, 1.0)); });
  const std::string text = to_string(lower("two", {x}, {t, y}, relaxed, separate).body);
  // t is an output: y reads its stored (rounded) value, widened from float16.
  EXPECT_GT(count(text, "float32(t["), 0) << text;
  EXPECT_GT(count(text, "float32(x["), 0) << text;
}

// Erf of a half chain takes the short formula (no erf call left) and stays within 2.5e-7 of the
// exact value for float16 inputs in steps of 1/1024 over [-6, 6] (NaN stays NaN, the infinities
// give +-1); the same chain without the option keeps erf.
TEST(FloatIntermediates, HalfChainErfTakesTheShortFormula) {
  const Type f32(DType::Float32);
  std::vector<double> values;
  for (double v = -6.0; v <= 6.0; v += 1.0 / 1024) values.push_back(v);  // every float16 in [1, 2), rounded to float16 elsewhere
  values.insert(values.end(), {std::nan(""), INFINITY, -INFINITY, 1e-4, -1e-4, 6e-8});
  const int64_t n = int64_t(values.size());
  te::Tensor x = te::placeholder("x", DType::Float16, {Expr(n)});
  te::Tensor y = te::compute("y", x.shape(), [&](const std::vector<Expr>& i) { return call(Intrinsic::Erf, cast(f32, x(i))); });
  Schedule rounded, relaxed;
  relaxed.float_intermediates = true;
  EXPECT_EQ(count(to_string(lower("erf", {x}, {y}, rounded).body), "erf("), 1);
  const LoweredFunc short_form = lower("erf", {x}, {y}, relaxed);
  EXPECT_EQ(count(to_string(short_form.body), "erf("), 0) << to_string(short_form.body);

  const double worst = expect_near_each(short_form, values, [](double v) { return std::erf(v); }, [](double) { return 2.5e-7; });
  EXPECT_GT(worst, 0.0);  // the formula, not erf itself
}

// GELU's factor 1 + erf(x / sqrt(2)) of a half chain is one formula: the exp2 of a polynomial in x
// itself (1 / sqrt(2) folded into its coefficients and clamp), erfc for x < 0 and 2 - erfc else;
// within 2.5e-7 of the exact value for float16 inputs over [-8, 8], NaN stays NaN.
TEST(FloatIntermediates, GeluFactorIsOneFormula) {
  const Type f32(DType::Float32);
  const double inv_sqrt2 = double(float(M_SQRT1_2));
  std::vector<double> values;
  for (double v = -8.0; v <= 8.0; v += 1.0 / 512) values.push_back(v);
  values.insert(values.end(), {std::nan(""), INFINITY, -INFINITY, 1e-4, -1e-4});
  const int64_t n = int64_t(values.size());
  te::Tensor x = te::placeholder("x", DType::Float16, {Expr(n)});
  te::Tensor y = te::compute("y", x.shape(), [&](const std::vector<Expr>& i) {
    return call(Intrinsic::Erf, cast(f32, x(i)) * FloatImm::make(f32, inv_sqrt2)) + FloatImm::make(f32, 1.0);
  });
  Schedule relaxed;
  relaxed.float_intermediates = true;
  const LoweredFunc short_form = lower("gelu_factor", {x}, {y}, relaxed);
  const std::string text = to_string(short_form.body);
  EXPECT_EQ(count(text, "erf("), 0) << text;
  EXPECT_EQ(count(text, "exp2("), 1) << text;
  EXPECT_EQ(count(text, "0.7071"), 0) << text;  // the scale is in the coefficients

  expect_near_each(short_form, values, [&](double v) { return 1.0 + std::erf(v * inv_sqrt2); }, [](double) { return 2.5e-7; });
}

// tanh-GELU's factor 1 + tanh(sqrt(2 / pi) x) of a half chain is 2 / (1 + exp2(k x)): no tanh
// call, sqrt(2 / pi) folded into k, within 1e-6 relative of the exact value for float16 inputs over
// [-12, 12] (where it falls to 1e-10: no cancellation), NaN stays NaN; tanh alone keeps tanh.
TEST(FloatIntermediates, TanhGeluFactorIsOneFormula) {
  const Type f32(DType::Float32);
  const double c = double(float(std::sqrt(2.0 / M_PI)));
  std::vector<double> values;
  for (double v = -12.0; v <= 12.0; v += 1.0 / 256) values.push_back(v);
  values.insert(values.end(), {std::nan(""), INFINITY, -INFINITY, 1e-4, -1e-4});
  const int64_t n = int64_t(values.size());
  te::Tensor x = te::placeholder("x", DType::Float16, {Expr(n)});
  te::Tensor y = te::compute("y", x.shape(), [&](const std::vector<Expr>& i) {
    return FloatImm::make(f32, 1.0) + call(Intrinsic::Tanh, FloatImm::make(f32, c) * cast(f32, x(i)));
  });
  te::Tensor t = te::compute("t", x.shape(), [&](const std::vector<Expr>& i) { return call(Intrinsic::Tanh, cast(f32, x(i))); });
  Schedule relaxed;
  relaxed.float_intermediates = true;
  EXPECT_EQ(count(to_string(lower("tanh", {x}, {t}, relaxed).body), "tanh("), 1);
  const LoweredFunc short_form = lower("tanh_gelu_factor", {x}, {y}, relaxed);
  const std::string text = to_string(short_form.body);
  EXPECT_EQ(count(text, "tanh("), 0) << text;
  EXPECT_EQ(count(text, "exp2("), 1) << text;
  EXPECT_EQ(count(text, "rcp("), 1) << text;

  expect_near_each(short_form, values, [&](double v) { return 1.0 + std::tanh(c * v); }, [](double exact) { return 1e-6 * exact; });
}

// Sigmoid of a half chain, 1 / (1 + exp(-x)), is one exp2 and one reciprocal: no exp, no
// division; within 1e-6 relative of the exact value for float16 inputs over [-20, 20] (down to 2e-9,
// no cancellation), 0 and 1 at the infinities, NaN stays NaN. A constant other than 1 over such a
// value is that constant times the reciprocal.
TEST(FloatIntermediates, HalfChainSigmoidIsExp2AndRcp) {
  const Type f32(DType::Float32);
  std::vector<double> values;
  for (double v = -20.0; v <= 20.0; v += 1.0 / 256) values.push_back(v);
  values.insert(values.end(), {std::nan(""), INFINITY, -INFINITY});
  const int64_t n = int64_t(values.size());
  te::Tensor x = te::placeholder("x", DType::Float16, {Expr(n)});
  te::Tensor y = te::compute("y", x.shape(), [&](const std::vector<Expr>& i) {
    const Expr one = FloatImm::make(f32, 1.0);
    return one / (one + call(Intrinsic::Exp, -cast(f32, x(i))));
  });
  te::Tensor z = te::compute("z", x.shape(), [&](const std::vector<Expr>& i) { return FloatImm::make(f32, 3.0) / cast(f32, x(i)); });
  Schedule relaxed;
  relaxed.float_intermediates = true;
  const std::string scaled = to_string(lower("three_over", {x}, {z}, relaxed).body);
  EXPECT_EQ(count(scaled, "(3f * rcp(float32(x["), 1) << scaled;
  const LoweredFunc f = lower("sigmoid", {x}, {y}, relaxed);
  const std::string text = to_string(f.body);
  EXPECT_EQ(count(text, "exp("), 0) << text;
  EXPECT_EQ(count(text, "exp2("), 1) << text;
  EXPECT_EQ(count(text, "rcp("), 1) << text;
  EXPECT_EQ(count(text, " / "), 0) << text;
  EXPECT_EQ(count(text, "(0f - "), 0) << text;  // the negation is in exp2's factor

  expect_near_each(f, values, [](double v) { return 1.0 / (1.0 + std::exp(-v)); }, [](double exact) { return 1e-6 * exact; });
}

// Exp of a half chain runs on the exp2 unit: exp2(u log2(e)), within 1e-6 relative of exp over
// float16 inputs in [-20, 11]; a float32 model's Exp keeps exp.
TEST(FloatIntermediates, HalfChainExpTakesTheExp2Unit) {
  const Type f32(DType::Float32);
  std::vector<double> values;
  for (double v = -20.0; v <= 11.0; v += 1.0 / 256) values.push_back(v);
  const int64_t n = int64_t(values.size());
  for (DType d : {DType::Float16, DType::Float32}) {
    SCOPED_TRACE(dtype_name(d));
    te::Tensor x = te::placeholder("x", d, {Expr(n)});
    te::Tensor y = te::compute("y", x.shape(), [&](const std::vector<Expr>& i) {
      return call(Intrinsic::Exp, (d == DType::Float32 ? x(i) : cast(f32, x(i))) - FloatImm::make(f32, 0.5));
    });
    Schedule relaxed;
    relaxed.float_intermediates = true;
    const LoweredFunc f = lower("exp", {x}, {y}, relaxed);
    const std::string text = to_string(f.body);
    EXPECT_EQ(count(text, "exp2("), d == DType::Float16 ? 1 : 0) << text;
    EXPECT_EQ(count(text, "exp("), d == DType::Float16 ? 0 : 1) << text;
    if (d != DType::Float16) continue;
    expect_near_each(f, values, [](double v) { return std::exp(v - 0.5); }, [](double exact) { return 1e-6 * exact; });
  }
}

// A float32 model's Erf keeps erf under the option: no half value is read.
TEST(FloatIntermediates, Float32ErfKeepsErf) {
  te::Tensor x = te::placeholder("x", DType::Float32, {Expr(64)});
  te::Tensor y = te::compute("y", x.shape(), [&](const std::vector<Expr>& i) { return call(Intrinsic::Erf, x(i)); });
  Schedule relaxed;
  relaxed.float_intermediates = true;
  EXPECT_EQ(count(to_string(lower("erf", {x}, {y}, relaxed).body), "erf("), 1);
}

}  // namespace
}  // namespace kiln
