#include "kiln/tune/SearchSpace.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "kiln/codegen/GraphFunctions.h"
#include "kiln/ir/IROperator.h"
#include "kiln/ir/IRPrinter.h"
#include "kiln/ir/IRVisitor.h"
#include "kiln/ir/Simplify.h"
#include "kiln/support/Error.h"
#include "kiln/support/Parallel.h"

namespace kiln::tune {

namespace {

constexpr int64_t kMaxBlockThreads = 1024;
constexpr int64_t kRegistersPerSm = 65536;
constexpr int64_t kMaxRegistersPerThread = 255;
constexpr int64_t kStaticSharedBytes = 48 * 1024;
// Registers a row kernel needs besides its cached row slice (indices, accumulators, addresses);
// a rough floor, checked again after building against ptxas' report.
constexpr int64_t kRowKernelBaseRegisters = 24;

struct StageKinds {
  bool row = false, column = false, flat = false;
};

StageKinds stage_kinds(const codegen::KernelDefinition& kernel) {
  const Schedule s = default_gpu_schedule(kernel.inputs, kernel.outputs);
  StageKinds kinds;
  for (const te::Tensor& t : te::topological_order(kernel.outputs, kernel.inputs)) {
    const StageSchedule* st = s.find(t.name());
    if (!st) continue;
    if (st->contraction_tile) continue;  // contraction knobs: see add_contraction_knobs below
    if (st->reduce_threads > 0) kinds.row = true;
    else if (st->reduce_row_threads > 1) kinds.column = true;
    else if (st->description.rfind("elementwise", 0) == 0 || st->description.find("a thread per output") != std::string::npos)
      kinds.flat = true;
  }
  return kinds;
}

int64_t row_columns(const codegen::KernelDefinition& kernel) {
  int64_t columns = 0;
  for (const te::Tensor& t : te::topological_order(kernel.outputs, kernel.inputs)) {
    if (t.is_placeholder()) continue;
    if (const ir::Reduce* red = t->body.as<ir::Reduce>()) {
      if (red->axes.empty()) continue;
      if (auto c = ir::as_const_int(ir::simplify(red->axes.back().extent))) columns = std::max(columns, *c);
    }
  }
  return columns;
}

// Which template paths the kernel's contractions can take, lowered with schedule `s`: a constant M
// takes one path (CudaPrinter::gemm_call prints only that one), a symbolic M any. A knob of a path
// no call can take changes no generated text, so it is no knob of the space.
struct ReachablePaths {
  bool gemv = false;        // the small-M kernel
  bool wgmma = false;       // the Hopper tiles
  bool dual_wgmma = false;  // the Hopper tiles of a dual product (gate and up sharing A)
  bool conv_wgmma = false;  // the Hopper convolution (a constant C that is a multiple of 8, stride 1)
};

ReachablePaths reachable_paths(const codegen::KernelDefinition& kernel, const Schedule& s) {
  class Find : public ir::IRVisitor {
   public:
    ReachablePaths paths;
    using IRVisitor::visit;

   protected:
    void visit(const ir::TemplateContraction* op) override {
      if (op->w4 || op->b.empty()) return;  // 4-bit calls: their own kernels, no knob
      if (const std::optional<ir::ConvWindow>& w = op->b[0].window) {
        // kernels/gemm/conv_wgmma_plan.h refuses any other convolution at run time.
        const std::optional<int64_t> c = ir::as_const_int(ir::simplify(w->channels));
        paths.conv_wgmma = paths.conv_wgmma ||
                           (!op->config.tf32 && c && *c % 8 == 0 && w->stride_h == 1 && w->stride_w == 1);
        return;
      }
      const ir::GemmTemplate& c = op->config;
      const std::optional<int64_t> m = ir::as_const_int(op->m);
      const bool gemv = c.gemv_max_m > 0 && (!m || ir::gemm_path(c, *m) == ir::GemmPath::SmallM);
      const bool wgmma = c.wgmma && !c.tf32 && (!m || ir::gemm_path(c, *m) == ir::GemmPath::Large);
      paths.gemv = paths.gemv || gemv;
      paths.wgmma = paths.wgmma || wgmma;
      paths.dual_wgmma = paths.dual_wgmma || (wgmma && op->b.size() == 2);
    }
  };
  Find finder;
  finder.visit(codegen::lower_kernel(kernel, codegen::Target::Cuda, &s).func.body);
  return finder.paths;
}

// The contraction templates' knobs, for the paths the kernel's calls can take: the small-M
// kernel's warps per block, the K from which the wide Hopper tile runs, the SWAP_AB tiles, the
// Hopper tile of dual products, and whether convolutions try the Hopper kernel. Every value is a configuration the GPU harness checks (bench/gemm),
// so none is illegal (the CI compile tests build the default ones); the other tile shapes and
// stages stay fixed until the harness checks more of them.
void add_contraction_knobs(SearchSpace& space) {
  const Schedule s = default_gpu_schedule(space.kernel.inputs, space.kernel.outputs);
  bool any = false;
  for (const te::Tensor& t : te::topological_order(space.kernel.outputs, space.kernel.inputs)) {
    const StageSchedule* st = s.find(t.name());
    any = any || (st && st->gemm_template && !st->gemm_template->w4);
  }
  if (!any) return;
  const ReachablePaths paths = reachable_paths(space.kernel, s);
  if (paths.gemv) space.knobs.push_back({"gemv_warps", {0, 4, 8, 16}});
  if (paths.wgmma) space.knobs.push_back({"wgmma_wide_min_k", {2048, 4096, 8192, 65536}});
  if (paths.wgmma) space.knobs.push_back({"wgmma_swap", {1, 0}});
  if (paths.dual_wgmma) space.knobs.push_back({"wgmma_dual_tile", {0, 1, 2}});
  // Convolutions: the Hopper kernel first (with its NHWC copy and weight repack each call), or the
  // patch / direct / gather kernels alone (bench/gemm/conv_bench.cu checks both).
  if (paths.conv_wgmma) space.knobs.push_back({"conv_wgmma", {1, 0}});
}

// Drops the knobs none of whose values changes the printed code, from the default or from any
// hand-picked point (those reach stages the kernel has in no form of its own: a CNN's BatchNorm
// and ReLU are in its convolutions' epilogues, so its elementwise knobs print the same module).
// They would spend trials on candidates that build to the same library. A knob that matters only
// together with another is kept where a hand-picked point sets that other (row_cache_bytes with
// row_threads). The hand-picked points lose the dropped knobs, and those that become the default
// or another point go.
void drop_dead_knobs(SearchSpace& space, int jobs) {
  if (space.target != codegen::Target::Cuda || space.knobs.empty()) return;
  std::vector<Candidate> anchors = {space.default_candidate()};
  for (const Candidate& c : space.known_good_) anchors.push_back(c);
  // Each anchor, and each anchor with one knob's value changed: the candidates to print.
  std::map<std::string, Candidate> points;
  for (const Candidate& a : anchors) {
    points.emplace(candidate_text(a), a);
    for (const Knob& k : space.knobs) {
      for (int64_t v : k.values) {
        Candidate c = a;
        c[k.name] = v;
        if (c != a && space.illegal_reason(c).empty()) points.emplace(candidate_text(c), c);
      }
    }
  }
  std::vector<const Candidate*> order;
  for (const auto& [text, c] : points) order.push_back(&c);
  std::vector<size_t> code(order.size());  // a hash of the module each point prints
  parallel_for(order.size(), jobs, [&](size_t i) {
    const Schedule schedule = default_gpu_schedule(space.kernel.inputs, space.kernel.outputs, schedule_options(*order[i]));
    code[i] = std::hash<std::string>()(
        codegen::generate_module({codegen::lower_kernel(space.kernel, space.target, &schedule).func}, space.target));
  });
  std::map<std::string, size_t> code_of;
  for (size_t i = 0; i < order.size(); ++i) code_of[candidate_text(*order[i])] = code[i];
  std::set<std::string> alive;
  for (const Candidate& a : anchors) {
    const size_t mine = code_of.at(candidate_text(a));
    for (const Knob& k : space.knobs) {
      for (int64_t v : k.values) {
        Candidate c = a;
        c[k.name] = v;
        auto it = code_of.find(candidate_text(c));
        if (it != code_of.end() && it->second != mine) alive.insert(k.name);
      }
    }
  }
  std::vector<Knob> kept;
  for (const Knob& k : space.knobs) {
    if (alive.count(k.name)) kept.push_back(k);
  }
  space.knobs = kept;
  const Candidate base = space.default_candidate();
  std::vector<Candidate> good;
  for (Candidate c : space.known_good_) {
    for (auto it = c.begin(); it != c.end();) it = alive.count(it->first) ? std::next(it) : c.erase(it);
    if (c != base && std::find(good.begin(), good.end(), c) == good.end()) good.push_back(c);
  }
  space.known_good_ = good;
}

}  // namespace

std::string candidate_text(const Candidate& c) {
  std::string s;
  for (const auto& [k, v] : c) s += (s.empty() ? "" : " ") + k + "=" + std::to_string(v);
  return s.empty() ? "(defaults)" : s;
}

Candidate SearchSpace::default_candidate() const {
  Candidate c;
  for (const Knob& k : knobs) c[k.name] = k.values.at(0);
  return c;
}

bool SearchSpace::contains(const Candidate& c) const {
  if (c.size() != knobs.size()) return false;
  for (const Knob& k : knobs) {
    auto it = c.find(k.name);
    if (it == c.end() || std::find(k.values.begin(), k.values.end(), it->second) == k.values.end()) return false;
  }
  return true;
}

double SearchSpace::size() const {
  double n = 1;
  for (const Knob& k : knobs) n *= static_cast<double>(k.values.size());
  return n;
}

int64_t SearchSpace::block_threads(const Candidate& c) const {
  if (target != codegen::Target::Cuda) return 1;
  const DefaultScheduleOptions o = schedule_options(c);
  const Schedule s = default_gpu_schedule(kernel.inputs, kernel.outputs, o);
  int64_t most = 1;
  for (const te::Tensor& t : te::topological_order(kernel.outputs, kernel.inputs)) {
    const StageSchedule* st = s.find(t.name());
    if (!st) continue;
    if (st->contraction_tile) most = std::max(most, st->contraction_tile->threads());
    else if (st->reduce_threads > 0) most = std::max(most, st->reduce_threads);
    else if (st->reduce_row_threads > 1) most = std::max(most, o.column_threads * st->reduce_row_threads);
    else most = std::max(most, o.threads_per_block);
  }
  return most;
}

std::string SearchSpace::illegal_reason(const Candidate& c) const {
  if (!contains(c)) return "not a point of the space";
  if (target != codegen::Target::Cuda) return "";
  const DefaultScheduleOptions o = schedule_options(c);
  const int64_t threads = block_threads(c);
  if (threads > kMaxBlockThreads) return std::to_string(threads) + " threads per block (at most 1024)";
  if (c.count("column_row_threads")) {
    const int64_t lanes = std::max<int64_t>(1, o.vector_bytes / narrowest_input_bytes);
    const int64_t rows = o.column_row_threads > 0 ? o.column_row_threads : std::min<int64_t>(32, 4 * lanes);
    const int64_t shared = o.column_threads * rows * lanes * 4;
    if (o.column_threads * rows > kMaxBlockThreads) return "column reduction: more than 1024 threads per block";
    if (shared > kStaticSharedBytes) return "column reduction: " + std::to_string(shared) + " bytes of shared memory (at most 48 KiB static)";
  }
  if (row_columns > 0 && c.count("row_threads")) {
    const int64_t row_threads = threads;
    const int64_t slice = (row_columns * widest_input_bytes + row_threads - 1) / row_threads;
    if (slice <= o.row_cache_bytes) {
      const int64_t registers = slice / 4 + kRowKernelBaseRegisters;
      if (registers > kMaxRegistersPerThread || registers * row_threads > kRegistersPerSm) {
        return "row cache of " + std::to_string(slice) + " bytes per thread x " + std::to_string(row_threads) +
               " threads exceeds the registers of an SM";
      }
    }
  }
  return "";
}

SearchSpace search_space(const codegen::KernelDefinition& kernel, codegen::Target target, int jobs) {
  SearchSpace space;
  space.target = target;
  space.kernel = kernel;
  int64_t narrowest = 0, widest = 0;
  for (const te::Tensor& t : kernel.inputs) {
    const int64_t b = dtype_bytes(t.dtype());
    narrowest = narrowest == 0 ? b : std::min(narrowest, b);
    widest = std::max(widest, b);
  }
  if (narrowest > 0) space.narrowest_input_bytes = narrowest, space.widest_input_bytes = widest;
  if (target == codegen::Target::Cpu) {
    space.knobs = {{"opt_level", {2, 1, 3}}, {"native", {0, 1}}, {"unroll", {0, 1}}};
    space.known_good_ = {{{"opt_level", 3}, {"native", 1}, {"unroll", 0}}};
    return space;
  }
  const StageKinds kinds = stage_kinds(kernel);
  space.knobs.push_back({"vector_bytes", {16, 8, 4}});
  if (kinds.flat) space.knobs.push_back({"threads_per_block", {256, 128, 512, 1024}});
  if (kinds.row) {
    space.row_columns = row_columns(kernel);
    space.knobs.push_back({"row_threads", {0, 64, 128, 256, 512, 1024}});
    space.knobs.push_back({"row_cache_bytes", {256, 0, 128, 512}});
  }
  if (kinds.column) {
    space.knobs.push_back({"column_threads", {32, 64, 128}});
    space.knobs.push_back({"column_row_threads", {0, 4, 8, 16, 32}});
  }
  add_contraction_knobs(space);
  // Float16/bfloat16 chains fused into one expression may keep float32 intermediates (a result-
  // changing choice, checked against the reference like every candidate): a knob only where it
  // changes the kernel's code.
  {
    DefaultScheduleOptions relaxed;
    relaxed.float_intermediates = true;
    const Schedule a = default_gpu_schedule(kernel.inputs, kernel.outputs), b = default_gpu_schedule(kernel.inputs, kernel.outputs, relaxed);
    if (ir::to_string(codegen::lower_kernel(kernel, target, &a).func.body) !=
        ir::to_string(codegen::lower_kernel(kernel, target, &b).func.body)) {
      space.knobs.push_back({"float_intermediates", {0, 1}});
    }
  }
  const Candidate base = space.default_candidate();
  auto with = [&](std::initializer_list<std::pair<const char*, int64_t>> changes) {
    Candidate c = base;
    for (const auto& [k, v] : changes) {
      if (!c.count(k)) return;
      c[k] = v;
    }
    if (space.illegal_reason(c).empty()) space.known_good_.push_back(c);
  };
  with({{"row_threads", 512}});
  with({{"row_threads", 1024}});
  with({{"row_threads", 128}});
  with({{"row_threads", 512}, {"row_cache_bytes", 0}});
  with({{"column_row_threads", 8}});
  with({{"column_row_threads", 16}, {"column_threads", 64}});
  with({{"threads_per_block", 512}});
  with({{"threads_per_block", 128}});
  with({{"gemv_warps", 8}});
  with({{"wgmma_wide_min_k", 4096}});
  with({{"wgmma_dual_tile", 1}});  // the harness's fastest dual tile at Gemma's M = 816 alone
  with({{"float_intermediates", 1}});
  drop_dead_knobs(space, jobs);
  return space;
}

DefaultScheduleOptions schedule_options(const Candidate& c) {
  DefaultScheduleOptions o;
  auto set = [&](const char* name, int64_t& field) {
    auto it = c.find(name);
    if (it != c.end()) field = it->second;
  };
  set("threads_per_block", o.threads_per_block);
  set("vector_bytes", o.vector_bytes);
  set("row_threads", o.row_threads);
  set("row_cache_bytes", o.row_cache_bytes);
  set("column_threads", o.column_threads);
  set("column_row_threads", o.column_row_threads);
  set("gemv_warps", o.gemv_warps);
  set("wgmma_wide_min_k", o.wgmma_wide_min_k);
  set("wgmma_dual_tile", o.wgmma_dual_tile);
  if (auto it = c.find("wgmma_swap"); it != c.end()) o.wgmma_swap = it->second != 0;
  if (auto it = c.find("conv_wgmma"); it != c.end()) o.conv_wgmma = it->second != 0;
  if (auto it = c.find("float_intermediates"); it != c.end()) o.float_intermediates = it->second != 0;
  return o;
}

std::vector<std::string> cpu_flags(const Candidate& c) {
  std::vector<std::string> flags;
  auto get = [&](const char* name, int64_t fallback) {
    auto it = c.find(name);
    return it == c.end() ? fallback : it->second;
  };
  flags.push_back("-O" + std::to_string(get("opt_level", 2)));
  if (get("native", 0)) flags.push_back("-march=native");
  if (get("unroll", 0)) flags.push_back("-funroll-loops");
  return flags;
}

}  // namespace kiln::tune
