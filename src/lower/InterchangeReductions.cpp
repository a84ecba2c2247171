#include "InterchangeReductions.h"

#include <optional>
#include <string>

#include "kiln/ir/ExprUsesVar.h"
#include "kiln/ir/IRMutator.h"
#include "kiln/ir/IROperator.h"
#include "kiln/ir/IRVisitor.h"
#include "kiln/ir/Simplify.h"

namespace kiln {
namespace {

using namespace ir;

// The loads of an expression or statement.
class CollectLoads : public IRVisitor {
 public:
  std::vector<const Load*> loads;
  using IRVisitor::visit;

 protected:
  void visit(const Load* op) override {
    loads.push_back(op);
    IRVisitor::visit(op);
  }
};

// The constant d with e(var + 1) = e(var) + d wherever e is a sum of multiples of var and terms
// without it; nullopt when it is not (var under a division, a min, a load, ...).
std::optional<int64_t> step(const Expr& e, const Expr& var) {
  if (!expr_uses_var(e, var)) return 0;
  if (e.same_as(var)) return 1;
  if (const Cast* c = e.as<Cast>()) return step(c->value, var);
  if (const Add* a = e.as<Add>()) {
    const auto x = step(a->a, var), y = step(a->b, var);
    if (x && y) return *x + *y;
  } else if (const Sub* d = e.as<Sub>()) {
    const auto x = step(d->a, var), y = step(d->b, var);
    if (x && y) return *x - *y;
  } else if (const Mul* m = e.as<Mul>()) {
    const auto ca = as_const_int(m->a), cb = as_const_int(m->b);
    const auto x = cb ? step(m->a, var) : std::nullopt, y = ca ? step(m->b, var) : std::nullopt;
    if (x) return *x * *cb;
    if (y) return *y * *ca;
  }
  return std::nullopt;
}

// How many of `loads` (other than the accumulator's) step by more than one element (or by no
// constant) when `var` steps by one.
int strided_loads(const std::vector<const Load*>& loads, const Buffer& acc, const Expr& var) {
  int n = 0;
  for (const Load* load : loads) {
    if (load->buffer.same_as(acc)) continue;
    const std::optional<int64_t> s = step(load->index, var);
    n += !s || *s > 1 || *s < -1;
  }
  return n;
}

// acc[0] -> acc_row[var], in loads and stores.
class Widen : public IRMutator {
 public:
  Widen(const Buffer& from, const Buffer& to, const Expr& var) : from_(from), to_(to), var_(var) {}
  using IRMutator::mutate;

 protected:
  Expr visit(const Load* op, const Expr& self) override {
    if (op->buffer.same_as(from_)) return Load::make(to_, var_);
    return IRMutator::visit(op, self);
  }
  Stmt visit(const Store* op, const Stmt& self) override {
    if (op->buffer.same_as(from_)) return Store::make(to_, mutate(op->value), var_);
    return IRMutator::visit(op, self);
  }

 private:
  Buffer from_, to_;
  Expr var_;
};

// Whether an expression loads or calls (worth computing once rather than per element of the row).
class Costly : public IRVisitor {
 public:
  bool found = false;
  using IRVisitor::visit;

 protected:
  void visit(const Load*) override { found = true; }
  void visit(const Call*) override { found = true; }
};

// Takes the parts of a row update that do not depend on the row's variable out of the row loop
// (an inlined GELU of the k-th input, once per k rather than once per output column): each
// becomes a let around the loop. Select branches and lets are left as they are (a branch may load
// where only its condition makes the address valid).
class HoistInvariants : public IRMutator {
 public:
  HoistInvariants(const Expr& row_var, const Buffer& acc, const std::string& prefix)
      : row_var_(row_var), acc_(acc), prefix_(prefix) {}
  std::vector<std::pair<Expr, Expr>> lets;  // (variable, value), in order
  using IRMutator::mutate;

 protected:
#define KILN_EXPR_NODE(name) \
  Expr visit(const name* op, const Expr& self) override { return hoist(self, [&] { return IRMutator::visit(op, self); }); }
#include "kiln/ir/Nodes.def"

