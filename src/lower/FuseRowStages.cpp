#include "FuseRowStages.h"

#include <set>

#include "kiln/ir/Equality.h"
#include "kiln/ir/IRMutator.h"
#include "kiln/ir/IROperator.h"
#include "kiln/ir/IRVisitor.h"
#include "kiln/ir/Simplify.h"

namespace kiln {
namespace {

using namespace ir;

const For* row_loop(const Stmt& s) {
  const For* f = s.as<For>();
  return f && f->for_kind == ForKind::BlockIdxX && is_zero(f->min) ? f : nullptr;
}

class BufferAccess : public IRVisitor {
 public:
  std::set<const BufferNode*> stored;
  std::vector<const Load*> loads;
  using IRVisitor::visit;

 protected:
  void visit(const Load* op) override {
    loads.push_back(op);
    IRVisitor::visit(op);
  }
  void visit(const Store* op) override {
    stored.insert(op->buffer.get());
    IRVisitor::visit(op);
  }
};

// Whether `body` (over row variable `row`) reads buffers written by the group only at `row`,
// and each such buffer holds one element per row.
bool reads_own_rows(const Stmt& body, const Expr& row, const Expr& rows, const std::set<const BufferNode*>& written) {
  BufferAccess access;
  access.visit(body);
  for (const Load* l : access.loads) {
    if (!written.count(l->buffer.get())) continue;
    if (!structurally_equal(simplify(l->buffer.num_elements()), simplify(rows))) return false;
    if (!structurally_equal(simplify(l->index), row)) return false;
  }
  return true;
}

// The extent of the first thread-bound loop in `body` (undefined when there is none).
class FirstThreadLoop : public IRVisitor {
 public:
  Expr extent;
  using IRVisitor::visit;

 protected:
  void visit(const For* op) override {
    if (!extent.defined() && is_gpu_thread(op->for_kind)) extent = op->extent;
    IRVisitor::visit(op);
  }
};

Expr thread_extent(const Stmt& body) {
  FirstThreadLoop f;
  f.visit(body);
  return f.extent;
}

}  // namespace

Stmt fuse_row_stages(const Stmt& body, std::vector<std::string>& notes) {
  if (const Allocate* a = body.as<Allocate>()) {
    Stmt inner = fuse_row_stages(a->body, notes);
    return inner.same_as(a->body) ? body : Allocate::make(a->buffer, inner);
  }
  const Seq* seq = body.as<Seq>();
  if (!seq) return body;
  std::vector<Stmt> out;
  std::vector<std::string> merged;
  auto note = [&](size_t i) { return i < notes.size() ? notes[i] : std::string(); };
  size_t k = 0;
  while (k < seq->stmts.size()) {
    const For* first = row_loop(seq->stmts[k]);
    if (!first) {
      merged.push_back(note(k));
      out.push_back(seq->stmts[k++]);
      continue;
    }
    const Expr row = first->var;
    std::vector<Stmt> group = {first->body};
    std::set<const BufferNode*> written;
    {
      BufferAccess a;
      a.visit(first->body);
      written = a.stored;
    }
    size_t next = k + 1;
    for (; next < seq->stmts.size(); ++next) {
      const For* f = row_loop(seq->stmts[next]);
      if (!f || !structurally_equal(simplify(f->extent), simplify(first->extent))) break;
      // Block all-reduces need every thread of the block: a stage over more threads than the
      // first (a one-row reduction beside a grid-stride elementwise stage of one block) stays apart.
      const Expr te0 = thread_extent(first->body), te1 = thread_extent(f->body);
      // A stage without a thread loop (one value per row, computed by every thread) fuses with any.
      if (te0.defined() && te1.defined() && !structurally_equal(te0, te1)) break;
      Stmt b = substitute(f->body, {{f->var, row}});
      if (!reads_own_rows(b, row, first->extent, written)) break;
      BufferAccess a;
      a.visit(b);
      written.insert(a.stored.begin(), a.stored.end());
      group.push_back(Evaluate::make(Call::make(Type(DType::Int32), Intrinsic::SyncThreads, {})));
      group.push_back(b);
    }
    if (group.size() == 1) {
      merged.push_back(note(k));
      out.push_back(seq->stmts[k++]);
      continue;
    }
    // The barrier at the end keeps a block's next row from overwriting what slower threads read.
    group.push_back(Evaluate::make(Call::make(Type(DType::Int32), Intrinsic::SyncThreads, {})));
    out.push_back(For::make(row, 0, first->extent, ForKind::BlockIdxX, Seq::make(group)));
    std::string joined = "one kernel per row for " + std::to_string(next - k) + " stages:";
    for (size_t i = k; i < next; ++i) joined += "\n//   " + note(i);
    merged.push_back(joined);
    k = next;
  }
  notes = merged;
  return Seq::make(out);
}

}  // namespace kiln
