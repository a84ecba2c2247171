// CudaPrinter's template calls: the contraction templates (GEMM, small-M, convolution, 4-bit
// linear layers; kernels/gemm/, kernels/quant/) and fused attention, their epilogue functors, and
// each call as a translation unit of its own (ModuleOptions::template_units). The generated
// kernels and the launches of the function are in CudaPrinter.cpp.
#include "CudaPrinter.h"

#include "kiln/ir/IROperator.h"
#include "kiln/ir/IRPrinter.h"
#include "kiln/ir/ExprUsesVar.h"
#include "kiln/ir/IRVisitor.h"
#include "kiln/ir/Simplify.h"
#include "kiln/support/Error.h"

namespace kiln::codegen {

using namespace ir;

// ---- contraction templates (kernels/gemm/) -----------------------------------------------

void CudaPrinter::print_template_contraction(const TemplateContraction*) {
  internal_error("a template contraction inside a kernel (it must be a stage of its own)");
}

std::string CudaPrinter::epilogue_name(const FunctionLayout& f, size_t stage) {
  return kernel_name(f, stage) + "_epilogue";
}

namespace {

// The buffers `body` stores into.
class StoredBuffers : public IRVisitor {
 public:
  std::set<const BufferNode*> stored;
  using IRVisitor::visit;

 protected:
  void visit(const Store* op) override {
    stored.insert(op->buffer.get());
    IRVisitor::visit(op);
  }
};

// Element types with an __ldg overload (sm_32_intrinsics.h, cuda_fp16.h, cuda_bf16.h).
bool has_ldg(DType t) {
  switch (t) {
    case DType::Float16: case DType::BFloat16: case DType::Float32: case DType::Float64: case DType::Int8:
    case DType::Int16: case DType::Int32: case DType::Int64: case DType::UInt8: case DType::UInt16:
    case DType::UInt32: case DType::UInt64: return true;
    default: return false;
  }
}

// The global buffers an epilogue functor only reads: their loads print as __ldg, so that nvcc can
// keep them across the functor's stores (the kernels call it for every element of a tile, unrolled:
// with plain loads each element's loads wait behind the previous element's store).
std::set<const BufferNode*> epilogue_read_only(const std::vector<Buffer>& used, const Stmt& body) {
  StoredBuffers v;
  v.visit(body);
  std::set<const BufferNode*> out;
  for (const Buffer& b : used) {
    if (b->scope == MemoryScope::Global && !v.stored.count(b.get()) && has_ldg(b->dtype)) out.insert(b.get());
  }
  return out;
}

// What an epilogue tells the GEMM kernels about itself (gemm_problem.cuh: EpilogueReadsRows,
// EpilogueIsLong): whether it loads at an index that depends on the row or batch (a residual), and
// whether its code is long (a transcendental call or a floating-point division per element).
class EpilogueShape : public IRVisitor {
 public:
  EpilogueShape(Expr row, Expr batch) : per_row_{std::move(row), std::move(batch)} {}
  bool reads_rows = false, is_long = false;
  std::vector<const Load*> row_loads;  // the loads at a per-row index
  using IRVisitor::visit;

 protected:
  void visit(const Load* op) override {
    if (per_row(op->index)) {
      reads_rows = true;
      row_loads.push_back(op);
    }
    IRVisitor::visit(op);
  }
  void visit(const LetStmt* op) override {
    if (per_row(op->value)) per_row_.push_back(op->var);
    IRVisitor::visit(op);
  }
  void visit(const Let* op) override {
    if (per_row(op->value)) per_row_.push_back(op->var);
    IRVisitor::visit(op);
  }
  void visit(const Call* op) override {
    switch (op->op) {
      case Intrinsic::Abs: case Intrinsic::Floor: case Intrinsic::Ceil: case Intrinsic::RoundEven: case Intrinsic::Trunc:
      case Intrinsic::IsNan: case Intrinsic::IsInf: case Intrinsic::BitAnd: case Intrinsic::BitOr: case Intrinsic::BitXor:
      case Intrinsic::BitNot: case Intrinsic::ShiftLeft: case Intrinsic::ShiftRight: case Intrinsic::BitCast:
      case Intrinsic::Infinity: case Intrinsic::NaN: break;
      default: is_long = true;
    }
    IRVisitor::visit(op);
  }
  void visit(const Div* op) override {
    if (op->type.is_float()) is_long = true;
    IRVisitor::visit(op);
  }

