#include "TemplateAttention.h"

#include <algorithm>
#include <functional>

#include "IndexDigits.h"
#include "kiln/ir/Equality.h"
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

// `e` without the float-to-float casts around it (the roundings of an exported fp16 graph: the
// kernel keeps float32 throughout).
Expr strip_casts(Expr e) {
  while (const Cast* c = e.as<Cast>()) {
    if (!c->type.is_float() || !c->value.type().is_float()) break;
    e = c->value;
  }
  return e;
}

// The stages by the tensor that other stages read (the original), and who reads each.
struct StageIndex {
  std::map<const te::TensorNode*, size_t> of;
  std::map<const te::TensorNode*, std::set<size_t>> readers;
};

// A read of a stage's tensor (after stripping casts), with the stage's index; nullptr otherwise.
const TensorRead* stage_read(const Expr& e, const StageIndex& index, size_t* stage) {
  const TensorRead* r = strip_casts(e).as<TensorRead>();
  if (!r) return nullptr;
  auto it = index.of.find(r->tensor.get());
  if (it == index.of.end()) return nullptr;
  *stage = it->second;
  return r;
}

bool same_expr(const Expr& a, const Expr& b) {
  return structurally_equal(simplify(a), simplify(b));
}

bool same_exprs(const std::vector<Expr>& a, const std::vector<Expr>& b) {
  if (a.size() != b.size()) return false;
  for (size_t d = 0; d < a.size(); ++d) {
    if (!same_expr(a[d], b[d])) return false;
  }
  return true;
}

bool reads_at(const TensorRead* r, const std::vector<Expr>& index) {
  return same_exprs(r->indices, index);
}

// A batched product laid out [batch.., m, n] with one reduction axis k (both attention products).
struct Product {
  te::Contraction c;
  std::vector<Expr> batch_vars, batch_ext;
  Expr m_var, n_var, k_var, m_ext, n_ext, k_ext;
};

std::optional<Product> product_of(const te::Tensor& t) {
  if (t->pattern != te::Pattern::Reduction || t.dtype() != DType::Float32) return std::nullopt;
  const Reduce* red = t->body.as<Reduce>();
  if (!red || red->reduce_kind != ReduceKind::Sum || red->axes.size() != 1 ||
      (red->condition.defined() && !is_one(red->condition))) {
    return std::nullopt;
  }
  auto c = te::as_contraction(t);
  const int r = t.ndim() - 2;
  if (!c || r < 0 || r > 4 || c->m_axes != std::vector<int>{r} ||
      c->n_axes != std::vector<int>{r + 1}) {
    return std::nullopt;
  }
  std::vector<int> batch;
  for (int d = 0; d < r; ++d) batch.push_back(d);
  if (c->batch_axes != batch) return std::nullopt;
  Product p{*c,
            {},
            {},
            t->axes[r].var,
            t->axes[r + 1].var,
            red->axes[0].var,
            t.shape(r),
            t.shape(r + 1),
            red->axes[0].extent};
  for (int d = 0; d < r; ++d) {
    p.batch_vars.push_back(t->axes[d].var);
    p.batch_ext.push_back(t.shape(d));
  }
  return p;
}

// The source of row reduction `t` (one axis, unconditional, of `kind`) at the index `read` reads
// it at, its reduction variable renamed `j`.
std::optional<Expr> row_source(const te::Tensor& t, ReduceKind kind, const TensorRead* read,
                               const Expr& j, const Expr& seq_k) {
  const Reduce* red = t->body.as<Reduce>();
  if (!red || red->reduce_kind != kind || red->axes.size() != 1 ||
      (red->condition.defined() && !is_one(red->condition)) ||
      !same_expr(red->axes[0].extent, seq_k) || read->indices.size() != t->axes.size()) {
    return std::nullopt;
  }
  std::vector<std::pair<Expr, Expr>> map;
  for (size_t d = 0; d < t->axes.size(); ++d) {
    if (expr_uses_var(read->indices[d], j)) return std::nullopt;  // a row value, read once per row
    map.emplace_back(t->axes[d].var, read->indices[d]);
  }
  map.emplace_back(red->axes[0].var, j);
  return substitute(red->source, map);
}

