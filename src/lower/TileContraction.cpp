#include "TileContraction.h"

#include "IndexDigits.h"
#include "kiln/ir/IRMutator.h"
#include "kiln/ir/IROperator.h"
#include "kiln/ir/Simplify.h"
#include "kiln/support/Error.h"

namespace kiln {
namespace {

using namespace ir;
using Bindings = std::vector<std::pair<Expr, Expr>>;

Expr product(const std::vector<Expr>& extents) {
  Expr p = Expr(1);
  for (const Expr& e : extents) p = p * e;
  return simplify(p);
}

Expr ceil_div(const Expr& a, int64_t b) { return simplify((a + Expr(b - 1)) / Expr(b)); }

Stmt unrolled(const Expr& v, int64_t extent, Stmt body) {
  return For::make(v, 0, Expr(extent), ForKind::Unrolled, std::move(body));
}

Stmt barrier() { return Evaluate::make(Call::make(Type(DType::Int32), Intrinsic::SyncThreads, {})); }

}  // namespace

Stmt tile_contraction(const te::Tensor& t, const te::Contraction& c, const Buffer& out, const ContractionTile& tile) {
  const Reduce* red = t->body.as<Reduce>();
  KILN_ASSERT(red, "tile_contraction: {} is not a reduction", t.name());
  KILN_ASSERT(tile.m % tile.thread_m == 0 && tile.n % tile.thread_n == 0, "contraction tile of {}", t.name());
  const int64_t threads_m = tile.m / tile.thread_m, threads_n = tile.n / tile.thread_n, threads = tile.threads();
  KILN_ASSERT((tile.m * tile.k) % threads == 0 && (tile.n * tile.k) % threads == 0, "contraction tile of {}", t.name());
  const Type acc_type = red->type;

  auto axes_of = [&](const std::vector<int>& dims, std::vector<Expr>& vars, std::vector<Expr>& extents) {
    for (int d : dims) {
      vars.push_back(t->axes[d].var);
      extents.push_back(t.shape(d));
    }
  };
  std::vector<Expr> batch_vars, batch_ext, m_vars, m_ext, n_vars, n_ext, k_vars, k_ext;
  axes_of(c.batch_axes, batch_vars, batch_ext);
  axes_of(c.m_axes, m_vars, m_ext);
  axes_of(c.n_axes, n_vars, n_ext);
  for (const IterVar& r : red->axes) {
    k_vars.push_back(r.var);
    k_ext.push_back(r.extent);
  }
  const Expr M = product(m_ext), N = product(n_ext), K = product(k_ext), B = product(batch_ext);

  const std::string name = t.name();
  const Expr bz = var(name + "_batch"), by = var(name + "_mtile"), bx = var(name + "_ntile");
  const Expr thread = var(name + "_thread"), step = var(name + "_kstep"), lk = var(name + "_kk");
  const Expr la = var(name + "_la"), lb = var(name + "_lb"), ti = var(name + "_ti"), tj = var(name + "_tj");
  const Buffer a_tile = Buffer::make(name + "_a_tile", c.a.type().dtype, {Expr(tile.k), Expr(tile.m)}, MemoryScope::Shared);
  const Buffer b_tile = Buffer::make(name + "_b_tile", c.b.type().dtype, {Expr(tile.k), Expr(tile.n)}, MemoryScope::Shared);
  const Buffer acc = Buffer::make(name + "_acc", acc_type.dtype, {Expr(tile.thread_m * tile.thread_n)}, MemoryScope::Local);
  const Expr condition = red->condition.defined() && !is_one(red->condition) ? red->condition : Expr();

  Bindings batch;
  unflatten(bz, batch_vars, batch_ext, batch);

  // One factor's tile: thread `thread` loads elements l * threads + thread, the fast index along
  // the reduction for `a` (its rows are usually contiguous in k) and along n for `b`.
  auto load_tile = [&](bool is_a) {
    const int64_t width = is_a ? tile.m : tile.n;
    const Expr l = is_a ? la : lb;
    const Expr e = l * Expr(threads) + thread;
    const Expr outer = is_a ? e % Expr(tile.k) : e / Expr(tile.n);  // k within the step
    const Expr inner = is_a ? e / Expr(tile.k) : e % Expr(tile.n);  // m or n within the tile
    const Expr k = step * Expr(tile.k) + outer;
    const Expr mn = (is_a ? by : bx) * Expr(width) + inner;
    Bindings b = batch;
    unflatten(mn, is_a ? m_vars : n_vars, is_a ? m_ext : n_ext, b);
    unflatten(k, k_vars, k_ext, b);
    Expr inside = mn < (is_a ? M : N) && k < K;
    if (condition.defined() && c.condition_on_a == is_a) inside = inside && substitute(condition, b);
    const Buffer& dst = is_a ? a_tile : b_tile;
    const Expr value = substitute(is_a ? c.a : c.b, b);
    const Expr at = outer * Expr(width) + inner;
    const int64_t per_thread = width * tile.k / threads;
    return unrolled(l, per_thread,
                    IfThenElse::make(simplify(inside), Store::make(dst, value, simplify(at)),
                                     Store::make(dst, make_zero(value.type()), simplify(at))));
  };

  const Expr ty = thread / Expr(threads_n), tx = thread % Expr(threads_n);
  const Expr acc_at = ti * Expr(tile.thread_n) + tj;
  const Stmt multiply =
      unrolled(lk, tile.k, unrolled(ti, tile.thread_m, unrolled(tj, tile.thread_n,
          Store::make(acc,
                      reduce_combine(ReduceKind::Sum, Load::make(acc, acc_at),
                                     Load::make(a_tile, lk * Expr(tile.m) + ty + ti * Expr(threads_m)) *
                                         Load::make(b_tile, lk * Expr(tile.n) + tx + tj * Expr(threads_n))),
                      acc_at))));
  const Stmt steps = For::make(step, 0, ceil_div(K, tile.k), ForKind::Serial,
                               Seq::make({load_tile(true), load_tile(false), barrier(), multiply, barrier()}));

  const Expr m = by * Expr(tile.m) + ty + ti * Expr(threads_m), n = bx * Expr(tile.n) + tx + tj * Expr(threads_n);
  Bindings all = batch;
  unflatten(m, m_vars, m_ext, all);
  unflatten(n, n_vars, n_ext, all);
  std::vector<Expr> out_index;
  for (const IterVar& axis : t->axes) out_index.push_back(axis.var);
  const Stmt store = unrolled(ti, tile.thread_m, unrolled(tj, tile.thread_n,
      IfThenElse::make(m < M && n < N,
                       Store::make(out, Load::make(acc, acc_at), simplify(substitute(out.flat_index(out_index), all))))));

  const Stmt init = unrolled(ti, tile.thread_m * tile.thread_n,
                             Store::make(acc, reduce_identity(ReduceKind::Sum, acc_type), ti));
  Stmt body = For::make(thread, 0, Expr(threads), ForKind::ThreadIdxX,
                        Allocate::make(acc, Seq::make({init, steps, store})));
  body = Allocate::make(a_tile, Allocate::make(b_tile, body));
  body = For::make(bx, 0, ceil_div(N, tile.n), ForKind::BlockIdxX, body);
  body = For::make(by, 0, ceil_div(M, tile.m), ForKind::BlockIdxY, body);
  return For::make(bz, 0, B, ForKind::BlockIdxZ, body);
}

}  // namespace kiln
