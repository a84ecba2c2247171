#include "CrossThreadReduce.h"

#include "kiln/ir/IRMutator.h"
#include "kiln/ir/IROperator.h"
#include "kiln/support/Error.h"

namespace kiln {
namespace {

using namespace ir;

std::optional<ReduceKind> combiner_kind(const Expr& update) {
  switch (update.kind()) {
    case NodeKind::Add: return ReduceKind::Sum;
    case NodeKind::Mul: return ReduceKind::Prod;
    case NodeKind::Min: return ReduceKind::Min;
    case NodeKind::Max: return ReduceKind::Max;
    default: return std::nullopt;
  }
}

// The innermost loop of a perfect nest (through IfThenElse without else) is split across threads.
Stmt split_innermost(const Stmt& s, const Expr& tx, int64_t threads, int64_t lanes) {
  const For* f = s.as<For>();
  if (!f) return Stmt();
  Stmt inner = split_innermost(f->body, tx, threads, lanes);
  if (inner.defined()) return For::make(f->var, f->min, f->extent, f->for_kind, inner);
  auto extent = as_const_int(f->extent);
  if (lanes > 1 && extent && *extent % lanes == 0 && is_zero(f->min)) {
    // r = (k * threads + tx) * lanes + v: consecutive lanes per thread, threads side by side.
    const int64_t steps = *extent / lanes;
    Expr k = var(f->var.as<Variable>()->name + "_k"), v = var(f->var.as<Variable>()->name + "_v");
    Expr q = k * Expr(threads) + tx;
    Stmt body = For::make(v, 0, Expr(lanes), ForKind::Vectorized, substitute(f->body, {{f->var, q * Expr(lanes) + v}}));
    if (steps % threads != 0) body = IfThenElse::make(q < Expr(steps), body);
    return For::make(k, 0, Expr((steps + threads - 1) / threads), ForKind::Serial, body);
  }
  // f is the innermost loop: r = min + k * threads + tx for k < ceil(extent / threads).
  Expr k = var(f->var.as<Variable>()->name + "_k");
  Expr r = f->min + k * Expr(threads) + tx;
  Stmt body = substitute(f->body, {{f->var, r}});
  if (!extent || *extent % threads != 0) body = IfThenElse::make(r < f->min + f->extent, body);
  return For::make(k, 0, (f->extent + Expr(threads - 1)) / Expr(threads), ForKind::Serial, body);
}

class Rewrite : public IRMutator {
 public:
  Rewrite(int64_t threads, int64_t lanes) : threads_(threads), lanes_(lanes) {}
  using IRMutator::mutate;
  bool changed = false;

 protected:
  Stmt visit(const Allocate* op, const Stmt& self) override {
    const Seq* seq = op->body.as<Seq>();
    if (op->buffer->scope != MemoryScope::Local || !seq || seq->stmts.size() != 3) return IRMutator::visit(op, self);
    const Store* init = seq->stmts[0].as<Store>();
    const Store* out = seq->stmts[2].as<Store>();
    Stmt update_nest = seq->stmts[1];
    const Stmt* innermost = &update_nest;
    while (const For* f = innermost->as<For>()) innermost = &f->body;
    const IfThenElse* cond = innermost->as<IfThenElse>();
    const Store* update = cond ? cond->then_case.as<Store>() : innermost->as<Store>();
    if (!init || !out || !update || !init->buffer.same_as(op->buffer) || !update->buffer.same_as(op->buffer) ||
        !update_nest.as<For>()) {
      return IRMutator::visit(op, self);
    }
    auto kind = combiner_kind(update->value);
    if (!kind) return IRMutator::visit(op, self);
    changed = true;
    Expr tx = var("tx");
    Stmt split = split_innermost(update_nest, tx, threads_, lanes_);
    Expr acc = Load::make(op->buffer, 0);
    Expr all = Call::make(acc.type(), Intrinsic::BlockAllReduce,
                          {acc, init->value, make_const(Type(DType::Int32), static_cast<int>(*kind))});
    Stmt body = Seq::make({seq->stmts[0], split, Store::make(op->buffer, all, 0),
                           IfThenElse::make(tx == Expr(0), seq->stmts[2])});
    return For::make(tx, 0, Expr(threads_), ForKind::ThreadIdxX, Allocate::make(op->buffer, body));
  }

 private:
  int64_t threads_, lanes_;
};

}  // namespace

Stmt cross_thread_reduce(const Stmt& stage, int64_t threads, int64_t lanes) {
  KILN_ASSERT(threads % 32 == 0 && threads > 0 && threads <= 1024, "cross-thread reduction over {} threads", threads);
  Rewrite rewrite(threads, lanes);
  return rewrite.mutate(stage);
}

}  // namespace kiln
