#pragma once
// The CPU (C++) subclass of the printer hierarchy. Private to codegen/.
#include <dlpack/dlpack.h>

#include "CodePrinter.h"

namespace kiln::codegen {

class CppPrinter : public CodePrinter {
 public:
  CppPrinter() : CodePrinter(Target::Cpu) {}

 protected:
  std::string prologue() override;
  std::string half_type_name(DType dtype) override;
  std::string math_function(ir::Intrinsic op, bool single) override;
  void print_compute(const FunctionLayout& f) override;
  void print_invoke(const FunctionLayout& f) override;
  void print_copy(const std::string& dst, const std::string& src, const std::string& bytes) override;
  std::string unroll_pragma() override { return "#pragma GCC unroll 16"; }
  int device_type() const override { return kDLCPU; }
};

}  // namespace kiln::codegen
