// The lowering pipeline, top to bottom:
//   1. order the tensors between inputs and outputs, producers first;
//   2. choose which injective tensors to inline into their consumers (fusion of elementwise chains;
//      a small one read a few times is recomputed in each reader rather than stored);
//   3. build one loop nest per remaining stage (reductions get an accumulator);
//   4. apply each stage's schedule (split, fuse, reorder, bind, vectorize, unroll), then spread
//      reductions over the threads of a block where the schedule says so (row reductions along
//      threadIdx.x, reductions over outer axes along threadIdx.y); contractions (MatMul,
//      Gemm, Conv) with a contraction tile are built tiled through shared memory instead;
//   5. replace tensor reads by loads from buffers; without a schedule (serial loops: the CPU
//      backend), reductions that walk an operand across rows run over a row of accumulators;
//   6. vectorize loops marked Vectorized (16-byte loads and stores around scalar compute);
//   7. fuse adjacent per-row stages into one loop over rows where the schedule says so, read a
//      row's input into registers once for all its stages where it says so, turn divisions
//      by loop invariants into multiplications where it says so, and keep float16/bfloat16
//      intermediates of fused chains in float32 where it says so;
//   8. allocate intermediate buffers, simplify.
// With KILN_LOG_IR set, the IR after each step is printed to stderr.
#include "kiln/lower/Lower.h"

#include <cstdlib>
#include <optional>
#include <map>
#include <set>
#include <iostream>
#include <unordered_map>
#include <unordered_set>

#include "ApplySchedule.h"
#include "CacheRowReads.h"
#include "CrossThreadReduce.h"
#include "FloatIntermediates.h"
#include "FuseRowStages.h"
#include "InterchangeReductions.h"
#include "ReciprocalDivisors.h"
#include "RowResultsInRegisters.h"
#include "SplitColumnReduction.h"
#include "TemplateAttention.h"
#include "TemplateContraction.h"
#include "TileContraction.h"
#include "VectorizeLoops.h"
#include "kiln/ir/IRMutator.h"
#include "kiln/ir/IROperator.h"
#include "kiln/ir/IRPrinter.h"
#include "kiln/ir/IRVisitor.h"
#include "kiln/ir/Simplify.h"
#include "kiln/support/Error.h"

namespace kiln {
namespace {

using namespace ir;

void log_ir(const char* step, const Stmt& s) {
  static const bool enabled = std::getenv("KILN_LOG_IR") != nullptr;
  if (enabled) std::cerr << "---- after " << step << " ----\n" << s;
}

// How often each tensor is read, summed over the bodies of the tensors in `order`.
class CountReads : public IRVisitor {
 public:
  std::unordered_map<const te::TensorNode*, int> reads;
  using IRVisitor::visit;

 protected:
  void visit(const TensorRead* op) override {
    ++reads[op->tensor.get()];
    IRVisitor::visit(op);
  }
};

// One tensor body's size in expression nodes and the tensors it reads, with how often.
class BodyCost : public IRVisitor {
 public:
  int64_t nodes = 0;
  std::unordered_map<const te::TensorNode*, int> reads;
  using IRVisitor::visit;

 protected:
#define KILN_EXPR_NODE(name)                \
  void visit(const name* op) override {     \
    count(op);                              \
    IRVisitor::visit(op);                   \
  }
#include "kiln/ir/Nodes.def"

