#include <gtest/gtest.h>

#include "kiln/ir/Equality.h"
#include "kiln/ir/IROperator.h"
#include "kiln/ir/IRPrinter.h"
#include "kiln/ir/Simplify.h"

namespace kiln::ir {
namespace {

TEST(Simplify, FoldsConstantsPerDtype) {
  Expr x = Add::make(make_const(DType::Int8, 100), make_const(DType::Int8, 100));
  EXPECT_EQ(as_const_int(simplify(x)), -56) << "int8 wraps around";
  Expr h = Add::make(make_const(DType::Float16, 2048), make_const(DType::Float16, 1));
  EXPECT_EQ(as_const_float(simplify(h)), 2048.0) << "float16 rounds 2049 to even";
  Expr c = Cast::make(DType::Int32, make_const(DType::Float32, -2.75));
  EXPECT_EQ(as_const_int(simplify(c)), -2) << "float to int truncates";
}

TEST(Simplify, RemovesIdentitiesInIndexArithmetic) {
  Expr n = var("n");
  EXPECT_TRUE(structurally_equal(simplify(Div::make(Mul::make(n, Expr(4)), Expr(4))), n));
  EXPECT_TRUE(is_zero(simplify(Sub::make(n, n))));
  EXPECT_EQ(to_string(simplify(Add::make(Add::make(n, Expr(3)), Expr(4)))), "(n + 7)");
}

TEST(Simplify, RefoldsASplitFusedIndex) {
  Expr f = var("f"), seq = var("seq");
  Expr flat = Add::make(Mul::make(Div::make(f, seq), seq), Mod::make(f, seq));
  EXPECT_TRUE(simplify(flat).same_as(f)) << to_string(simplify(flat));
  Expr other = var("g");
  Expr mismatched = Add::make(Mul::make(Div::make(f, seq), seq), Mod::make(other, seq));
  EXPECT_FALSE(simplify(mismatched).same_as(f));
}

TEST(Simplify, SelectWithKnownConditionPicksABranch) {
  Expr a = var("a"), b = var("b");
  Expr s = Select::make(LT::make(Expr(1), Expr(2)), a, b);
  EXPECT_TRUE(simplify(s).same_as(a));
}

TEST(Equality, ComparesStructureAndVariableIdentity) {
  Expr a = var("a"), a2 = var("a");
  EXPECT_TRUE(structurally_equal(a * 2 + 1, a * 2 + 1));
  EXPECT_FALSE(structurally_equal(a * 2 + 1, a2 * 2 + 1)) << "same name, different variable";
  EXPECT_EQ(structural_hash(a * 2), structural_hash(a * 2));
}

}  // namespace
}  // namespace kiln::ir
