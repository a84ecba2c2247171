#include "ApplySchedule.h"

#include <algorithm>

#include "kiln/ir/IRMutator.h"
#include "kiln/ir/IROperator.h"
#include "kiln/support/Error.h"

namespace kiln {
namespace {

using namespace ir;

struct Loop {
  std::string name;
  Expr var;
  Expr extent;
  ForKind kind = ForKind::Serial;
};

size_t find_loop(const std::vector<Loop>& loops, const std::string& name) {
  for (size_t i = 0; i < loops.size(); ++i) {
    if (loops[i].name == name) return i;
  }
  internal_error("schedule names loop '" + name + "', which the stage does not have");
}

}  // namespace

Stmt apply_schedule(const Stmt& stage, const te::Tensor& t, const StageSchedule& schedule) {
  // Peel the perfect nest of output-axis loops.
  std::vector<Loop> loops;
  std::vector<std::pair<Expr, Expr>> value_of;  // original axis variable -> expression of new loops
  Stmt body = stage;
  for (size_t d = 0; d < t->axes.size(); ++d) {
    const For* f = body.as<For>();
    KILN_ASSERT(f && f->var.same_as(t->axes[d].var), "stage {} is not a loop nest over its axes", t.name());
    loops.push_back(Loop{"i" + std::to_string(d), f->var, f->extent, f->for_kind});
    body = f->body;
  }
  std::vector<Expr> guards;
  for (const LoopTransform& tr : schedule.transforms) {
    switch (tr.kind) {
      case LoopTransform::Kind::Split: {
        const size_t at = find_loop(loops, tr.loop);
        const Loop old = loops[at];
        KILN_ASSERT(tr.factor > 0, "split factor");
        Loop outer{old.name + ".o", var(old.name + "_o"), (old.extent + (tr.factor - 1)) / tr.factor};
        Loop inner{old.name + ".i", var(old.name + "_i"), Expr(tr.factor)};
        Expr value = outer.var * tr.factor + inner.var;
        auto ext = as_const_int(old.extent);
        if (!ext || *ext % tr.factor != 0) guards.push_back(value < old.extent);
        value_of.emplace_back(old.var, value);
        loops.erase(loops.begin() + at);
        loops.insert(loops.begin() + at, {outer, inner});
        break;
      }
      case LoopTransform::Kind::Fuse: {
        const size_t a = find_loop(loops, tr.loop), b = find_loop(loops, tr.loop2);
        KILN_ASSERT(b == a + 1, "fuse of non-adjacent loops {} and {}", tr.loop, tr.loop2);
        const Loop la = loops[a], lb = loops[b];
        Loop fused{la.name + "." + lb.name, var(la.name + "_" + lb.name + "_f"), la.extent * lb.extent};
        value_of.emplace_back(la.var, fused.var / lb.extent);
        value_of.emplace_back(lb.var, fused.var % lb.extent);
        loops.erase(loops.begin() + a, loops.begin() + b + 1);
        loops.insert(loops.begin() + a, fused);
        break;
      }
      case LoopTransform::Kind::Reorder: {
        std::vector<size_t> positions;
        for (const std::string& n : tr.order) positions.push_back(find_loop(loops, n));
        std::vector<size_t> sorted = positions;
        std::sort(sorted.begin(), sorted.end());
        std::vector<Loop> picked;
        for (size_t p : positions) picked.push_back(loops[p]);
        for (size_t i = 0; i < sorted.size(); ++i) loops[sorted[i]] = picked[i];
        break;
      }
      case LoopTransform::Kind::Bind: loops[find_loop(loops, tr.loop)].kind = tr.for_kind; break;
      case LoopTransform::Kind::Vectorize: loops[find_loop(loops, tr.loop)].kind = ForKind::Vectorized; break;
      case LoopTransform::Kind::Unroll: loops[find_loop(loops, tr.loop)].kind = ForKind::Unrolled; break;
    }
  }
  // Substitute in definition order: an axis becomes an expression of newer loops, which later
  // transformations may have replaced in turn.
  for (const auto& definition : value_of) {
    body = substitute(body, {definition});
    for (Expr& g : guards) g = substitute(g, {definition});
  }
  if (!guards.empty()) {
    Expr all = guards[0];
    for (size_t i = 1; i < guards.size(); ++i) all = all && guards[i];
    body = IfThenElse::make(all, body);
  }
  for (auto it = loops.rbegin(); it != loops.rend(); ++it) body = For::make(it->var, 0, it->extent, it->kind, body);
  return body;
}

}  // namespace kiln
