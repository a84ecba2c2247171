#pragma once
// The CUDA subclass of the printer hierarchy: one __global__ kernel per stage, GPU loop kinds
// as grid-stride and block-stride loops, __shared__ allocations, cross-thread reductions, math
// through CUDA's float/double functions, and launches on the caller's stream. Private to codegen/.
#include <dlpack/dlpack.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "CodePrinter.h"

namespace kiln::codegen {

class CudaPrinter : public CodePrinter {
 public:
  CudaPrinter() : CodePrinter(Target::Cuda) {}
  // ModuleOptions::template_units: GEMM template calls are compiled in their own translation
  // units, appended to `units` (see Codegen.h).
  void set_template_units(std::vector<std::string>* units) { units_ = units; }

 protected:
  std::string prologue() override;
  std::string half_type_name(DType dtype) override;
  std::string math_function(ir::Intrinsic op, bool single) override;
  void print_compute(const FunctionLayout& f) override;
  void print_invoke(const FunctionLayout& f) override;
  void print_copy(const std::string& dst, const std::string& src, const std::string& bytes) override;
  void print_for(const ir::For* op) override;
  void print_allocate(const ir::Allocate* op) override;
  void print_template_contraction(const ir::TemplateContraction* op) override;
  void print_template_attention(const ir::TemplateAttention* op) override;

 private:
  std::string epilogue_name(const FunctionLayout& f, size_t stage);
  void print_epilogue(const FunctionLayout& f, size_t stage, const ir::TemplateContraction* op);
  void print_epilogue_prefetch(const FunctionLayout& f, const ir::TemplateContraction* op,
                               const std::vector<const ir::Load*>& row_loads);
  void print_template_call(const FunctionLayout& f, size_t stage, const ir::TemplateContraction* op);
  void print_w4_call(const FunctionLayout& f, size_t stage, const ir::TemplateContraction* op);
  void print_conv_call(const FunctionLayout& f, size_t stage, const ir::TemplateContraction* op, const std::string& element);
  void print_attention_epilogue(const FunctionLayout& f, size_t stage, const ir::TemplateAttention* op);
  void print_attention_call(const FunctionLayout& f, size_t stage, const ir::TemplateAttention* op);
  std::string print_block_allreduce(const ir::Call* op) override;
  void print_sync_threads() override;
  std::string unroll_pragma() override { return "#pragma unroll"; }
  int device_type() const override { return kDLCUDA; }

 private:
  std::string kernel_name(const FunctionLayout& f, size_t stage);
  // Whether template call `stage` may read its B operands before the kernel launched before it has
  // finished (gemm_problem.cuh's Problem::b_early), and so whether the function's first generated
  // kernel, the point from which that is safe, must be launched in stream order (print_invoke).
  static bool reads_b_early(const FunctionLayout& f, size_t stage);
  static size_t first_generated_kernel(const FunctionLayout& f);  // f.stages.size(): none
  // A template call's unit of its own (ModuleOptions::template_units); see CudaPrinterTemplates.cpp.
  struct UnitCall {
    std::string description;
    std::string problem_type;  // what the launcher's first parameter points to
    std::string params;        // the parameters after the problem and the functor (", ...")
    std::string bindings;      // statements binding those parameters for `call`
    std::string call;          // the template call: an expression of `problem`, `epilogue`, `stream`
  };
  void print_template_unit(const FunctionLayout& f, size_t stage, const UnitCall& call, std::string epilogue_text);
  std::string gemm_call(const ir::TemplateContraction* op, const std::string& split_arg, const std::string& cuda_stream);
  // The convolution template's call; `workspace_args`: "" or "<pointer>, <bytes>, ".
  std::string conv_call(const ir::TemplateContraction* op, const std::string& element, const std::string& workspace_args,
                        const std::string& cuda_stream);
  UnitCall contraction_unit_call(const ir::TemplateContraction* op);
  UnitCall attention_unit_call(const ir::TemplateAttention* op);
  std::vector<std::string>* units_ = nullptr;
  std::map<std::string, std::string> launchers_;  // by kernel name: the launcher of its unit
  std::set<std::string> unit_launchers_;     // launchers whose unit is written (once per module)
  // The launched block of the kernel being printed (x, y, z; 0 outside a kernel): a thread loop
  // of that extent runs exactly once in every thread and is printed as a block.
  int64_t kernel_threads_[3] = {0, 0, 0};
};

}  // namespace kiln::codegen
