#include "VectorizeLoops.h"

#include "kiln/ir/Equality.h"
#include "kiln/ir/IRMutator.h"
#include "kiln/ir/IROperator.h"
#include "kiln/ir/IRVisitor.h"
#include "kiln/ir/Simplify.h"

namespace kiln {
namespace {

using namespace ir;

class Mentions : public IRVisitor {
 public:
  explicit Mentions(const Expr& v) : v_(v) {}
  bool found = false;
  using IRVisitor::visit;

 protected:
  void visit(const Variable* op) override { found = found || op == v_.get(); }
  void visit(const Let* op) override {
    lets = true;
    IRVisitor::visit(op);
  }

 public:
  bool lets = false;

 private:
  Expr v_;
};

bool mentions(const Expr& e, const Expr& v) {
  Mentions m(v);
  m.visit(e);
  return m.found || m.lets;  // a Let inside could bind names the hoisted base would lose
}

void add_terms(const Expr& e, std::vector<Expr>& terms) {
  if (const Add* a = e.as<Add>()) {
    add_terms(a->a, terms);
    add_terms(a->b, terms);
  } else {
    terms.push_back(e);
  }
}

bool multiple_of(const Expr& e, int64_t n) {
  if (auto c = as_const_int(e)) return *c % n == 0;
  if (const Mul* m = e.as<Mul>()) return multiple_of(m->a, n) || multiple_of(m->b, n);
  if (const Add* a = e.as<Add>()) return multiple_of(a->a, n) && multiple_of(a->b, n);
  return false;
}

// base when index == base + v with base free of v and a multiple of lanes; undefined otherwise.
Expr contiguous_base(const Expr& index, const Expr& v, int64_t lanes) {
  std::vector<Expr> terms;
  add_terms(index, terms);
  Expr base;
  int hits = 0;
  for (const Expr& t : terms) {
    if (t.same_as(v)) {
      ++hits;
      continue;
    }
    if (mentions(t, v) || !multiple_of(t, lanes)) return Expr();
    base = base.defined() ? base + t : t;
  }
  if (hits != 1) return Expr();
  return base.defined() ? base : Expr(0);
}

// The variables that loops and lets inside a statement bind.
class BoundInside : public IRVisitor {
 public:
  std::vector<Expr> vars;
  using IRVisitor::visit;

 protected:
  void visit(const For* op) override {
    vars.push_back(op->var);
    IRVisitor::visit(op);
  }
  void visit(const LetStmt* op) override {
    vars.push_back(op->var);
    IRVisitor::visit(op);
  }
};

// Replaces contiguous loads with reads of per-load local arrays. A load whose offset depends on
// a loop or let inside the vectorized loop (a reduction's row) stays where it is.
class HoistLoads : public IRMutator {
 public:
  HoistLoads(const Expr& v, int64_t lanes, std::vector<Expr> inner)
      : v_(v), lanes_(lanes), inner_(std::move(inner)) {}
  struct Hoisted {
    Buffer global, local;
    Expr base;
  };
  std::vector<Hoisted> hoisted;
  using IRMutator::mutate;

 protected:
  Expr visit(const Load* op, const Expr& self) override {
    if (op->buffer->scope != MemoryScope::Global) return IRMutator::visit(op, self);
    Expr base = contiguous_base(op->index, v_, lanes_);
    for (const Expr& w : inner_) {
      if (base.defined() && mentions(base, w)) base = Expr();
    }
    if (!base.defined()) return IRMutator::visit(op, self);
    for (const Hoisted& h : hoisted) {
      if (h.global.same_as(op->buffer) && structurally_equal(h.base, base)) return Load::make(h.local, v_);
    }
    Buffer local = Buffer::make(op->buffer->name + "_v", op->buffer->dtype, {Expr(lanes_)}, MemoryScope::Local);
    hoisted.push_back({op->buffer, local, base});
    return Load::make(local, v_);
  }

 private:
  Expr v_;
  int64_t lanes_;
  std::vector<Expr> inner_;
};

Stmt vectorize_one(const For* loop) {
  const int64_t lanes = *as_const_int(loop->extent);
  const Expr& v = loop->var;
  // A guard that does not depend on the lane moves outside the loop.
  Stmt body = loop->body;
  Expr guard;
  if (const IfThenElse* i = body.as<IfThenElse>(); i && !i->else_case.defined() && !mentions(i->condition, v)) {
    guard = i->condition;
    body = i->then_case;
  }
  const Store* store = body.as<Store>();
  Expr out_base = store && store->buffer->scope == MemoryScope::Global ? contiguous_base(store->index, v, lanes) : Expr();
  BoundInside inner;
  inner.visit(body);
  HoistLoads hoist(v, lanes, inner.vars);
  std::vector<Stmt> seq;
  Buffer result;
  Stmt compute;
  if (out_base.defined()) {
    result = Buffer::make(store->buffer->name + "_v", store->buffer->dtype, {Expr(lanes)}, MemoryScope::Local);
    compute = Store::make(result, hoist.mutate(store->value), v);
  } else {
    compute = hoist.mutate(body);
  }
  if (hoist.hoisted.empty() && !out_base.defined()) {
    return For::make(v, loop->min, loop->extent, ForKind::Unrolled, loop->body);
  }
  const Expr lane_ramp = Ramp::make(Expr(0), Expr(1), static_cast<int>(lanes));
  for (const auto& h : hoist.hoisted) {
    seq.push_back(Store::make(h.local, Load::make(h.global, Ramp::make(h.base, Expr(1), static_cast<int>(lanes))), lane_ramp));
  }
  seq.push_back(For::make(v, loop->min, loop->extent, ForKind::Unrolled, compute));
  if (out_base.defined()) {
    seq.push_back(Store::make(store->buffer, Load::make(result, lane_ramp), Ramp::make(out_base, Expr(1), static_cast<int>(lanes))));
  }
  Stmt out = Seq::make(seq);
  if (result.defined()) out = Allocate::make(result, out);
  for (const auto& h : hoist.hoisted) out = Allocate::make(h.local, out);
  if (guard.defined()) out = IfThenElse::make(guard, out);
  return out;
}

class Vectorize : public IRMutator {
 public:
  using IRMutator::mutate;

 protected:
  Stmt visit(const For* op, const Stmt& self) override {
    Stmt s = IRMutator::visit(op, self);
    const For* f = s.as<For>();
    if (f->for_kind != ForKind::Vectorized || !as_const_int(f->extent) || !is_zero(f->min)) return s;
    return vectorize_one(f);
  }
};

}  // namespace

Stmt vectorize_loops(const Stmt& s) { return Vectorize().mutate(s); }

}  // namespace kiln
