// Elementwise ops: arithmetic with broadcasting and unary math. float16/bfloat16 values are
// computed in float32 and stored back (upcast/downcast), as the CUDA code does.
#include "Families.h"
#include "kiln/ops/Helpers.h"

namespace kiln::ops {
namespace {

using namespace ir;
using BinaryFn = Expr (*)(Expr, Expr);

te::Tensor broadcast_binary(OpContext& ctx, const te::Tensor& a, const te::Tensor& b, BinaryFn fn) {
  check_same_dtype(ctx, {a, b});
  const DType dtype = a.dtype();
  return te::compute(
      ctx.output_name(0), broadcast_shape(ctx, {a, b}),
      [&](const std::vector<Expr>& i) {
        return downcast(fn(upcast(broadcast_read(a, i)), upcast(broadcast_read(b, i))), dtype);
      },
      ctx.node().describe());
}

template <BinaryFn Fn>
std::vector<te::Tensor> binary(OpContext& ctx) {
  return {broadcast_binary(ctx, ctx.input(0), ctx.input(1), Fn)};
}

Expr add(Expr a, Expr b) { return std::move(a) + std::move(b); }
Expr sub(Expr a, Expr b) { return std::move(a) - std::move(b); }
Expr mul(Expr a, Expr b) { return std::move(a) * std::move(b); }
Expr div(Expr a, Expr b) { return std::move(a) / std::move(b); }

using UnaryFn = Expr (*)(Expr);

te::Tensor map_unary(OpContext& ctx, const te::Tensor& x, UnaryFn fn) {
  const DType dtype = x.dtype();
  return te::compute(
      ctx.output_name(0), x.shape(),
      [&](const std::vector<Expr>& i) { return downcast(fn(upcast(x(i))), dtype); }, ctx.node().describe());
}

template <UnaryFn Fn>
std::vector<te::Tensor> unary_float(OpContext& ctx) {
  check_dtype(ctx, ctx.input(0), "input 0", kFloatTypes);
  return {map_unary(ctx, ctx.input(0), Fn)};
}

Expr relu(Expr x) { return max(x, make_zero(x.type())); }
Expr exp_(Expr x) { return call(Intrinsic::Exp, std::move(x)); }
Expr tanh_(Expr x) { return call(Intrinsic::Tanh, std::move(x)); }

}  // namespace

void register_elementwise(OpTable& table) {
  table.add(OpKind::Add, binary<add>);
  table.add(OpKind::Sub, binary<sub>);
  table.add(OpKind::Mul, binary<mul>);
  table.add(OpKind::Div, binary<div>);
  table.add(OpKind::Relu, unary_float<relu>);
  table.add(OpKind::Exp, unary_float<exp_>);
  table.add(OpKind::Tanh, unary_float<tanh_>);
}

}  // namespace kiln::ops
