#include "SplitColumnReduction.h"

#include <optional>

#include "kiln/ir/ExprUsesVar.h"
#include "kiln/ir/IRMutator.h"
#include "kiln/ir/IROperator.h"

namespace kiln {
namespace {

using namespace ir;

std::optional<ReduceKind> combiner_kind(const Expr& update) {
  switch (update.kind()) {
    case NodeKind::Add:
      return ReduceKind::Sum;
    case NodeKind::Mul:
      return ReduceKind::Prod;
    case NodeKind::Min:
      return ReduceKind::Min;
    case NodeKind::Max:
      return ReduceKind::Max;
    default:
      return std::nullopt;
  }
}

// The one-element accumulator becomes one element per lane.
class ExpandAccumulator : public IRMutator {
 public:
  ExpandAccumulator(Buffer from, Buffer to, Expr lane)
      : from_(std::move(from)), to_(std::move(to)), lane_(std::move(lane)) {}
  using IRMutator::mutate;

 protected:
  Expr visit(const Load* op, const Expr& self) override {
    if (!op->buffer.same_as(from_)) return IRMutator::visit(op, self);
    return Load::make(to_, lane_);
  }
  Stmt visit(const Store* op, const Stmt& self) override {
    if (!op->buffer.same_as(from_)) return IRMutator::visit(op, self);
    return Store::make(to_, mutate(op->value), lane_);
  }

