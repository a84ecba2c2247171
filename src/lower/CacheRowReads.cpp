#include "CacheRowReads.h"

#include <map>
#include <optional>
#include <set>

#include "kiln/ir/ExprUsesVar.h"
#include "kiln/ir/Equality.h"
#include "kiln/ir/IRMutator.h"
#include "kiln/ir/IROperator.h"
#include "kiln/ir/IRVisitor.h"
#include "kiln/ir/Simplify.h"

namespace kiln {
namespace {

using namespace ir;

// A whole-vector load of a global buffer into a local array, inside a thread loop.
struct VectorRead {
  const Store* store;  // local[ramp] = global[ramp(base, 1, lanes)]
  const For* thread;   // the enclosing thread loop
  const For* step;     // the serial loop the offset steps with (null: none)
  Expr base, guard;    // with the thread and step variables replaced by the canonical ones
  int lanes;
};

// Collects the vector reads of each global buffer in a row body, the buffers stored to, and
// reads it cannot cache (a vector read under a context it does not understand).
class CollectReads : public IRVisitor {
 public:
  CollectReads(Expr t, Expr k) : t_(std::move(t)), k_(std::move(k)) {}
  std::map<const BufferNode*, std::vector<VectorRead>> reads;
  std::map<const BufferNode*, Buffer> buffers;
  std::vector<const BufferNode*> first_read;  // the buffers in the order of their first read, not by address
  std::set<const BufferNode*> stored, uncacheable;
  using IRVisitor::visit;

 protected:
  void visit(const For* op) override {
    const bool thread = is_gpu_thread(op->for_kind);
    if (thread) {
      if (thread_) ++nested_threads_;
      thread_ = op;
    } else if (thread_) {
      loops_.push_back(op);
    }
    IRVisitor::visit(op);
    if (thread) {
      thread_ = nullptr;
      loops_.clear();
    } else if (thread_) {
      loops_.pop_back();
    }
  }
  void visit(const LetStmt* op) override {
    visit(op->value);
    lets_.push_back(op->var);
    visit(op->body);
    lets_.pop_back();
  }
  void visit(const IfThenElse* op) override {
    visit(op->condition);
    guards_.push_back(op->condition);
    visit(op->then_case);
    guards_.pop_back();
    if (op->else_case.defined()) {
      guards_.push_back(Expr());  // an else branch: not a guard this pass reproduces
      visit(op->else_case);
      guards_.pop_back();
    }
  }
  void visit(const Store* op) override {
    if (op->buffer->scope == MemoryScope::Global) stored.insert(op->buffer.get());
    const Load* load = op->value.as<Load>();
    const Ramp* ramp = load ? load->index.as<Ramp>() : nullptr;
    if (ramp && load->buffer->scope == MemoryScope::Global &&
        op->buffer->scope == MemoryScope::Local) {
      if (buffers.emplace(load->buffer.get(), load->buffer).second) first_read.push_back(load->buffer.get());
      if (auto r = read(op, ramp)) {
        reads[load->buffer.get()].push_back(*r);
      } else {
        uncacheable.insert(load->buffer.get());
      }
      visit(op->index);
      return;
    }
    IRVisitor::visit(op);
  }

 private:
  std::optional<VectorRead> read(const Store* op, const Ramp* ramp) {
    if (!thread_ || nested_threads_ || !is_one(ramp->stride) || !is_zero(thread_->min))
      return std::nullopt;
    const For* step = nullptr;
    for (const For* f : loops_) {
      if (!expr_uses_var(ramp->base, f->var)) continue;
      if (step || !is_zero(f->min) || !as_const_int(f->extent)) return std::nullopt;
      step = f;
    }
    std::vector<std::pair<Expr, Expr>> canonical = {{thread_->var, t_}};
    if (step) canonical.emplace_back(step->var, k_);
    Expr guard;
    for (const Expr& g : guards_) {
      if (!g.defined()) return std::nullopt;
      for (const For* f : loops_) {
        if (f != step && expr_uses_var(g, f->var)) return std::nullopt;
      }
      guard = guard.defined() ? guard && g : g;
    }
    for (const For* f : loops_) {
      if (f != step && expr_uses_var(ramp->base, f->var)) return std::nullopt;
    }
    for (const Expr& v : lets_) {  // names bound inside the row: the read cannot move to its top
      if (expr_uses_var(ramp->base, v) || (guard.defined() && expr_uses_var(guard, v))) return std::nullopt;
    }
    VectorRead r{op,     thread_,    step, simplify(substitute(ramp->base, canonical)),
                 Expr(), ramp->lanes};
    if (guard.defined()) r.guard = simplify(substitute(guard, canonical));
    return r;
  }