// exp(x - max) as (x, the read of max), or nullopt.
std::optional<std::pair<Expr, const TensorRead*>> shifted_exp(const Expr& e,
                                                              const StageIndex& index,
                                                              size_t* max_stage) {
  const Call* exp = strip_casts(e).as<Call>();
  if (!exp || exp->op != Intrinsic::Exp) return std::nullopt;
  const Sub* sub = strip_casts(exp->args[0]).as<Sub>();
  if (!sub) return std::nullopt;
  const TensorRead* max = stage_read(sub->b, index, max_stage);
  if (!max) return std::nullopt;
  return std::pair{sub->a, max};
}

// The logits: scale * scores (scores a stage read) plus an optional mask read. The scale is a
// constant times, optionally, a factor free of the axes that only the device knows (an exported
// scale read from an initializer or computed from a Shape): `device_scale`, float32.
struct Logits {
  const TensorRead* scores = nullptr;
  double scale = 1.0;
  Expr device_scale;
  const TensorRead* mask = nullptr;
};

bool uses_any(const Expr& e, const std::vector<Expr>& vars) {
  for (const Expr& v : vars) {
    if (expr_uses_var(e, v)) return true;
  }
  return false;
}

// `e` as scores * constant * device factor (or divided by them); `axes` are the logits' axes.
std::optional<Logits> scaled_scores(const Expr& e, const std::vector<Expr>& axes) {
  const Expr x = strip_casts(e);
  if (const TensorRead* r = x.as<TensorRead>()) {
    if (!uses_any(x, axes)) return std::nullopt;
    return Logits{r, 1.0, Expr(), nullptr};
  }
  const Mul* mul = x.as<Mul>();
  const Div* div = x.as<Div>();
  if (!mul && !div) return std::nullopt;
  const std::vector<std::pair<Expr, Expr>> splits =
      mul ? std::vector<std::pair<Expr, Expr>>{{mul->a, mul->b}, {mul->b, mul->a}}
          : std::vector<std::pair<Expr, Expr>>{{div->a, div->b}};
  for (const auto& [factor, other] : splits) {
    if (uses_any(other, axes)) continue;
    auto inner = scaled_scores(factor, axes);
    if (!inner) continue;
    if (auto c = as_const_float(strip_casts(other))) {
      if (div && *c == 0) return std::nullopt;
      inner->scale = div ? inner->scale / *c : inner->scale * *c;
      return inner;
    }
    if (inner->device_scale.defined() || !other.type().is_float()) return std::nullopt;
    const Expr f = cast(Type(DType::Float32), other);
    inner->device_scale = div ? make_one(f.type()) / f : f;
    return inner;
  }
  return std::nullopt;
}

// `is_scores` says whether a read is of the scores product (rather than of the mask).
std::optional<Logits> logits_of(const Expr& e, const std::vector<Expr>& axes,
                                const std::function<bool(const TensorRead*)>& is_scores) {
  const Expr x = strip_casts(e);
  if (const Add* add = x.as<Add>()) {
    for (const auto& [scaled, mask] : {std::pair{add->a, add->b}, std::pair{add->b, add->a}}) {
      auto s = scaled_scores(scaled, axes);
      const TensorRead* m = strip_casts(mask).as<TensorRead>();
      if (s && m && is_scores(s->scores)) {
        s->mask = m;
        return s;
      }
    }
    return std::nullopt;
  }
  auto s = scaled_scores(x, axes);
  if (s && !is_scores(s->scores)) return std::nullopt;
  return s;
}

bool subset(const std::set<size_t>& readers, const std::set<size_t>& allowed) {
  for (size_t r : readers) {
    if (!allowed.count(r)) return false;
  }
  return true;
}

// Each tensor read of `tensor` in a body, collected.
class ReadsOf : public IRVisitor {
 public:
  explicit ReadsOf(const te::TensorNode* tensor) : tensor_(tensor) {}
  std::vector<const TensorRead*> reads;
  using IRVisitor::visit;

