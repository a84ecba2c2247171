#include "CudaPrinter.h"

#include "Embedded.h"
#include "kiln/ir/IROperator.h"
#include "kiln/ir/IRPrinter.h"
#include "kiln/ir/ExprUsesVar.h"
#include "kiln/ir/IRVisitor.h"
#include "kiln/ir/Simplify.h"
#include "kiln/support/Error.h"

namespace kiln::codegen {

using namespace ir;

namespace {

// Grid-stride loops cover any grid; these caps keep a few waves of blocks resident.
constexpr int64_t kMaxBlocksX = 8192;
constexpr int64_t kMaxBlocksYZ = 65535;

// The launch shape of one stage: the extents of its block loops (host expressions of the
// symbols) and of its thread loops (constants).
struct LaunchShape {
  Expr blocks[3];
  int64_t threads[3] = {1, 1, 1};
};

class FindLaunchShape : public IRVisitor {
 public:
  LaunchShape shape;
  using IRVisitor::visit;

 protected:
  void visit(const For* op) override {
    if (is_gpu_block(op->for_kind)) {
      const int d = static_cast<int>(op->for_kind) - static_cast<int>(ForKind::BlockIdxX);
      KILN_ASSERT(!shape.blocks[d].defined(), "two loops bound to {}", for_kind_name(op->for_kind));
      shape.blocks[d] = op->extent;
    } else if (is_gpu_thread(op->for_kind)) {
      const int d = static_cast<int>(op->for_kind) - static_cast<int>(ForKind::ThreadIdxX);
      auto n = as_const_int(op->extent);
      KILN_ASSERT(n && *n > 0 && *n <= 1024, "thread loop of extent {} (a constant up to 1024 is needed)",
                  to_string(op->extent));
      shape.threads[d] = std::max(shape.threads[d], *n);
    }
    IRVisitor::visit(op);
  }
};

const char* const kIndexName[3] = {"x", "y", "z"};

// A kernel that works on whole rows: a block-bound loop around barriers or block all-reduces.
// Finds the bytes per row of the largest global buffer that it reads at more than one place, i.e.
// that a later stage of the row reads again (undefined when every buffer is read at one place, as
// when CacheRowReads keeps the row in registers).
class RowKernelBytes : public IRVisitor {
 public:
  explicit RowKernelBytes(Expr rows) : rows_(std::move(rows)) {}
  bool cooperative = false;
  Expr reread_bytes;
  using IRVisitor::visit;

 protected:
  void visit(const Call* op) override {
    cooperative = cooperative || op->op == Intrinsic::SyncThreads || op->op == Intrinsic::BlockAllReduce;
    IRVisitor::visit(op);
  }
  void visit(const Load* op) override {
    if (op->buffer->scope == MemoryScope::Global && !read_.insert(op->buffer.get()).second) {
      Expr b = op->buffer.num_elements() * Expr(dtype_bytes(op->buffer->dtype)) / rows_;
      auto c = as_const_int(b), best = reread_bytes.defined() ? as_const_int(reread_bytes) : std::optional<int64_t>();
      if (!reread_bytes.defined() || (c && best && *c > *best)) reread_bytes = b;
    }
    IRVisitor::visit(op);
  }

 private:
  Expr rows_;
  std::set<const BufferNode*> read_;  // only asked whether it holds a buffer: its order is never used
};

}  // namespace

std::string CudaPrinter::prologue() { return embedded_file("templates/cuda_prologue.cuh"); }

std::string CudaPrinter::half_type_name(DType dtype) {
  return dtype == DType::Float16 ? "__half" : "__nv_bfloat16";
}

std::string CudaPrinter::math_function(Intrinsic op, bool single) {
  struct Entry {
    Intrinsic op;
    const char* single;
    const char* dbl;
  };
  static const Entry kTable[] = {
      {Intrinsic::Exp, "kiln::exp_via_exp2", "exp"},  {Intrinsic::Exp2, "kiln::exp2_unit", "exp2"},
      {Intrinsic::Rcp, "kiln::rcp_unit", "kiln::rcp_"},
      {Intrinsic::Log, "logf", "log"},
      {Intrinsic::Sqrt, "sqrtf", "sqrt"},    {Intrinsic::Rsqrt, "rsqrtf", "rsqrt"},
      {Intrinsic::Sin, "sinf", "sin"},       {Intrinsic::Cos, "cosf", "cos"},
      {Intrinsic::Tan, "tanf", "tan"},       {Intrinsic::Asin, "asinf", "asin"},
      {Intrinsic::Acos, "acosf", "acos"},    {Intrinsic::Atan, "atanf", "atan"},
      {Intrinsic::Sinh, "sinhf", "sinh"},    {Intrinsic::Cosh, "coshf", "cosh"},
      {Intrinsic::Tanh, "tanhf", "tanh"},    {Intrinsic::Asinh, "asinhf", "asinh"},
      {Intrinsic::Acosh, "acoshf", "acosh"}, {Intrinsic::Atanh, "atanhf", "atanh"},
      {Intrinsic::Erf, "erff", "erf"},       {Intrinsic::Abs, "fabsf", "fabs"},
      {Intrinsic::Floor, "floorf", "floor"}, {Intrinsic::Ceil, "ceilf", "ceil"},
      {Intrinsic::RoundEven, "rintf", "rint"}, {Intrinsic::Trunc, "truncf", "trunc"},
      {Intrinsic::Pow, "powf", "pow"},       {Intrinsic::Fmod, "fmodf", "fmod"},
      {Intrinsic::IsNan, "isnan", "isnan"},  {Intrinsic::IsInf, "isinf", "isinf"},
  };
  for (const Entry& e : kTable) {
    if (e.op == op) return single ? e.single : e.dbl;
  }
  return "";
}

namespace {

class FirstGlobalStore : public IRVisitor {
 public:
  std::string name;
  using IRVisitor::visit;

