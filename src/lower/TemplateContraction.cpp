#include "TemplateContraction.h"

#include <random>

#include "IndexDigits.h"
#include "kiln/ir/ExprUsesVar.h"
#include "kiln/ir/IRMutator.h"
#include "kiln/ir/IROperator.h"
#include "kiln/ir/IRPrinter.h"
#include "kiln/ir/IRVisitor.h"
#include "kiln/ir/Simplify.h"
#include "kiln/support/Error.h"
#include "kiln/te/Contraction.h"

namespace kiln {
namespace {

using namespace ir;
using Buffers = std::map<const te::TensorNode*, Buffer>;

constexpr size_t kMaxBatchRank = 4;  // kernels/gemm/gemm_problem.cuh

bool is_half(DType d) { return d == DType::Float16 || d == DType::BFloat16; }

// A factor the templates can read: a float16/bfloat16 tensor element widened to float32, or
// (TF32 allowed) a float32 tensor element.
const TensorRead* template_factor(const Expr& e, bool tf32) {
  if (const TensorRead* r = e.as<TensorRead>()) return tf32 && r->tensor->dtype == DType::Float32 ? r : nullptr;
  const Cast* c = e.as<Cast>();
  if (!c || c->type != Type(DType::Float32)) return nullptr;
  const TensorRead* r = c->value.as<TensorRead>();
  return r && is_half(r->tensor->dtype) ? r : nullptr;
}

Expr product(const std::vector<Expr>& extents) {
  Expr p = Expr(1);
  for (const Expr& e : extents) p = p * e;
  return simplify(p);
}

// The axes of a contraction stage by role; each side flattens its axes row-major.
struct Roles {
  std::vector<Expr> batch_vars, batch_ext, m_vars, m_ext, n_vars, n_ext, k_vars, k_ext;
  std::vector<Expr> all() const {
    std::vector<Expr> v = batch_vars;
    for (const auto* side : {&m_vars, &n_vars, &k_vars}) v.insert(v.end(), side->begin(), side->end());
    return v;
  }
  std::vector<Expr> all_extents() const {
    std::vector<Expr> e = batch_ext;
    for (const auto* side : {&m_ext, &n_ext, &k_ext}) e.insert(e.end(), side->begin(), side->end());
    return e;
  }
};

Roles roles_of(const te::Tensor& t, const te::Contraction& c) {
  Roles r;
  auto take = [&](const std::vector<int>& dims, std::vector<Expr>& vars, std::vector<Expr>& ext) {
    for (int d : dims) {
      vars.push_back(t->axes[d].var);
      ext.push_back(t.shape(d));
    }
  };
  take(c.batch_axes, r.batch_vars, r.batch_ext);
  take(c.m_axes, r.m_vars, r.m_ext);
  take(c.n_axes, r.n_vars, r.n_ext);
  for (const IterVar& k : t->body.as<Reduce>()->axes) {
    r.k_vars.push_back(k.var);
    r.k_ext.push_back(k.extent);
  }
  return r;
}

// Replaces each Variable by a value drawn for it (the same value for every use).
class RandomValues : public IRMutator {
 public:
  explicit RandomValues(uint64_t seed) : rng_(seed) {}
  using IRMutator::mutate;

 protected:
  Expr visit(const Variable* op, const Expr&) override {
    auto it = values_.find(op);
    if (it == values_.end()) it = values_.emplace(op, std::uniform_int_distribution<int64_t>(1, 1000)(rng_)).first;
    return Expr(it->second);
  }

 private:
  std::mt19937_64 rng_;
  std::map<const Variable*, int64_t> values_;
};

// Whether two index expressions of the size symbols are equal: by the simplifier, else by
// evaluating both at random values of their symbols (these are products and sums of symbols;
// polynomials that agree at eight random points up to 1000 are equal).
bool equal_for_all_symbols(const Expr& a, const Expr& b) {
  const Expr diff = simplify(a - b);
  if (is_zero(diff)) return true;
  for (uint64_t trial = 0; trial < 8; ++trial) {
    auto c = as_const_int(simplify(RandomValues(trial).mutate(diff)));
    if (!c || *c != 0) return false;
  }
  return true;
}

// An index expression as constant + sum_v coefficient_v * v over the axis variables, the
// coefficients free of them; nullopt when it is not affine in the axes (a division or remainder
// of an axis, a product of two axes).
struct LinearForm {
  Expr constant = Expr(0);
  std::map<const ExprNode*, Expr> coefficient;
};

// Whether `e` reads a tensor (a data-dependent index, such as a Gather's): then it is not a
// function of the size symbols alone, and the host cannot evaluate it.
class ReadsData : public IRVisitor {
 public:
  bool found = false;
  using IRVisitor::visit;