 protected:
  void visit(const TensorRead* op) override {
    if (op->tensor.get() == tensor_) reads.push_back(op);
    IRVisitor::visit(op);
  }

 private:
  const te::TensorNode* tensor_;
};

// Where consumer `e` reads `prev` (once, or always at the same index), when that index is a
// permutation of e's axes with the same extents: for each dim of prev, the axis of e.
std::optional<std::vector<int>> permutation_read(const te::Tensor& e, const te::Tensor& prev) {
  ReadsOf reads(prev.node().get());
  reads.visit(e->body);
  if (reads.reads.empty() || e.ndim() != prev.ndim()) return std::nullopt;
  const TensorRead* r = reads.reads.front();
  for (const TensorRead* other : reads.reads) {
    if (!same_exprs(other->indices, r->indices)) return std::nullopt;
  }
  std::vector<int> axis_of(r->indices.size(), -1);
  std::set<int> used;
  for (size_t p = 0; p < r->indices.size(); ++p) {
    for (int a = 0; a < e.ndim(); ++a) {
      if (r->indices[p].same_as(e->axes[a].var)) axis_of[p] = a;
    }
    if (axis_of[p] < 0 || !used.insert(axis_of[p]).second ||
        !same_expr(e.shape(axis_of[p]), prev.shape(p))) {
      return std::nullopt;
    }
  }
  return axis_of;
}

