#include "RowResultsInRegisters.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "kiln/ir/Equality.h"
#include "kiln/ir/IRMutator.h"
#include "kiln/ir/IROperator.h"
#include "kiln/ir/IRVisitor.h"

namespace kiln {
namespace {

using namespace ir;

// `if (tx == 0) { global[index] = acc[0] }` right after `acc[0] = block_allreduce(...)`, in a thread
// loop over tx: the store of a row result that every thread of the block holds.
struct GuardedResult {
  const IfThenElse* guard;
  Buffer global, acc;
  Expr index;
  int64_t threads;  // the thread loop's extent (0: not a constant)
};

std::optional<GuardedResult> as_guarded_result(const Stmt& allreduce, const Stmt& next, const Expr& thread_var, int64_t threads) {
  const Store* reduced = allreduce.as<Store>();
  const Call* call = reduced ? reduced->value.as<Call>() : nullptr;
  if (!call || call->op != Intrinsic::BlockAllReduce || !is_zero(reduced->index)) return std::nullopt;
  const IfThenElse* guard = next.as<IfThenElse>();
  if (!guard || guard->else_case.defined()) return std::nullopt;
  const EQ* first = guard->condition.as<EQ>();
  if (!first || !first->a.same_as(thread_var) || !is_zero(first->b)) return std::nullopt;
  const Store* store = guard->then_case.as<Store>();
  const Load* value = store ? store->value.as<Load>() : nullptr;
  if (!value || value->buffer.get() != reduced->buffer.get() || !is_zero(value->index) ||
      store->buffer->scope != MemoryScope::Global || store->value.type().lanes != 1)
    return std::nullopt;
  return GuardedResult{guard, store->buffer, reduced->buffer, store->index, threads};
}

// The guarded result stores of a row body's thread loops, by global buffer, with the position (in
// the row body's statement list) of the statement that holds each.
class FindResults : public IRVisitor {
 public:
  std::map<const BufferNode*, std::pair<GuardedResult, size_t>> results;
  size_t position = 0;
  using IRVisitor::visit;

 protected:
  void visit(const For* op) override {
    const bool thread = is_gpu_thread(op->for_kind);
    if (thread) thread_var_ = op->var, threads_ = as_const_int(op->extent).value_or(0);
    IRVisitor::visit(op);
    if (thread) thread_var_ = Expr();
  }
  void visit(const Seq* op) override {
    for (size_t i = 0; i + 1 < op->stmts.size() && thread_var_.defined(); ++i) {
      if (auto r = as_guarded_result(op->stmts[i], op->stmts[i + 1], thread_var_, threads_)) results.emplace(r->global.get(), std::make_pair(*r, position));
    }
    IRVisitor::visit(op);
  }

 private:
  Expr thread_var_;
  int64_t threads_ = 0;
};

// Every store and load of the given buffers in a statement: how many stores, and the loads' indices.
class Accesses : public IRVisitor {
 public:
  explicit Accesses(const std::set<const BufferNode*>& buffers) : buffers_(buffers) {}
  std::map<const BufferNode*, int> stores;
  std::map<const BufferNode*, std::vector<Expr>> loads;
  using IRVisitor::visit;

 protected:
  void visit(const Store* op) override {
    if (buffers_.count(op->buffer.get())) ++stores[op->buffer.get()];
    IRVisitor::visit(op);
  }
  void visit(const Load* op) override {
    if (buffers_.count(op->buffer.get())) loads[op->buffer.get()].push_back(op->index);
    IRVisitor::visit(op);
  }

 private:
  const std::set<const BufferNode*>& buffers_;
};

// The replacement inside one row body: each guarded store becomes an unguarded store of the
// thread's own copy, each load of the temporary a load of that copy.
class KeepInRegisters : public IRMutator {
 public:
  struct Replacement {
    const IfThenElse* guard;
    Buffer acc, value;
  };
  std::map<const BufferNode*, Replacement> replace;
  using IRMutator::mutate;

