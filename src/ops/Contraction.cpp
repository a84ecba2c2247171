// Contractions: MatMul, Gemm, Conv, ConvTranspose. Each is a sum reduction; float16/bfloat16
// inputs accumulate into a float32 tensor and a second compute stores the result in the input
// type (with bias and scaling folded into that epilogue).
#include "Contraction.h"

#include "Families.h"
#include "IndexMath.h"
#include "Windows.h"
#include "kiln/ir/IRPrinter.h"
#include "kiln/ir/Simplify.h"
#include "kiln/ops/Helpers.h"

namespace kiln::ops {

using namespace ir;

Type accumulator_type(DType dtype) {
  return (dtype == DType::Float16 || dtype == DType::BFloat16) ? Type(DType::Float32) : Type(dtype);
}

namespace {

constexpr std::initializer_list<DType> kMatMulTypes = {DType::Float16, DType::BFloat16, DType::Float32,
                                                       DType::Float64, DType::Int32,   DType::Int64,
                                                       DType::UInt32,  DType::UInt64};

Expr acc_read(const te::Tensor& t, std::vector<Expr> indices, Type acc) { return cast(acc, t(std::move(indices))); }

// The accumulator (`body` over `shape`), then the epilogue mapping it to the output dtype. When
// the accumulator already has the output's dtype and there is no epilogue, it is the output.
using Epilogue = std::function<Expr(const Expr& acc, const std::vector<Expr>& indices)>;
te::Tensor reduce_then(OpContext& ctx, const std::vector<Expr>& shape, DType out_dtype, const te::ComputeFn& body,
                       const Epilogue& epilogue) {
  const std::vector<Expr> dims = simplified(shape);
  const Type acc = accumulator_type(out_dtype);
  if (acc == Type(out_dtype) && !epilogue) {
    return te::compute(ctx.output_name(0), dims, body, ctx.node().describe());
  }
  te::Tensor sum = te::compute(ctx.stage_name("acc"), dims, body, ctx.node().describe());
  return te::compute(
      ctx.output_name(0), dims,
      [&](const std::vector<Expr>& i) {
        Expr v = sum(i);
        if (epilogue) v = epilogue(v, i);
        return downcast(v, out_dtype);
      },
      ctx.node().describe());
}

// Broadcast batch index: `t_dims` right-aligned against `out` batch indices.
std::vector<Expr> batch_index(const std::vector<Expr>& t_dims, const std::vector<Expr>& out) {
  std::vector<Expr> idx;
  const size_t offset = out.size() - t_dims.size();
  for (size_t d = 0; d < t_dims.size(); ++d) idx.push_back(is_one(t_dims[d]) ? Expr(0) : out[d + offset]);
  return idx;
}

std::vector<te::Tensor> matmul(OpContext& ctx) {
  const te::Tensor& a = ctx.input(0);
  const te::Tensor& b = ctx.input(1);
  check_dtype(ctx, a, "input 0 (A)", kMatMulTypes);
  check_same_dtype(ctx, {a, b});
  if (a.ndim() == 0 || b.ndim() == 0) ctx.fail("MatMul inputs must have rank 1 or more, got {} and {}",
                                               shape_text(a.shape()), shape_text(b.shape()));
  const bool a_vec = a.ndim() == 1, b_vec = b.ndim() == 1;
  const Expr k_a = a.shape(a.ndim() - 1);
  const Expr k_b = b_vec ? b.shape(0) : b.shape(b.ndim() - 2);
  auto ka = as_const_int(k_a), kb = as_const_int(k_b);
  if (ka && kb && *ka != *kb) {
    ctx.fail("inner dimensions do not match: A {} has {} columns but B {} has {} rows", shape_text(a.shape()), *ka,
             shape_text(b.shape()), *kb);
  }
  const std::vector<Expr> a_batch(a.shape().begin(), a.shape().end() - (a_vec ? 1 : 2));
  const std::vector<Expr> b_batch(b.shape().begin(), b.shape().end() - (b_vec ? 1 : 2));
  std::vector<Expr> shape = broadcast_shape(ctx, {te::placeholder("A_batch", a.dtype(), a_batch),
                                                  te::placeholder("B_batch", b.dtype(), b_batch)});
  const size_t nb = shape.size();
  if (!a_vec) shape.push_back(a.shape(a.ndim() - 2));
  if (!b_vec) shape.push_back(b.shape(b.ndim() - 1));
  const Type acc = accumulator_type(a.dtype());
  const Expr k_extent = ka ? k_a : k_b;
  return {reduce_then(ctx, shape, a.dtype(), [&](const std::vector<Expr>& i) {
    IterVar k = te::reduce_axis(k_extent, ctx.stage_name("k"));
    std::vector<Expr> batch(i.begin(), i.begin() + nb);
    std::vector<Expr> ai = batch_index(a_batch, batch), bi = batch_index(b_batch, batch);
    if (!a_vec) ai.push_back(i[nb]);
    ai.push_back(k.var);
    bi.push_back(k.var);
    if (!b_vec) bi.push_back(i[nb + (a_vec ? 0 : 1)]);
    return te::sum(acc_read(a, ai, acc) * acc_read(b, bi, acc), {k});
  }, nullptr)};
}

std::vector<te::Tensor> gemm(OpContext& ctx) {
  const te::Tensor& a = ctx.input(0);
  const te::Tensor& b = ctx.input(1);
  check_dtype(ctx, a, "input 0 (A)", kMatMulTypes);
  check_same_dtype(ctx, {a, b});
  if (a.ndim() != 2 || b.ndim() != 2) ctx.fail("A {} and B {} must be matrices", shape_text(a.shape()), shape_text(b.shape()));
  const bool ta = ctx.node().attr_int("transA", 0) != 0, tb = ctx.node().attr_int("transB", 0) != 0;
  const double alpha = ctx.node().attr_float("alpha", 1.0), beta = ctx.node().attr_float("beta", 1.0);
  const Expr m = a.shape(ta ? 1 : 0), k_a = a.shape(ta ? 0 : 1), k_b = b.shape(tb ? 1 : 0), n = b.shape(tb ? 0 : 1);
  auto ka = as_const_int(k_a), kb = as_const_int(k_b);
  if (ka && kb && *ka != *kb) {
    ctx.fail("inner dimensions do not match: op(A) has {} columns but op(B) has {} rows (A {}, transA={}, B {}, "
             "transB={})", *ka, *kb, shape_text(a.shape()), ta, shape_text(b.shape()), tb);
  }
  const Type acc = accumulator_type(a.dtype());
  te::Tensor c;
  if (ctx.has_input(2)) {
    c = ctx.input(2);
    check_same_dtype(ctx, {a, b, c});
    te::Tensor out_like = te::placeholder("Y", a.dtype(), {m, n});
    broadcast_shape(ctx, {out_like, c});
  }
  Epilogue epilogue;
  if (alpha != 1.0 || (c.defined() && beta != 0.0) || acc != Type(a.dtype())) {
    epilogue = [&, alpha, beta](const Expr& s, const std::vector<Expr>& i) {
      Expr v = alpha == 1.0 ? s : s * make_const(acc, alpha);
      if (c.defined() && beta != 0.0) {
        Expr cv = cast(acc, broadcast_read(c, i));
        v = v + (beta == 1.0 ? cv : cv * make_const(acc, beta));
      }
      return v;
    };
  }
  return {reduce_then(ctx, {m, n}, a.dtype(), [&](const std::vector<Expr>& i) {
    IterVar k = te::reduce_axis(ka ? k_a : k_b, ctx.stage_name("k"));
    Expr av = ta ? acc_read(a, {k.var, i[0]}, acc) : acc_read(a, {i[0], k.var}, acc);
    Expr bv = tb ? acc_read(b, {i[1], k.var}, acc) : acc_read(b, {k.var, i[1]}, acc);
    return te::sum(av * bv, {k});
  }, epilogue)};
}

std::vector<int64_t> kernel_of(const OpContext& ctx, const te::Tensor& w) {
  std::vector<int64_t> kernel = ctx.node().attr_ints("kernel_shape", {});
  if (!kernel.empty()) return kernel;
  for (int d = 2; d < w.ndim(); ++d) {
    auto c = as_const_int(w.shape(d));
    if (!c) ctx.fail("the weight {} has a symbolic kernel size; give attribute 'kernel_shape'", shape_text(w.shape()));
    kernel.push_back(*c);
  }
  return kernel;
}

struct ConvOperands {
  te::Tensor x, w, bias;
  int64_t group;
  std::vector<Expr> spatial;
};

ConvOperands conv_operands(OpContext& ctx) {
  ConvOperands op{ctx.input(0), ctx.input(1), ctx.has_input(2) ? ctx.input(2) : te::Tensor(),
                  ctx.node().attr_int("group", 1), {}};
  check_dtype(ctx, op.x, "input 0 (X)", kFloatTypes);
  check_same_dtype(ctx, {op.x, op.w, op.bias});
  if (op.x.ndim() < 3 || op.w.ndim() != op.x.ndim()) {
    ctx.fail("X {} and W {} must have equal rank of 3 or more (N, C, spatial...)", shape_text(op.x.shape()),
             shape_text(op.w.shape()));
  }
  if (op.group <= 0) ctx.fail("attribute 'group' must be positive, got {}", op.group);
  op.spatial.assign(op.x.shape().begin() + 2, op.x.shape().end());
  return op;
}

std::vector<te::Tensor> conv(OpContext& ctx) {
  ConvOperands op = conv_operands(ctx);
  const te::Tensor &x = op.x, &w = op.w;
  const int64_t group = op.group;
  const Expr channels = x.shape(1), out_channels = w.shape(0), group_channels = w.shape(1);
  auto c = as_const_int(channels), cg = as_const_int(group_channels), m = as_const_int(out_channels);
  if (c && cg && *c != *cg * group) {
    ctx.fail("X {} has {} channels but W {} expects {} ({} per group x group {})", shape_text(x.shape()), *c,
             shape_text(w.shape()), *cg * group, *cg, group);
  }
  if (m && *m % group != 0) ctx.fail("W {} has {} output channels, not a multiple of group {}", shape_text(w.shape()), *m, group);
  if (op.bias.defined() && (op.bias.ndim() != 1 || (m && as_const_int(op.bias.shape(0)) && *as_const_int(op.bias.shape(0)) != *m))) {
    ctx.fail("bias B {} must have shape [{}]", shape_text(op.bias.shape()), to_string(out_channels));
  }
  const WindowGeometry g = window_geometry(ctx, op.spatial, kernel_of(ctx, w), false);
  std::vector<Expr> shape = {x.shape(0), out_channels};
  shape.insert(shape.end(), g.out.begin(), g.out.end());
  const Type acc = accumulator_type(x.dtype());
  const Expr per_group_out = simplify(out_channels / Expr(group));
  const size_t ns = op.spatial.size();
  Epilogue epilogue;
  if (op.bias.defined()) {
    epilogue = [&](const Expr& s, const std::vector<Expr>& i) { return s + cast(acc, op.bias({i[1]})); };
  }
  return {reduce_then(ctx, shape, x.dtype(), [&](const std::vector<Expr>& i) {
    IterVar rc = te::reduce_axis(group_channels, ctx.stage_name("c"));
    std::vector<IterVar> axes = {rc};
    Expr ch = group == 1 ? rc.var : (i[1] / per_group_out) * group_channels + rc.var;
    std::vector<Expr> xi = {i[0], ch}, wi = {i[1], rc.var};
    Expr cond = make_bool(true);
    for (size_t d = 0; d < ns; ++d) {
      IterVar k = te::reduce_axis(Expr(g.kernel[d]), ctx.stage_name("k" + std::to_string(d)));
      axes.push_back(k);
      Expr pos = window_position(g, static_cast<int>(d), i[2 + d], k.var);
      if (!is_zero(g.pad_begin[d]) || !is_zero(g.pad_end[d])) cond = cond && inside(pos, op.spatial[d]);
      xi.push_back(pos);
      wi.push_back(k.var);
    }
    return te::sum(acc_read(x, xi, acc) * acc_read(w, wi, acc), axes, simplify(cond));
  }, epilogue)};
}

std::vector<te::Tensor> conv_transpose(OpContext& ctx) {
  ConvOperands op = conv_operands(ctx);
  const te::Tensor &x = op.x, &w = op.w;
  const int64_t group = op.group;
  const size_t ns = op.spatial.size();
  const Expr channels = x.shape(1);
  if (auto c = as_const_int(channels), wc = as_const_int(w.shape(0)); c && wc && *c != *wc) {
    ctx.fail("X {} has {} channels but W {} expects {} (its dimension 0)", shape_text(x.shape()), *c,
             shape_text(w.shape()), *wc);
  }
  const Node& node = ctx.node();
  const std::vector<int64_t> kernel = kernel_of(ctx, w);
  const std::vector<int64_t> strides = node.attr_ints("strides", std::vector<int64_t>(ns, 1));
  const std::vector<int64_t> dilations = node.attr_ints("dilations", std::vector<int64_t>(ns, 1));
  const std::vector<int64_t> out_pad = node.attr_ints("output_padding", std::vector<int64_t>(ns, 0));
  std::vector<int64_t> output_shape = node.attr_ints("output_shape", {});
  if (output_shape.size() == ns + 2) output_shape.erase(output_shape.begin(), output_shape.begin() + 2);
  const std::string auto_pad = node.attr_string("auto_pad", "NOTSET");
  std::vector<int64_t> pads = node.attr_ints("pads", std::vector<int64_t>(2 * ns, 0));
  if (kernel.size() != ns || strides.size() != ns || dilations.size() != ns || out_pad.size() != ns ||
      pads.size() != 2 * ns || (!output_shape.empty() && output_shape.size() != ns)) {
    ctx.fail("kernel_shape, strides, dilations, output_padding, output_shape need {} entries and pads {}", ns, 2 * ns);
  }
  std::vector<Expr> pad_begin, out;
  for (size_t d = 0; d < ns; ++d) {
    const Expr full = (op.spatial[d] - 1) * Expr(strides[d]) + Expr(out_pad[d] + (kernel[d] - 1) * dilations[d] + 1);
    if (!output_shape.empty() || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      Expr o = output_shape.empty() ? op.spatial[d] * Expr(strides[d]) : Expr(output_shape[d]);
      Expr total = full - o;
      Expr half = floor_div(total, Expr(2));
      pad_begin.push_back(simplify(auto_pad == "SAME_UPPER" ? half : total - half));
      out.push_back(simplify(o));
    } else {
      pad_begin.push_back(Expr(pads[d]));
      out.push_back(simplify(full - Expr(pads[d] + pads[d + ns])));
    }
  }
  const Expr per_group_out = w.shape(1), per_group_in = simplify(channels / Expr(group));
  std::vector<Expr> shape = {x.shape(0), simplify(per_group_out * Expr(group))};
  shape.insert(shape.end(), out.begin(), out.end());
  const Type acc = accumulator_type(x.dtype());
  Epilogue epilogue;
  if (op.bias.defined()) {
    epilogue = [&](const Expr& s, const std::vector<Expr>& i) { return s + cast(acc, op.bias({i[1]})); };
  }
  return {reduce_then(ctx, shape, x.dtype(), [&](const std::vector<Expr>& i) {
    IterVar rc = te::reduce_axis(per_group_in, ctx.stage_name("c"));
    std::vector<IterVar> axes = {rc};
    Expr ch = group == 1 ? rc.var : (i[1] / per_group_out) * per_group_in + rc.var;
    Expr oc = group == 1 ? i[1] : i[1] % per_group_out;
    std::vector<Expr> xi = {i[0], ch}, wi = {ch, oc};
    Expr cond = make_bool(true);
    for (size_t d = 0; d < ns; ++d) {
      IterVar k = te::reduce_axis(Expr(kernel[d]), ctx.stage_name("k" + std::to_string(d)));
      axes.push_back(k);
      // Output o receives input position p where p * stride - pad + k * dilation == o.
      Expr t = i[2 + d] + pad_begin[d] - k.var * Expr(dilations[d]);
      Expr p = strides[d] == 1 ? t : t / Expr(strides[d]);
      cond = cond && t >= 0 && p < op.spatial[d];
      if (strides[d] != 1) cond = cond && t % Expr(strides[d]) == 0;
      xi.push_back(p);
      wi.push_back(k.var);
    }
    return te::sum(acc_read(x, xi, acc) * acc_read(w, wi, acc), axes, simplify(cond));
  }, epilogue)};
}

}  // namespace

void register_contraction(OpTable& table) {
  table.add(OpKind::MatMul, matmul);
  table.add(OpKind::Gemm, gemm);
  table.add(OpKind::Conv, conv);
  table.add(OpKind::ConvTranspose, conv_transpose);
  register_pooling(table);
}

}  // namespace kiln::ops