std::optional<AttentionGroup> match(size_t ci, const std::vector<LoweringStage>& stages,
                                    const StageIndex& index,
                                    const std::set<const te::TensorNode*>& outputs,
                                    const Buffers& buffers, const Schedule& schedule) {
  const te::Tensor& context = stages[ci].inlined;
  const auto pv = product_of(context);
  if (!pv) return std::nullopt;
  const Expr& j = pv->k_var;
  std::vector<Expr> row = pv->batch_vars;
  row.push_back(pv->m_var);
  std::vector<Expr> at = row;
  at.push_back(j);

  // p: a stage read at (b.., i, j) whose body is the softmax, or the softmax inlined.
  Expr p = pv->c.a;
  std::optional<size_t> p_stage;
  size_t s = 0;
  if (const TensorRead* r = stage_read(p, index, &s)) {
    const te::Tensor& pt = stages[s].inlined;
    if (pt->pattern != te::Pattern::Injective || !reads_at(r, at)) return std::nullopt;
    std::vector<std::pair<Expr, Expr>> map;
    for (int d = 0; d < pt.ndim(); ++d) map.emplace_back(pt->axes[d].var, at[d]);
    p = substitute(pt->body, map);
    p_stage = s;
  }
  p = strip_casts(p);
  // ops/Attention.cpp: 0 for a row whose keys are all masked. The condition is kept by value: the
  // Select may be owned by p alone (p = substitute(...) above), and p is about to be replaced.
  Expr guard_condition;
  if (const Select* guard = p.as<Select>()) {
    if (!is_zero(strip_casts(guard->true_value))) return std::nullopt;
    guard_condition = guard->condition;
    p = strip_casts(guard->false_value);
  }
  const Div* div = p.as<Div>();
  if (!div) return std::nullopt;
  size_t max_stage = 0, sum_stage = 0, max_stage_in_sum = 0;
  const TensorRead* sum_read = stage_read(div->b, index, &sum_stage);
  auto numerator = shifted_exp(div->a, index, &max_stage);
  if (!sum_read || !numerator) return std::nullopt;
  const auto& [logits, max_read] = *numerator;
  if (guard_condition.defined()) {
    const Expr m = TensorRead::make(max_read->tensor, max_read->indices);
    const Expr expected = call(Intrinsic::IsInf, m) && m < make_zero(m.type());
    if (!same_expr(guard_condition, expected)) return std::nullopt;
  }
  auto max_source = row_source(stages[max_stage].inlined, ReduceKind::Max, max_read, j, pv->k_ext);
  auto sum_source = row_source(stages[sum_stage].inlined, ReduceKind::Sum, sum_read, j, pv->k_ext);
  if (!max_source || !sum_source) return std::nullopt;
  auto sum_exp = shifted_exp(*sum_source, index, &max_stage_in_sum);
  if (!sum_exp || max_stage_in_sum != max_stage ||
      !same_exprs(sum_exp->second->indices, max_read->indices) ||
      !same_expr(sum_exp->first, logits) || !same_expr(*max_source, logits)) {
    return std::nullopt;
  }

  // The logits read the scores product at (b.., i, j).
  std::optional<Product> qk;
  size_t qk_stage = 0;
  auto is_scores = [&](const TensorRead* r) {
    auto it = index.of.find(r->tensor.get());
    if (it == index.of.end() || !reads_at(r, at)) return false;
    qk = product_of(stages[it->second].inlined);
    qk_stage = it->second;
    return qk.has_value();
  };
  const auto l = logits_of(logits, at, is_scores);
  if (!l || !is_scores(l->scores)) return std::nullopt;
  const te::Tensor& scores = stages[qk_stage].inlined;
  const StageSchedule* ss = schedule.find(scores.name());
  if (!ss || !ss->gemm_template || ss->gemm_template->tf32 || ss->gemm_template->w4)
    return std::nullopt;
  const auto head_dim = as_const_int(simplify(qk->k_ext));
  if (!head_dim || !same_exprs(qk->batch_ext, pv->batch_ext) || !same_expr(qk->m_ext, pv->m_ext) ||
      !same_expr(qk->n_ext, pv->k_ext) || !same_expr(qk->k_ext, pv->n_ext)) {
    return std::nullopt;
  }

  // Only the chain reads its intermediates.
  const size_t p_reader = p_stage ? *p_stage : ci;
  const std::vector<std::pair<size_t, std::set<size_t>>> readers_allowed = {
      {qk_stage, {max_stage, sum_stage, p_reader}},
      {max_stage, {sum_stage, p_reader}},
      {sum_stage, {p_reader}}};
  for (const auto& [stage, allowed] : readers_allowed) {
    const te::TensorNode* t = stages[stage].original.node().get();
    if (outputs.count(t) || !subset(index.readers.at(t), allowed)) return std::nullopt;
  }
  if (p_stage &&
      (outputs.count(stages[*p_stage].original.node().get()) ||
       index.readers.at(stages[*p_stage].original.node().get()) != std::set<size_t>{ci})) {
    return std::nullopt;
  }

  AttentionGroup g;
  auto q = strided_operand(qk->c.a, qk->batch_vars, qk->batch_ext, qk->m_var, qk->m_ext, qk->k_var, qk->k_ext, buffers);
  auto k = strided_operand(qk->c.b, qk->batch_vars, qk->batch_ext, qk->n_var, qk->n_ext, qk->k_var, qk->k_ext, buffers);
  auto v = strided_operand(pv->c.b, pv->batch_vars, pv->batch_ext, j, pv->k_ext, pv->n_var, pv->n_ext, buffers);
  if (!q || !k || !v) return std::nullopt;
  const DType dtype = q->buffer->dtype;
  if (k->buffer->dtype != dtype || v->buffer->dtype != dtype) return std::nullopt;
  g.device_scale = l->device_scale;
  if (l->mask) {
    g.mask = strided_operand(
        cast(Type(DType::Float32), TensorRead::make(l->mask->tensor, l->mask->indices)),
        pv->batch_vars, pv->batch_ext, pv->m_var, pv->m_ext, j, pv->k_ext, buffers);
    if (!g.mask || g.mask->buffer->dtype != dtype) return std::nullopt;
  }
  g.q = *q;
  g.k = *k;
  g.v = *v;
  g.scale = l->scale;
  g.batch_extents = pv->batch_ext;
  g.seq_q = pv->m_ext;
  g.seq_k = pv->k_ext;
  g.head_dim = *head_dim;

  std::vector<size_t> members = {qk_stage, max_stage, sum_stage};
  if (p_stage) members.push_back(*p_stage);
  members.push_back(ci);
  // The consumers that only cast or permute the context.
  for (size_t last = ci;;) {
    const te::TensorNode* prev = stages[last].original.node().get();
    auto it = index.readers.find(prev);
    if (outputs.count(prev) || it == index.readers.end() || it->second.size() != 1) break;
    const size_t e = *it->second.begin();
    if (stages[e].inlined->pattern != te::Pattern::Injective ||
        !permutation_read(stages[e].inlined, stages[last].original)) {
      break;
    }
    members.push_back(e);
    last = e;
  }
  for (size_t m : members) {  // the device factor of the scale is computed before the call
    ReadsOf reads(stages[m].original.node().get());
    if (g.device_scale.defined()) reads.visit(g.device_scale);
    if (!reads.reads.empty()) return std::nullopt;
  }
  std::vector<size_t> sorted = members;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end() ||
      sorted.front() != qk_stage)
    return std::nullopt;
  for (size_t m : members) {
    g.stages.push_back(stages[m]);
    if (m == ci) g.context = g.stages.size() - 1;
    if (p_stage && m == *p_stage) g.probabilities = g.stages.size() - 1;
  }
  return g;
}

