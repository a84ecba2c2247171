// The training domain's optimizer steps (ai.onnx.preview.training): Adagrad, Momentum (standard
// and Nesterov) and Adam, each an elementwise update of n tensors at once. Inputs: the learning
// rate R and the step count T (scalars), then X_1..n, G_1..n and the optimizer's state tensors;
// outputs: the new X_1..n, then the new states. The update formulas are the ONNX spec's, in
// float32 (float64 for float64 tensors).
#include <cmath>

#include "Families.h"
#include "IndexMath.h"
#include "kiln/ops/Helpers.h"

namespace kiln::ops {
namespace {

using namespace ir;

enum class Optimizer { Adagrad, Momentum, Adam };

// How many tensor groups follow R and T: X, G and one (Adagrad, Momentum) or two (Adam) states.
int group_count(Optimizer op) {
  return op == Optimizer::Adam ? 4 : 3;
}

Expr scalar(const OpContext& ctx, int i, const char* what, Type acc) {
  const te::Tensor& t = ctx.input(i);
  auto n = as_const_int(product(t.shape()));
  if (!n || *n != 1)
    ctx.fail("input {} ({}) {} must hold one value", i, what, shape_text(t.shape()));
  return cast(acc, t(std::vector<Expr>(static_cast<size_t>(t.ndim()), Expr(0))));
}

std::vector<te::Tensor> build_optimizer(OpContext& ctx, Optimizer op) {
  const Node& node = ctx.node();
  const int groups = group_count(op);
  const int tensors = ctx.num_inputs() - 2;
  if (tensors < groups || tensors % groups != 0) {
    ctx.fail("has {} inputs; expected R, T and {} groups of n tensors (n >= 1)", ctx.num_inputs(),
             groups);
  }
  const int n = tensors / groups;
  const int outputs = (groups - 1) * n;  // new X, then the new states
  if (static_cast<int>(node.outputs.size()) != outputs) {
    ctx.fail("has {} outputs; expected {} (the {} updated tensors and their new states)",
             node.outputs.size(), outputs, n);
  }
  check_dtype(ctx, ctx.input(1), "input 1 (T)", {DType::Int64});
  const Type acc(ctx.input(2).dtype() == DType::Float64 ? DType::Float64 : DType::Float32);
  const Expr r = scalar(ctx, 0, "R", acc);
  const Expr t = scalar(ctx, 1, "T", acc);
  auto c = [&](double v) { return make_const(acc, v); };
  const double norm = node.attr_float("norm_coefficient", 0.0);
  std::vector<te::Tensor> results(static_cast<size_t>(outputs));
  for (int k = 0; k < n; ++k) {
    std::vector<te::Tensor> group;
    for (int g = 0; g < groups; ++g) group.push_back(ctx.input(2 + g * n + k));
    check_dtype(ctx, group[0], "X", kFloatTypes);
    check_same_dtype(ctx, group);
    for (int g = 1; g < groups; ++g) {
      if (group[g].ndim() != group[0].ndim()) {
        ctx.fail("tensor {} of group {} {} must have the shape of X {}", k, g,
                 shape_text(group[g].shape()), shape_text(group[0].shape()));
      }
    }
    const DType dtype = group[0].dtype();
    auto at = [&](int g, const std::vector<Expr>& i) { return cast(acc, group[g](i)); };
    auto g_reg = [&](const std::vector<Expr>& i) { return c(norm) * at(0, i) + at(1, i); };
    // state(i): the first new state; x_new(i, state) the updated X.
    std::function<Expr(const std::vector<Expr>&)> state, second_state;
    std::function<Expr(const std::vector<Expr>&, const Expr&, const Expr&)> x_new;
    if (op == Optimizer::Adagrad) {
      const double decay = node.attr_float("decay_factor", 0.0),
                   epsilon = node.attr_float("epsilon", 1e-6);
      const Expr rate = r / (c(1) + t * c(decay));
      state = [&, g_reg](const std::vector<Expr>& i) { return at(2, i) + g_reg(i) * g_reg(i); };
      x_new = [&, rate, epsilon, g_reg](const std::vector<Expr>& i, const Expr& h, const Expr&) {
        return at(0, i) - rate * g_reg(i) / (call(Intrinsic::Sqrt, h) + c(epsilon));
      };
    } else if (op == Optimizer::Momentum) {
      const double alpha = node.attr_float("alpha", 0.0), beta = node.attr_float("beta", 0.0);
      const std::string mode = node.attr_string("mode", "standard");
      if (mode != "standard" && mode != "nesterov")
        ctx.fail("attribute 'mode' is '{}'; expected standard or nesterov", mode);
      const Expr beta_adjusted = select(t > c(0), c(beta), c(1));
      state = [&, g_reg, alpha, beta_adjusted](const std::vector<Expr>& i) {
        return c(alpha) * at(2, i) + beta_adjusted * g_reg(i);
      };
      const bool nesterov = mode == "nesterov";
      x_new = [&, r, alpha, nesterov, g_reg](const std::vector<Expr>& i, const Expr& v,
                                             const Expr&) {
        return at(0, i) - r * (nesterov ? g_reg(i) + c(alpha) * v : v);
      };
    } else {
      const double alpha = node.attr_float("alpha", 0.9), beta = node.attr_float("beta", 0.999);
      const double epsilon = node.attr_float("epsilon", 1e-6),
                   post = node.attr_float("norm_coefficient_post", 0.0);
      // Bias correction after the first step: R sqrt(1 - beta^T) / (1 - alpha^T).
      const Expr rate = select(t > c(0),
                               r * call(Intrinsic::Sqrt, c(1) - call(Intrinsic::Pow, c(beta), t)) /
                                   (c(1) - call(Intrinsic::Pow, c(alpha), t)),
                               r);
      state = [&, g_reg, alpha](const std::vector<Expr>& i) {
        return c(alpha) * at(2, i) + c(1 - alpha) * g_reg(i);
      };
      second_state = [&, g_reg, beta](const std::vector<Expr>& i) {
        return c(beta) * at(3, i) + c(1 - beta) * g_reg(i) * g_reg(i);
      };
      x_new = [&, rate, epsilon, post](const std::vector<Expr>& i, const Expr& v, const Expr& h) {
        return c(1 - post) * (at(0, i) - rate * (v / (call(Intrinsic::Sqrt, h) + c(epsilon))));
      };
    }
    const std::vector<Expr> shape = group[0].shape();
    const te::Tensor new_state = te::compute(
        ctx.output_name(n + k), shape,
        [&](const std::vector<Expr>& i) { return downcast(state(i), dtype); }, node.describe());
    te::Tensor new_second;
    if (second_state) {
      new_second = te::compute(
          ctx.output_name(2 * n + k), shape,
          [&](const std::vector<Expr>& i) { return downcast(second_state(i), dtype); },
          node.describe());
    }
    // X's update reads the states in the accumulation type, recomputed (not the stored, rounded
    // ones).
    results[k] = te::compute(
        ctx.output_name(k), shape,
        [&](const std::vector<Expr>& i) {
          return downcast(x_new(i, state(i), second_state ? second_state(i) : Expr()), dtype);
        },
        node.describe());
    results[n + k] = new_state;
    if (second_state) results[2 * n + k] = new_second;
  }
  return results;
}

std::vector<te::Tensor> build_adagrad(OpContext& ctx) {
  return build_optimizer(ctx, Optimizer::Adagrad);
}
std::vector<te::Tensor> build_momentum(OpContext& ctx) {
  return build_optimizer(ctx, Optimizer::Momentum);
}
std::vector<te::Tensor> build_adam(OpContext& ctx) {
  return build_optimizer(ctx, Optimizer::Adam);
}

}  // namespace

void register_optimizers(OpTable& table) {
  table.add(OpKind::Adagrad, build_adagrad);
  table.add(OpKind::Momentum, build_momentum);
  table.add(OpKind::Adam, build_adam);
}

}  // namespace kiln::ops