 private:
  bool per_row(const Expr& e) const {
    for (const Expr& v : per_row_)
      if (expr_uses_var(e, v)) return true;
    return false;
  }
  std::vector<Expr> per_row_;  // the row and batch variables and the lets computed from them
};

}  // namespace

// Whether `x`, a contraction operand of M/N extent `extent`, is K-major as the templates decide it
// (kernels/gemm/gemm_problem.cuh: EpilogueAKMajor): 1 yes, 0 no, -1 known only per call.
static int k_major_hint(const ContractionOperand& x, const Expr& extent) {
  const std::optional<int64_t> k = as_const_int(x.stride_k), mn = as_const_int(x.stride_mn), e = as_const_int(extent);
  if (!k) return -1;
  if (*k != 1) return 0;
  if ((e && *e == 1) || (mn && *mn != 1)) return 1;
  return mn && e ? 0 : -1;  // both strides 1: K-major only where the extent is 1
}

// The epilogue functor of kernels/gemm/gemm_problem.cuh: the buffers and symbols the epilogue
// uses as members, its statements as the call operator over (batch, m, n, accumulators).
void CudaPrinter::print_epilogue(const FunctionLayout& f, size_t stage, const TemplateContraction* op) {
  const std::vector<Buffer> buffers = buffers_used(f, op->epilogue);
  open_block("struct " + epilogue_name(f, stage));
  line() << "static constexpr int kNumB = " << op->b.size() << ";\n";
  EpilogueShape shape(op->m_var, op->batch_var);
  shape.visit(op->epilogue);
  line() << "static constexpr bool kReadsRows = " << (shape.reads_rows ? "true" : "false") << ", kLong = "
         << (shape.is_long ? "true" : "false") << ";\n";
  // (not for a convolution, whose operands are not the problem's A and B, nor a 4-bit linear layer,
  // whose kernels take the weight apart from B)
  if (!op->w4 && !op->b.empty() && !op->b[0].window) {
    const int a = k_major_hint(op->a, op->m);
    int b = k_major_hint(op->b[0], op->n);
    for (const ContractionOperand& x : op->b) b = k_major_hint(x, op->n) == b ? b : -1;
    if (a >= 0 || b >= 0) {
      line() << "static constexpr int kAKMajor = " << a << ", kBKMajor = " << b
             << ";  // the operands' layouts, known here (kiln::gemm::EpilogueAKMajor)\n";
    }
  }
  for (const Buffer& b : buffers) line() << storage_type_name(b->dtype) << "* " << buffer_name(b) << ";\n";
  for (const Expr& s : f.symbols) line() << "int64_t " << var_name(s) << ";\n";
  const std::string unused = "[[maybe_unused]] ";
  std::string params = unused + "int64_t " + var_name(op->batch_var) + ", " + unused + "int64_t " + var_name(op->m_var) +
                       ", " + unused + "int64_t " + var_name(op->n_var);
  for (const Expr& acc : op->acc_vars) params += ", " + unused + "float " + var_name(acc);
  open_block("__device__ __forceinline__ void operator()(" + params + ") const");
  read_only_loads_ = epilogue_read_only(buffers, op->epilogue);
  stmt(op->epilogue);
  close_block();
  print_epilogue_prefetch(f, op, shape.row_loads);
  read_only_loads_.clear();
  close_block(";");
}

// prefetch(b, m, n) of an epilogue functor (gemm_problem.cuh: EpilogueHasPrefetch): an L1 prefetch
// of each per-row load of a read-only, unpacked buffer whose address depends on b, m, n and the
// sizes only (not on a let of the body). Printed only when every per-row load qualifies, so that a
// kernel that prefetches leaves no load of the call behind.
void CudaPrinter::print_epilogue_prefetch(const FunctionLayout& f, const TemplateContraction* op,
                                          const std::vector<const ir::Load*>& row_loads) {
  if (row_loads.empty()) return;
  std::set<const ExprNode*> allowed = {op->batch_var.get(), op->m_var.get(), op->n_var.get()};
  for (const Expr& sym : f.symbols) allowed.insert(sym.get());
  for (const Load* load : row_loads) {
    if (!read_only_loads_.count(load->buffer.get()) || is_packed_global(load->buffer) || !load->index.type().is_scalar()) return;
    for (const ExprNode* v : variables_in(load->index))
      if (!allowed.count(v)) return;
  }
  const std::string unused = "[[maybe_unused]] ";
  open_block("__device__ __forceinline__ void prefetch(" + unused + "int64_t " + var_name(op->batch_var) + ", " + unused + "int64_t " +
             var_name(op->m_var) + ", " + unused + "int64_t " + var_name(op->n_var) + ") const");
  std::set<std::string> printed;
  for (const Load* load : row_loads) {
    const std::string address = buffer_name(load->buffer) + "[" + expr(load->index) + "]";
    if (printed.insert(address).second) line() << "kiln::gemm::prefetch_l1(&" << address << ");\n";
  }
  close_block();
}

size_t CudaPrinter::first_generated_kernel(const FunctionLayout& f) {
  for (size_t k = 0; k < f.stages.size(); ++k) {
    if (!f.stages[k].as<TemplateContraction>() && !f.stages[k].as<TemplateAttention>()) return k;
  }
  return f.stages.size();
}

// B may be read before the kernel launched before this one has finished (gemm_problem.cuh) when
// every B is a function input (which no kernel of the function writes) and the function's first
// generated kernel was launched earlier (always, unlike a template, which launches nothing for an
// empty problem): print_invoke launches that kernel in stream order here, so it started after all
// the caller's work had finished, and every later kernel starts after it has. Only the small-M
// kernel reads B early, so a call whose constant M takes another path does not.
bool CudaPrinter::reads_b_early(const FunctionLayout& f, size_t stage) {
  const TemplateContraction* op = f.stages[stage].as<TemplateContraction>();
  if (!op || op->w4 || op->b.empty() || op->b[0].window || first_generated_kernel(f) >= stage) return false;
  if (op->config.gemv_max_m <= 0) return false;
  if (const std::optional<int64_t> m = ir::as_const_int(op->m); m && ir::gemm_path(op->config, *m) != GemmPath::SmallM) return false;
  for (const ContractionOperand& b : op->b) {
    bool input = false;
    for (const Buffer& in : f.func->inputs) input = input || in.same_as(b.buffer);
    if (!input) return false;
  }
  return true;
}

// Fills a kiln::gemm::Problem from the bound buffers and symbols and calls the template the
// schedule chose: the small-M kernel when M is at most config.gemv_max_m, the tensor-core
// kernel otherwise (both compiled; M is often a symbol, so the choice is made per call).
void CudaPrinter::print_template_call(const FunctionLayout& f, size_t stage, const TemplateContraction* op) {
  if (op->w4) {
    print_w4_call(f, stage, op);
    return;
  }
  const GemmTemplate& c = op->config;
  const std::string t = type_name(op->a.buffer->dtype);
  auto s = [](int64_t v) { return std::to_string(v); };
  open_block("");
  line() << "// " << op->description << "\n";
  line() << "// path: " << c.reason << "\n";
  line() << "kiln::gemm::Problem problem;\n";
  line() << "problem.m = " << expr(op->m) << ";\n";
  line() << "problem.n = " << expr(op->n) << ";\n";
  line() << "problem.k = " << expr(op->k) << ";\n";
  line() << "problem.batch_rank = " << op->batch_extents.size() << ";\n";
  for (size_t d = 0; d < op->batch_extents.size(); ++d) {
    line() << "problem.batch_extent[" << d << "] = " << expr(op->batch_extents[d]) << ";\n";
  }
  auto operand = [&](const std::string& field, const ContractionOperand& x) {
    line() << field << ".data = " << buffer_name(x.buffer) << " + " << expr(x.offset) << ";\n";
    line() << field << ".stride_mn = " << expr(x.stride_mn) << ";\n";
    line() << field << ".stride_k = " << expr(x.stride_k) << ";\n";
    for (size_t d = 0; d < x.batch_strides.size(); ++d) {
      line() << field << ".batch_stride[" << d << "] = " << expr(x.batch_strides[d]) << ";\n";
    }
  };
  operand("problem.a", op->a);
  for (size_t j = 0; j < op->b.size(); ++j) operand("problem.b[" + s(j) + "]", op->b[j]);
  line() << "problem.num_b = " << op->b.size() << ";\n";
  if (reads_b_early(f, stage)) {
    line() << "problem.b_early = true;  // B: function inputs, read after this call's first generated kernel started\n";
  }
  const std::string args = compute_args(f, buffers_used(f, op->epilogue));
  line() << "const " << epilogue_name(f, stage) << " epilogue{" << args << "};\n";
  if (op->b[0].window) {
    print_conv_call(f, stage, op, t);
    close_block();
    return;
  }
  const std::string split = op->split_k.defined() ? buffer_name(op->split_k) + ", static_cast<int64_t>(" +
                                                        expr(op->split_k.num_elements()) + ") * " +
                                                        s(dtype_bytes(op->split_k->dtype))
                                                  : std::string("nullptr, 0");
  auto launcher = launchers_.find(kernel_name(f, stage));
  if (launcher != launchers_.end()) {
    line() << "const cudaError_t launched = " << launcher->second << "(&problem, &epilogue, " << split
           << ", static_cast<cudaStream_t>(stream));\n";
  } else {
    line() << "const cudaError_t launched =\n" << gemm_call(op, split, "static_cast<cudaStream_t>(stream)") << ";\n";
  }
  line() << "if (launched != cudaSuccess) return kiln_launch_failed(signature, \"" << kernel_name(f, stage) << "\", launched);\n";
  close_block();
}

// A unit of its own for the template call of `stage` (ModuleOptions::template_units): the functor
// (`epilogue_text`) and an extern "C" launcher, both named after a hash of the unit's text, so
// that the same contraction and epilogue give the same unit whatever the rest of the module is;
// the module declares the launcher and calls it with its own functor, whose members are the same.
// The functor's name must differ between different units: the template instantiations it names
// (kernels and their host-side launch functions) are merged by the linker across the library's
// objects, and two functors of one name would leave every unit calling one of them.
void CudaPrinter::print_template_unit(const FunctionLayout& f, size_t stage, const UnitCall& call, std::string epilogue_text) {
  const std::string params = "(const " + call.problem_type + "* problem_in, const void* epilogue_in" + call.params +
                             ", cudaStream_t stream)";
  // The unit with its functor named `functor` and its launcher `launcher`.
  auto unit = [&](const std::string& functor, const std::string& launcher) {
    std::string text = epilogue_text;
    const std::string name = epilogue_name(f, stage);
    for (size_t at = text.find(name); at != std::string::npos; at = text.find(name, at + functor.size())) {
      text.replace(at, name.size(), functor);
    }
    return prologue() + "\n// " + call.description + "\n" + text + "\nextern \"C\" cudaError_t " + launcher + params +
           " {\n  const " + call.problem_type + "& problem = *problem_in;\n  const " + functor + "& epilogue = *static_cast<const " +
           functor + "*>(epilogue_in);\n" + call.bindings + "  return\n" + call.call + ";\n}\n";
  };
  char hash[20];
  std::snprintf(hash, sizeof hash, "%016zx", std::hash<std::string>()(unit("kiln_unit_epilogue", "kiln_unit_launch")));
  const std::string launcher = std::string("kiln_gemm_unit_") + hash;
  launchers_[kernel_name(f, stage)] = launcher;
  line() << "extern \"C\" cudaError_t " << launcher << params << ";  // in a translation unit of its own\n";
  if (unit_launchers_.insert(launcher).second) units_->push_back(unit(std::string("kiln_unit_epilogue_") + hash, launcher));
}

CudaPrinter::UnitCall CudaPrinter::contraction_unit_call(const TemplateContraction* op) {
  UnitCall u;
  u.description = op->description;
  u.problem_type = "kiln::gemm::Problem";
  if (op->b[0].window) {
    const std::string element = type_name(op->a.buffer->dtype);
    u.params = ", const kiln::gemm::ConvShape* shape_in";
    if (op->split_k.defined()) u.params += ", " + element + "* workspace, int64_t workspace_bytes";
    u.bindings = "  const kiln::gemm::ConvShape& shape = *shape_in;\n";
    u.call = "    " + conv_call(op, element, op->split_k.defined() ? "workspace, workspace_bytes, " : "", "stream");
    return u;
  }
  const std::string split_type = op->split_k.defined() ? storage_type_name(op->split_k->dtype) : "float";
  u.params = ", " + split_type + "* split, int64_t split_bytes";
  u.call = gemm_call(op, "split, split_bytes", "stream");
  return u;
}

CudaPrinter::UnitCall CudaPrinter::attention_unit_call(const TemplateAttention* op) {
  UnitCall u;
  u.description = op->description;
  u.problem_type = "kiln::gemm::AttentionProblem";
  u.call = "    kiln::gemm::attention<" + type_name(op->q.buffer->dtype) + ", " + std::to_string(op->head_dim) +
           ">(problem, epilogue, stream)";
  return u;
}

// The call of the template the schedule chose, as an expression of `problem`, `epilogue`, the
// split-K workspace arguments `split` (pointer, bytes) and the stream.
std::string CudaPrinter::gemm_call(const TemplateContraction* op, const std::string& split_arg, const std::string& cuda_stream) {
  const GemmTemplate& c = op->config;
  const std::string t = type_name(op->a.buffer->dtype);
  auto s = [](int64_t v) { return std::to_string(v); };
  const bool dual = op->b.size() == 2;
  auto gemm = [&](const GemmTile& tile) {
    return "kiln::gemm::gemm<" + t + ", kiln::gemm::TileConfig<" + s(tile.bm) + ", " + s(tile.bn) + ", " + s(tile.bk) +
           ", " + s(tile.warps_m) + ", " + s(tile.warps_n) + ", " + s(tile.stages) + ">>(problem, epilogue, " + split_arg +
           ", " + cuda_stream + ")";
  };
  // Each path guarded by its bound on M (ir::gemm_path's order), the last one unguarded.
  struct Path {
    GemmPath path;
    int64_t bound;  // 0: the last path
    std::string call;
  };
  std::vector<Path> paths;
  if (c.gemv_max_m > 0) {
    paths.push_back({GemmPath::SmallM, c.gemv_max_m, "kiln::gemm::gemv<" + t + ", kiln::gemm::GemvConfig<" + s(c.gemv_max_m) + ", " +
                                         s(c.gemv_warps) + ">>(problem, epilogue, " + split_arg + ", " + cuda_stream + ")"});
  }
  // The Hopper kernel falls back to the mma.sync tile itself (other devices, builds without
  // sm_90a, operands TMA cannot read).
  auto gemm_wgmma = [&](const GemmWgmmaTile& w, const GemmTile& tile) {
    return "kiln::gemm::gemm_wgmma<" + t + ", kiln::gemm::WgmmaConfig<" + s(w.bm) + ", " + s(w.bn) + ", " + s(w.stages) + ", " +
           (w.pingpong ? "1" : "0") + (w.dual_halves || w.swap_ab ? std::string(", ") + (w.dual_halves ? "1" : "0") : "") +
           (w.swap_ab ? ", 1" : "") + ">, kiln::gemm::TileConfig<" + s(tile.bm) + ", " + s(tile.bn) + ", " + s(tile.bk) + ", " +
           s(tile.warps_m) + ", " + s(tile.warps_n) + ", " + s(tile.stages) + ">>(problem, epilogue, " + split_arg + ", " +
           cuda_stream + ")";
  };
  auto shape = [&](const GemmWgmmaTile& w) {
    return "kiln::gemm::WgmmaTileShape{" + s(w.bm) + ", " + s(w.bn) + ", " + (w.pingpong ? "true" : "false") + "}";
  };
  if (c.mid_max_m > 0) paths.push_back({GemmPath::Mid, c.mid_max_m, gemm(dual ? c.dual_mid_tile : c.mid_tile)});
  if (c.wgmma && !c.tf32) {
    const std::string wide = "kiln::gemm::wgmma_prefers_wide(problem, " + s(c.wgmma_tile.bm) + ", " + s(c.wgmma_tile.bn) + ", " +
                             s(c.wgmma_wide_min_k) + ", " + s(c.wgmma_narrow_tile.bm) + ", " + s(c.wgmma_narrow_tile.bn) + ")";
    std::string call;
    if (!c.wgmma_swap) {
      call = dual ? gemm_wgmma(c.wgmma_dual_tile, c.dual_tile)
                  : "(" + wide + " ? " + gemm_wgmma(c.wgmma_tile, c.tile) + " : " + gemm_wgmma(c.wgmma_narrow_tile, c.tile) + ")";
    } else if (dual) {  // the SWAP_AB tile where kiln::gemm::wgmma_swap_choice picks it
      call = "(kiln::gemm::wgmma_swap_choice(problem, epilogue, " + shape(c.wgmma_dual_tile) + ", " + shape(c.wgmma_dual_swap_tile) +
             ") == 1 ? " + gemm_wgmma(c.wgmma_dual_swap_tile, c.dual_tile) + " : " + gemm_wgmma(c.wgmma_dual_tile, c.dual_tile) + ")";
    } else {  // each choice made once per call: the wide or narrow tile, then a SWAP_AB tile over it
      call = "[&]() -> cudaError_t {\n      const bool wide = " + wide + ";\n      switch (kiln::gemm::wgmma_swap_choice(problem, epilogue, wide ? " +
             shape(c.wgmma_tile) + " : " + shape(c.wgmma_narrow_tile) + ", " + shape(c.wgmma_swap_narrow_tile) + ", " +
             shape(c.wgmma_swap_tile) + ")) {\n        case 1: return " + gemm_wgmma(c.wgmma_swap_narrow_tile, c.tile) +
             ";\n        case 2: return " + gemm_wgmma(c.wgmma_swap_tile, c.tile) + ";\n        default: return wide ? " +
             gemm_wgmma(c.wgmma_tile, c.tile) + " : " + gemm_wgmma(c.wgmma_narrow_tile, c.tile) + ";\n      }\n    }()";
    }
    paths.push_back({GemmPath::Large, 0, call});
  } else {
    paths.push_back({GemmPath::Large, 0, gemm(dual ? c.dual_tile : c.tile)});
  }
  // A constant M takes one path: only that path's templates are instantiated (each path's kernels
  // are compiled whether or not a branch can reach them, most of a module's build time).
  if (const std::optional<int64_t> m = ir::as_const_int(op->m)) {
    const GemmPath taken = gemm_path(c, *m);
    for (size_t p = 0; p < paths.size(); ++p) {
      if (paths[p].path != taken) continue;
      const int64_t below = p > 0 ? paths[p - 1].bound : 0;
      const std::string which = paths[p].bound > 0 ? "M <= " + s(paths[p].bound) : below > 0 ? "M > " + s(below) : "every M";
      return "    // M = " + s(*m) + ": only the path for " + which + "\n    " + paths[p].call;
    }
  }
  std::string call;
  for (size_t p = 0; p + 1 < paths.size(); ++p) {
    call += "    problem.m <= " + s(paths[p].bound) + " ? " + paths[p].call + " :\n";
  }
  return call + "    " + paths.back().call;
}

// A kiln.QuantLinear through kernels/quant/ (w4_launch.cuh's launch_linear_epilogue): the
// kernels' LinearParams from the bound buffers and symbols, the generated epilogue functor in
// place of their store, the split-K partials in the function's workspace. The kernels pick the
// GEMV (M <= 16) or the GEMM per call from the bound M, as plan_linear does for libkiln_quant.
void CudaPrinter::print_w4_call(const FunctionLayout& f, size_t stage, const TemplateContraction* op) {
  const W4Weight& w = *op->w4;
  static const char* const kFormat[] = {"NvFp4", "MxFp4", "Int4"};
  const std::string format = std::string("kiln::quant::gpu::Format::") + kFormat[static_cast<int>(w.format)];
  open_block("");
  line() << "// " << op->description << "\n";
  line() << "// path: " << op->config.reason << "\n";
  line() << "kiln::quant::gpu::LinearParams params{};\n";
  line() << "params.x = " << buffer_name(op->a.buffer) << ";\n";
  line() << "params.weight = reinterpret_cast<const uint8_t*>(" << buffer_name(w.weight) << ");\n";
  line() << "params.scale = " << buffer_name(w.scales) << ";\n";
  if (w.format == W4Format::Int4) line() << "params.zero = " << buffer_name(w.extra) << ";\n";
  if (w.format == W4Format::NvFp4) line() << "params.scale2 = nullptr;  // the tensor scale is applied by the epilogue\n";
  line() << "params.m = static_cast<int>(" << expr(op->m) << ");\n";
  line() << "params.n = static_cast<int>(" << expr(op->n) << ");\n";
  line() << "params.k = static_cast<int>(" << expr(op->k) << ");\n";
  line() << "params.group = " << w.group << ";\n";
  line() << "const " << epilogue_name(f, stage) << " epilogue{" << compute_args(f, buffers_used(f, op->epilogue)) << "};\n";
  line() << "const cudaError_t launched = kiln::quant::gpu::launch_linear_epilogue<" << format << ", "
         << type_name(op->a.buffer->dtype) << ">(params, epilogue, "
         << (op->split_k.defined() ? buffer_name(op->split_k) + ", static_cast<size_t>(" + expr(op->split_k.num_elements()) + ") * 4"
                                   : std::string("nullptr, 0"))
         << ", static_cast<cudaStream_t>(stream));\n";
  line() << "if (launched != cudaSuccess) return kiln_launch_failed(signature, \"" << kernel_name(f, stage) << "\", launched);\n";
  close_block();
}

// A convolution's B operand (an implicit im2col): its window as a kiln::gemm::ConvShape and one
// call of the implicit-GEMM template, with the workspace for the Hopper kernel's repacked weight
// where lowering reserved one.
std::string CudaPrinter::conv_call(const TemplateContraction* op, const std::string& element, const std::string& workspace_args,
                                   const std::string& cuda_stream) {
  const GemmTile& tile = op->config.conv_tile;
  auto s = [](int64_t v) { return std::to_string(v); };
  return "kiln::gemm::conv<" + element + ", kiln::gemm::TileConfig<" + s(tile.bm) + ", " + s(tile.bn) + ", " + s(tile.bk) + ", " +
         s(tile.warps_m) + ", " + s(tile.warps_n) + ", " + s(tile.stages) + ">>(problem, shape, epilogue, " + workspace_args +
         cuda_stream + ")";
}

void CudaPrinter::print_conv_call(const FunctionLayout& f, size_t stage, const TemplateContraction* op,
                                  const std::string& element) {
  const ConvWindow& w = *op->b[0].window;
  line() << "kiln::gemm::ConvShape shape;\n";
  line() << "shape.x = " << buffer_name(op->b[0].buffer) << ";\n";
  line() << "shape.channels = " << expr(w.channels) << ";\n";
  line() << "shape.height = " << expr(w.height) << ";\n";
  line() << "shape.width = " << expr(w.width) << ";\n";
  line() << "shape.out_height = " << expr(w.out_height) << ";\n";
  line() << "shape.out_width = " << expr(w.out_width) << ";\n";
  line() << "shape.kernel_h = " << w.kernel_h << ";\n";
  line() << "shape.kernel_w = " << w.kernel_w << ";\n";
  line() << "shape.stride_h = " << w.stride_h << ";\n";
  line() << "shape.stride_w = " << w.stride_w << ";\n";
  line() << "shape.dilation_h = " << w.dilation_h << ";\n";
  line() << "shape.dilation_w = " << w.dilation_w << ";\n";
  line() << "shape.pad_h = " << w.pad_h << ";\n";
  line() << "shape.pad_w = " << w.pad_w << ";\n";
  // The workspace (where the Hopper kernel may run): the weight repacked per call, M * K elements.
  const std::string workspace =
      op->split_k.defined() ? buffer_name(op->split_k) + ", static_cast<int64_t>(" + expr(op->split_k.num_elements()) + ") * sizeof(" +
                                  element + "), "
                            : std::string();
  auto launcher = launchers_.find(kernel_name(f, stage));
  if (launcher != launchers_.end()) {
    line() << "const cudaError_t launched = " << launcher->second << "(&problem, &epilogue, &shape, " << workspace
           << "static_cast<cudaStream_t>(stream));\n";
  } else {
    line() << "const cudaError_t launched = " << conv_call(op, element, workspace, "static_cast<cudaStream_t>(stream)") << ";\n";
  }
  line() << "if (launched != cudaSuccess) return kiln_launch_failed(signature, \"" << kernel_name(f, stage) << "\", launched);\n";
}

// ---- fused attention (kernels/gemm/attention.cuh) ---------------------------------------

namespace {

// What the attention epilogue functor computes: the epilogue and the scale's device factor.
Stmt attention_functor_body(const TemplateAttention* op) {
  if (!op->scale_expr.defined()) return op->epilogue;
  return Seq::make({op->epilogue, Evaluate::make(op->scale_expr)});
}

}  // namespace

void CudaPrinter::print_template_attention(const TemplateAttention*) {
  internal_error("a template attention inside a kernel (it must be a stage of its own)");
}

// The epilogue functor of attention<T, D>: the buffers and symbols the epilogue uses as members,
// its statements as the call operator over (batch, query row, head-dim column, output value).
void CudaPrinter::print_attention_epilogue(const FunctionLayout& f, size_t stage, const TemplateAttention* op) {
  const std::vector<Buffer> buffers = buffers_used(f, attention_functor_body(op));
  open_block("struct " + epilogue_name(f, stage));
  for (const Buffer& b : buffers) line() << type_name(b->dtype) << "* " << buffer_name(b) << ";\n";
  for (const Expr& s : f.symbols) line() << "int64_t " << var_name(s) << ";\n";
  const std::string unused = "[[maybe_unused]] ";
  const std::string params = unused + "int64_t " + var_name(op->batch_var) + ", " + unused + "int64_t " +
                             var_name(op->row_var) + ", " + unused + "int64_t " + var_name(op->d_var) + ", " + unused +
                             "float " + var_name(op->out_var);
  open_block("__device__ __forceinline__ void operator()(" + params + ") const");
  read_only_loads_ = epilogue_read_only(buffers, op->epilogue);
  stmt(op->epilogue);
  read_only_loads_.clear();
  close_block();
  if (op->scale_expr.defined()) {  // the scale's factor known on the device only (attention.cuh: attention_scale)
    open_block("__device__ __forceinline__ float kiln_device_scale() const");
    line() << "return " << expr(op->scale_expr) << ";\n";
    close_block();
  }
  close_block(";");
}

// Fills a kiln::gemm::AttentionProblem from the bound buffers and symbols and calls
// attention<T, D>, which picks the tensor-core kernel or its exact fallback per call.
void CudaPrinter::print_attention_call(const FunctionLayout& f, size_t stage, const TemplateAttention* op) {
  open_block("");
  line() << "// " << op->description << "\n";
  line() << "// path: " << op->reason << "\n";
  line() << "kiln::gemm::AttentionProblem problem;\n";
  line() << "problem.seq_q = " << expr(op->seq_q) << ";\n";
  line() << "problem.seq_k = " << expr(op->seq_k) << ";\n";
  line() << "problem.batch_rank = " << op->batch_extents.size() << ";\n";
  for (size_t d = 0; d < op->batch_extents.size(); ++d) {
    line() << "problem.batch_extent[" << d << "] = " << expr(op->batch_extents[d]) << ";\n";
  }
  auto operand = [&](const std::string& field, const ContractionOperand& x) {
    line() << field << ".data = " << buffer_name(x.buffer) << " + " << expr(x.offset) << ";\n";
    line() << field << ".stride_row = " << expr(x.stride_mn) << ";\n";
    line() << field << ".stride_d = " << expr(x.stride_k) << ";\n";
    for (size_t d = 0; d < x.batch_strides.size(); ++d) {
      line() << field << ".batch_stride[" << d << "] = " << expr(x.batch_strides[d]) << ";\n";
    }
  };
  operand("problem.q", op->q);
  operand("problem.k", op->k);
  operand("problem.v", op->v);
  if (op->mask) operand("problem.mask", *op->mask);
  line() << "problem.scale = " << expr(FloatImm::make(Type(DType::Float32), op->scale)) << ";\n";
  line() << "const " << epilogue_name(f, stage) << " epilogue{"
         << compute_args(f, buffers_used(f, attention_functor_body(op))) << "};\n";
  auto launcher = launchers_.find(kernel_name(f, stage));
  if (launcher != launchers_.end()) {
    line() << "const cudaError_t launched = " << launcher->second << "(&problem, &epilogue, static_cast<cudaStream_t>(stream));\n";
  } else {
    line() << "const cudaError_t launched = kiln::gemm::attention<" << type_name(op->q.buffer->dtype) << ", "
           << op->head_dim << ">(problem, epilogue, static_cast<cudaStream_t>(stream));\n";
  }
  line() << "if (launched != cudaSuccess) return kiln_launch_failed(signature, \"" << kernel_name(f, stage) << "\", launched);\n";
  close_block();
}

}  // namespace kiln::codegen