 private:
  template <typename Node>
  void count(const Node*) {
    ++nodes;
  }
  void count(const TensorRead* op) {
    ++nodes;
    ++reads[op->tensor.get()];
  }
};

// Which injective tensors to inline into their readers. A tensor read once is always inlined
// (fusion costs nothing). One read a few times is inlined too when its body, with what is
// inlined into it, is small: recomputing a LayerNorm output in each of the GELU terms that read
// it costs a few arithmetic instructions, keeping it costs a write and a read of every element
// and a kernel boundary (the LayerNorm+GELU row kernel stays one kernel). Re-indexings a
// contraction template reads through (`folded`) are always inlined: their index arithmetic
// becomes the template operand's strides.
constexpr int kMaxRecomputedReads = 4;
constexpr int64_t kMaxRecomputedNodes = 48;

// The tensors a reduction reads more often than they have elements (a convolution's or a matrix
// product's operands: each element read by many outputs), with constant shapes: inlined, their
// bodies would be recomputed at every read (LowerOptions::materialize_reread).
std::set<const te::TensorNode*> reread_by_reductions(const std::vector<te::Tensor>& order) {
  std::unordered_map<const te::TensorNode*, int64_t> sizes;
  for (const te::Tensor& t : order)
    if (const std::optional<int64_t> n = te::constant_num_elements(t)) sizes[t.node().get()] = *n;
  std::set<const te::TensorNode*> reread;
  for (const te::Tensor& t : order) {
    const Reduce* red = t->body.as<Reduce>();
    const auto out = sizes.find(t.node().get());
    if (!red || out == sizes.end()) continue;
    int64_t steps = 1;
    bool constant = true;
    for (const IterVar& axis : red->axes) {
      const std::optional<int64_t> e = as_const_int(simplify(axis.extent));
      constant = constant && e.has_value();
      if (e) steps *= *e;
    }
    if (!constant) continue;
    CountReads reads;
    reads.visit(red->source);
    for (const auto& [producer, count] : reads.reads) {
      const auto in = sizes.find(producer);
      if (in != sizes.end() && in->second > 0 && out->second * steps >= 2 * in->second) reread.insert(producer);
    }
  }
  return reread;
}

std::vector<te::Tensor> choose_inlined(const std::vector<te::Tensor>& order,
                                       const std::unordered_set<const te::TensorNode*>& is_output,
                                       const std::set<const te::TensorNode*>& keep,
                                       const std::set<const te::TensorNode*>& folded, bool materialize_reread) {
  CountReads counts;
  for (const te::Tensor& t : order) counts.visit(t->body);
  const std::set<const te::TensorNode*> reread =
      materialize_reread ? reread_by_reductions(order) : std::set<const te::TensorNode*>();
  std::vector<te::Tensor> inlined;
  std::unordered_map<const te::TensorNode*, int64_t> inlined_nodes;  // body size once inlined
  for (const te::Tensor& t : order) {
    const te::TensorNode* node = t.node().get();
    if (t->pattern != te::Pattern::Injective || is_output.count(node) || keep.count(node)) continue;
    if (reread.count(node) && !folded.count(node)) continue;
    BodyCost cost;
    cost.visit(t->body);
    int64_t nodes = cost.nodes;
    for (const auto& [producer, reads] : cost.reads) {
      auto it = inlined_nodes.find(producer);
      if (it != inlined_nodes.end()) nodes += reads * (it->second - 1);
    }
    const int reads = counts.reads[node];
    if (reads <= 1 || folded.count(node) || (reads <= kMaxRecomputedReads && nodes <= kMaxRecomputedNodes)) {
      inlined.push_back(t);
      inlined_nodes[node] = nodes;
    }
  }
  return inlined;
}

// Replaces TensorRead with Load from the tensor's buffer.
class ReadsToLoads : public IRMutator {
 public:
  explicit ReadsToLoads(const std::unordered_map<const te::TensorNode*, Buffer>& buffers) : buffers_(buffers) {}
  using IRMutator::mutate;

 protected:
  Expr visit(const TensorRead* op, const Expr& self) override {
    Expr r = IRMutator::visit(op, self);
    const TensorRead* read = r.as<TensorRead>();
    auto it = buffers_.find(read->tensor.get());
    KILN_ASSERT(it != buffers_.end(), "tensor {} is read but neither an input nor computed", read->tensor->name);
    return Load::make(it->second, it->second.flat_index(read->indices));
  }