 protected:
  void visit(const TensorRead*) override { found = true; }
  void visit(const Load*) override { found = true; }
};

std::optional<LinearForm> linear_form(const Expr& e, const std::vector<Expr>& axes, const std::vector<Expr>& extents = {});

// x / d and x % d for a positive constant d, when x's form splits into a part whose coefficients
// are multiples of d and a remainder part that stays within [0, d) over the axes' ranges (each
// axis in [0, extent), extents known constants where the remainder needs them): a reshape's
// unflattening of a flattened index, e.g. (i * 2304 + h * 64 + d) % 2304 = h * 64 + d for h < 12,
// d < 64. nullopt otherwise.
std::optional<LinearForm> divide_form(const LinearForm& x, int64_t d, bool remainder, const std::vector<Expr>& axes,
                                      const std::vector<Expr>& extents) {
  const std::optional<int64_t> constant = as_const_int(simplify(x.constant));
  if (d <= 0 || !constant || *constant < 0) return std::nullopt;
  LinearForm high, low;
  high.constant = Expr(*constant / d);
  low.constant = Expr(*constant % d);
  int64_t low_max = *constant % d;
  for (const auto& [v, c] : x.coefficient) {
    const std::optional<int64_t> k = as_const_int(simplify(c));
    if (!k || *k < 0) return std::nullopt;
    if (*k % d == 0) {
      if (*k != 0) high.coefficient[v] = Expr(*k / d);
      continue;
    }
    std::optional<int64_t> extent;
    for (size_t a = 0; a < axes.size() && a < extents.size(); ++a)
      if (axes[a].get() == v) extent = as_const_int(simplify(extents[a]));
    if (!extent || *extent <= 0) return std::nullopt;
    low_max += *k * (*extent - 1);
    if (low_max >= d) return std::nullopt;
    low.coefficient[v] = Expr(*k);
  }
  return remainder ? low : high;
}

// `extents` (parallel to `axes`, optional): each axis ranges over [0, extent), which lets a division
// or remainder of an axis expression by a constant be affine (divide_form).
std::optional<LinearForm> linear_form(const Expr& e, const std::vector<Expr>& axes, const std::vector<Expr>& extents) {
  ReadsData data;
  data.visit(e);
  if (data.found) return std::nullopt;
  bool uses_axis = false;
  for (const Expr& v : axes) uses_axis = uses_axis || expr_uses_var(e, v);
  if (!uses_axis) return LinearForm{e, {}};
  if (e.as<Variable>()) return LinearForm{Expr(0), {{e.get(), Expr(1)}}};
  auto scale = [](LinearForm f, const Expr& by) {
    f.constant = f.constant * by;
    for (auto& [v, c] : f.coefficient) c = c * by;
    return f;
  };
  auto combine = [](LinearForm x, const LinearForm& y, bool subtract) {
    x.constant = subtract ? x.constant - y.constant : x.constant + y.constant;
    for (const auto& [v, c] : y.coefficient) {
      auto it = x.coefficient.find(v);
      const Expr term = subtract ? Expr(0) - c : c;
      if (it == x.coefficient.end()) x.coefficient[v] = term;
      else it->second = it->second + term;
    }
    return x;
  };
  if (const Add* add = e.as<Add>()) {
    auto x = linear_form(add->a, axes, extents), y = linear_form(add->b, axes, extents);
    if (!x || !y) return std::nullopt;
    return combine(*x, *y, false);
  }
  if (const Sub* sub = e.as<Sub>()) {
    auto x = linear_form(sub->a, axes, extents), y = linear_form(sub->b, axes, extents);
    if (!x || !y) return std::nullopt;
    return combine(*x, *y, true);
  }
  if (const Mul* mul = e.as<Mul>()) {
    auto x = linear_form(mul->a, axes, extents), y = linear_form(mul->b, axes, extents);
    if (!x || !y) return std::nullopt;
    if (x->coefficient.empty()) return scale(*y, x->constant);
    if (y->coefficient.empty()) return scale(*x, y->constant);
  }
  const Div* div = e.as<Div>();
  const Mod* mod = e.as<Mod>();
  if ((div || mod) && !extents.empty()) {
    const Expr& a = div ? div->a : mod->a;
    const std::optional<int64_t> d = as_const_int(simplify(div ? div->b : mod->b));
    auto x = linear_form(a, axes, extents);
    if (!x || !d) return std::nullopt;
    return divide_form(*x, *d, mod != nullptr, axes, extents);
  }
  return std::nullopt;
}

Expr coefficient_of(const LinearForm& f, const Expr& v) {
  auto it = f.coefficient.find(v.get());
  return it == f.coefficient.end() ? Expr(0) : simplify(it->second);
}

// The stride of a flattened side (vars row-major over their extents): the innermost one's, when
// each outer stride is the next inner stride times its extent. 0 for a side with no axes.
std::optional<Expr> side_stride(const std::vector<Expr>& strides, const std::vector<Expr>& extents) {
  if (strides.empty()) return Expr(0);
  for (size_t i = 0; i + 1 < strides.size(); ++i) {
    if (!equal_for_all_symbols(strides[i], strides[i + 1] * extents[i + 1])) return std::nullopt;
  }
  return strides.back();
}

// `factor` as a strided operand over (batch, mn side, k side), or nullopt.
std::optional<ContractionOperand> operand_of(const Expr& factor, const Roles& r, bool is_a, bool tf32,
                                            const Buffers& buffers) {
  const TensorRead* read = template_factor(factor, tf32);
  if (!read) return std::nullopt;
  auto it = buffers.find(read->tensor.get());
  if (it == buffers.end()) return std::nullopt;
  const Buffer& buffer = it->second;
  const auto flat = linear_form(simplify(buffer.flat_index(read->indices)), r.all(), r.all_extents());
  if (!flat) return std::nullopt;
  auto strides = [&](const std::vector<Expr>& vars) {
    std::vector<Expr> out;
    for (const Expr& v : vars) out.push_back(coefficient_of(*flat, v));
    return out;
  };
  const auto& mn_vars = is_a ? r.m_vars : r.n_vars;
  const auto& mn_ext = is_a ? r.m_ext : r.n_ext;
  auto stride_mn = side_stride(strides(mn_vars), mn_ext), stride_k = side_stride(strides(r.k_vars), r.k_ext);
  if (!stride_mn || !stride_k) return std::nullopt;
  return ContractionOperand{buffer, simplify(flat->constant), *stride_mn, *stride_k, strides(r.batch_vars), std::nullopt};
}

// A contraction stage the templates can compute, with its operands (b unused with w4).
struct Candidate {
  te::Contraction contraction;
  Roles roles;
  ContractionOperand a, b;
  std::optional<W4Weight> w4;
};

// kernels/quant/'s tiles: N a multiple of the GEMV's 16 rows, K of the 128-k step.
constexpr int64_t kW4RowMultiple = 16, kW4KMultiple = 128;
// Split-K partials of kernels/quant/ launch_linear_epilogue at most (kEpilogueSplitFloats).
constexpr int64_t kW4SplitFloats = int64_t(2 * 132) * 128 * 64;

// A kiln.QuantLinear accumulator (te::QuantLinearInfo) as a call of kernels/quant/, or why not
// (`why`). The kernels read x [M, K] row-major with float16/bfloat16 elements, and the weight,
// scales and tensor scale/zeros as function inputs: the GEMV requests weights before waiting for
// the previous kernel (programmatic dependent launch), so they must not be written by this
// function.
std::optional<Candidate> analyze_w4(const LoweringStage& s, const Buffers& buffers, std::string* why) {
  const te::QuantLinearInfo& q = *s.inlined->quant_linear;
  auto refuse = [&](const std::string& reason) -> std::optional<Candidate> {
    if (why) *why = reason;
    return std::nullopt;
  };
  if (q.format == te::QuantLinearFormat::MxFp4) {
    // The kernels fold an E8M0 block scale into one 16-bit multiplier (codes <= 128, checked by
    // quant::prepack on the host); a weight passed at run time is not checked, so no kernel.
    return refuse("MXFP4 weights: the 4-bit kernels take block scales up to 2^1 only, which is not checked at run time");
  }
  if (s.inlined->pattern != te::Pattern::Reduction) return refuse("not a reduction");
  auto c = te::as_contraction(s.inlined);
  if (!c || !c->batch_axes.empty() || c->n_axes.size() != 1) return refuse("not a plain [M, K] x [N, K] contraction");
  const TensorRead* rx = template_factor(c->a, false);
  if (!rx) return refuse("x is not a float16/bfloat16 tensor read");
  const DType dx = rx->tensor->dtype;
  Roles roles = roles_of(s.inlined, *c);
  auto a = operand_of(c->a, roles, true, false, buffers);
  const Expr N = product(roles.n_ext), K = product(roles.k_ext);
  if (!a || !is_zero(a->offset) || !is_one(a->stride_k) || !equal_for_all_symbols(a->stride_mn, K)) {
    return refuse("x is not read as a whole row-major [M, K] buffer");
  }
  const auto n = as_const_int(N), k = as_const_int(K);
  if (!n || !k || *n % kW4RowMultiple != 0 || *k % kW4KMultiple != 0) {
    return refuse("N = " + to_string(N) + ", K = " + to_string(K) + ": the 4-bit kernels need N a multiple of " +
                  std::to_string(kW4RowMultiple) + " and K of " + std::to_string(kW4KMultiple));
  }
  auto input = [&](const te::Tensor& t) -> std::optional<Buffer> {
    if (!t.defined() || !t.is_placeholder()) return std::nullopt;
    auto it = buffers.find(t.node().get());
    return it == buffers.end() ? std::nullopt : std::optional<Buffer>(it->second);
  };
  W4Weight w;
  w.format = q.format == te::QuantLinearFormat::NvFp4 ? W4Format::NvFp4 : W4Format::Int4;
  w.group = q.group;
  auto weight = input(q.weight), scales = input(q.scales), extra = input(q.extra);
  if (!weight || !scales || !extra) return refuse("the 4-bit weight, its scales or its tensor scale/zeros are not inputs of the function");
  w.weight = *weight;
  w.scales = *scales;
  w.extra = *extra;
  if (w.format == W4Format::Int4 && (q.scales.dtype() != dx || q.extra.dtype() != dx)) {
    return refuse("INT4 scales and zeros of " + std::string(dtype_name(q.scales.dtype())) + " with " +
                  std::string(dtype_name(dx)) + " activations (the kernels read them as the activation dtype; kiln quantize --scale-dtype chooses it)");
  }
  return Candidate{*c, std::move(roles), *a, *a, std::move(w)};
}

// The conjuncts of a condition (`a && b && ...`).
void conjuncts(const Expr& e, std::vector<Expr>& out) {
  if (const And* a = e.as<And>()) {
    conjuncts(a->a, out);
    conjuncts(a->b, out);
  } else {
    out.push_back(e);
  }
}

// Whether `condition` (the conjuncts of the reduction condition that read output axis `o` or
// reduction axis `k`) holds exactly where 0 <= o * stride - pad + k * dilation < extent, for every
// o < out and k < kernel: checked by evaluating it at each pair (a convolution's padding test).
bool is_window_test(const std::vector<Expr>& condition, const Expr& o, const Expr& k, int64_t out, int64_t kernel,
                    int64_t stride, int64_t dilation, int64_t pad, int64_t extent) {
  if (out * kernel > 200000) return false;
  Expr all = make_bool(true);
  for (const Expr& c : condition) all = all && c;
  for (int64_t oi = 0; oi < out; ++oi) {
    for (int64_t ki = 0; ki < kernel; ++ki) {
      const int64_t pos = oi * stride - pad + ki * dilation;
      const auto v = as_const_int(simplify(substitute(all, {{o, Expr(oi)}, {k, Expr(ki)}})));
      if (!v || (*v != 0) != (pos >= 0 && pos < extent)) return false;
    }
  }
  return true;
}

// A convolution (ops/Contraction.cpp: conv) the implicit-GEMM template computes: group 1, 1-D or
// 2-D, float16/bfloat16, A the weight at an affine address (m = output channel, k = (c, kh, kw)),
// B the image read at (n, c, o * stride - pad + k * dilation...) with constant window and spatial
// extents, and a reduction condition that is exactly the padding test (zero outside the image).
std::optional<Candidate> analyze_conv(const LoweringStage& s, const te::Contraction& c, const Roles& roles,
                                      const Buffers& buffers) {
  const size_t ns = roles.k_vars.size() - 1;
  if ((ns != 1 && ns != 2) || !roles.batch_vars.empty() || roles.m_vars.size() != 1 || roles.n_vars.size() != ns + 1) {
    return std::nullopt;
  }
  auto a = operand_of(c.a, roles, true, false, buffers);
  const TensorRead* rb = template_factor(c.b, false);
  if (!a || !rb) return std::nullopt;
  auto it = buffers.find(rb->tensor.get());
  if (it == buffers.end()) return std::nullopt;
  const Buffer& image = it->second;
  if (image->shape.size() != ns + 2 || rb->indices.size() != ns + 2 || !rb->indices[0].same_as(roles.n_vars[0]) ||
      !rb->indices[1].same_as(roles.k_vars[0]) || !equal_for_all_symbols(image->shape[0], roles.n_ext[0]) ||
      !equal_for_all_symbols(image->shape[1], roles.k_ext[0])) {
    return std::nullopt;
  }
  // The kernel's offsets within one image are 32-bit.
  const auto image_elems = as_const_int(simplify(image->shape[1] * product({image->shape.begin() + 2, image->shape.end()})));
  if (!image_elems || *image_elems >= (int64_t(1) << 31)) return std::nullopt;
  std::vector<Expr> condition;
  const Reduce* red = s.inlined->body.as<Reduce>();
  if (red->condition.defined() && !is_one(red->condition)) conjuncts(red->condition, condition);
  std::vector<bool> claimed(condition.size(), false);
  int64_t window[2][4] = {{1, 1, 1, 0}, {1, 1, 1, 0}};  // per dim (h, w): kernel, stride, dilation, pad
  for (size_t d = 0; d < ns; ++d) {
    const Expr &o = roles.n_vars[1 + d], &k = roles.k_vars[1 + d];
    const auto form = linear_form(simplify(rb->indices[2 + d]), roles.all());
    if (!form) return std::nullopt;
    for (const auto& [v, coefficient] : form->coefficient) {
      if (v != o.get() && v != k.get() && !is_zero(simplify(coefficient))) return std::nullopt;
    }
    const auto stride = as_const_int(coefficient_of(*form, o)), dilation = as_const_int(coefficient_of(*form, k));
    const auto offset = as_const_int(simplify(form->constant)), kernel = as_const_int(roles.k_ext[1 + d]);
    const auto out = as_const_int(roles.n_ext[1 + d]), extent = as_const_int(image->shape[2 + d]);
    if (!stride || !dilation || !offset || !kernel || !out || !extent || *stride < 1 || *dilation < 1 || *offset > 0 ||
        *extent > (int64_t(1) << 30)) {
      return std::nullopt;
    }
    std::vector<Expr> mine;
    for (size_t j = 0; j < condition.size(); ++j) {
      if (expr_uses_var(condition[j], o) || expr_uses_var(condition[j], k)) {
        mine.push_back(condition[j]);
        claimed[j] = true;
      }
    }
    if (!is_window_test(mine, o, k, *out, *kernel, *stride, *dilation, -*offset, *extent)) return std::nullopt;
    const size_t w = ns == 1 ? 1 : d;
    window[w][0] = *kernel, window[w][1] = *stride, window[w][2] = *dilation, window[w][3] = -*offset;
  }
  for (size_t j = 0; j < condition.size(); ++j) {
    if (!claimed[j]) return std::nullopt;  // a test of anything but the window's position
  }
  ConvWindow cw;
  cw.channels = image->shape[1];
  cw.height = ns == 1 ? Expr(1) : image->shape[2];
  cw.width = image->shape.back();
  cw.out_height = ns == 1 ? Expr(1) : roles.n_ext[1];
  cw.out_width = roles.n_ext.back();
  cw.kernel_h = window[0][0], cw.stride_h = window[0][1], cw.dilation_h = window[0][2], cw.pad_h = window[0][3];
  cw.kernel_w = window[1][0], cw.stride_w = window[1][1], cw.dilation_w = window[1][2], cw.pad_w = window[1][3];
  const ContractionOperand b{image, Expr(0), Expr(0), Expr(0), {}, cw};
  return Candidate{c, roles, *a, b, std::nullopt};
}

// The operands of contraction stage `s`, when the templates can read them.
std::optional<Candidate> analyze(const LoweringStage& s, const Buffers& buffers, bool tf32) {
  if (s.inlined->pattern != te::Pattern::Reduction) return std::nullopt;
  const Reduce* red = s.inlined->body.as<Reduce>();
  auto c = te::as_contraction(s.inlined);
  if (!c || s.inlined.dtype() != DType::Float32) return std::nullopt;
  const TensorRead *ra = template_factor(c->a, tf32), *rb = template_factor(c->b, tf32);
  if (!ra || !rb || ra->tensor->dtype != rb->tensor->dtype) return std::nullopt;
  Roles roles = roles_of(s.inlined, *c);
  if (roles.batch_vars.size() > kMaxBatchRank) return std::nullopt;
  if (roles.k_vars.size() >= 2 && is_half(ra->tensor->dtype)) {
    if (auto conv = analyze_conv(s, *c, roles, buffers)) return conv;
  }
  if (red->condition.defined() && !is_one(red->condition)) return std::nullopt;
  auto a = operand_of(c->a, roles, true, tf32, buffers), b = operand_of(c->b, roles, false, tf32, buffers);
  if (!a || !b) return std::nullopt;
  return Candidate{*c, std::move(roles), *a, *b, std::nullopt};
}

std::optional<Candidate> candidate_of(const LoweringStage& s, const Buffers& buffers, const Schedule& schedule,
                                     std::string* why = nullptr) {
  const StageSchedule* ss = schedule.find(s.inlined.name());
  if (!ss || !ss->gemm_template) return std::nullopt;
  if (ss->gemm_template->w4) {
    if (!s.inlined->quant_linear) return std::nullopt;
    return analyze_w4(s, buffers, why);
  }
  return analyze(s, buffers, ss->gemm_template->tf32);
}

bool same_exprs(const std::vector<Expr>& x, const std::vector<Expr>& y) {
  if (x.size() != y.size()) return false;
  for (size_t i = 0; i < x.size(); ++i) {
    if (!equal_for_all_symbols(x[i], y[i])) return false;
  }
  return true;
}

bool same_operand(const ContractionOperand& x, const ContractionOperand& y) {
  return x.buffer.same_as(y.buffer) && same_exprs({x.offset, x.stride_mn, x.stride_k}, {y.offset, y.stride_mn, y.stride_k}) &&
         same_exprs(x.batch_strides, y.batch_strides);
}

// Two contractions that can run as one dual product: the same A, the same split of the same
// output axes, the same reduction extents.
bool shares_a(const Candidate& x, const Candidate& y) {
  if (x.w4 || y.w4) return false;  // kernels/quant/'s fused gate/up needs the weights interleaved
  return x.contraction.batch_axes == y.contraction.batch_axes && x.contraction.m_axes == y.contraction.m_axes &&
         x.contraction.n_axes == y.contraction.n_axes && same_operand(x.a, y.a) &&
         same_exprs(x.roles.batch_ext, y.roles.batch_ext) && same_exprs(x.roles.m_ext, y.roles.m_ext) &&
         same_exprs(x.roles.n_ext, y.roles.n_ext) && same_exprs(x.roles.k_ext, y.roles.k_ext);
}

bool same_shape(const te::Tensor& x, const te::Tensor& y) { return same_exprs(x.shape(), y.shape()); }

// Whether every read of `tensor` in `t`'s body is at t's own index. Index 0 on an axis of extent 1
// is that axis (the op library writes broadcast reads of size-1 axes so: [1, S, H] + bias).
class ReadsAtOwnIndex : public IRVisitor {
 public:
  ReadsAtOwnIndex(const te::Tensor& t, const te::TensorNode* tensor) : t_(t), tensor_(tensor) {}
  bool ok = true;
  using IRVisitor::visit;

