// Elementwise comparisons, logic, bitwise ops, float classification and selection (Where).
#include "Elementwise.h"

namespace kiln::ops {
namespace {

using namespace ir;

inline constexpr std::initializer_list<DType> kIntegerTypes = {
    DType::Int8, DType::Int16, DType::Int32, DType::Int64, DType::UInt8, DType::UInt16, DType::UInt32, DType::UInt64};
inline constexpr std::initializer_list<DType> kComparableTypes = {
    DType::Bool,   DType::Int8,   DType::Int16,   DType::Int32,    DType::Int64,   DType::UInt8,   DType::UInt16,
    DType::UInt32, DType::UInt64, DType::Float16, DType::BFloat16, DType::Float32, DType::Float64};

using BinaryFn = Expr (*)(Expr, Expr);

// Two inputs of one dtype (one of `allowed`), broadcast; `Fn` gives a bool, or the inputs' type
// when `same_type` (bitwise ops).
te::Tensor binary(OpContext& ctx, std::initializer_list<DType> allowed, BinaryFn fn, bool same_type) {
  const te::Tensor& a = ctx.input(0);
  const te::Tensor& b = ctx.input(1);
  check_same_dtype(ctx, {a, b});
  check_dtype(ctx, a, "input 0", allowed);
  const DType dtype = same_type ? a.dtype() : DType::Bool;
  return broadcast_map(ctx, {a, b}, [&](const std::vector<Expr>& v) { return downcast(fn(v[0], v[1]), dtype); });
}

template <BinaryFn Fn>
std::vector<te::Tensor> compare(OpContext& ctx) {
  return {binary(ctx, kComparableTypes, Fn, false)};
}

template <BinaryFn Fn>
std::vector<te::Tensor> logical(OpContext& ctx) {
  return {binary(ctx, {DType::Bool}, Fn, false)};
}

template <BinaryFn Fn>
std::vector<te::Tensor> bitwise(OpContext& ctx) {
  return {binary(ctx, kIntegerTypes, Fn, true)};
}

Expr eq(Expr a, Expr b) { return std::move(a) == std::move(b); }
Expr lt(Expr a, Expr b) { return std::move(a) < std::move(b); }
Expr gt(Expr a, Expr b) { return std::move(a) > std::move(b); }
Expr le(Expr a, Expr b) { return std::move(a) <= std::move(b); }
Expr ge(Expr a, Expr b) { return std::move(a) >= std::move(b); }
Expr logical_and(Expr a, Expr b) { return std::move(a) && std::move(b); }
Expr logical_or(Expr a, Expr b) { return std::move(a) || std::move(b); }
Expr logical_xor(Expr a, Expr b) { return std::move(a) != std::move(b); }
Expr bit_and(Expr a, Expr b) { return call(Intrinsic::BitAnd, std::move(a), std::move(b)); }
Expr bit_or(Expr a, Expr b) { return call(Intrinsic::BitOr, std::move(a), std::move(b)); }
Expr bit_xor(Expr a, Expr b) { return call(Intrinsic::BitXor, std::move(a), std::move(b)); }

template <typename Fn>
te::Tensor unary(OpContext& ctx, std::initializer_list<DType> allowed, Fn fn) {
  const te::Tensor& x = ctx.input(0);
  check_dtype(ctx, x, "input 0", allowed);
  return broadcast_map(ctx, {x}, [&](const std::vector<Expr>& v) { return fn(v[0]); });
}

std::vector<te::Tensor> build_not(OpContext& ctx) {
  return {unary(ctx, {DType::Bool}, [](const Expr& x) { return !x; })};
}

std::vector<te::Tensor> build_bitwise_not(OpContext& ctx) {
  return {unary(ctx, kIntegerTypes, [](const Expr& x) { return call(Intrinsic::BitNot, x); })};
}

// BitShift: unsigned integers; `direction` is "LEFT" or "RIGHT".
std::vector<te::Tensor> build_bit_shift(OpContext& ctx) {
  const std::string direction = ctx.node().attr_string("direction", "");
  if (direction != "LEFT" && direction != "RIGHT") {
    ctx.fail("attribute 'direction' is '{}', expected 'LEFT' or 'RIGHT'", direction);
  }
  const Intrinsic op = direction == "LEFT" ? Intrinsic::ShiftLeft : Intrinsic::ShiftRight;
  const te::Tensor& a = ctx.input(0);
  const te::Tensor& b = ctx.input(1);
  check_same_dtype(ctx, {a, b});
  if (ctx.opset() < 28) {
    check_dtype(ctx, a, "input 0", {DType::UInt8, DType::UInt16, DType::UInt32, DType::UInt64});
    return {broadcast_map(ctx, {a, b}, [&](const std::vector<Expr>& v) { return call(op, v[0], v[1]); })};
  }
  // Opset 28 adds signed types: right shifts are arithmetic; a shift by a negative amount or by
  // the bit width or more gives what the sign extension alone gives (-1 for a right shift of a
  // negative value, else 0).
  check_dtype(ctx, a, "input 0", {DType::UInt8, DType::UInt16, DType::UInt32, DType::UInt64, DType::Int8,
                                  DType::Int16, DType::Int32, DType::Int64});
  const bool right = op == Intrinsic::ShiftRight;
  return {broadcast_map(ctx, {a, b}, [&](const std::vector<Expr>& v) {
    const Type t = v[0].type();
    const Expr zero = make_zero(t);
    const Expr out_of_range = v[1] < zero || v[1] >= make_const(t, t.bits());
    const Expr fill = right && t.is_int() ? select(v[0] < zero, make_const(t, -1), zero) : zero;
    return select(out_of_range, fill, call(op, v[0], select(out_of_range, zero, v[1])));
  })};
}

std::vector<te::Tensor> build_is_nan(OpContext& ctx) {
  return {unary(ctx, kFloatTypes, [](const Expr& x) { return call(Intrinsic::IsNan, x); })};
}

std::vector<te::Tensor> build_is_inf(OpContext& ctx) {
  const bool positive = ctx.node().attr_int("detect_positive", 1) != 0;
  const bool negative = ctx.node().attr_int("detect_negative", 1) != 0;
  return {unary(ctx, kFloatTypes, [=](const Expr& x) {
    const Expr inf = call(Intrinsic::IsInf, x);
    const Expr zero = make_zero(x.type());
    if (positive && negative) return inf;
    if (positive) return inf && x > zero;
    if (negative) return inf && x < zero;
    return make_bool(false) && inf;
  })};
}

// Where(condition, X, Y): the three broadcast together; X and Y have one dtype.
std::vector<te::Tensor> build_where(OpContext& ctx) {
  const te::Tensor& condition = ctx.input(0);
  const te::Tensor& x = ctx.input(1);
  const te::Tensor& y = ctx.input(2);
  check_dtype(ctx, condition, "input 0 (condition)", {DType::Bool});
  if (x.dtype() != y.dtype()) {
    ctx.fail("input 1 has dtype {} but input 2 has dtype {}; they must match", dtype_name(x.dtype()),
             dtype_name(y.dtype()));
  }
  const DType dtype = x.dtype();
  return {broadcast_map(ctx, {condition, x, y},
                        [&](const std::vector<Expr>& v) { return downcast(select(v[0], v[1], v[2]), dtype); })};
}

}  // namespace

void register_elementwise_logic(OpTable& table) {
  table.add(OpKind::Equal, compare<eq>);
  table.add(OpKind::Less, compare<lt>);
  table.add(OpKind::Greater, compare<gt>);
  table.add(OpKind::LessOrEqual, compare<le>);
  table.add(OpKind::GreaterOrEqual, compare<ge>);
  table.add(OpKind::And, logical<logical_and>);
  table.add(OpKind::Or, logical<logical_or>);
  table.add(OpKind::Xor, logical<logical_xor>);
  table.add(OpKind::Not, build_not);
  table.add(OpKind::BitwiseAnd, bitwise<bit_and>);
  table.add(OpKind::BitwiseOr, bitwise<bit_or>);
  table.add(OpKind::BitwiseXor, bitwise<bit_xor>);
  table.add(OpKind::BitwiseNot, build_bitwise_not);
  table.add(OpKind::BitShift, build_bit_shift);
  table.add(OpKind::IsNaN, build_is_nan);
  table.add(OpKind::IsInf, build_is_inf);
  table.add(OpKind::Where, build_where);
}

}  // namespace kiln::ops