 private:
  const std::unordered_map<const te::TensorNode*, Buffer>& buffers_;
};

// The size symbols (Variables) that shapes use, as the same handles, in first-use order.
class CollectSymbols : public IRMutator {
 public:
  std::vector<Expr> symbols;
  using IRMutator::mutate;

 protected:
  Expr visit(const Variable* op, const Expr& self) override {
    for (const Expr& s : symbols) {
      if (s.get() == op) return self;
    }
    symbols.push_back(self);
    return self;
  }
};

// The loop nest of one stage, before scheduling.
Stmt build_stage(const te::Tensor& t, const Buffer& out) {
  std::vector<Expr> indices;
  for (const IterVar& axis : t->axes) indices.push_back(axis.var);
  const Expr flat = out.flat_index(indices);
  Stmt body;
  if (const Reduce* red = t->body.as<Reduce>()) {
    Buffer acc = Buffer::make(t.name() + "_acc", t.dtype(), {Expr(1)}, MemoryScope::Local);
    Stmt update = Store::make(acc, reduce_combine(red->reduce_kind, Load::make(acc, 0), red->source), 0);
    if (!is_one(red->condition)) update = IfThenElse::make(red->condition, update);
    for (auto it = red->axes.rbegin(); it != red->axes.rend(); ++it) {
      update = For::make(it->var, 0, it->extent, ForKind::Serial, update);
    }
    body = Allocate::make(acc, Seq::make({Store::make(acc, reduce_identity(red->reduce_kind, t.dtype()), 0), update,
                                          Store::make(out, Load::make(acc, 0), flat)}));
  } else {
    body = Store::make(out, t->body, flat);
  }
  for (auto it = t->axes.rbegin(); it != t->axes.rend(); ++it) {
    body = For::make(it->var, 0, it->extent, ForKind::Serial, body);
  }
  return body;
}

}  // namespace

LoweredFunc lower(const std::string& name, const std::vector<te::Tensor>& inputs,
                  const std::vector<te::Tensor>& outputs, const Schedule& schedule, const LowerOptions& options) {
  LoweredFunc func;
  func.name = name;
  std::unordered_map<const te::TensorNode*, Buffer> buffers;
  std::unordered_set<const te::TensorNode*> is_input, is_output;
  for (const te::Tensor& t : inputs) {
    Buffer b = Buffer::make(t.name(), t.dtype(), t.shape());
    buffers[t.node().get()] = b;
    func.inputs.push_back(b);
    is_input.insert(t.node().get());
  }
  for (const te::Tensor& t : outputs) is_output.insert(t.node().get());

  // 1. Order the tensors, stopping at the inputs.
  const std::vector<te::Tensor> order = te::topological_order(outputs, inputs);
  for (const te::Tensor& t : order) {
    if (t.is_placeholder()) internal_error("lowering " + name + ": tensor " + t.name() + " is read but is not an input");
  }

  // 2. Choose what to inline.
  std::set<const te::TensorNode*> folded;
  const std::set<const te::TensorNode*> keep = keep_template_operands(order, schedule, &folded);
  std::vector<te::Tensor> inlined;
  if (options.inline_injective) inlined = choose_inlined(order, is_output, keep, folded, options.materialize_reread);
  std::unordered_set<const te::TensorNode*> inlined_set;
  for (const te::Tensor& t : inlined) inlined_set.insert(t.node().get());

  // 3-4. One scheduled loop nest per stage; contractions the templates compute, with the stages
  // folded into their epilogues, become one TemplateContraction at the last such stage.
  std::vector<LoweringStage> staged;
  for (const te::Tensor& original : order) {
    if (inlined_set.count(original.node().get())) continue;
    const te::Tensor t = te::inline_tensors(original, inlined);
    staged.push_back({original, t});
    buffers[original.node().get()] = Buffer::make(t.name(), t.dtype(), t.shape());
  }
  const std::map<const te::TensorNode*, Buffer> buffer_map(buffers.begin(), buffers.end());
  const std::set<const te::TensorNode*> output_set(is_output.begin(), is_output.end());
  // Attention chains first (their two products would otherwise become two GEMM calls).
  const std::vector<AttentionGroup> attention_groups = plan_template_attention(staged, output_set, buffer_map, schedule);
  std::map<const te::TensorNode*, const AttentionGroup*> attention_of;
  std::set<const te::TensorNode*> taken;
  for (const AttentionGroup& g : attention_groups) {
    for (const LoweringStage& s : g.stages) {
      attention_of[s.original.node().get()] = &g;
      taken.insert(s.original.node().get());
    }
  }
  std::map<const te::TensorNode*, const TemplateGroup*> group_of;
  const std::vector<TemplateGroup> groups = plan_template_contractions(staged, output_set, buffer_map, schedule, taken);
  for (const TemplateGroup& g : groups) {
    for (const LoweringStage& s : g.contractions) group_of[s.original.node().get()] = &g;
    for (const LoweringStage& s : g.chain) group_of[s.original.node().get()] = &g;
  }
  std::vector<Stmt> stages;
  std::vector<Buffer> temporaries;
  for (const LoweringStage& stage_tensors : staged) {
    const te::Tensor& original = stage_tensors.original;
    const te::Tensor& t = stage_tensors.inlined;
    const Buffer& out = buffers[original.node().get()];
    if (auto a = attention_of.find(original.node().get()); a != attention_of.end()) {
      const AttentionGroup& group = *a->second;
      if (!group.written().original.same_as(original)) continue;  // computed by the call
      // The reference loops (what the interpreter runs) allocate the intermediates themselves:
      // the fused kernel never stores them, so the function's workspace has none.
      std::vector<Stmt> reference;
      for (const LoweringStage& s : group.stages) {
        reference.push_back(build_stage(s.inlined, buffers[s.original.node().get()]));
        if (!s.inlined->origin.empty()) func.comment += (func.comment.empty() ? "" : "; ") + s.inlined->origin;
      }
      Stmt reference_loops = Seq::make(reference);
      for (auto it = group.stages.rbegin() + 1; it != group.stages.rend(); ++it) {
        reference_loops = Allocate::make(buffers[it->original.node().get()], reference_loops);
      }
      const Stmt call = template_attention(group, buffer_map, reference_loops);
      const TemplateAttention* node = call.as<TemplateAttention>();
      func.stage_notes.push_back(t.name() + " = " + node->description + "; schedule: attention template (" +
                                 node->reason + ")");
      stages.push_back(call);
      if (is_output.count(original.node().get())) func.outputs.push_back(out);
      else temporaries.push_back(out);
      continue;
    }
    if (auto g = group_of.find(original.node().get()); g != group_of.end()) {
      const TemplateGroup& group = *g->second;
      if (!group.written().original.same_as(original)) continue;  // folded into a later stage
      const te::Tensor& first = group.contractions.front().inlined;
      const StageSchedule& contraction_schedule = *schedule.find(first.name());
      const Stmt call = template_contraction(group, buffer_map, *contraction_schedule.gemm_template);
      const TemplateContraction* node = call.as<TemplateContraction>();
      func.stage_notes.push_back(t.name() + " = " + node->description + "; schedule: contraction template (" +
                                 node->config.reason + ")");
      for (const LoweringStage& s : group.contractions) {
        if (!s.inlined->origin.empty()) func.comment += (func.comment.empty() ? "" : "; ") + s.inlined->origin;
      }
      for (const LoweringStage& s : group.chain) {
        if (!s.inlined->origin.empty()) func.comment += (func.comment.empty() ? "" : "; ") + s.inlined->origin;
      }
      stages.push_back(call);
      if (node->split_k.defined()) temporaries.push_back(node->split_k);
      if (is_output.count(original.node().get())) func.outputs.push_back(out);
      else temporaries.push_back(out);
      continue;
    }
    const StageSchedule* stage_schedule = schedule.find(t.name());
    std::optional<te::Contraction> contraction;
    if (stage_schedule && stage_schedule->contraction_tile) contraction = te::as_contraction(t);
    Stmt stage;
    if (contraction) {
      stage = tile_contraction(t, *contraction, out, *stage_schedule->contraction_tile);
    } else {
      stage = build_stage(t, out);
      if (stage_schedule) stage = apply_schedule(stage, t, *stage_schedule);
    }
    if (!contraction && stage_schedule && stage_schedule->reduce_threads > 0) {
      stage = cross_thread_reduce(stage, stage_schedule->reduce_threads, stage_schedule->reduce_vector);
    }
    if (!contraction && stage_schedule && stage_schedule->reduce_row_threads > 1) {
      stage = split_column_reduction(stage, stage_schedule->reduce_row_threads);
    }
    func.stage_notes.push_back(t.name() + " = " + (t->origin.empty() ? std::string("(no source node)") : t->origin) +
                               "; schedule: " +
                               (contraction ? (stage_schedule->gemm_template
                                                   ? "no contraction template (" +
                                                         template_refusal(stage_tensors, buffer_map, schedule) + "), "
                                                   : std::string()) +
                                                  stage_schedule->contraction_description
                                : stage_schedule ? stage_schedule->description : std::string("serial loops")));
    if (!t->origin.empty()) func.comment += (func.comment.empty() ? "" : "; ") + t->origin;
    stages.push_back(stage);
    if (is_output.count(original.node().get())) {
      func.outputs.push_back(out);
    } else {
      temporaries.push_back(out);
    }
  }
  // Outputs that are inputs or appear twice still need a buffer each, in the given order.
  std::vector<Buffer> ordered_outputs;
  for (const te::Tensor& t : outputs) {
    auto it = buffers.find(t.node().get());
    KILN_ASSERT(it != buffers.end(), "output {} was not computed", t.name());
    ordered_outputs.push_back(it->second);
  }
  func.outputs = ordered_outputs;
  Stmt body = Seq::make(stages);
  if (!body.defined()) body = Evaluate::make(make_zero(kIndexType));
  log_ir("building stages", body);

  // 5. Loads from buffers.
  body = ReadsToLoads(buffers).mutate(body);
  log_ir("reads to loads", body);
  // 5b. Serial loops (no schedule: the CPU backend): reductions that walk an operand across rows
  // run over a row of accumulators instead (same results, bit for bit).
  if (schedule.empty() && options.interchange_reductions) {
    body = interchange_reductions(body);
    log_ir("interchange reductions", body);
  }

  // 6. Vector accesses.
  body = simplify(body);
  body = vectorize_loops(body);
  log_ir("vectorize loops", body);

  // 7. One kernel per row for row stages.
  if (schedule.fuse_row_stages) {
    body = fuse_row_stages(body, func.stage_notes);
    log_ir("fuse row stages", body);
  }
  if (schedule.cache_row_bytes > 0) {
    body = cache_row_reads(body, schedule.cache_row_bytes);
    log_ir("cache row reads", body);
  }
  if (schedule.fuse_row_stages) {
    body = row_results_in_registers(body, temporaries);
    log_ir("row results in registers", body);
  }
  if (schedule.reciprocal_divisors) {
    body = reciprocal_divisors(body);
    log_ir("reciprocal divisors", body);
  }
  if (schedule.float_intermediates) {
    body = float_intermediates(body);
    log_ir("float intermediates", body);
  }

  // 8. Temporaries allocated around the whole body; simplify.
  for (auto it = temporaries.rbegin(); it != temporaries.rend(); ++it) body = Allocate::make(*it, body);
  body = simplify(body);
  log_ir("simplify", body);
  func.body = body;

  CollectSymbols symbols;
  for (const Buffer& b : func.inputs) for (const Expr& d : b->shape) symbols.mutate(d);
  for (const Buffer& b : func.outputs) for (const Expr& d : b->shape) symbols.mutate(d);
  func.symbols = symbols.symbols;
  return func;
}

}  // namespace kiln