 protected:
  Stmt visit(const IfThenElse* op, const Stmt& self) override {
    for (const auto& [buffer, r] : replace) {
      if (r.guard == op) return Store::make(r.value, Load::make(r.acc, make_zero(kIndexType)), make_zero(kIndexType));
    }
    return IRMutator::visit(op, self);
  }
  Expr visit(const Load* op, const Expr& self) override {
    auto it = replace.find(op->buffer.get());
    return it == replace.end() ? IRMutator::visit(op, self) : Load::make(it->second.value, make_zero(kIndexType));
  }
};

class RowBodies : public IRMutator {
 public:
  RowBodies(const Stmt& whole, const std::vector<Buffer>& temporaries) : whole_(whole) {
    for (const Buffer& b : temporaries) temporaries_.insert(b.get());
  }
  std::set<const BufferNode*> removed;
  using IRMutator::mutate;

 protected:
  Stmt visit(const For* op, const Stmt& self) override {
    if (!is_gpu_block(op->for_kind)) return IRMutator::visit(op, self);
    // The row body: its statements, under the local allocations at its top.
    std::vector<const Allocate*> allocs;
    Stmt inner = op->body;
    while (const Allocate* a = inner.as<Allocate>()) allocs.push_back(a), inner = a->body;
    const Seq* seq = inner.as<Seq>();
    if (!seq) return self;
    FindResults found;
    for (size_t i = 0; i < seq->stmts.size(); ++i) {
      found.position = i;
      found.visit(seq->stmts[i]);
    }
    // In statement order (then by name), never by address: the order names the register values'
    // allocations in the generated text, which must not change from one run to the next.
    std::vector<const BufferNode*> ordered;
    // Not with 1024 threads a block: there a kernel fits two blocks on an SM only within 32
    // registers a thread, and the values kept live can cost that (softmax 1024x32000 fp16, default
    // schedule, H200, run s15e: 32 -> 44 registers, 51.0 -> 58.1 us; with 512 threads 48.6 -> 47.0).
    for (const auto& [buffer, r] : found.results)
      if (temporaries_.count(buffer) && r.first.threads > 0 && r.first.threads < 1024) ordered.push_back(buffer);
    if (ordered.empty()) return self;
    std::sort(ordered.begin(), ordered.end(), [&](const BufferNode* a, const BufferNode* b) {
      const size_t pa = found.results.at(a).second, pb = found.results.at(b).second;
      return pa != pb ? pa < pb : a->name < b->name;
    });
    const std::set<const BufferNode*> candidates(ordered.begin(), ordered.end());
    // The whole function's accesses (another kernel may read the temporary), and each statement's
    // of this row body.
    Accesses everywhere(candidates);
    everywhere.visit(whole_);
    std::vector<Accesses> in_stmt;
    for (const Stmt& st : seq->stmts) {
      in_stmt.emplace_back(candidates);
      in_stmt.back().visit(st);
    }
    KeepInRegisters keep;
    std::vector<Buffer> values;
    for (const BufferNode* buffer : ordered) {
      const auto& [r, position] = found.results.at(buffer);
      if (everywhere.stores[buffer] != 1) continue;
      size_t later = 0;
      for (size_t i = position + 1; i < seq->stmts.size(); ++i) later += in_stmt[i].loads[buffer].size();
      const std::vector<Expr>& all = everywhere.loads[buffer];
      const bool same_index = std::all_of(all.begin(), all.end(), [&](const Expr& i) { return structurally_equal(i, r.index); });
      if (all.empty() || later != all.size() || !same_index) continue;
      const Buffer value = Buffer::make(r.global->name + "_value", r.global->dtype, {Expr(1)}, MemoryScope::Local);
      keep.replace.emplace(buffer, KeepInRegisters::Replacement{r.guard, r.acc, value});
      values.push_back(value);
      removed.insert(buffer);
    }
    if (values.empty()) return self;
    Stmt body = keep.mutate(inner);
    for (const Buffer& v : values) body = Allocate::make(v, body);
    for (auto it = allocs.rbegin(); it != allocs.rend(); ++it) body = Allocate::make((*it)->buffer, body);
    return For::make(op->var, op->min, op->extent, op->for_kind, body);
  }

 private:
  Stmt whole_;
  std::set<const BufferNode*> temporaries_;
};

}  // namespace

Stmt row_results_in_registers(const Stmt& s, std::vector<Buffer>& temporaries) {
  RowBodies rows(s, temporaries);
  Stmt out = rows.mutate(s);
  temporaries.erase(std::remove_if(temporaries.begin(), temporaries.end(), [&](const Buffer& b) { return rows.removed.count(b.get()) > 0; }),
                    temporaries.end());
  return out;
}

}  // namespace kiln