 protected:
  void visit(const TensorRead* op) override {
    if (op->tensor.get() == tensor_) {
      ok = ok && static_cast<int>(op->indices.size()) == t_.ndim();
      for (size_t d = 0; ok && d < op->indices.size(); ++d) {
        ok = op->indices[d].same_as(t_->axes[d].var) || (is_zero(op->indices[d]) && is_one(t_->axes[d].extent));
      }
    }
    IRVisitor::visit(op);
  }

 private:
  const te::Tensor& t_;
  const te::TensorNode* tensor_;
};

// Replaces reads of the tensors in `values` (all at the consumer's own index) by their values.
class ReadsToValues : public IRMutator {
 public:
  explicit ReadsToValues(const std::map<const te::TensorNode*, Expr>& values) : values_(values) {}
  using IRMutator::mutate;

 protected:
  Expr visit(const TensorRead* op, const Expr& self) override {
    auto it = values_.find(op->tensor.get());
    return it == values_.end() ? IRMutator::visit(op, self) : it->second;
  }

 private:
  const std::map<const te::TensorNode*, Expr>& values_;
};

}  // namespace

std::set<const te::TensorNode*> keep_template_operands(const std::vector<te::Tensor>& order, const Schedule& schedule,
                                                       std::set<const te::TensorNode*>* folded) {
  std::set<const te::TensorNode*> keep;
  for (const te::Tensor& t : order) {
    const StageSchedule* s = schedule.find(t.name());
    if (!s || !s->gemm_template || t.is_placeholder()) continue;
    auto c = te::as_contraction(t);
    if (!c) continue;
    for (const Expr* factor : {&c->a, &c->b}) {
      const Cast* cast = factor->as<Cast>();
      const TensorRead* r = cast ? cast->value.as<TensorRead>() : factor->as<TensorRead>();
      if (!r) continue;
      // The pure re-indexings (Transpose, Reshape, a constant Gather) between the factor and the
      // tensor it reads in the end; anything computed on the way stays a stage.
      std::vector<te::Tensor> chain;
      te::Tensor leaf(r->tensor);
      while (!leaf.is_placeholder()) {
        const TensorRead* next = leaf->body.as<TensorRead>();
        if (!next) {
          keep.insert(leaf.node().get());
          break;
        }
        chain.push_back(leaf);
        leaf = te::Tensor(next->tensor);
      }
      if (chain.empty()) continue;
      // Inlined, the chain's reads must leave the factor's address affine (a transpose does; a
      // reshape of a transpose, or a gather by a tensor's value, does not): inline the longest
      // prefix of the chain that does, and keep the tensor after it as a stage the template reads.
      auto affine_through = [&](size_t j) {
        const te::Tensor& end = j < chain.size() ? chain[j] : leaf;
        const te::Tensor inlined = te::inline_tensors(t, std::vector<te::Tensor>(chain.begin(), chain.begin() + j));
        auto ci = te::as_contraction(inlined);
        if (!ci) return false;
        const Roles roles = roles_of(inlined, *ci);
        const Buffers end_buffer = {{end.node().get(), Buffer::make(end.name(), end.dtype(), end.shape())}};
        const bool tf32 = s->gemm_template->tf32;
        for (const bool is_a : {true, false}) {
          const TensorRead* read = template_factor(is_a ? ci->a : ci->b, tf32);
          if (read && read->tensor.get() == end.node().get()) {
            return operand_of(is_a ? ci->a : ci->b, roles, is_a, tf32, end_buffer).has_value();
          }
        }
        return false;
      };
      size_t j = chain.size();
      while (j > 0 && !affine_through(j)) --j;
      if (j < chain.size()) keep.insert(chain[j].node().get());
      if (folded)
        for (size_t i = 0; i < j; ++i) folded->insert(chain[i].node().get());
    }
  }
  return keep;
}

std::optional<ContractionOperand> strided_operand(const Expr& factor, const std::vector<Expr>& batch_vars,
                                                  const std::vector<Expr>& batch_extents, const Expr& row_var,
                                                  const Expr& row_extent, const Expr& col_var, const Expr& col_extent,
                                                  const Buffers& buffers) {
  Roles r;
  r.batch_vars = batch_vars;
  r.batch_ext = batch_extents;
  r.m_vars = {row_var};
  r.m_ext = {row_extent};
  r.k_vars = {col_var};
  r.k_ext = {col_extent};
  return operand_of(factor, r, true, false, buffers);
}

std::vector<TemplateGroup> plan_template_contractions(const std::vector<LoweringStage>& stages,
                                                      const std::set<const te::TensorNode*>& outputs,
                                                      const Buffers& buffers, const Schedule& schedule,
                                                      const std::set<const te::TensorNode*>& taken) {
  // Which stages read each tensor (by stage index).
  std::map<const te::TensorNode*, std::set<size_t>> readers;
  for (size_t i = 0; i < stages.size(); ++i) {
    for (const te::Tensor& x : te::direct_inputs(stages[i].inlined)) readers[x.node().get()].insert(i);
  }
  struct Group {
    TemplateGroup group;
    std::vector<Candidate> candidates;
    bool alive = true;
  };
  std::vector<Group> groups;
  std::map<const te::TensorNode*, size_t> head;  // the tensor a group writes so far -> group
  for (size_t i = 0; i < stages.size(); ++i) {
    const LoweringStage& s = stages[i];
    if (taken.count(s.original.node().get())) continue;
    if (auto c = candidate_of(s, buffers, schedule)) {
      head[s.original.node().get()] = groups.size();
      groups.push_back({TemplateGroup{{s}, {}}, {*c}});
      continue;
    }
    if (s.inlined->pattern != te::Pattern::Injective) continue;
    // The group heads this stage may absorb: it is their only reader, reads them at its own index
    // and has their shape. Other heads it reads are plain buffers to it.
    std::vector<size_t> read_groups;
    for (const te::Tensor& x : te::direct_inputs(s.inlined)) {
      auto h = head.find(x.node().get());
      if (h == head.end()) continue;
      ReadsAtOwnIndex own(s.inlined, x.node().get());
      own.visit(s.inlined->body);
      if (!outputs.count(x.node().get()) && readers[x.node().get()] == std::set<size_t>{i} && own.ok &&
          same_shape(x, s.inlined)) {
        read_groups.push_back(h->second);
      }
    }
    if (read_groups.size() > 2) read_groups = {read_groups.front()};
    if (read_groups.size() == 2) {
      const Group &g0 = groups[read_groups[0]], &g1 = groups[read_groups[1]];
      if (g0.candidates.size() != 1 || g1.candidates.size() != 1 || !shares_a(g0.candidates[0], g1.candidates[0])) {
        read_groups = {read_groups.front()};  // not one dual product: absorb the first, read the other
      }
    }
    if (read_groups.size() == 1) {
      Group& g = groups[read_groups[0]];
      head.erase(g.group.written().original.node().get());
      g.group.chain.push_back(s);
      head[s.original.node().get()] = read_groups[0];
    } else if (read_groups.size() == 2) {
      Group &g0 = groups[read_groups[0]], &g1 = groups[read_groups[1]];
      head.erase(g0.group.written().original.node().get());
      head.erase(g1.group.written().original.node().get());
      g0.group.contractions.push_back(g1.group.contractions[0]);
      g0.candidates.push_back(g1.candidates[0]);
      g0.group.chain.insert(g0.group.chain.end(), g1.group.chain.begin(), g1.group.chain.end());
      g0.group.chain.push_back(s);
      g1.alive = false;
      head[s.original.node().get()] = read_groups[0];
    }
  }
  std::vector<TemplateGroup> out;
  for (Group& g : groups) {
    if (g.alive) out.push_back(std::move(g.group));
  }
  return out;
}

std::string template_refusal(const LoweringStage& stage, const Buffers& buffers, const Schedule& schedule) {
  std::string why;
  if (candidate_of(stage, buffers, schedule, &why)) return "";
  return why.empty() ? "its factors are not float16/bfloat16 buffers read at affine addresses" : why;
}

std::optional<Expr> conv_wgmma_workspace_elements(const ConvWindow& window, const Expr& m, const Expr& k, const Expr& image_elements) {
  if (window.stride_h != 1 || window.stride_w != 1) return std::nullopt;
  // Channels known off 8: plan_conv_wgmma refuses them (the mma.sync kernels are faster there).
  const auto channels = as_const_int(simplify(window.channels));
  if (channels && *channels % 8 != 0) return std::nullopt;
  return simplify(m * k + image_elements);
}

Stmt template_contraction(const TemplateGroup& group, const Buffers& buffers, const GemmTemplate& config) {
  // Recomputed here (planning checked them): the operands of each contraction.
  std::vector<Candidate> candidates;
  for (const LoweringStage& s : group.contractions) {
    auto c = config.w4 ? analyze_w4(s, buffers, nullptr) : analyze(s, buffers, config.tf32);
    KILN_ASSERT(c, "template contraction {} is no longer a candidate", s.inlined.name());
    candidates.push_back(*c);
  }
  const te::Tensor& first = group.contractions.front().inlined;
  const Roles& roles = candidates.front().roles;
  const std::string name = first.name();
  const Expr batch_var = var(name + "_b"), m_var = var(name + "_m"), n_var = var(name + "_n");

  // The epilogue over the first contraction's axis variables: each folded stage's value as a
  // let, then the store of the last one.
  std::map<const te::TensorNode*, Expr> values;
  std::vector<Expr> acc_vars;
  for (size_t j = 0; j < group.contractions.size(); ++j) {
    acc_vars.push_back(var(name + "_acc" + std::to_string(j), Type(DType::Float32)));
    values[group.contractions[j].original.node().get()] = acc_vars.back();
  }
  // Every other stage's axes are renamed to the first contraction's (same shapes, checked).
  auto to_first_axes = [&](const te::Tensor& t) {
    std::vector<std::pair<Expr, Expr>> map;
    for (int d = 0; d < t.ndim(); ++d) map.emplace_back(t->axes[d].var, first->axes[d].var);
    return map;
  };
  // The chain's values as lets, then the store of the last one, given the accumulators' values.
  const LoweringStage& written = group.written();
  const Buffer& out = buffers.at(written.original.node().get());
  auto make_core = [&](std::map<const te::TensorNode*, Expr> chain_values) {
    std::vector<std::pair<Expr, Expr>> lets;
    for (const LoweringStage& s : group.chain) {
      const Expr value = ReadsToValues(chain_values).mutate(substitute(s.inlined->body, to_first_axes(s.inlined)));
      const Expr v = var(s.inlined.name() + "_value", value.type());
      lets.emplace_back(v, value);
      chain_values[s.original.node().get()] = v;
    }
    std::vector<Expr> index;
    for (const IterVar& axis : first->axes) index.push_back(axis.var);
    const Expr result = chain_values.at(written.original.node().get());
    Stmt core = Store::make(out, result.type() == Type(out->dtype) ? result : cast(Type(out->dtype), result),
                            simplify(out.flat_index(index)));
    for (auto it = lets.rbegin(); it != lets.rend(); ++it) core = LetStmt::make(it->first, it->second, core);
    return core;
  };
  const Stmt core = make_core(values);
  // The kernels' accumulator: NVFP4's tensor scale (any float dtype: plugins for 16-bit
  // activations pass it as such) is applied by the epilogue, not by the kernels
  // (LinearParams::scale2 = null); the reference's accumulator has it already.
  Stmt kernel_core = core;
  if (config.w4 && first->quant_linear->format == te::QuantLinearFormat::NvFp4) {
    const te::Tensor& scale = first->quant_linear->extra;
    Expr& acc = values[group.contractions[0].original.node().get()];
    acc = acc * cast(Type(DType::Float32), scale(std::vector<Expr>(scale.ndim(), Expr(0))));
    kernel_core = make_core(values);
  }

  std::vector<std::pair<Expr, Expr>> digits;
  unflatten(batch_var, roles.batch_vars, roles.batch_ext, digits);
  unflatten(m_var, roles.m_vars, roles.m_ext, digits);
  unflatten(n_var, roles.n_vars, roles.n_ext, digits);
  // Substituted rather than bound, so that (m / seq) * seq + m % seq folds back to m.
  const Stmt epilogue = simplify(substitute(kernel_core, digits));

  // The reference: for each output element, each accumulator summed in order, then the core.
  Stmt reference = core;
  for (size_t j = group.contractions.size(); j-- > 0;) {
    const te::Tensor& c = group.contractions[j].inlined;
    const Reduce* red = c->body.as<Reduce>();
    const Buffer acc = Buffer::make(c.name() + "_sum", DType::Float32, {Expr(1)}, MemoryScope::Local);
    Stmt update = Store::make(acc, Load::make(acc, 0) + substitute(red->source, to_first_axes(c)), 0);
    if (red->condition.defined() && !is_one(red->condition)) {
      update = IfThenElse::make(substitute(red->condition, to_first_axes(c)), update);  // a convolution's padding
    }
    for (auto it = red->axes.rbegin(); it != red->axes.rend(); ++it) {
      update = For::make(it->var, 0, it->extent, ForKind::Serial, update);
    }
    reference = Allocate::make(acc, Seq::make({Store::make(acc, make_zero(Type(DType::Float32)), 0), update,
                                               LetStmt::make(acc_vars[j], Load::make(acc, 0), reference)}));
  }
  for (int d = first.ndim(); d-- > 0;) reference = For::make(first->axes[d].var, 0, first.shape(d), ForKind::Serial, reference);

  const std::optional<W4Weight>& w4 = candidates.front().w4;
  std::vector<ContractionOperand> b;
  for (const Candidate& c : candidates) {
    if (!w4) b.push_back(c.b);
  }
  const Expr M = product(roles.m_ext), N = product(roles.n_ext), K = product(roles.k_ext);
  const bool conv = candidates.front().b.window.has_value();
  // The workspace: split-K partials (float32); a convolution splits no K, but the Hopper kernel
  // (when the schedule enables it) repacks its weight and the image there, in the weight's dtype.
  const Expr split_floats = w4 ? select(M <= Expr(16), Expr(0), min(M * N, Expr(kW4SplitFloats)))
                               : select(M <= Expr(256), Expr(8) * M * N + Expr(1024), Expr(0));
  Buffer split_k;
  if (!conv) {
    split_k = Buffer::make(name + "_split_k", DType::Float32, {simplify(split_floats)});
  } else if (const auto elements = config.conv_wgmma ? conv_wgmma_workspace_elements(*candidates.front().b.window, M, K,
                                                                                   candidates.front().b.buffer.num_elements())
                                                     : std::nullopt) {
    split_k = Buffer::make(name + "_conv_wgmma", candidates.front().a.buffer->dtype, {*elements});
  }
  std::string description = (group.contractions.size() == 2 ? "dual contraction " : conv ? "convolution " : "contraction ") + name;
  if (group.contractions.size() == 2) description += " and " + group.contractions[1].inlined.name();
  if (w4) {
    static const char* const kFormat[] = {"NVFP4", "MXFP4", "INT4"};
    description += " with " + std::string(kFormat[static_cast<int>(w4->format)]) + " weight " + w4->weight->name;
  }
  if (conv) description += " as implicit GEMM, im2col of " + candidates.front().b.buffer->name;
  description += " (" + std::string(dtype_name(candidates.front().a.buffer->dtype)) + ", M = " + to_string(M) +
                 ", N = " + to_string(N) + ", K = " + to_string(K) + ")";
  if (!group.chain.empty()) {
    description += ", epilogue:";
    for (const LoweringStage& s : group.chain) description += " " + s.inlined.name();
  }
  GemmTemplate chosen = config;
  if (conv) chosen.reason = config.conv_reason;
  return TemplateContraction::make(roles.batch_ext, M, N, K, candidates.front().a, std::move(b), batch_var, m_var,
                                   n_var, std::move(acc_vars), epilogue, reference, split_k, chosen, description, w4);
}

}  // namespace kiln



