// CausalConvWithState (opset 27): a causal depthwise 1-D convolution over [batch, channels, L]
// with a carried state, the step of Gated DeltaNet / Mamba blocks. The input is read as if the
// past state (k - 1 positions, zeros when absent) were concatenated before it; output position l
// is bias[c] + sum_t padded[l + t] * weight[c, 0, t], optionally through SiLU (rounded to the
// input's type first, as the reference does); present_state is the padded input's last k - 1
// positions. float16/bfloat16 accumulate in float32.
#include "Families.h"
#include "IndexMath.h"
#include "kiln/ops/Helpers.h"

namespace kiln::ops {
namespace {

using namespace ir;

std::vector<te::Tensor> build_causal_conv(OpContext& ctx) {
  const Node& node = ctx.node();
  const te::Tensor& x = ctx.input(0);
  const te::Tensor& w = ctx.input(1);
  check_dtype(ctx, x, "input 0 (input)", kFloatTypes);
  check_same_dtype(ctx, {x, w});
  if (x.ndim() != 3)
    ctx.fail("input {} must have rank 3 (batch_size, channels, length)", shape_text(x.shape()));
  if (w.ndim() != 3) ctx.fail("weight {} must have rank 3 (channels, 1, k)", shape_text(w.shape()));
  auto k = as_const_int(w.shape(2));
  if (!k || *k < 1)
    ctx.unsupported("a kernel size that is not a known positive number ({})",
                    shape_text(w.shape()));
  const std::string activation = node.attr_string("activation", "none");
  if (activation != "none" && activation != "silu" && activation != "swish") {
    ctx.fail("attribute 'activation' is '{}'; expected none, silu or swish", activation);
  }
  const te::Tensor bias = ctx.has_input(2) ? ctx.input(2) : te::Tensor();
  const te::Tensor past = ctx.has_input(3) ? ctx.input(3) : te::Tensor();
  if (bias.defined() && bias.ndim() != 1)
    ctx.fail("bias {} must have rank 1 (channels)", shape_text(bias.shape()));
  if (past.defined()) {
    auto n = as_const_int(past.shape(2));
    if (past.ndim() != 3 || !n || *n != *k - 1) {
      ctx.fail("past_state {} must have shape [batch_size, channels, {}] (k - 1 positions)",
               shape_text(past.shape()), *k - 1);
    }
  }
  const Type acc(x.dtype() == DType::Float64 ? DType::Float64 : DType::Float32);
  const Expr carried = Expr(*k - 1);
  // Position j of the state-padded input [past | input].
  auto padded = [&](const Expr& b, const Expr& c, const Expr& j) {
    const Expr from_input = x({b, c, max(j - carried, Expr(0))});
    if (!past.defined()) return select(j >= carried, from_input, make_zero(Type(x.dtype())));
    return select(j >= carried, from_input, past({b, c, min(j, carried - 1)}));
  };
  const IterVar t = te::reduce_axis(Expr(*k), ctx.stage_name("t"));
  const te::Tensor conv = te::compute(
      ctx.stage_name("conv"), x.shape(),
      [&](const std::vector<Expr>& i) {
        return te::sum(
            cast(acc, padded(i[0], i[1], i[2] + t.var)) * cast(acc, w({i[1], Expr(0), t.var})),
            {t});
      },
      node.describe());
  te::Tensor out = te::compute(
      ctx.output_name(0), x.shape(),
      [&](const std::vector<Expr>& i) {
        Expr v = conv(i);
        if (bias.defined()) v = v + cast(acc, bias({i[1]}));
        if (activation == "none") return cast(Type(x.dtype()), v);
        v = cast(acc, cast(Type(x.dtype()), v));
        return cast(Type(x.dtype()), v / (make_one(acc) + call(Intrinsic::Exp, -v)));
      },
      node.describe());
  const te::Tensor present = te::compute(
      ctx.output_name(1), {x.shape(0), x.shape(1), carried},
      [&](const std::vector<Expr>& i) { return padded(i[0], i[1], x.shape(2) + i[2]); },
      node.describe());
  return {out, present};
}

}  // namespace

void register_causal_conv(OpTable& table) {
  table.add(OpKind::CausalConvWithState, build_causal_conv);
}

}  // namespace kiln::ops
