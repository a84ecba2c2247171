// Attention (opsets 23-25): softmax(Q K^T * scale (softcapped) + bias) V per head, with 3-D
// inputs split into heads (q_num_heads, kv_num_heads), grouped-query attention (each K/V head
// serves q_heads / kv_heads query heads), a past key/value cache concatenated before the new
// keys (present_key/present_value outputs), and a bias made of the attention mask (boolean:
// -inf where false; float: added; a shorter last dim padded as masked), the causal mask aligned
// to the end of the cache, the sliding window (left/right_window_size) and nonpad_kv_seqlen. A
// row whose keys are all masked gives 0. qk_matmul_output_mode selects output 3 (0/1: the
// softcapped scores, 2: with the bias, 3: after softmax), as the ONNX reference.
//
// The stages are the same as those of an exported attention subgraph (MatMul, Mul, Add,
// Softmax, MatMul): a contraction over the head dim, the row max and row sum of a softmax, and
// a contraction over the keys; both forms therefore lower to the same kernels.
#include <cmath>

#include "Families.h"
#include "IndexMath.h"
#include "kiln/ops/Helpers.h"

namespace kiln::ops {
namespace {

using namespace ir;

int64_t dim_of(const OpContext& ctx, const te::Tensor& t, int d, const char* what) {
  auto n = as_const_int(t.shape(d));
  if (!n) ctx.unsupported("{} (dim {} of {}) is symbolic", what, d, shape_text(t.shape()));
  return *n;
}

std::vector<te::Tensor> attention(OpContext& ctx) {
  const Node& node = ctx.node();
  const te::Tensor& q = ctx.input(0);
  const te::Tensor& k = ctx.input(1);
  const te::Tensor& v = ctx.input(2);
  check_dtype(ctx, q, "input 0 (Q)", kFloatTypes);
  check_same_dtype(ctx, {q, k, v});
  const int rank = q.ndim();
  if ((rank != 3 && rank != 4) || k.ndim() != rank || v.ndim() != rank) {
    ctx.fail("Q {}, K {} and V {} must all have rank 3 or all rank 4", shape_text(q.shape()), shape_text(k.shape()),
             shape_text(v.shape()));
  }
  const te::Tensor mask = ctx.has_input(3) ? ctx.input(3) : te::Tensor();
  const te::Tensor past_k = ctx.has_input(4) ? ctx.input(4) : te::Tensor();
  const te::Tensor past_v = ctx.has_input(5) ? ctx.input(5) : te::Tensor();
  const te::Tensor nonpad = ctx.has_input(6) ? ctx.input(6) : te::Tensor();
  if (past_k.defined() != past_v.defined()) ctx.fail("past_key and past_value must be given together");
  if (nonpad.defined() && past_k.defined()) ctx.fail("nonpad_kv_seqlen cannot be combined with past_key/past_value");
  const int64_t batch = dim_of(ctx, q, 0, "the batch size");
  int64_t hq, hkv, sq, skv, dq, dv;
  if (rank == 3) {
    if (!node.has_attribute("q_num_heads") || !node.has_attribute("kv_num_heads")) {
      ctx.fail("3-D Q/K/V need attributes 'q_num_heads' and 'kv_num_heads'");
    }
    hq = node.attr_int("q_num_heads", 1);
    hkv = node.attr_int("kv_num_heads", 1);
    if (hq <= 0 || hkv <= 0) ctx.fail("q_num_heads ({}) and kv_num_heads ({}) must be positive", hq, hkv);
    sq = dim_of(ctx, q, 1, "the query length");
    skv = dim_of(ctx, k, 1, "the key length");
    const int64_t wq = dim_of(ctx, q, 2, "Q's hidden size"), wk = dim_of(ctx, k, 2, "K's hidden size"),
                  wv = dim_of(ctx, v, 2, "V's hidden size");
    if (wq % hq != 0 || wk % hkv != 0 || wv % hkv != 0) {
      ctx.fail("hidden sizes {} (Q), {} (K), {} (V) must divide into q_num_heads {} / kv_num_heads {}", wq, wk, wv, hq, hkv);
    }
    dq = wq / hq;
    dv = wv / hkv;
    if (wk / hkv != dq) ctx.fail("Q's head size {} differs from K's {}", dq, wk / hkv);
  } else {
    if (ctx.opset() >= 25 && (node.has_attribute("q_num_heads") || node.has_attribute("kv_num_heads"))) {
      ctx.fail("q_num_heads and kv_num_heads must not be given for 4-D inputs");
    }
    hq = dim_of(ctx, q, 1, "Q's heads");
    hkv = dim_of(ctx, k, 1, "K's heads");
    sq = dim_of(ctx, q, 2, "the query length");
    skv = dim_of(ctx, k, 2, "the key length");
    dq = dim_of(ctx, q, 3, "Q's head size");
    dv = dim_of(ctx, v, 3, "V's head size");
    if (dim_of(ctx, k, 3, "K's head size") != dq) ctx.fail("K {} must have Q's head size {}", shape_text(k.shape()), dq);
  }
  if (hq % hkv != 0) ctx.fail("q heads ({}) must be a multiple of kv heads ({})", hq, hkv);
  const int64_t group = hq / hkv;
  const int64_t past = past_k.defined() ? dim_of(ctx, past_k, 2, "the cache length") : 0;
  const int64_t total = past + skv;
  const DType dtype = q.dtype();
  const int64_t precision = node.attr_int("softmax_precision", 0);
  const Type acc = precision == 11 || dtype == DType::Float64 ? Type(DType::Float64) : Type(DType::Float32);
  auto c = [&](double x) { return make_const(acc, x); };
  const double scale = node.has_attribute("scale") ? node.attr_float("scale", 1.0) : 1.0 / std::sqrt(static_cast<double>(dq));
  const double softcap = node.attr_float("softcap", 0.0);
  const bool causal = node.attr_int("is_causal", 0) != 0;
  const int64_t left = node.attr_int("left_window_size", -1), right = node.attr_int("right_window_size", -1);
  const int64_t mode = node.attr_int("qk_matmul_output_mode", 0);
  if (mode < 0 || mode > 3) ctx.fail("attribute 'qk_matmul_output_mode' is {}, expected 0 to 3", mode);

  // 4-D views [b, head, seq, d] of the inputs; keys and values include the cache.
  auto head_read = [&](const te::Tensor& t, const Expr& b, const Expr& h, const Expr& s, const Expr& d, int64_t size) {
    return rank == 3 ? t({b, s, h * Expr(size) + d}) : t({b, h, s, d});
  };
  auto present = [&](const te::Tensor& cache, const te::Tensor& fresh, int64_t size, int output) {
    return te::compute(
        ctx.output_name(output),
        {Expr(batch), Expr(hkv), Expr(total), Expr(size)},
        [&](const std::vector<Expr>& i) {
          // Without a cache i[2] < skv already, and the read stays affine (lower/TemplateAttention.h).
          if (!cache.defined()) return head_read(fresh, i[0], i[1], i[2], i[3], size);
          const Expr now = head_read(fresh, i[0], i[1], clamp(i[2] - Expr(past), Expr(0), Expr(skv - 1)), i[3], size);
          return select(i[2] < Expr(past), cache({i[0], i[1], clamp(i[2], Expr(0), Expr(past - 1)), i[3]}), now);
        },
        node.describe());
  };
  // The K/V head that query head h reads (grouped-query attention): h itself without groups.
  auto kv_head = [&](const Expr& h) { return group == 1 ? h : floor_div(h, Expr(group)); };
  const te::Tensor keys = present(past_k, k, dq, 1);
  const te::Tensor values = present(past_v, v, dv, 2);

  const IterVar d = te::reduce_axis(Expr(dq), ctx.stage_name("d"));
  const te::Tensor scores = te::compute(
      ctx.stage_name("scores"), {Expr(batch), Expr(hq), Expr(sq), Expr(total)},
      [&](const std::vector<Expr>& i) {
        const Expr qv = cast(acc, head_read(q, i[0], i[1], i[2], d.var, dq));
        const Expr kv = cast(acc, keys({i[0], kv_head(i[1]), i[3], d.var}));
        return te::sum(qv * kv, {d});
      },
      node.describe());
  // The bias at [b, h, i, j]: 0 or -inf (masks) plus a float mask's value.
  auto neg_inf = [&]() { return lowest_value(acc); };
  auto bias = [&](const std::vector<Expr>& i) {
    Expr allowed = make_bool(true);
    Expr added = c(0);
    if (mask.defined()) {
      const int m = mask.ndim();
      std::vector<Expr> at;
      const int64_t mask_len = dim_of(ctx, mask, m - 1, "the mask's key length");
      for (int a = 0; a < m; ++a) {
        const Expr& index = i[4 - m + a];
        if (a == m - 1) at.push_back(clamp(index, Expr(0), Expr(mask_len - 1)));
        else at.push_back(is_one(mask.shape(a)) ? Expr(0) : index);
      }
      const Expr inside = i[3] < Expr(mask_len);
      if (mask.dtype() == DType::Bool) {
        allowed = inside && mask(at);
      } else {
        allowed = inside;
        added = cast(acc, mask(at));
      }
    }
    // Offsets of the query block within the keys: the cache length, or per batch nonpad - q.
    const Expr offset = nonpad.defined() ? cast(kIndexType, nonpad({i[0]})) - Expr(sq) : Expr(past);
    const Expr diff = i[2] + offset - i[3];
    if (causal) allowed = allowed && diff >= 0;
    if (left >= 0) allowed = allowed && diff <= Expr(left);
    if (right >= 0) allowed = allowed && -diff <= Expr(right);
    if (nonpad.defined()) allowed = allowed && i[3] < cast(kIndexType, nonpad({i[0]}));
    return select(allowed, added, neg_inf());
  };
  auto capped = [&](const std::vector<Expr>& i) {
    Expr s = scores(i) * c(scale);
    if (softcap > 0) s = c(softcap) * call(Intrinsic::Tanh, s / c(softcap));
    return s;
  };
  auto logits = [&](const std::vector<Expr>& i) { return capped(i) + bias(i); };
  const IterVar j1 = te::reduce_axis(Expr(total), ctx.stage_name("j_max"));
  const te::Tensor row_max = te::compute(
      ctx.stage_name("max"), {Expr(batch), Expr(hq), Expr(sq)},
      [&](const std::vector<Expr>& i) { return te::max_reduce(logits({i[0], i[1], i[2], j1.var}), {j1}); },
      node.describe());
  const IterVar j2 = te::reduce_axis(Expr(total), ctx.stage_name("j_sum"));
  const te::Tensor row_sum = te::compute(
      ctx.stage_name("sum"), {Expr(batch), Expr(hq), Expr(sq)},
      [&](const std::vector<Expr>& i) {
        const std::vector<Expr> at = {i[0], i[1], i[2], j2.var};
        return te::sum(call(Intrinsic::Exp, logits(at) - row_max(i)), {j2});
      },
      node.describe());
  auto probability = [&](const std::vector<Expr>& i) {
    const std::vector<Expr> row = {i[0], i[1], i[2]};
    const Expr m = row_max(row);
    return select(call(Intrinsic::IsInf, m) && m < c(0), c(0), call(Intrinsic::Exp, logits(i) - m) / row_sum(row));
  };
  const IterVar j3 = te::reduce_axis(Expr(total), ctx.stage_name("j"));
  const te::Tensor context = te::compute(
      ctx.stage_name("context"), {Expr(batch), Expr(hq), Expr(sq), Expr(dv)},
      [&](const std::vector<Expr>& i) {
        const Expr p = cast(acc, cast(Type(dtype), probability({i[0], i[1], i[2], j3.var})));
        return te::sum(p * cast(acc, values({i[0], kv_head(i[1]), j3.var, i[3]})), {j3});
      },
      node.describe());
  std::vector<te::Tensor> out;
  if (rank == 3) {
    out.push_back(te::compute(
        ctx.output_name(0), {Expr(batch), Expr(sq), Expr(hq * dv)},
        [&](const std::vector<Expr>& i) {
          return cast(Type(dtype), context({i[0], floor_div(i[2], Expr(dv)), i[1], floor_mod(i[2], Expr(dv))}));
        },
        node.describe()));
  } else {
    out.push_back(te::compute(
        ctx.output_name(0), context.shape(), [&](const std::vector<Expr>& i) { return cast(Type(dtype), context(i)); },
        node.describe()));
  }
  out.push_back(keys);
  out.push_back(values);
  out.push_back(te::compute(
      ctx.output_name(3), scores.shape(),
      [&](const std::vector<Expr>& i) {
        Expr r = mode == 2 ? logits(i) : mode == 3 ? probability(i) : capped(i);
        return cast(Type(dtype), r);
      },
      node.describe()));
  return out;
}

}  // namespace

void register_attention(OpTable& table) { table.add(OpKind::Attention, attention); }

}  // namespace kiln::ops