 private:
  Buffer from_, to_;
  Expr lane_;
};

// The update store at the bottom of a nest of loops and guards, as given by `wrap`; undefined
// when the nest holds anything else, or when a loop bound or guard of the nest depends on the
// lane `lane` (a pooling window's padding test on the output column: the lane loop cannot move
// inside it).
template <typename Wrap>
Stmt wrap_update(const Stmt& s, const Buffer& acc, const Expr& lane, const Wrap& wrap) {
  if (const For* f = s.as<For>()) {
    if (expr_uses_var(f->min, lane) || expr_uses_var(f->extent, lane)) return Stmt();
    Stmt b = wrap_update(f->body, acc, lane, wrap);
    return b.defined() ? For::make(f->var, f->min, f->extent, f->for_kind, b) : Stmt();
  }
  if (const IfThenElse* i = s.as<IfThenElse>(); i && !i->else_case.defined()) {
    if (expr_uses_var(i->condition, lane)) return Stmt();
    Stmt b = wrap_update(i->then_case, acc, lane, wrap);
    return b.defined() ? IfThenElse::make(i->condition, b) : Stmt();
  }
  if (const Store* st = s.as<Store>(); st && st->buffer.same_as(acc)) return wrap(s);
  return Stmt();
}

struct Threads {
  Expr tx;
  int64_t x;
};

// `a`: the accumulator's allocation (init, update nest, output store); `lane`: the Vectorized
// loop around it, or null.
Stmt split(const Allocate* a, const For* lane, const Threads& threads, int64_t rows) {
  const Seq* seq = a->body.as<Seq>();
  if (a->buffer->scope != MemoryScope::Local || !seq || seq->stmts.size() != 3) return Stmt();
  const Store* init = seq->stmts[0].as<Store>();
  const For* outer = seq->stmts[1].as<For>();
  const Store* out = seq->stmts[2].as<Store>();
  if (!init || !outer || !out || !init->buffer.same_as(a->buffer) || !is_zero(outer->min))
    return Stmt();
  auto extent = as_const_int(outer->extent);
  auto lanes = lane ? as_const_int(lane->extent) : std::optional<int64_t>(1);
  if (!extent || !lanes) return Stmt();
  // The update's combiner, from the store at the bottom of the nest.
  std::optional<ReduceKind> kind;
  const Expr lane_var = lane ? lane->var : Expr();
  wrap_update(seq->stmts[1], a->buffer, lane_var, [&](const Stmt& s) {
    kind = combiner_kind(s.as<Store>()->value);
    return s;
  });
  if (!kind) return Stmt();

  const Buffer acc =
      Buffer::make(a->buffer->name, a->buffer->dtype, {Expr(*lanes)}, MemoryScope::Local);
  const Expr lane_index = lane ? lane->var : Expr(0);
  auto per_lane = [&](const Stmt& s) {
    Stmt e = ExpandAccumulator(a->buffer, acc, lane_index).mutate(s);
    return lane ? For::make(lane->var, 0, Expr(*lanes), ForKind::Vectorized, e) : e;
  };
  Stmt update = wrap_update(outer->body, a->buffer, lane_var, per_lane);
  if (!update.defined()) return Stmt();

  // Rows of the outermost reduction loop: r = k * rows + ty.
  const std::string name = outer->var.as<Variable>()->name;
  const Expr ty = var("ty");
  const int64_t steps = (*extent + rows - 1) / rows;
  auto step = [&](const Expr& k) {
    const Expr r = k * Expr(rows) + ty;
    Stmt s = substitute(update, {{outer->var, r}});
    return *extent % rows == 0 ? s : IfThenElse::make(r < Expr(*extent), s);
  };
  Stmt nest;
  // Loads in flight per thread: 8 steps unrolled where the steps allow, else 4.
  const int64_t unroll = steps % 8 == 0 && steps > 8 ? 8 : steps % 4 == 0 && steps > 4 ? 4 : 1;
  if (unroll > 1) {
    const Expr ko = var(name + "_k"), ku = var(name + "_u");
    nest =
        For::make(ko, 0, Expr(steps / unroll), ForKind::Serial,
                  For::make(ku, 0, Expr(unroll), ForKind::Unrolled, step(ko * Expr(unroll) + ku)));
  } else {
    const Expr k = var(name + "_k");
    nest = For::make(k, 0, Expr(steps), ForKind::Serial, step(k));
  }

  // Thread (x, 0) combines the partial results of threads (x, 1..rows-1), lane by lane.
  const Buffer partial = Buffer::make(a->buffer->name + "_partial", a->buffer->dtype,
                                      {Expr(threads.x * rows)}, MemoryScope::Shared);
  const Expr w = var("w"), y = var("y");
  const Stmt sync = Evaluate::make(Call::make(Type(DType::Int32), Intrinsic::SyncThreads, {}));
  const Stmt gather = For::make(
      y, 0, Expr(rows - 1), ForKind::Unrolled,
      Store::make(acc,
                  reduce_combine(*kind, Load::make(acc, w),
                                 Load::make(partial, (y + Expr(1)) * Expr(threads.x) + threads.tx)),
                  w));
  // The first barrier keeps a lane's writes from overtaking the previous lane's (or output
  // group's) reads by thread (x, 0).
  const Stmt combine = For::make(
      w, 0, Expr(*lanes), ForKind::Unrolled,
      Seq::make({sync, Store::make(partial, Load::make(acc, w), ty * Expr(threads.x) + threads.tx),
                 sync, IfThenElse::make(ty == Expr(0), gather)}));
  const Stmt body = Seq::make({per_lane(seq->stmts[0]), nest, combine,
                               IfThenElse::make(ty == Expr(0), per_lane(seq->stmts[2]))});
  return For::make(ty, 0, Expr(rows), ForKind::ThreadIdxY,
                   Allocate::make(partial, Allocate::make(acc, body)));
}

class Rewrite : public IRMutator {
 public:
  explicit Rewrite(int64_t rows) : rows_(rows) {}
  using IRMutator::mutate;

 protected:
  Stmt visit(const For* op, const Stmt& self) override {
    if (op->for_kind == ForKind::ThreadIdxX) {
      auto x = as_const_int(op->extent);
      if (!x || !is_zero(op->min)) return self;
      const Threads threads{op->var, *x};
      Stmt body;
      if (const Allocate* a = op->body.as<Allocate>()) {
        body = split(a, nullptr, threads, rows_);
      } else if (const For* lane = op->body.as<For>();
                 lane && lane->for_kind == ForKind::Vectorized && is_zero(lane->min)) {
        if (const Allocate* a2 = lane->body.as<Allocate>()) body = split(a2, lane, threads, rows_);
      }
      return body.defined() ? For::make(op->var, op->min, op->extent, op->for_kind, body) : self;
    }
    return IRMutator::visit(op, self);
  }

 private:
  int64_t rows_;
};

}  // namespace

Stmt split_column_reduction(const Stmt& stage, int64_t row_threads) {
  return Rewrite(row_threads).mutate(stage);
}

}  // namespace kiln
