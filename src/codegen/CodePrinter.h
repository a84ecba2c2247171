#pragma once
// The base C printer of the one printer hierarchy (STYLE.md point 4). It owns indentation,
// unique names, temporaries and scopes, prints every Expr and Stmt of a lowered function, and
// prints the parts of a module every target shares: the signature tables, the workspace formula,
// the kernel-contract entry point and its TVM-FFI export. Targets override hooks only: CppPrinter
// (the CPU backend, a function over buffers) and CudaPrinter (kernels and their launches).
// Private to codegen/.
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "kiln/codegen/Codegen.h"
#include "kiln/ir/IR.h"

namespace kiln::codegen {

// What the entry point and the compute code of one function need to know.
struct FunctionLayout {
  const LoweredFunc* func = nullptr;
  std::string name;                       // C identifier of the function
  std::vector<ir::Buffer> params;         // inputs then outputs (signature order)
  size_t num_inputs = 0;                  // params[0, num_inputs) are inputs
  // Inputs the library owns (a model library's weights, ModuleOptions::library_constants): not
  // parameters; the entry point binds them from kiln_model_constants() (runtime/kiln_model.h).
  std::vector<ir::Buffer> constants;
  std::vector<ir::Buffer> temporaries;    // global buffers carved from the workspace
  // Per temporary: the first and last stage that reads or writes it (the memory plan's
  // lifetimes, runtime/arena_plan.h).
  std::vector<std::pair<int, int>> lifetimes;
  std::vector<ir::Stmt> stages;           // top-level statements inside the temporaries
  std::vector<ir::Expr> symbols;          // signature symbols: the function's, then derived dims
  // A parameter dim that is neither a constant nor a symbol: bound to a derived symbol and
  // checked against its expression after validation.
  struct DerivedDim {
    int symbol;  // index into symbols
    ir::Expr expression;
    std::string where;  // "out.shape[1]"
  };
  std::vector<DerivedDim> derived;
  std::map<const ir::BufferNode*, int> alignment;  // bytes, per buffer with vector accesses
  // Outputs that are an input or an earlier output (Identity): param index <- buffer to copy.
  std::vector<std::pair<int, ir::Buffer>> copies;
};
// `library_constants`: indices into func.inputs of the inputs the library owns.
FunctionLayout layout_function(const LoweredFunc& func, const std::vector<int>& library_constants = {});

class CodePrinter {
 public:
  explicit CodePrinter(Target target) : target_(target) {}
  virtual ~CodePrinter() = default;

  std::string module(const std::vector<LoweredFunc>& funcs, const ModuleOptions& options);

 protected:
  // ---- hooks -------------------------------------------------------------------------------
  virtual std::string prologue() = 0;                   // includes and fixed helper code
  virtual std::string half_type_name(DType dtype) = 0;  // float16 / bfloat16 storage types
  // The name of intrinsic `op` for float32 (`single`) or float64 arguments; "" if not a plain call.
  virtual std::string math_function(ir::Intrinsic op, bool single) = 0;
  // Prints the compute code of `f` (kernels, or a function over buffers) before its entry point.
  virtual void print_compute(const FunctionLayout& f) = 0;
  // Prints, inside the entry point, the statements that run the compute code (buffers and
  // symbols are bound as locals of the same names by then).
  virtual void print_invoke(const FunctionLayout& f) = 0;
  virtual void print_for(const ir::For* op);
  virtual void print_allocate(const ir::Allocate* op);
  virtual std::string print_block_allreduce(const ir::Call* op);
  virtual void print_sync_threads();
  virtual void print_template_contraction(const ir::TemplateContraction* op);
  virtual void print_template_attention(const ir::TemplateAttention* op);
  virtual std::string unroll_pragma() = 0;  // the line before an unrolled loop
  // Copies `bytes` from `src` to `dst` (both bound names) inside the entry point.
  virtual void print_copy(const std::string& dst, const std::string& src, const std::string& bytes) = 0;
  // Parameters and arguments of a compute function: the global buffers `body` uses (params and
  // temporaries, in signature order) and every symbol.
  std::vector<ir::Buffer> buffers_used(const FunctionLayout& f, const ir::Stmt& body);
  std::string compute_params(const FunctionLayout& f, const std::vector<ir::Buffer>& buffers, const ir::Stmt& body);
  std::string compute_args(const FunctionLayout& f, const std::vector<ir::Buffer>& buffers);
  virtual int device_type() const = 0;  // kDLCPU or kDLCUDA

  // ---- names and scopes --------------------------------------------------------------------
  // A fresh identifier from `hint`, unique in the current function.
  std::string fresh_name(const std::string& hint);
  // The identifier bound to variable or buffer node `key`, made from `hint` on first use.
  std::string name_of(const void* key, const std::string& hint);
  std::string var_name(const ir::Expr& var);
  std::string buffer_name(const ir::Buffer& buffer);
  void reset_names();  // a new function: names start over

  // ---- text --------------------------------------------------------------------------------
  std::ostream& line();  // starts an indented line
  void open_block(const std::string& head);  // `head {` and indent
  void close_block(const std::string& tail = "");
  void blank_line() { out_ << "\n"; }
  std::ostringstream& out() { return out_; }

  // ---- IR ----------------------------------------------------------------------------------
  // The C type of a value (in registers, local and shared arrays) and of a global buffer's
  // elements: they differ for the packed 4- and 2-bit types (uint8_t bytes; kiln_packed.h).
  std::string type_name(Type t);
  std::string storage_type_name(DType dtype);
  std::string storage_bytes(const ir::Buffer& b);  // host expression: the bytes of a global buffer
  static bool is_packed_global(const ir::Buffer& b) { return is_packed(b->dtype) && b->scope == ir::MemoryScope::Global; }
  std::string expr(const ir::Expr& e);  // may emit temporaries (Let) before the current line
  void stmt(const ir::Stmt& s);
  std::string buffer_pointer_type(const ir::Buffer& b, bool is_const);

  // Host code binding symbols and buffers of an entry point or a workspace formula.
  void bind_symbols(const FunctionLayout& f, const std::string& array);

  Target target_;
  // Global buffers whose element loads print as __ldg (read-only through the kernel, e.g. the
  // inputs of a template's epilogue functor): nvcc may then hoist and reuse them across the
  // functor's stores instead of reloading after each one.
  std::set<const ir::BufferNode*> read_only_loads_;

 private:
  std::string binary(const ir::Expr& e, const char* op);
  std::string float_const(Type t, double v);
  std::string int_const(Type t, int64_t v);
  std::string packed_traits(DType dtype);
  std::string wrap_narrow(Type t, const std::string& text);
  std::string call(const ir::Call* op);
  void print_store(const ir::Store* op);
  std::string load_element(const ir::Buffer& b, const std::string& index);
  void print_store_element(const ir::Buffer& b, const std::string& index, const std::string& value);
  void print_signature(const FunctionLayout& f);
  void print_workspace(const FunctionLayout& f);
  void print_entry(const FunctionLayout& f);
  void print_tvm_ffi_export(const FunctionLayout& f);

  std::ostringstream out_;
  int indent_ = 0;
  std::map<const void*, std::string> names_;
  std::set<std::string> used_;
};

std::string string_literal(const std::string& text);

}  // namespace kiln::codegen