 protected:
  void visit(const Store* op) override {
    if (name.empty() && op->buffer->scope == MemoryScope::Global) name = op->buffer->name;
    IRVisitor::visit(op);
  }
};

}  // namespace

// "<function>_k<stage>_<first tensor the stage writes>": names from the model.
std::string CudaPrinter::kernel_name(const FunctionLayout& f, size_t stage) {
  FirstGlobalStore first;
  first.visit(f.stages[stage]);
  return f.name + "_k" + std::to_string(stage) + (first.name.empty() ? "" : "_" + c_identifier(first.name));
}

void CudaPrinter::print_compute(const FunctionLayout& f) {
  const std::vector<std::string>& notes = f.func->stage_notes;
  for (size_t k = 0; k < f.stages.size(); ++k) {
    reset_names();
    const Stmt& stage = f.stages[k];
    if (const TemplateContraction* tc = stage.as<TemplateContraction>()) {
      blank_line();
      line() << "// kernel " << k << " of " << f.name << ": " << (k < notes.size() ? notes[k] : std::string("(no note)"))
             << "\n";
      const size_t before = out().tellp();
      print_epilogue(f, k, tc);
      if (units_ && !tc->w4) print_template_unit(f, k, contraction_unit_call(tc), out().str().substr(before));
      continue;
    }
    if (const TemplateAttention* ta = stage.as<TemplateAttention>()) {
      blank_line();
      line() << "// kernel " << k << " of " << f.name << ": " << (k < notes.size() ? notes[k] : std::string("(no note)"))
             << "\n";
      const size_t before = out().tellp();
      print_attention_epilogue(f, k, ta);
      if (units_) print_template_unit(f, k, attention_unit_call(ta), out().str().substr(before));
      continue;
    }
    FindLaunchShape launch;
    launch.visit(stage);
    const int64_t threads = launch.shape.threads[0] * launch.shape.threads[1] * launch.shape.threads[2];
    const std::vector<Buffer> buffers = buffers_used(f, stage);
    blank_line();
    line() << "// kernel " << k << " of " << f.name << ": " << (k < notes.size() ? notes[k] : std::string("(no note)"))
           << "\n";
    open_block("__global__ void __launch_bounds__(" + std::to_string(threads) + ") " + kernel_name(f, k) + "(" +
               compute_params(f, buffers, stage) + ")");
    // Launched programmatically (launch_generated): the kernel may start while the one before it
    // on the stream still runs, so it reads nothing before pdl_wait, which returns once that kernel
    // has finished and its writes are visible (a no-op after a plain launch). The next kernel may
    // be scheduled at once (a small-M contraction then prefetches its weights before its own wait).
    line() << "kiln::gemm::detail::pdl_trigger();\n";
    line() << "kiln::gemm::detail::pdl_wait();\n";
    for (int d = 0; d < 3; ++d) kernel_threads_[d] = launch.shape.threads[d];
    stmt(stage);
    for (int64_t& t : kernel_threads_) t = 0;
    close_block();
  }
}

void CudaPrinter::print_invoke(const FunctionLayout& f) {
  for (size_t k = 0; k < f.stages.size(); ++k) {
    if (const TemplateContraction* tc = f.stages[k].as<TemplateContraction>()) {
      print_template_call(f, k, tc);
      continue;
    }
    if (const TemplateAttention* ta = f.stages[k].as<TemplateAttention>()) {
      print_attention_call(f, k, ta);
      continue;
    }
    FindLaunchShape launch;
    launch.visit(f.stages[k]);
    const LaunchShape& s = launch.shape;
    std::string grid;
    const For* top = f.stages[k].as<For>();
    std::optional<std::string> row_grid;
    if (top && top->for_kind == ForKind::BlockIdxX) {
      RowKernelBytes row(top->extent);
      row.visit(top->body);
      // Rows read again by a later stage: few enough blocks that what is read again stays in L2.
      // Rows read once (cached in registers): a block per row, up to kMaxBlocksX, which the
      // hardware schedules as blocks finish (run s27b, H200, against the capped grid: softmax
      // 1024x32000 40.6 -> 38.7 us, LayerNorm+GELU 8192x4096 43.6 -> 41.8, softmax 8192x4096
      // 37.1 -> 35.5).
      if (row.cooperative && row.reread_bytes.defined()) {
        row_grid = "kiln_row_grid_size(" + expr(top->extent) + ", " + expr(simplify(row.reread_bytes)) + ")";
      }
    }
    for (int d = 0; d < 3; ++d) {
      if (d == 0 && row_grid) {
        grid += *row_grid;
        continue;
      }
      const std::string cap = std::to_string(d == 0 ? kMaxBlocksX : kMaxBlocksYZ);
      grid += std::string(d ? ", " : "") +
              (s.blocks[d].defined() ? "kiln_grid_size(" + expr(s.blocks[d]) + ", " + cap + ")" : std::string("1"));
    }
    const std::string block = std::to_string(s.threads[0]) + ", " + std::to_string(s.threads[1]) + ", " +
                              std::to_string(s.threads[2]);
    const std::string name = kernel_name(f, k);
    const std::string args = compute_args(f, buffers_used(f, f.stages[k]));  // empty for a kernel of no parameters
    // Programmatic (it may start while the kernel before it runs), except the function's first
    // generated kernel where a later template call reads its B early (reads_b_early): that one
    // starts in stream order, after all the caller's work.
    bool in_order = false;
    if (k == first_generated_kernel(f)) {
      for (size_t later = k + 1; later < f.stages.size(); ++later) in_order = in_order || reads_b_early(f, later);
    }
    if (in_order) line() << "// in stream order: the B operands of a later call are read before its pdl_wait\n";
    line() << "if (const cudaError_t launched = kiln::gemm::detail::launch_generated(" << (in_order ? "false" : "true") << ", "
           << name << ", dim3(" << grid << "), dim3(" << block << "), static_cast<cudaStream_t>(stream)"
           << (args.empty() ? "" : ", " + args) << "); launched != cudaSuccess)\n";
    line() << "  return kiln_launch_failed(signature, \"" << name << "\", launched);\n";
  }
}

void CudaPrinter::print_copy(const std::string& dst, const std::string& src, const std::string& bytes) {
  open_block("if (cudaMemcpyAsync(" + dst + ", " + src + ", " + bytes +
             ", cudaMemcpyDeviceToDevice, static_cast<cudaStream_t>(stream)) != cudaSuccess)");
  line() << "return kiln_check_launch(signature, \"cudaMemcpyAsync\");\n";
  close_block();
}

void CudaPrinter::print_for(const For* op) {
  const bool block = is_gpu_block(op->for_kind), thread = is_gpu_thread(op->for_kind);
  if (!block && !thread) {
    CodePrinter::print_for(op);
    return;
  }
  KILN_ASSERT(is_zero(op->min), "GPU loop {} does not start at 0", op->var.as<Variable>()->name);
  const int d = static_cast<int>(op->for_kind) - static_cast<int>(block ? ForKind::BlockIdxX : ForKind::ThreadIdxX);
  const std::string v = var_name(op->var);
  const std::string index = std::string(block ? "blockIdx." : "threadIdx.") + kIndexName[d];
  const std::string step = std::string(block ? "gridDim." : "blockDim.") + kIndexName[d];
  // A thread loop as wide as the launched block runs exactly once in every thread: a block that
  // binds the index (`__launch_bounds__` is only a maximum, so the compiler could not drop the
  // loop itself; run s27h, H200: default-schedule rows 5-9% faster).
  const std::optional<int64_t> extent = as_const_int(op->extent);
  if (thread && extent && *extent == kernel_threads_[d]) {
    open_block("");
    if (stmt_uses_var(op->body, op->var)) line() << "const int64_t " << v << " = " << index << ";\n";
    stmt(op->body);
    close_block();
    return;
  }
  // Grid-stride (block) and narrower block-stride (thread) loops: correct for any launch shape.
  const std::string n = expr(op->extent);
  open_block("for (int64_t " + v + " = " + index + "; " + v + " < " + n + "; " + v + " += " + step + ")");
  stmt(op->body);
  close_block();
}

void CudaPrinter::print_allocate(const Allocate* op) {
  if (op->buffer->scope != MemoryScope::Shared) {
    CodePrinter::print_allocate(op);
    return;
  }
  const Buffer& b = op->buffer;
  auto n = as_const_int(b.num_elements());
  KILN_ASSERT(n, "shared allocation {} of a non-constant size", b->name);
  line() << "__shared__ " << type_name(b->dtype) << " " << buffer_name(b) << "[" << *n << "];\n";
  stmt(op->body);
}

std::string CudaPrinter::print_block_allreduce(const Call* op) {
  auto kind = as_const_int(op->args[2]);
  KILN_ASSERT(kind, "block_allreduce kind");
  return "kiln::block_allreduce<" + std::to_string(*kind) + ">(" + expr(op->args[0]) + ", " + expr(op->args[1]) + ")";
}

void CudaPrinter::print_sync_threads() { line() << "__syncthreads();\n"; }

}  // namespace kiln::codegen