// Replaces reads of `tensor` by `value`.
class ReadToValue : public IRMutator {
 public:
  ReadToValue(const te::TensorNode* tensor, Expr value)
      : tensor_(tensor), value_(std::move(value)) {}
  using IRMutator::mutate;

 protected:
  Expr visit(const TensorRead* op, const Expr& self) override {
    return op->tensor.get() == tensor_ ? value_ : IRMutator::visit(op, self);
  }

 private:
  const te::TensorNode* tensor_;
  Expr value_;
};

// Which kernel attention<T, D> runs, as far as lowering knows (the template decides per call).
std::string path_reason(const AttentionGroup& g) {
  const std::string d = std::to_string(g.head_dim);
  if (g.head_dim != 64 && g.head_dim != 128) {
    return "fp32 fallback kernel, one block per query row: tensor cores take head dims 64 and 128, "
           "not " +
           d;
  }
  bool symbolic = false;
  for (const auto& [name, op] :
       {std::pair{"Q", &g.q}, std::pair{"K", &g.k}, std::pair{"V", &g.v}}) {
    if (!is_one(op->stride_k)) {
      return std::string("fp32 fallback kernel, one block per query row: the head dim of ") + name +
             " is not contiguous";
    }
    std::vector<Expr> offsets = op->batch_strides;
    offsets.push_back(op->offset);
    offsets.push_back(op->stride_mn);
    for (const Expr& e : offsets) {
      auto c = as_const_int(simplify(e));
      if (!c) symbolic = true;
      if (c && *c % 8 != 0) {
        return std::string("fp32 fallback kernel, one block per query row: ") + name +
               " is not read in 16-byte aligned rows (offset or stride " + std::to_string(*c) +
               " elements)";
      }
    }
  }
  return "tensor cores (FlashAttention-2 style: 64 query rows x 64 keys per step, 4 warps), D = " +
         d +
         (symbolic ? "; 16-byte alignment checked per call (else the fp32 fallback)"
                   : ", rows 16-byte aligned");
}

}  // namespace

std::vector<AttentionGroup> plan_template_attention(const std::vector<LoweringStage>& stages,
                                                    const std::set<const te::TensorNode*>& outputs,
                                                    const Buffers& buffers,
                                                    const Schedule& schedule) {
  StageIndex index;
  for (size_t i = 0; i < stages.size(); ++i) {
    index.of[stages[i].original.node().get()] = i;
    index.readers[stages[i].original.node().get()];
  }
  for (size_t i = 0; i < stages.size(); ++i) {
    for (const te::Tensor& x : te::direct_inputs(stages[i].inlined))
      index.readers[x.node().get()].insert(i);
  }
  std::vector<AttentionGroup> groups;
  std::set<const te::TensorNode*> taken;
  for (size_t i = 0; i < stages.size(); ++i) {
    auto g = match(i, stages, index, outputs, buffers, schedule);
    if (!g) continue;
    bool overlaps = false;
    for (const LoweringStage& s : g->stages)
      overlaps = overlaps || taken.count(s.original.node().get());
    if (overlaps) continue;
    for (const LoweringStage& s : g->stages) taken.insert(s.original.node().get());
    groups.push_back(std::move(*g));
  }
  return groups;
}

