// Layout changes: the same elements in another arrangement (Transpose, Reshape, Flatten,
// Squeeze, Unsqueeze, DepthToSpace, SpaceToDepth). Each output element reads one input element.
#include <algorithm>

#include "DataMovement.h"
#include "IndexMath.h"
#include "kiln/ir/Equality.h"
#include "kiln/ir/IRPrinter.h"
#include "kiln/ir/Simplify.h"
#include "kiln/ops/Helpers.h"

namespace kiln::ops {
namespace {

using namespace ir;

te::Tensor make_output(OpContext& ctx, std::vector<Expr> shape, const te::ComputeFn& fn) {
  return te::compute(ctx.output_name(0), simplified(std::move(shape)), fn, ctx.node().describe());
}

// Reads `x` at the row-major position that `indices` has in `out_shape` (same element count).
Expr read_reshaped(const te::Tensor& x, const std::vector<Expr>& indices, const std::vector<Expr>& out_shape) {
  if (x.ndim() == static_cast<int>(indices.size())) {
    bool same = true;
    for (int d = 0; d < x.ndim() && same; ++d) same = structurally_equal(simplify(x.shape(d)), simplify(out_shape[d]));
    if (same) return x(indices);
  }
  return x(unflatten_index(flatten_index(indices, out_shape), x.shape()));
}

std::vector<te::Tensor> transpose(OpContext& ctx) {
  const te::Tensor& x = ctx.input(0);
  const int rank = x.ndim();
  std::vector<int64_t> perm = ctx.node().attr_ints("perm", {});
  if (perm.empty()) {
    for (int d = rank - 1; d >= 0; --d) perm.push_back(d);
  }
  if (static_cast<int>(perm.size()) != rank) {
    ctx.fail("attribute 'perm' has {} entries but the input has rank {}", perm.size(), rank);
  }
  std::vector<bool> seen(rank, false);
  std::vector<Expr> shape;
  for (int64_t& p : perm) {
    p = normalize_axis(ctx, p, rank, "attribute 'perm' entry");
    if (seen[p]) ctx.fail("attribute 'perm' names axis {} twice; expected a permutation of 0..{}", p, rank - 1);
    seen[p] = true;
    shape.push_back(x.shape(static_cast<int>(p)));
  }
  return {make_output(ctx, shape, [&](const std::vector<Expr>& i) {
    std::vector<Expr> in(rank);
    for (int d = 0; d < rank; ++d) in[perm[d]] = i[d];
    return x(in);
  })};
}

// Splits a product into constant and symbolic factors, for cancelling dims in Reshape's -1.
void factors(const Expr& e, int64_t& constant, std::vector<Expr>& symbolic) {
  if (auto c = as_const_int(e)) {
    constant *= *c;
  } else if (const Mul* m = e.as<Mul>()) {
    factors(m->a, constant, symbolic);
    factors(m->b, constant, symbolic);
  } else {
    symbolic.push_back(e);
  }
}

// The dim that makes `known` hold as many elements as `total`: total / product(known), with
// symbolic factors cancelled (batch * seq * 64 / 64 is batch * seq).
std::optional<Expr> infer_dim(const std::vector<Expr>& input_dims, const std::vector<Expr>& known) {
  int64_t in_const = 1, out_const = 1;
  std::vector<Expr> in_sym, out_sym;
  for (const Expr& d : input_dims) factors(simplify(d), in_const, in_sym);
  for (const Expr& d : known) factors(simplify(d), out_const, out_sym);
  for (auto it = out_sym.begin(); it != out_sym.end();) {
    auto match = std::find_if(in_sym.begin(), in_sym.end(), [&](const Expr& e) { return structurally_equal(e, *it); });
    if (match == in_sym.end()) {
      ++it;
      continue;
    }
    in_sym.erase(match);
    it = out_sym.erase(it);
  }
  if (out_const == 0) return std::nullopt;
  Expr dim;
  if (in_const % out_const == 0) {
    dim = Expr(in_const / out_const);
    for (const Expr& s : in_sym) dim = is_one(dim) ? s : dim * s;
    if (!out_sym.empty()) dim = dim / product(out_sym);
  } else {
    if (in_sym.empty() && out_sym.empty()) return std::nullopt;
    dim = product(input_dims) / product(known);
  }
  return simplify(dim);
}

std::vector<te::Tensor> reshape(OpContext& ctx) {
  const te::Tensor& x = ctx.input(0);
  if (ctx.opset() < 5) ctx.unsupported("Reshape before opset 5 (shape attribute) is not supported");
  const std::vector<Expr>& target = ctx.known_values(1, "shape");
  const bool allow_zero = ctx.node().attr_int("allowzero", 0) != 0;
  std::vector<Expr> shape;
  int infer_at = -1;
  for (size_t k = 0; k < target.size(); ++k) {
    Expr d = cast(kIndexType, target[k]);
    auto c = as_const_int(d);
    if (c && *c == -1) {
      if (infer_at >= 0) ctx.fail("shape {} has more than one -1 dimension", shape_text(target));
      infer_at = static_cast<int>(k);
    } else if (c && *c == 0 && !allow_zero) {
      if (static_cast<int>(k) >= x.ndim()) {
        ctx.fail("shape {} copies dimension {} (0) but the input {} has rank {}", shape_text(target), k,
                 shape_text(x.shape()), x.ndim());
      }
      d = x.shape(static_cast<int>(k));
    } else if (c && *c < 0) {
      ctx.fail("shape {} has the negative dimension {} (only -1 is allowed)", shape_text(target), *c);
    }
    shape.push_back(d);
  }
  if (infer_at >= 0 && allow_zero) {
    for (const Expr& d : shape) {
      if (is_zero(d)) ctx.fail("shape {} has both -1 and 0 with allowzero=1", shape_text(target));
    }
  }
  const Expr total = product(x.shape());
  if (infer_at >= 0) {
    std::vector<Expr> known;
    for (int k = 0; k < static_cast<int>(shape.size()); ++k) {
      if (k != infer_at) known.push_back(shape[k]);
    }
    auto dim = infer_dim(x.shape(), known);
    if (!dim) {
      ctx.fail("cannot reshape {} ({} elements) into {}: the element count is not a multiple of {}",
               shape_text(x.shape()), to_string(total), shape_text(target), to_string(product(known)));
    }
    shape[infer_at] = *dim;
  }
  auto in_n = as_const_int(total), out_n = as_const_int(product(shape));
  if (in_n && out_n && *in_n != *out_n) {
    ctx.fail("cannot reshape {} ({} elements) into {} ({} elements)", shape_text(x.shape()), *in_n,
             shape_text(simplified(shape)), *out_n);
  }
  shape = simplified(shape);
  return {make_output(ctx, shape, [&](const std::vector<Expr>& i) { return read_reshaped(x, i, shape); })};
}

std::vector<te::Tensor> flatten(OpContext& ctx) {
  const te::Tensor& x = ctx.input(0);
  const int rank = x.ndim();
  int64_t axis = ctx.node().attr_int("axis", 1);
  if (axis < -rank || axis > rank) {
    ctx.fail("attribute 'axis' {} is out of range for a tensor of rank {} (expected [{}, {}])", axis, rank, -rank, rank);
  }
  if (axis < 0) axis += rank;
  const std::vector<Expr>& dims = x.shape();
  std::vector<Expr> shape = {product({dims.begin(), dims.begin() + axis}), product({dims.begin() + axis, dims.end()})};
  return {make_output(ctx, shape, [&](const std::vector<Expr>& i) { return read_reshaped(x, i, shape); })};
}

// Axes from the attribute (before opset 13) or input 1 (from opset 13); empty when absent.
std::vector<int64_t> axes_argument(OpContext& ctx) {
  if (ctx.opset() < 13) return ctx.node().attr_ints("axes", {});
  if (!ctx.has_input(1)) return {};
  return ctx.constant_ints(1, "axes");
}

std::vector<te::Tensor> squeeze(OpContext& ctx) {
  const te::Tensor& x = ctx.input(0);
  const int rank = x.ndim();
  std::vector<bool> drop(rank, false);
  std::vector<int64_t> axes = axes_argument(ctx);
  if (axes.empty()) {
    for (int d = 0; d < rank; ++d) {
      auto c = as_const_int(x.shape(d));
      if (!c) {
        ctx.unsupported("Squeeze without axes on the symbolic dimension {} of {}", d, shape_text(x.shape()));
      }
      drop[d] = *c == 1;
    }
  }
  for (int64_t a : axes) {
    const int d = normalize_axis(ctx, a, rank, "axis");
    auto c = as_const_int(x.shape(d));
    if (c && *c != 1) ctx.fail("cannot squeeze axis {} of {}: its size is {}, not 1", d, shape_text(x.shape()), *c);
    drop[d] = true;
  }
  std::vector<Expr> shape;
  for (int d = 0; d < rank; ++d) {
    if (!drop[d]) shape.push_back(x.shape(d));
  }
  return {make_output(ctx, shape, [&](const std::vector<Expr>& i) {
    std::vector<Expr> in;
    size_t k = 0;
    for (int d = 0; d < rank; ++d) in.push_back(drop[d] ? Expr(0) : i[k++]);
    return x(in);
  })};
}

std::vector<te::Tensor> unsqueeze(OpContext& ctx) {
  const te::Tensor& x = ctx.input(0);
  std::vector<int64_t> axes = axes_argument(ctx);
  if (axes.empty()) ctx.fail("Unsqueeze needs axes ('axes' attribute before opset 13, input 1 from opset 13)");
  const int out_rank = x.ndim() + static_cast<int>(axes.size());
  std::vector<bool> added(out_rank, false);
  for (int64_t a : axes) {
    const int d = normalize_axis(ctx, a, out_rank, "axis");
    if (added[d]) ctx.fail("axes name output axis {} twice", d);
    added[d] = true;
  }
  std::vector<Expr> shape;
  int k = 0;
  for (int d = 0; d < out_rank; ++d) shape.push_back(added[d] ? Expr(1) : x.shape(k++));
  return {make_output(ctx, shape, [&](const std::vector<Expr>& i) {
    std::vector<Expr> in;
    for (int d = 0; d < out_rank; ++d) {
      if (!added[d]) in.push_back(i[d]);
    }
    return x(in);
  })};
}

int64_t blocksize(OpContext& ctx) {
  const int64_t b = ctx.node().attr_int("blocksize", 0);
  if (b <= 0) ctx.fail("attribute 'blocksize' must be positive, got {}", b);
  return b;
}

std::vector<te::Tensor> depth_to_space(OpContext& ctx) {
  const te::Tensor& x = ctx.input(0);
  if (x.ndim() != 4) ctx.fail("input must have rank 4 (N, C, H, W), got {}", shape_text(x.shape()));
  const int64_t b = blocksize(ctx);
  const std::string mode = ctx.node().attr_string("mode", "DCR");
  if (mode != "DCR" && mode != "CRD") ctx.fail("attribute 'mode' is '{}', expected DCR or CRD", mode);
  const bool dcr = mode == "DCR";
  if (auto c = as_const_int(x.shape(1)); c && *c % (b * b) != 0) {
    ctx.fail("channels {} are not a multiple of blocksize^2 = {}", *c, b * b);
  }
  const Expr channels = simplify(x.shape(1) / Expr(b * b));
  std::vector<Expr> shape = {x.shape(0), channels, x.shape(2) * Expr(b), x.shape(3) * Expr(b)};
  return {make_output(ctx, shape, [&](const std::vector<Expr>& i) {
    Expr bh = i[2] % Expr(b), bw = i[3] % Expr(b);
    Expr c = dcr ? (bh * Expr(b) + bw) * channels + i[1] : i[1] * Expr(b * b) + bh * Expr(b) + bw;
    return x({i[0], c, i[2] / Expr(b), i[3] / Expr(b)});
  })};
}

std::vector<te::Tensor> space_to_depth(OpContext& ctx) {
  const te::Tensor& x = ctx.input(0);
  if (x.ndim() != 4) ctx.fail("input must have rank 4 (N, C, H, W), got {}", shape_text(x.shape()));
  const int64_t b = blocksize(ctx);
  for (int d = 2; d < 4; ++d) {
    if (auto c = as_const_int(x.shape(d)); c && *c % b != 0) {
      ctx.fail("spatial dimension {} ({}) is not a multiple of blocksize {}", d, *c, b);
    }
  }
  // Opset 28 adds `mode` (as DepthToSpace's): DCR (default) puts the block offset outermost in
  // the output channel, CRD the input channel.
  const std::string mode = ctx.opset() >= 28 ? ctx.node().attr_string("mode", "DCR") : "DCR";
  if (mode != "DCR" && mode != "CRD") ctx.fail("attribute 'mode' is '{}', expected DCR or CRD", mode);
  const bool dcr = mode == "DCR";
  const Expr channels = x.shape(1);
  std::vector<Expr> shape = {x.shape(0), channels * Expr(b * b), x.shape(2) / Expr(b), x.shape(3) / Expr(b)};
  return {make_output(ctx, shape, [&](const std::vector<Expr>& i) {
    Expr block = dcr ? i[1] / channels : i[1] % Expr(b * b);
    Expr c = dcr ? i[1] % channels : i[1] / Expr(b * b);
    return x({i[0], c, i[2] * Expr(b) + block / Expr(b), i[3] * Expr(b) + block % Expr(b)});
  })};
}

}  // namespace

void register_layout_ops(OpTable& table) {
  table.add(OpKind::Transpose, transpose);
  table.add(OpKind::Reshape, reshape);
  table.add(OpKind::Flatten, flatten);
  table.add(OpKind::Squeeze, squeeze);
  table.add(OpKind::Unsqueeze, unsqueeze);
  table.add(OpKind::DepthToSpace, depth_to_space);
  table.add(OpKind::SpaceToDepth, space_to_depth);
}

}  // namespace kiln::ops
