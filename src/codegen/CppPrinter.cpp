// The CPU backend's printer: each lowered function becomes one C++ function over its buffers
// (every loop serial; GPU loop kinds run as plain loops), called from the kernel-contract entry.
#include "CppPrinter.h"

#include "Embedded.h"

namespace kiln::codegen {

using namespace ir;

std::string CppPrinter::prologue() { return embedded_file("templates/cpu_prologue.h"); }

std::string CppPrinter::half_type_name(DType dtype) {
  return dtype == DType::Float16 ? "kiln::half_t" : "kiln::bfloat16_t";
}

std::string CppPrinter::math_function(Intrinsic op, bool /*single*/) {
  // std:: overloads pick the float or double version from the argument.
  switch (op) {
    case Intrinsic::Exp: return "std::exp";
    case Intrinsic::Exp2: return "std::exp2";
    case Intrinsic::Rcp: return "kiln::rcp_";
    case Intrinsic::Log: return "std::log";
    case Intrinsic::Sqrt: return "std::sqrt";
    case Intrinsic::Rsqrt: return "kiln::rsqrt_";
    case Intrinsic::Sin: return "std::sin";
    case Intrinsic::Cos: return "std::cos";
    case Intrinsic::Tan: return "std::tan";
    case Intrinsic::Asin: return "std::asin";
    case Intrinsic::Acos: return "std::acos";
    case Intrinsic::Atan: return "std::atan";
    case Intrinsic::Sinh: return "std::sinh";
    case Intrinsic::Cosh: return "std::cosh";
    case Intrinsic::Tanh: return "std::tanh";
    case Intrinsic::Asinh: return "std::asinh";
    case Intrinsic::Acosh: return "std::acosh";
    case Intrinsic::Atanh: return "std::atanh";
    case Intrinsic::Erf: return "std::erf";
    case Intrinsic::Abs: return "std::fabs";
    case Intrinsic::Floor: return "std::floor";
    case Intrinsic::Ceil: return "std::ceil";
    case Intrinsic::RoundEven: return "std::nearbyint";
    case Intrinsic::Trunc: return "std::trunc";
    case Intrinsic::Pow: return "std::pow";
    case Intrinsic::Fmod: return "std::fmod";
    case Intrinsic::IsNan: return "std::isnan";
    case Intrinsic::IsInf: return "std::isinf";
    default: return "";
  }
}

void CppPrinter::print_compute(const FunctionLayout& f) {
  reset_names();
  const std::vector<Buffer> buffers = buffers_used(f, f.func->body);
  open_block("static void " + f.name + "_compute(" + compute_params(f, buffers, f.func->body) + ")");
  for (const Stmt& s : f.stages) stmt(s);
  close_block();
}

void CppPrinter::print_invoke(const FunctionLayout& f) {
  line() << f.name << "_compute(" << compute_args(f, buffers_used(f, f.func->body)) << ");\n";
}

void CppPrinter::print_copy(const std::string& dst, const std::string& src, const std::string& bytes) {
  line() << "memcpy(" << dst << ", " << src << ", " << bytes << ");\n";
}

}  // namespace kiln::codegen
