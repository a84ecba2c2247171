#include <gtest/gtest.h>

#include "kiln/ir/IRMutator.h"
#include "kiln/ir/IROperator.h"
#include "kiln/ir/IRPrinter.h"
#include "kiln/support/Error.h"

namespace kiln::ir {
namespace {

TEST(IR, OperatorsFoldIndexConstants) {
  Expr n = var("n");
  EXPECT_EQ(to_string(n * 1 + 0), "n");
  EXPECT_EQ(to_string(Expr(3) * 4 + 2), "14");
  EXPECT_EQ(to_string(n * 2 + 1), "((n * 2) + 1)");
}

TEST(IR, ConstantsTakeTheOtherOperandsType) {
  Expr x = var("x", DType::Float16);
  Expr y = x + 1;
  EXPECT_EQ(y.type(), Type(DType::Float16));
  EXPECT_EQ(to_string(y), "(x + 1_float16)");
}

TEST(IR, MismatchedTypesAreAnInternalError) {
  Expr x = var("x", DType::Float32), i = var("i", DType::Int32);
  EXPECT_THROW(Add::make(x, i), InternalError);
}

TEST(IR, SubstituteReplacesByIdentityNotName) {
  Expr a = var("v"), b = var("v");
  Expr e = a + b;
  Expr r = substitute(e, {{a, Expr(7)}});
  EXPECT_EQ(to_string(r), "(7 + v)");
}

TEST(IR, FloorDivAndModOfNegativeConstants) {
  EXPECT_EQ(as_const_int(floor_div(Expr(-7), Expr(2))), -4);
  EXPECT_EQ(as_const_int(floor_mod(Expr(-7), Expr(2))), 1);
  EXPECT_EQ(as_const_int(floor_mod(Expr(7), Expr(-2))), -1);
}

TEST(IR, PrintsLoopNests) {
  Buffer b = Buffer::make("out", DType::Float32, {Expr(4)});
  Expr i = var("i");
  Stmt s = For::make(i, 0, 4, ForKind::Serial, Store::make(b, make_const(DType::Float32, 1.5), i));
  EXPECT_EQ(to_string(s), "for serial (i, 0, 4) {\n  out[i] = 1.5f\n}\n");
}

}  // namespace
}  // namespace kiln::ir