  Expr t_, k_;
  const For* thread_ = nullptr;
  int nested_threads_ = 0;
  std::vector<const For*> loops_;
  std::vector<Expr> guards_, lets_;
};

bool same(const Expr& a, const Expr& b) {
  return a.defined() == b.defined() && (!a.defined() || structurally_equal(a, b));
}

// Vector reads become copies out of the row's local array; their step loops are unrolled.
class ReadFromCache : public IRMutator {
 public:
  std::map<const Store*, std::pair<Buffer, const VectorRead*>> reads;
  std::set<const For*> unroll;
  using IRMutator::mutate;

 protected:
  Stmt visit(const Store* op, const Stmt& self) override {
    auto it = reads.find(op);
    if (it == reads.end()) return IRMutator::visit(op, self);
    const auto& [cache, read] = it->second;
    const Expr offset = read->step ? read->step->var * Expr(read->lanes) : Expr(0);
    return Store::make(op->buffer, Load::make(cache, Ramp::make(offset, Expr(1), read->lanes)),
                       op->index);
  }
  Stmt visit(const For* op, const Stmt& self) override {
    Stmt s = IRMutator::visit(op, self);
    if (!unroll.count(op)) return s;
    const For* f = s.as<For>();
    return For::make(f->var, f->min, f->extent, ForKind::Unrolled, f->body);
  }
};

Stmt cache_row(const For* row, int64_t max_bytes) {
  const Expr t = var("t", row->var.type()), k = var("k", row->var.type());
  CollectReads collect(t, k);
  collect.visit(row->body);
  ReadFromCache rewrite;
  std::vector<Stmt> preloads;
  std::vector<Buffer> caches;
  int64_t bytes = 0;
  // In the order of the row's first reads: which buffers fit max_bytes, and the caches' order in the
  // generated text, must not depend on where the buffers happen to be allocated.
  for (const BufferNode* node : collect.first_read) {
    auto found = collect.reads.find(node);
    if (found == collect.reads.end()) continue;
    const std::vector<VectorRead>& reads = found->second;
    if (reads.size() < 2 || collect.stored.count(node) || collect.uncacheable.count(node)) continue;
    const VectorRead& first = reads.front();
    const int64_t steps = first.step ? *as_const_int(first.step->extent) : 1;
    bool agree = true;
    for (const VectorRead& r : reads) {
      const int64_t s = r.step ? *as_const_int(r.step->extent) : 1;
      agree = agree && s == steps && r.lanes == first.lanes &&
              structurally_equal(r.thread->extent, first.thread->extent) &&
              structurally_equal(r.base, first.base) && same(r.guard, first.guard);
    }
    const Buffer& global = collect.buffers.at(node);
    const int64_t cache_bytes = steps * first.lanes * dtype_bytes(global->dtype);
    if (!agree || bytes + cache_bytes > max_bytes) continue;
    bytes += cache_bytes;
    Buffer cache = Buffer::make(global->name + "_row", global->dtype, {Expr(steps * first.lanes)},
                                MemoryScope::Local);
    caches.push_back(cache);
    Stmt load = Store::make(cache, Load::make(global, Ramp::make(first.base, Expr(1), first.lanes)),
                            Ramp::make(k * Expr(first.lanes), Expr(1), first.lanes));
    if (first.guard.defined()) load = IfThenElse::make(first.guard, load);
    load = steps > 1 ? For::make(k, 0, Expr(steps), ForKind::Unrolled, load)
                     : substitute(load, {{k, Expr(0)}});
    preloads.push_back(For::make(t, 0, first.thread->extent, first.thread->for_kind, load));
    for (const VectorRead& r : reads) {
      rewrite.reads[r.store] = {cache, &r};
      if (r.step) rewrite.unroll.insert(r.step);
    }
  }
  if (caches.empty()) return Stmt();
  preloads.push_back(rewrite.mutate(row->body));
  Stmt body = Seq::make(preloads);
  for (auto it = caches.rbegin(); it != caches.rend(); ++it) body = Allocate::make(*it, body);
  return For::make(row->var, row->min, row->extent, row->for_kind, body);
}

class CacheRows : public IRMutator {
 public:
  explicit CacheRows(int64_t max_bytes) : max_bytes_(max_bytes) {}
  using IRMutator::mutate;

 protected:
  Stmt visit(const For* op, const Stmt& self) override {
    if (!is_gpu_block(op->for_kind)) return IRMutator::visit(op, self);
    Stmt cached = cache_row(op, max_bytes_);
    return cached.defined() ? cached : self;
  }

 private:
  int64_t max_bytes_;
};

}  // namespace

Stmt cache_row_reads(const Stmt& s, int64_t max_bytes) {
  return CacheRows(max_bytes).mutate(s);
}

}  // namespace kiln
