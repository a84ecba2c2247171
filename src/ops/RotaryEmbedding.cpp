// RotaryEmbedding (opset 23): rotates the first rotary_embedding_dim values of each head by the
// cached angles of its position: pairs (x1, x2) become (cos x1 - sin x2, sin x1 + cos x2). Pairs
// are (2p, 2p+1) when interleaved, else (p, p + dim/2). Inputs are [batch, heads, seq, head] or
// [batch, seq, heads * head] (num_heads); the caches are [batch, seq, dim/2], or [positions,
// dim/2] indexed by position_ids [batch, seq]. One injective stage, float16/bfloat16 in float32.
#include "Families.h"
#include "IndexMath.h"
#include "kiln/ops/Helpers.h"

namespace kiln::ops {
namespace {

using namespace ir;

std::vector<te::Tensor> rotary_embedding(OpContext& ctx) {
  const te::Tensor& x = ctx.input(0);
  const te::Tensor& cos_cache = ctx.input(1);
  const te::Tensor& sin_cache = ctx.input(2);
  const te::Tensor positions = ctx.has_input(3) ? ctx.input(3) : te::Tensor();
  check_dtype(ctx, x, "input 0", kFloatTypes);
  check_same_dtype(ctx, {x, cos_cache, sin_cache});
  const int rank = x.ndim();
  if (rank != 3 && rank != 4) ctx.fail("input 0 {} must have rank 3 or 4", shape_text(x.shape()));
  Expr head_size;
  if (rank == 4) {
    head_size = x.shape(3);
  } else {
    const int64_t heads = ctx.node().attr_int("num_heads", 0);
    if (heads <= 0) ctx.fail("a 3-D input {} needs attribute 'num_heads'", shape_text(x.shape()));
    auto hidden = as_const_int(x.shape(2));
    if (!hidden || *hidden % heads != 0) {
      ctx.fail("the hidden size of {} must be a known multiple of num_heads {}", shape_text(x.shape()), heads);
    }
    head_size = Expr(*hidden / heads);
  }
  auto head = as_const_int(head_size);
  if (!head) ctx.unsupported("a symbolic head size in {}", shape_text(x.shape()));
  int64_t dim = ctx.node().attr_int("rotary_embedding_dim", 0);
  if (dim == 0) dim = *head;
  if (dim % 2 != 0 || dim > *head) ctx.fail("rotary_embedding_dim {} must be even and at most the head size {}", dim, *head);
  const int64_t half = dim / 2;
  const int cache_rank = positions.defined() ? 2 : 3;
  if (cos_cache.ndim() != cache_rank || sin_cache.ndim() != cache_rank ||
      !is_const_int(cos_cache.shape(cache_rank - 1), half) || !is_const_int(sin_cache.shape(cache_rank - 1), half)) {
    ctx.fail("cos_cache {} and sin_cache {} must have rank {} and a last dim of {} (rotary_embedding_dim / 2)",
             shape_text(cos_cache.shape()), shape_text(sin_cache.shape()), cache_rank, half);
  }
  const bool interleaved = ctx.node().attr_int("interleaved", 0) != 0;
  return {te::compute(
      ctx.output_name(0), x.shape(),
      [&](const std::vector<Expr>& i) {
        const Expr b = i[0];
        const Expr s = rank == 4 ? i[2] : i[1];
        const Expr d = rank == 4 ? i[3] : floor_mod(i[2], head_size);
        const Expr base = rank == 4 ? Expr(0) : i[2] - d;  // the head's first element (3-D)
        auto at = [&](const Expr& dd) {
          std::vector<Expr> index = i;
          index[rank - 1] = rank == 4 ? dd : base + dd;
          return upcast(x(index));
        };
        Expr p, first, second, is_second;
        if (interleaved) {
          p = floor_div(d, Expr(2));
          first = p * 2;
          second = p * 2 + 1;
          is_second = floor_mod(d, Expr(2)) == 1;
        } else {
          is_second = d >= Expr(half);
          p = select(is_second, d - Expr(half), d);
          first = p;
          second = p + Expr(half);
        }
        const Expr pc = clamp(p, Expr(0), Expr(half - 1));
        auto cache = [&](const te::Tensor& t) {
          if (!positions.defined()) return upcast(t({b, s, pc}));
          const Expr row = clamp(cast(kIndexType, positions({b, s})), Expr(0), t.shape(0) - 1);
          return upcast(t({row, pc}));
        };
        const Expr cv = cache(cos_cache), sv = cache(sin_cache);
        const Expr x1 = at(clamp(first, Expr(0), Expr(dim - 1))), x2 = at(clamp(second, Expr(0), Expr(dim - 1)));
        const Expr rotated = select(is_second, sv * x1 + cv * x2, cv * x1 - sv * x2);
        return downcast(select(d < Expr(dim), rotated, upcast(x(i))), x.dtype());
      },
      ctx.node().describe())};
}

}  // namespace

void register_rotary_embedding(OpTable& table) { table.add(OpKind::RotaryEmbedding, rotary_embedding); }

}  // namespace kiln::ops
