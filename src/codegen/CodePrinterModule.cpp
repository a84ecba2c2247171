// The parts of a generated module every target shares: symbol binding, the workspace plan, the
// signature, the entry point (validation, workspace carving, the stage calls) and the module
// itself with its library entry points. Split from CodePrinter.cpp, which prints expressions and
// statements.
#include <cstdio>

#include "CodePrinter.h"
#include "kiln/ir/IROperator.h"
#include "kiln/ir/IRPrinter.h"
#include "kiln/support/Error.h"

namespace kiln::codegen {

using namespace ir;

std::string signature_text(const FunctionLayout& f);  // Signature.cpp

namespace {

const char* dl_type_code(DType d) {
  switch (dtype_class(d)) {
    case DTypeClass::Bool: return "6 /* bool */";
    case DTypeClass::Int: return "kDLInt";
    case DTypeClass::UInt: return "kDLUInt";
    case DTypeClass::Float: return d == DType::BFloat16 ? "kDLBfloat" : "kDLFloat";
  }
  return "kDLFloat";
}

}  // namespace

// ---- module parts every target shares ------------------------------------------------------

void CodePrinter::bind_symbols(const FunctionLayout& f, const std::string& array) {
  for (size_t s = 0; s < f.symbols.size(); ++s) {
    line() << "[[maybe_unused]] const int64_t " << var_name(f.symbols[s]) << " = " << array << "[" << s << "];\n";
  }
}

void CodePrinter::print_workspace(const FunctionLayout& f) {
  // The memory plan (runtime/arena_plan.h): sizes evaluated for this call's symbols, lifetimes
  // fixed here; offsets[] receives each temporary's offset in the workspace.
  reset_names();
  const size_t n = f.temporaries.size();
  open_block("static size_t kiln_arena_" + f.name +
             "([[maybe_unused]] const int64_t* symbols, [[maybe_unused]] size_t* offsets, [[maybe_unused]] size_t* live_bytes)");
  if (n == 0) {
    line() << "if (live_bytes) *live_bytes = 0;\n";
    line() << "return 0;\n";
    close_block();
  } else {
    bind_symbols(f, "symbols");
    line() << "kiln::abi::ArenaBuffer buffers[" << n << "] = {\n";
    for (size_t k = 0; k < n; ++k) {
      const Buffer& t = f.temporaries[k];
      line() << "    {" << storage_bytes(t) << ", " << f.lifetimes[k].first << ", " << f.lifetimes[k].second
             << ", 0},  // " << t->name << "\n";
    }
    line() << "};\n";
    line() << "const size_t total = kiln::abi::plan_arena(buffers, " << n << ");\n";
    line() << "for (int k = 0; k < " << n << "; ++k) offsets[k] = buffers[k].offset;\n";
    line() << "if (live_bytes) *live_bytes = kiln::abi::arena_live_bytes(buffers, " << n << ");\n";
    line() << "return total;\n";
    close_block();
  }
  blank_line();
  open_block("static size_t kiln_workspace_bytes_" + f.name + "(const int64_t* symbols)");
  line() << "size_t offsets[" << std::max<size_t>(1, n) << "];\n";
  line() << "return kiln_arena_" << f.name << "(symbols, offsets, nullptr);\n";
  close_block();
  blank_line();
  // The largest live set for these symbols: what the plan is measured against (kiln::Model's
  // memory report).
  open_block("extern \"C\" size_t kiln_live_bytes_" + f.name + "(const int64_t* symbols)");
  line() << "size_t offsets[" << std::max<size_t>(1, n) << "], live = 0;\n";
  line() << "kiln_arena_" << f.name << "(symbols, offsets, &live);\n";
  line() << "return live;\n";
  close_block();
}

namespace {

std::vector<int> constant_indices(const FunctionLayout& f) {
  std::vector<int> indices;
  for (const Buffer& c : f.constants) {
    for (size_t k = 0; k < f.func->inputs.size(); ++k) {
      if (f.func->inputs[k].same_as(c)) indices.push_back(static_cast<int>(k));
    }
  }
  return indices;
}

}  // namespace

void CodePrinter::print_signature(const FunctionLayout& f) {
  open_block("extern \"C\" const KilnSignature* kiln_signature_" + f.name + "(void)");
  for (size_t i = 0; i < f.params.size(); ++i) {
    const Buffer& b = f.params[i];
    std::string dims;
    for (const Expr& d : b->shape) {
      std::string text;
      if (auto c = as_const_int(d)) {
        text = std::to_string(*c);
      } else {
        for (size_t s = 0; s < f.symbols.size(); ++s) {
          if (f.symbols[s].same_as(d)) text = "KILN_DIM_SYMBOL(" + std::to_string(s) + ")";
        }
        for (const auto& derived : f.derived) {
          if (derived.expression.same_as(d) && text.empty()) text = "KILN_DIM_SYMBOL(" + std::to_string(derived.symbol) + ")";
        }
      }
      dims += (dims.empty() ? "" : ", ") + text;
    }
    line() << "static const KilnDim shape_" << i << "[] = {" << (dims.empty() ? "0" : dims) << "};\n";
  }
  line() << "static const KilnParam params[] = {\n";
  for (size_t i = 0; i < f.params.size(); ++i) {
    const Buffer& b = f.params[i];
    auto it = f.alignment.find(b.get());
    const int alignment = std::max(dtype_bytes(b->dtype), it == f.alignment.end() ? 1 : it->second);
    line() << "    {" << string_literal(b->name) << ", {" << dl_type_code(b->dtype) << ", " << dtype_bits(b->dtype)
           << ", 1}, " << b->shape.size() << ", shape_" << i << ", " << alignment << ", "
           << (i >= f.num_inputs ? 1 : 0) << "},\n";
  }
  line() << "};\n";
  const size_t ns = f.symbols.size();
  if (ns) {
    std::string names, ones, zeros;
    for (const Expr& s : f.symbols) {
      names += (names.empty() ? "" : ", ") + string_literal(s.as<Variable>()->name);
      ones += ones.empty() ? "1" : ", 1";
      zeros += zeros.empty() ? "0" : ", 0";
    }
    line() << "static const char* const symbol_names[] = {" << names << "};\n";
    line() << "static const int64_t symbol_divisors[] = {" << ones << "};\n";
    line() << "static const int64_t symbol_minimums[] = {" << zeros << "};\n";
  }
  line() << "static const KilnSignature signature = {\n";
  line() << "    " << string_literal(f.name) << ", KILN_ABI_VERSION, " << device_type() << ", " << f.params.size()
         << ", params, " << ns << ", " << (ns ? "symbol_names, symbol_divisors, symbol_minimums" : "nullptr, nullptr, nullptr")
         << ",\n";
  line() << "    kiln_workspace_bytes_" << f.name << ",\n";
  line() << "    " << string_literal(signature_text(f)) << ",\n";
  line() << "    " << string_literal(signature_json(*f.func, target_, constant_indices(f))) << "};\n";
  line() << "return &signature;\n";
  close_block();
}

void CodePrinter::print_entry(const FunctionLayout& f) {
  reset_names();
  open_block("extern \"C\" int32_t kiln_" + f.name +
             "(const DLTensor* args, int32_t num_args, [[maybe_unused]] void* workspace, [[maybe_unused]] void* stream)");
  line() << "std::string& error = kiln::abi::last_error_storage();\n";
  line() << "const KilnSignature& signature = *kiln_signature_" << f.name << "();\n";
  line() << "int64_t symbols[" << std::max<size_t>(1, f.symbols.size()) << "];\n";
  line() << "const int32_t status = kiln::abi::validate_arguments(signature, args, num_args, symbols, &error);\n";
  line() << "if (status != KILN_OK) return status;\n";
  bind_symbols(f, "symbols");
  for (const auto& d : f.derived) {
    const std::string want = expr(d.expression);
    open_block("if (" + var_name(f.symbols[d.symbol]) + " != " + want + ")");
    line() << "error = std::string(signature.text) + \": " << d.where << " is \" + std::to_string("
           << var_name(f.symbols[d.symbol]) << ") + \", expected \" + std::to_string(" << want << ") + \" ("
           << to_string(d.expression) << ")\";\n";
    line() << "return KILN_ERR_SHAPE;\n";
    close_block();
  }
  if (!f.temporaries.empty()) {
    open_block("if (workspace == nullptr && signature.workspace_bytes(symbols) > 0)");
    line() << "error = std::string(signature.text) + \": workspace is null, expected \" + "
              "std::to_string(signature.workspace_bytes(symbols)) + \" bytes\";\n";
    line() << "return KILN_ERR_WORKSPACE;\n";
    close_block();
  }
  for (size_t i = 0; i < f.params.size(); ++i) {
    const Buffer& b = f.params[i];
    const std::string t = storage_type_name(b->dtype);
    line() << "[[maybe_unused]] " << t << "* " << buffer_name(b) << " = reinterpret_cast<" << t << "*>(static_cast<char*>(args[" << i
           << "].data) + args[" << i << "].byte_offset);\n";
  }
  if (!f.constants.empty()) {
    // The library's weights on this call's device, loaded (uploaded) on first use.
    line() << "const void* const* constants = kiln_model_constants(args[0].device.device_id, stream);\n";
    line() << "if (constants == nullptr) return KILN_ERR_WEIGHTS;\n";
    for (size_t k = 0; k < f.constants.size(); ++k) {
      const Buffer& b = f.constants[k];
      const std::string t = storage_type_name(b->dtype);
      line() << "[[maybe_unused]] " << t << "* " << buffer_name(b) << " = static_cast<" << t
             << "*>(const_cast<void*>(constants[" << k << "]));\n";
    }
  }
  if (!f.temporaries.empty()) {
    line() << "static thread_local kiln::abi::ArenaCache<" << f.temporaries.size() << ", " << f.symbols.size()
           << "> arena;\n";
    line() << "const size_t* offsets = arena.get(symbols, [](const int64_t* s, size_t* o) { kiln_arena_" << f.name
           << "(s, o, nullptr); });\n";
    for (size_t k = 0; k < f.temporaries.size(); ++k) {
      const Buffer& b = f.temporaries[k];
      const std::string t = storage_type_name(b->dtype);
      line() << t << "* " << buffer_name(b) << " = reinterpret_cast<" << t
             << "*>(static_cast<char*>(workspace) + offsets[" << k << "]);\n";
    }
  }
  print_invoke(f);
  for (const auto& [param, source] : f.copies) {
    const Buffer& dst = f.params[param];
    print_copy(buffer_name(dst), buffer_name(source), storage_bytes(dst));
  }
  line() << "return KILN_OK;\n";
  close_block();
}

// The entry point under TVM-FFI's stable C ABI as well (__tvm_ffi_<name>, __tvm_ffi__doc_<name>):
// the macro of include/kiln/runtime/tvm_ffi_export.h, which every prologue includes.
void CodePrinter::print_tvm_ffi_export(const FunctionLayout& f) {
  blank_line();
  line() << "KILN_TVM_FFI_EXPORT(" << f.name << ")\n";
}

std::string CodePrinter::module(const std::vector<LoweredFunc>& funcs, const ModuleOptions& options) {
  out_ << "// Generated by kiln (" << target_name(target_) << " backend). Do not edit: regenerate.\n";
  if (!options.banner.empty()) out_ << "// " << options.banner << "\n";
  out_ << prologue();
  out_ << "#include \"kiln/runtime/arena_plan.h\"  // the memory plan of the workspace\n";
  if (!options.library_constants.empty()) out_ << "#include \"kiln/runtime/kiln_model.h\"  // the library's weights\n";
  std::vector<std::string> names;
  for (const LoweredFunc& func : funcs) {
    auto owned = options.library_constants.find(c_identifier(func.name));
    const FunctionLayout f =
        layout_function(func, owned == options.library_constants.end() ? std::vector<int>() : owned->second);
    out_ << "\n// ==== " << f.name << " ====\n";
    out_ << "// source: " << (func.comment.empty() ? "(none)" : func.comment) << "\n";
    out_ << "// " << signature_text(f) << "\n";
    print_compute(f);
    blank_line();
    print_workspace(f);
    blank_line();
    print_signature(f);
    blank_line();
    print_entry(f);
    print_tvm_ffi_export(f);
    names.push_back(f.name);
  }
  if (options.define_last_error) {
    out_ << "\n// ==== library entry points ====\n";
    for (const std::string& n : options.other_functions) {
      out_ << "extern \"C\" int32_t kiln_" << n << "(const DLTensor*, int32_t, void*, void*);\n";
      out_ << "extern \"C\" const KilnSignature* kiln_signature_" << n << "(void);\n";
      names.push_back(n);
    }
    out_ << "\nextern \"C\" int32_t kiln_library_functions(const KilnFunction** functions) {\n";
    if (names.empty()) {
      out_ << "  *functions = nullptr;\n  return 0;\n}\n";
    } else {
      out_ << "  static const KilnFunction table[] = {\n";
      for (const std::string& n : names) {
        out_ << "      {" << string_literal(n) << ", kiln_" << n << ", kiln_signature_" << n << "},\n";
      }
      out_ << "  };\n  *functions = table;\n  return " << names.size() << ";\n}\n";
    }
    out_ << "\nextern \"C\" const char* kiln_last_error(void) { return kiln::abi::last_error_storage().c_str(); }\n";
  }
  return out_.str();
}

}  // namespace kiln::codegen