Stmt template_attention(const AttentionGroup& group, const Buffers& buffers, Stmt reference) {
  const te::Tensor& context = group.stages[group.context].inlined;
  const auto pv = product_of(context);
  KILN_ASSERT(pv, "attention context {} is no longer a product", context.name());
  const std::string name = context.name();
  const Expr batch_var = var(name + "_b"), row_var = var(name + "_i"), d_var = var(name + "_d");
  const Expr out_var = var(name + "_out", Type(DType::Float32));

  // The epilogue over the context's axes: each folded consumer's value as a let, then the store
  // of the last one at its layout.
  std::vector<Expr> axes;  // the current stage's axes in terms of the context's
  for (const IterVar& a : context->axes) axes.push_back(a.var);
  Expr value = out_var;
  std::vector<std::pair<Expr, Expr>> lets;
  for (size_t m = group.context + 1; m < group.stages.size(); ++m) {
    const te::Tensor& e = group.stages[m].inlined;
    const te::Tensor& prev = group.stages[m - 1].original;
    const auto axis_of = permutation_read(e, prev);
    KILN_ASSERT(axis_of, "attention consumer {} no longer permutes {}", e.name(), prev.name());
    std::vector<Expr> e_axes(e.ndim());
    std::vector<std::pair<Expr, Expr>> map;
    for (size_t p = 0; p < axis_of->size(); ++p) {
      e_axes[(*axis_of)[p]] = axes[p];
      map.emplace_back(e->axes[(*axis_of)[p]].var, axes[p]);
    }
    const Expr v = ReadToValue(prev.node().get(), value).mutate(substitute(e->body, map));
    const Expr bound = ir::var(e.name() + "_value", v.type());
    lets.emplace_back(bound, v);
    value = bound;
    axes = e_axes;
  }
  const Buffer& out = buffers.at(group.written().original.node().get());
  Stmt store =
      Store::make(out, value.type() == Type(out->dtype) ? value : cast(Type(out->dtype), value),
                  simplify(out.flat_index(axes)));
  for (auto it = lets.rbegin(); it != lets.rend(); ++it)
    store = LetStmt::make(it->first, it->second, store);
  std::vector<std::pair<Expr, Expr>> digits;
  unflatten(batch_var, pv->batch_vars, pv->batch_ext, digits);
  digits.emplace_back(pv->m_var, row_var);
  digits.emplace_back(pv->n_var, d_var);
  const Stmt epilogue = simplify(substitute(store, digits));

  std::string description =
      "attention " + name + " (" + std::string(dtype_name(group.q.buffer->dtype)) + ", batch [";
  for (size_t d = 0; d < group.batch_extents.size(); ++d) {
    description += (d ? ", " : "") + to_string(group.batch_extents[d]);
  }
  description += "], seq_q = " + to_string(group.seq_q) + ", seq_k = " + to_string(group.seq_k) +
                 ", D = " + std::to_string(group.head_dim) + ", scale = " + std::to_string(group.scale);
  if (group.device_scale.defined()) {
    // An exporter's scale computed from Shape(x) is a long expression: named, not printed, then.
    const std::string factor = to_string(group.device_scale);
    constexpr size_t kLongest = 48;
    description += factor.size() <= kLongest ? " x " + factor : " x a factor computed on the device (kiln_device_scale)";
  }
  if (group.mask) description += ", mask " + group.mask->buffer->name;
  description += "), stages:";
  for (const LoweringStage& s : group.stages) description += " " + s.inlined.name();
  return TemplateAttention::make(group.batch_extents, group.seq_q, group.seq_k, group.head_dim,
                                 group.q, group.k, group.v, group.mask, group.scale,
                                 group.device_scale, batch_var, row_var, d_var, out_var, epilogue,
                                 std::move(reference), description, path_reason(group));
}

}  // namespace kiln
