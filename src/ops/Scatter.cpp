// Scatters and the gathers that mirror them: ScatterElements (and opset 9's Scatter), ScatterND,
// TensorScatter, GatherND, OneHot, Compress. A scatter is written from the output's side: element i
// of the result reduces the updates that land on i (a conditional reduction over the updates,
// O(output x updates)); with reduction 'none' the last such update wins (the largest update
// position), as in the ONNX reference. Data-dependent indices are normalized (negative counts from
// the end) and clamped, so that generated code never reads outside a tensor.
#include "Families.h"
#include "IndexMath.h"
#include "ReduceStages.h"
#include "kiln/ir/Simplify.h"
#include "kiln/ops/Helpers.h"

namespace kiln::ops {
namespace {

using namespace ir;

enum class ScatterReduction { None, Add, Mul, Max, Min };

ScatterReduction parse_reduction(const OpContext& ctx) {
  const std::string r = ctx.node().attr_string("reduction", "none");
  if (r == "none") return ScatterReduction::None;
  if (r == "add") return ScatterReduction::Add;
  if (r == "mul") return ScatterReduction::Mul;
  if (r == "max") return ScatterReduction::Max;
  if (r == "min") return ScatterReduction::Min;
  ctx.fail("attribute 'reduction' is '{}', expected none, add, mul, max or min", r);
}

Expr normalized(const Expr& raw, const Expr& dim) {
  const Expr v = cast(kIndexType, raw);
  return select(v < 0, v + dim, v);
}

te::Tensor make_output(const OpContext& ctx, int output, std::vector<Expr> shape, const te::ComputeFn& fn) {
  return te::compute(ctx.output_name(output), simplified(std::move(shape)), fn, ctx.node().describe());
}

// One reduction stage over the update positions `axes` (extents `extents`), per output element.
te::Tensor scatter_stage(const OpContext& ctx, const std::string& name, const std::vector<Expr>& out_shape,
                         const std::vector<Expr>& extents, ReduceKind kind,
                         const std::function<Expr(const std::vector<Expr>& i, const std::vector<Expr>& u)>& source,
                         const std::function<Expr(const std::vector<Expr>& i, const std::vector<Expr>& u)>& cond) {
  return te::compute(
      name, out_shape,
      [&](const std::vector<Expr>& i) {
        std::vector<IterVar> axes;
        std::vector<Expr> u;
        for (size_t k = 0; k < extents.size(); ++k) {
          axes.push_back(te::reduce_axis(extents[k], name + "_u" + std::to_string(k)));
          u.push_back(axes.back().var);
        }
        return Reduce::make(kind, source(i, u), axes, cond(i, u));
      },
      ctx.node().describe());
}

// Combines data with the updates landing on each element: `cond(i, u)` says whether the update
// at position u (extents `extents`) lands on output element i, `update_at(i, u)` reads it.
std::vector<te::Tensor> finish_scatter(
    const OpContext& ctx, const te::Tensor& data, ScatterReduction reduction,
    const std::vector<Expr>& extents,
    const std::function<Expr(const std::vector<Expr>& i, const std::vector<Expr>& u)>& cond,
    const std::function<Expr(const std::vector<Expr>& i, const std::vector<Expr>& u)>& update_at) {
  const std::vector<Expr>& shape = data.shape();
  const Type acc = accumulate_type(data.dtype());
  if (reduction == ScatterReduction::None) {
    // The last landing update: the largest flat update position (-1 when none lands).
    const te::Tensor last = scatter_stage(
        ctx, ctx.stage_name("last"), shape, extents, ReduceKind::Max,
        [&](const std::vector<Expr>&, const std::vector<Expr>& u) { return flatten_index(u, extents); }, cond);
    return {make_output(ctx, 0, shape, [&](const std::vector<Expr>& i) {
      const Expr p = last(i);
      const std::vector<Expr> u = unflatten_index(max(p, Expr(0)), extents);
      return select(p >= 0, update_at(i, u), data(i));
    })};
  }
  ReduceKind kind = ReduceKind::Sum;
  if (reduction == ScatterReduction::Mul) kind = ReduceKind::Prod;
  if (reduction == ScatterReduction::Max) kind = ReduceKind::Max;
  if (reduction == ScatterReduction::Min) kind = ReduceKind::Min;
  const te::Tensor combined = scatter_stage(
      ctx, ctx.stage_name("combine"), shape, extents, kind,
      [&](const std::vector<Expr>& i, const std::vector<Expr>& u) { return cast(acc, update_at(i, u)); }, cond);
  return {make_output(ctx, 0, shape, [&](const std::vector<Expr>& i) {
    const Expr d = cast(acc, data(i));
    const Expr c = combined(i);
    Expr r;
    switch (reduction) {
      case ScatterReduction::Add: r = d + c; break;
      case ScatterReduction::Mul: r = d * c; break;
      case ScatterReduction::Max: r = max(d, c); break;
      case ScatterReduction::Min: r = min(d, c); break;
      case ScatterReduction::None: break;
    }
    return cast(Type(data.dtype()), r);
  })};
}

std::vector<te::Tensor> scatter_elements(OpContext& ctx) {
  const te::Tensor& data = ctx.input(0);
  const te::Tensor& indices = ctx.input(1);
  const te::Tensor& updates = ctx.input(2);
  check_dtype(ctx, indices, "input 1 (indices)", {DType::Int32, DType::Int64});
  check_same_dtype(ctx, {data, updates});
  const int rank = data.ndim();
  if (indices.ndim() != rank || updates.ndim() != rank) {
    ctx.fail("data {}, indices {} and updates {} must have the same rank", shape_text(data.shape()),
             shape_text(indices.shape()), shape_text(updates.shape()));
  }
  const int axis = normalize_axis(ctx, ctx.node().attr_int("axis", 0), rank, "attribute 'axis'");
  const ScatterReduction reduction = ctx.node().op == OpKind::Scatter ? ScatterReduction::None : parse_reduction(ctx);
  // The updates landing on i: those at (i with dim `axis` = k) whose index is i[axis].
  const std::vector<Expr> extents = {indices.shape(axis)};
  auto update_index = [&](const std::vector<Expr>& i, const Expr& k) {
    std::vector<Expr> u = i;
    for (int d = 0; d < rank; ++d) u[d] = d == axis ? k : clamp(i[d], Expr(0), indices.shape(d) - 1);
    return u;
  };
  auto cond = [&](const std::vector<Expr>& i, const std::vector<Expr>& u) {
    Expr c = normalized(indices(update_index(i, u[0])), data.shape(axis)) == i[axis];
    for (int d = 0; d < rank; ++d) {
      if (d != axis && !is_zero(simplify(indices.shape(d) - data.shape(d)))) c = c && i[d] < indices.shape(d);
    }
    return c;
  };
  auto update_at = [&](const std::vector<Expr>& i, const std::vector<Expr>& u) {
    return updates(update_index(i, u[0]));
  };
  return finish_scatter(ctx, data, reduction, extents, cond, update_at);
}

std::vector<te::Tensor> scatter_nd(OpContext& ctx) {
  const te::Tensor& data = ctx.input(0);
  const te::Tensor& indices = ctx.input(1);
  const te::Tensor& updates = ctx.input(2);
  check_dtype(ctx, indices, "input 1 (indices)", {DType::Int64});
  check_same_dtype(ctx, {data, updates});
  if (indices.ndim() < 1) ctx.fail("indices must have rank 1 or more");
  auto k_dim = as_const_int(indices.shape(indices.ndim() - 1));
  if (!k_dim) ctx.unsupported("the last dimension of indices {} is symbolic", shape_text(indices.shape()));
  const int k = static_cast<int>(*k_dim);
  const int rank = data.ndim();
  if (k > rank) ctx.fail("indices {} index {} dims, but data {} has rank {}", shape_text(indices.shape()), k,
                         shape_text(data.shape()), rank);
  const int q = indices.ndim();
  if (updates.ndim() != q - 1 + rank - k) {
    ctx.fail("updates {} must have rank {} (indices' rank - 1 + data's rank - {}), got {}", shape_text(updates.shape()),
             q - 1 + rank - k, k, updates.ndim());
  }
  const ScatterReduction reduction = parse_reduction(ctx);
  const std::vector<Expr> extents(indices.shape().begin(), indices.shape().end() - 1);
  auto cond = [&](const std::vector<Expr>& i, const std::vector<Expr>& u) {
    Expr c = make_bool(true);
    for (int t = 0; t < k; ++t) {
      std::vector<Expr> at = u;
      at.push_back(Expr(t));
      c = c && normalized(indices(at), data.shape(t)) == i[t];
    }
    return c;
  };
  auto update_at = [&](const std::vector<Expr>& i, const std::vector<Expr>& u) {
    std::vector<Expr> at = u;
    at.insert(at.end(), i.begin() + k, i.end());
    return updates(at);
  };
  return finish_scatter(ctx, data, reduction, extents, cond, update_at);
}

std::vector<te::Tensor> gather_nd(OpContext& ctx) {
  const te::Tensor& data = ctx.input(0);
  const te::Tensor& indices = ctx.input(1);
  check_dtype(ctx, indices, "input 1 (indices)", {DType::Int64});
  const int b = static_cast<int>(ctx.node().attr_int("batch_dims", 0));
  const int q = indices.ndim(), r = data.ndim();
  if (q < 1) ctx.fail("indices must have rank 1 or more");
  if (b < 0 || b >= std::min(q, r)) ctx.fail("attribute 'batch_dims' is {}, expected [0, {})", b, std::min(q, r));
  auto k_dim = as_const_int(indices.shape(q - 1));
  if (!k_dim) ctx.unsupported("the last dimension of indices {} is symbolic", shape_text(indices.shape()));
  const int k = static_cast<int>(*k_dim);
  if (k < 1 || k > r - b) {
    ctx.fail("indices {} index {} dims, expected 1 to {} (data {} minus batch_dims {})", shape_text(indices.shape()), k,
             r - b, shape_text(data.shape()), b);
  }
  std::vector<Expr> shape(indices.shape().begin(), indices.shape().end() - 1);
  shape.insert(shape.end(), data.shape().begin() + b + k, data.shape().end());
  return {make_output(ctx, 0, shape, [&](const std::vector<Expr>& i) {
    std::vector<Expr> at(i.begin(), i.begin() + (q - 1));
    std::vector<Expr> in(i.begin(), i.begin() + b);
    for (int t = 0; t < k; ++t) {
      std::vector<Expr> idx = at;
      idx.push_back(Expr(t));
      in.push_back(clamp(normalized(indices(idx), data.shape(b + t)), Expr(0), data.shape(b + t) - 1));
    }
    in.insert(in.end(), i.begin() + (q - 1), i.end());
    return data(in);
  })};
}

std::vector<te::Tensor> one_hot(OpContext& ctx) {
  const te::Tensor& indices = ctx.input(0);
  const te::Tensor& values = ctx.input(2);
  const std::vector<double> depth_values = ctx.constant_floats(1, "depth");
  if (depth_values.size() != 1) ctx.fail("input 1 ('depth') must hold one value, got {}", depth_values.size());
  const int64_t depth = static_cast<int64_t>(depth_values[0]);
  if (depth < 1) ctx.fail("input 1 ('depth') is {}, expected a positive number", depth_values[0]);
  if (auto n = as_const_int(product(values.shape())); !n || *n != 2) {
    ctx.fail("input 2 ('values') {} must hold two values: [off_value, on_value]", shape_text(values.shape()));
  }
  const int rank = indices.ndim() + 1;
  const int axis = normalize_axis(ctx, ctx.node().attr_int("axis", -1), rank, "attribute 'axis'");
  std::vector<Expr> shape = indices.shape();
  shape.insert(shape.begin() + axis, Expr(depth));
  auto value = [&](int k) {
    std::vector<Expr> at = unflatten_index(Expr(k), values.shape());
    return values(at);
  };
  return {make_output(ctx, 0, shape, [&](const std::vector<Expr>& i) {
    std::vector<Expr> at = i;
    at.erase(at.begin() + axis);
    Expr raw = indices(at);
    if (raw.type().is_float()) raw = call(Intrinsic::Trunc, raw);
    return select(normalized(raw, Expr(depth)) == i[axis], value(1), value(0));
  })};
}

// Compress: the selected slices along `axis` (of the flattened input without one). The number
// selected decides the output shape, so the condition must be known when compiling. The k-th
// output slice reads input slice j = the number of positions whose running count of true
// conditions is <= k.
std::vector<te::Tensor> compress(OpContext& ctx) {
  const te::Tensor& input = ctx.input(0);
  const te::Tensor& condition = ctx.input(1);
  if (!ctx.is_known(1)) {
    ctx.unsupported("the condition (input 1) is not known when compiling; the output's size depends on its values");
  }
  const std::vector<int64_t> cond_values = ctx.constant_ints(1, "condition");
  te::Tensor x = input;
  int axis = 0;
  if (ctx.node().has_attribute("axis")) {
    axis = normalize_axis(ctx, ctx.node().attr_int("axis", 0), input.ndim(), "attribute 'axis'");
  } else {
    const Expr n = product(input.shape());
    x = te::compute(ctx.stage_name("flat"), {n}, [&](const std::vector<Expr>& i) {
      return input(unflatten_index(i[0], input.shape()));
    });
  }
  const Expr dim = x.shape(axis);
  auto n = as_const_int(dim);
  if (!n) ctx.unsupported("compressing dimension {} of {}, which is symbolic", axis, shape_text(x.shape()));
  if (static_cast<int64_t>(cond_values.size()) > *n) {
    ctx.fail("the condition has {} values but the compressed dimension has {}", cond_values.size(), *n);
  }
  int64_t count = 0;
  for (int64_t c : cond_values) count += c != 0 ? 1 : 0;
  const Expr len(static_cast<int64_t>(cond_values.size()));
  const IterVar m = te::reduce_axis(len, ctx.stage_name("m"));
  const te::Tensor running = te::compute(ctx.stage_name("running"), {len}, [&](const std::vector<Expr>& j) {
    return te::sum(cast(kIndexType, cast(Type(DType::Bool), condition({m.var}))), {m}, m.var <= j[0]);
  });
  const IterVar jv = te::reduce_axis(len, ctx.stage_name("j"));
  const te::Tensor source = te::compute(ctx.stage_name("source"), {Expr(count)}, [&](const std::vector<Expr>& k) {
    return te::sum(Expr(1), {jv}, running({jv.var}) <= k[0]);
  });
  std::vector<Expr> shape = x.shape();
  shape[axis] = Expr(count);
  return {make_output(ctx, 0, shape, [&](const std::vector<Expr>& i) {
    std::vector<Expr> in = i;
    in[axis] = clamp(source({i[axis]}), Expr(0), dim - 1);
    return x(in);
  })};
}

// TensorScatter (opset 24, a KV-cache write): present = past with update's `sequence_length`
// positions along `axis` written from write_indices[batch] on (modulo the cache length in
// 'circular' mode). Written from the output side: position j takes update[j - start] when that
// lies in the update.
std::vector<te::Tensor> tensor_scatter(OpContext& ctx) {
  const te::Tensor& past = ctx.input(0);
  const te::Tensor& update = ctx.input(1);
  check_same_dtype(ctx, {past, update});
  const std::string mode = ctx.node().attr_string("mode", "linear");
  if (mode != "linear" && mode != "circular")
    ctx.fail("attribute 'mode' is '{}'; expected linear or circular", mode);
  const int rank = past.ndim();
  if (update.ndim() != rank || rank < 2) {
    ctx.fail("past_cache {} and update {} must have one rank of at least 2",
             shape_text(past.shape()), shape_text(update.shape()));
  }
  const int axis = normalize_axis(ctx, ctx.node().attr_int("axis", -2), rank, "attribute 'axis'");
  if (axis == 0)
    ctx.fail("attribute 'axis' is 0, the batch axis; expected a sequence axis after it");
  const te::Tensor indices = ctx.has_input(2) ? ctx.input(2) : te::Tensor();
  if (indices.defined()) check_dtype(ctx, indices, "input 2 (write_indices)", {DType::Int64});
  const Expr capacity = past.shape(axis), length = update.shape(axis);
  return {make_output(ctx, 0, past.shape(), [&](const std::vector<Expr>& i) {
    const Expr start = indices.defined() ? cast(kIndexType, indices({i[0]})) : Expr(0);
    Expr k = i[axis] - start;
    if (mode == "circular") k = floor_mod(k, capacity);
    std::vector<Expr> at = i;
    at[axis] = clamp(k, Expr(0), length - 1);
    return select(k >= 0 && k < length, update(at), past(i));
  })};
}

}  // namespace

void register_scatter(OpTable& table) {
  table.add(OpKind::ScatterElements, scatter_elements);
  table.add(OpKind::Scatter, scatter_elements);
  table.add(OpKind::ScatterND, scatter_nd);
  table.add(OpKind::GatherND, gather_nd);
  table.add(OpKind::OneHot, one_hot);
  table.add(OpKind::Compress, compress);
  table.add(OpKind::TensorScatter, tensor_scatter);
}

}  // namespace kiln::ops