 private:
  template <typename Recurse>
  Expr hoist(const Expr& e, Recurse recurse) {
    Costly costly;
    costly.visit(e);
    if (!costly.found) return e;
    if (!expr_uses_var(e, row_var_) && !reads_acc(e)) {
      const Expr v = Variable::make(e.type(), prefix_ + std::to_string(lets.size()));
      lets.emplace_back(v, e);
      return v;
    }
    if (e.as<Select>() || e.as<Let>()) return e;
    return recurse();
  }
  bool reads_acc(const Expr& e) const {
    CollectLoads all;
    all.visit(e);
    for (const Load* l : all.loads) {
      if (l->buffer.same_as(acc_)) return true;
    }
    return false;
  }
  Expr row_var_;
  Buffer acc_;
  std::string prefix_;
};

// The statement build_stage makes for one output element of a reduction:
//   Allocate acc[1] { acc[0] = init; for r...: [if (c)] acc[0] = f(acc[0], ...); out[i] = acc[0] }
struct ReductionElement {
  Buffer acc;
  Stmt init, loops, store;
  std::vector<const For*> reduction_loops;  // outermost first
  Stmt update;                              // the innermost statement
};

std::optional<ReductionElement> match_element(const Stmt& s) {
  const Allocate* alloc = s.as<Allocate>();
  if (!alloc || alloc->buffer->scope != MemoryScope::Local || alloc->buffer->shape.size() != 1 ||
      !is_const_int(alloc->buffer->shape[0], 1)) {
    return std::nullopt;
  }
  const Seq* seq = alloc->body.as<Seq>();
  if (!seq || seq->stmts.size() != 3) return std::nullopt;
  ReductionElement e{alloc->buffer, seq->stmts[0], seq->stmts[1], seq->stmts[2], {}, Stmt()};
  const Store* init = e.init.as<Store>();
  const Store* store = e.store.as<Store>();
  if (!init || !init->buffer.same_as(e.acc) || !store || store->buffer.same_as(e.acc)) return std::nullopt;
  Stmt inner = e.loops;
  while (const For* f = inner.as<For>()) {
    if (f->for_kind != ForKind::Serial) return std::nullopt;
    e.reduction_loops.push_back(f);
    inner = f->body;
  }
  if (e.reduction_loops.empty()) return std::nullopt;
  e.update = inner;
  const IfThenElse* cond = inner.as<IfThenElse>();
  if (cond && cond->else_case.defined()) return std::nullopt;
  const Store* update = (cond ? cond->then_case : inner).as<Store>();
  if (!update || !update->buffer.same_as(e.acc)) return std::nullopt;
  return e;
}

class Interchange : public IRMutator {
 public:
  explicit Interchange(int64_t max_row_bytes) : max_row_bytes_(max_row_bytes) {}
  using IRMutator::mutate;

 protected:
  Stmt visit(const For* op, const Stmt& self) override {
    const std::optional<int64_t> n = as_const_int(op->extent);
    const std::optional<ReductionElement> e = op->for_kind == ForKind::Serial ? match_element(op->body) : std::nullopt;
    if (!n || *n < 2 || !e || !is_const_int(op->min, 0) || *n * dtype_bytes(e->acc->dtype) > max_row_bytes_) {
      return IRMutator::visit(op, self);
    }
    CollectLoads loads;
    loads.visit(e->update);
    const Expr& inner_reduction = e->reduction_loops.back()->var;
    if (strided_loads(loads.loads, e->acc, op->var) >= strided_loads(loads.loads, e->acc, inner_reduction)) return self;
    const Buffer row = Buffer::make(e->acc->name + "_row", e->acc->dtype, {op->extent}, MemoryScope::Local);
    Widen widen(e->acc, row, op->var);
    auto over_row = [&](const Stmt& body) { return For::make(op->var, 0, op->extent, ForKind::Serial, widen.mutate(body)); };
    Stmt loops;
    if (const Store* update = e->update.as<Store>()) {  // unconditional: its invariant parts go before the row loop
      HoistInvariants hoist(op->var, e->acc, e->acc->name + "_k");
      const Expr value = hoist.mutate(update->value);
      loops = over_row(Store::make(update->buffer, value, update->index));
      for (auto it = hoist.lets.rbegin(); it != hoist.lets.rend(); ++it) loops = LetStmt::make(it->first, it->second, loops);
    } else {
      loops = over_row(e->update);
    }
    for (auto it = e->reduction_loops.rbegin(); it != e->reduction_loops.rend(); ++it) {
      loops = For::make((*it)->var, (*it)->min, (*it)->extent, ForKind::Serial, loops);
    }
    return Allocate::make(row, Seq::make({over_row(e->init), loops, over_row(e->store)}));
  }

 private:
  int64_t max_row_bytes_;
};

}  // namespace

Stmt interchange_reductions(const Stmt& s, int64_t max_row_bytes) { return Interchange(max_row_bytes).mutate(s); }

}  // namespace kiln
