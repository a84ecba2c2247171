#include "CodePrinter.h"

#include <cmath>
#include <cstdio>

#include "kiln/ir/IROperator.h"
#include "kiln/ir/IRPrinter.h"
#include "kiln/ir/IRVisitor.h"
#include "kiln/ir/SmallFloat.h"
#include "kiln/support/Error.h"

namespace kiln::codegen {

using namespace ir;


namespace {

// Buffers with vector (Ramp-indexed) accesses and the widest access in bytes.
class FindVectorAccess : public IRVisitor {
 public:
  std::map<const BufferNode*, int> alignment;
  using IRVisitor::visit;

 protected:
  void note(const Buffer& b, const Expr& index) {
    if (index.type().lanes > 1 && b->scope == MemoryScope::Global) {
      int& a = alignment[b.get()];
      a = std::max(a, std::min(16, index.type().lanes * dtype_bytes(b->dtype)));
    }
  }
  void visit(const Load* op) override {
    note(op->buffer, op->index);
    IRVisitor::visit(op);
  }
  // A packed tensor is written through the aligned 32-bit word that holds each element's byte
  // (kiln_packed.h's store_packed), so it must be 4-byte aligned.
  void visit(const Store* op) override {
    note(op->buffer, op->index);
    if (is_packed(op->buffer->dtype) && op->buffer->scope == MemoryScope::Global) {
      int& a = alignment[op->buffer.get()];
      a = std::max(a, 4);
    }
    IRVisitor::visit(op);
  }
  // The 4-bit kernels (kernels/quant/) read x and the weight in 16-byte vectors and the scales
  // (and INT4's zeros) in 4-byte words. (NVFP4's tensor scale is read by the epilogue.)
  void visit(const TemplateContraction* op) override {
    if (op->w4) {
      const Buffer none;
      const Buffer& zeros = op->w4->format == W4Format::Int4 ? op->w4->extra : none;
      for (const auto& [b, bytes] : {std::pair{&op->a.buffer, 16}, {&op->w4->weight, 16}, {&op->w4->scales, 4}, {&zeros, 4}}) {
        if (b->defined() && (*b)->scope == MemoryScope::Global) {
          int& a = alignment[b->get()];
          a = std::max(a, bytes);
        }
      }
    }
    IRVisitor::visit(op);
  }
};

class TouchedBuffers : public IRVisitor {
 public:
  std::set<const BufferNode*> touched;
  using IRVisitor::visit;

 protected:
  void visit(const Load* op) override {
    touched.insert(op->buffer.get());
    IRVisitor::visit(op);
  }
  void visit(const Store* op) override {
    touched.insert(op->buffer.get());
    IRVisitor::visit(op);
  }
  // A template call also reads its operands and uses its split-K partials (neither appears as a
  // Load or Store outside the reference loops).
  void visit(const TemplateContraction* op) override {
    touched.insert(op->a.buffer.get());
    for (const ContractionOperand& b : op->b) touched.insert(b.buffer.get());
    if (op->w4) {
      for (const Buffer* w : {&op->w4->weight, &op->w4->scales, &op->w4->extra}) {
        if (w->defined()) touched.insert(w->get());
      }
    }
    if (op->split_k.defined()) touched.insert(op->split_k.get());
    IRVisitor::visit(op);
  }
};

// The stages between which each temporary is live. Stages run in order (one after another on the
// CPU, kernels in order on one stream), so a buffer whose last stage precedes another's first
// stage may share its bytes.
std::vector<std::pair<int, int>> temporary_lifetimes(const std::vector<Buffer>& temporaries,
                                                     const std::vector<Stmt>& stages) {
  std::vector<std::pair<int, int>> lifetimes(temporaries.size(), {-1, -1});
  for (size_t s = 0; s < stages.size(); ++s) {
    TouchedBuffers t;
    t.visit(stages[s]);
    for (size_t k = 0; k < temporaries.size(); ++k) {
      if (!t.touched.count(temporaries[k].get())) continue;
      if (lifetimes[k].first < 0) lifetimes[k].first = static_cast<int>(s);
      lifetimes[k].second = static_cast<int>(s);
    }
  }
  for (auto& [first, last] : lifetimes) {
    if (first < 0) first = last = 0;  // never touched: give it a slot of its own at stage 0
  }
  return lifetimes;
}


}  // namespace

FunctionLayout layout_function(const LoweredFunc& func, const std::vector<int>& library_constants) {
  FunctionLayout f;
  f.func = &func;
  f.name = c_identifier(func.name);
  std::vector<bool> owned(func.inputs.size(), false);
  for (int k : library_constants) {
    KILN_ASSERT(k >= 0 && k < static_cast<int>(func.inputs.size()));
    owned[k] = true;
    f.constants.push_back(func.inputs[k]);
  }
  for (size_t k = 0; k < func.inputs.size(); ++k) {
    if (!owned[k]) f.params.push_back(func.inputs[k]);
  }
  f.num_inputs = f.params.size();
  for (const Buffer& b : func.outputs) {
    bool seen = false;
    for (const Buffer& p : f.params) seen = seen || p.same_as(b);
    if (seen) {
      // The contract passes every output separately: this one is a copy of an earlier buffer.
      f.copies.emplace_back(static_cast<int>(f.params.size()), b);
      f.params.push_back(Buffer::make(b->name, b->dtype, b->shape));
    } else {
      f.params.push_back(b);
    }
  }
  Stmt body = func.body;
  while (const Allocate* a = body.as<Allocate>()) {
    if (a->buffer->scope != MemoryScope::Global) break;
    f.temporaries.push_back(a->buffer);
    body = a->body;
  }
  if (const Seq* seq = body.as<Seq>()) {
    f.stages = seq->stmts;
  } else if (!body.as<Evaluate>()) {
    f.stages = {body};
  }
  f.lifetimes = temporary_lifetimes(f.temporaries, f.stages);
  f.symbols = func.symbols;
  std::vector<bool> bound(f.symbols.size(), false);
  for (const Buffer& b : f.params) {
    for (size_t d = 0; d < b->shape.size(); ++d) {
      const Expr& dim = b->shape[d];
      if (as_const_int(dim)) continue;
      bool found = false;
      for (size_t s = 0; s < f.symbols.size() && !found; ++s) {
        if (f.symbols[s].same_as(dim)) bound[s] = found = true;
      }
      if (!found) {
        const std::string where = b->name + ".shape[" + std::to_string(d) + "]";
        f.symbols.push_back(var(b->name + "_dim" + std::to_string(d)));
        f.derived.push_back({static_cast<int>(f.symbols.size()) - 1, dim, where});
        bound.push_back(true);
      }
    }
  }
  for (size_t s = 0; s < bound.size(); ++s) {
    if (!bound[s]) {
      unsupported("function {}: size symbol '{}' appears in shapes only inside expressions, so no argument binds it",
                  func.name, f.symbols[s].as<Variable>()->name);
    }
  }
  FindVectorAccess vectors;
  vectors.visit(func.body);
  f.alignment = vectors.alignment;
  return f;
}

// ---- names, text ---------------------------------------------------------------------------

void CodePrinter::reset_names() {
  names_.clear();
  used_.clear();
  for (const char* reserved : {"args", "num_args", "workspace", "stream", "symbols", "signature", "error", "status",
                               "offset", "int", "float", "double", "char", "bool", "auto", "const", "for", "if",
                               "else", "return", "kiln", "std", "half", "signed", "unsigned", "long", "short",
                               "void", "default", "case", "switch", "while", "do", "new", "delete", "this",
                               "register", "static", "struct", "union", "class", "template", "typename", "private",
                               "public", "protected", "operator", "goto", "break", "continue", "sizeof", "volatile",
                               "inline", "extern", "namespace", "using", "true", "false", "nullptr", "min", "max",
                               "exp", "log", "abs", "pow", "grid", "block", "dim3", "and", "or", "not", "xor",
                               "bitand", "bitor", "compl", "and_eq", "or_eq", "not_eq", "xor_eq", "typedef", "enum",
                               "try", "catch", "throw", "friend", "virtual", "mutable", "explicit", "export", "asm",
                               "threadIdx", "blockIdx", "blockDim", "gridDim", "warpSize", "launch", "main",
                               "constexpr", "decltype", "noexcept", "static_assert", "thread_local", "alignas",
                               "alignof", "char8_t", "char16_t", "char32_t", "wchar_t", "concept", "requires",
                               "co_await", "co_return", "co_yield", "consteval", "constinit", "float2", "float4",
                               "int2", "int4", "uint4", "dst", "src"}) {
    used_.insert(reserved);
  }
}

std::string CodePrinter::fresh_name(const std::string& hint) {
  std::string base = c_identifier(hint.empty() ? "t" : hint);
  while (base.size() > 1 && base.back() == '_') base.pop_back();
  std::string name = base;
  for (int k = 1; used_.count(name); ++k) name = base + "_" + std::to_string(k);
  used_.insert(name);
  return name;
}

std::string CodePrinter::name_of(const void* key, const std::string& hint) {
  auto it = names_.find(key);
  if (it != names_.end()) return it->second;
  return names_[key] = fresh_name(hint);
}

std::string CodePrinter::var_name(const Expr& v) {
  const Variable* op = v.as<Variable>();
  KILN_ASSERT(op, "not a variable: {}", to_string(v));
  return name_of(op, op->name);
}

std::string CodePrinter::buffer_name(const Buffer& b) { return name_of(b.get(), b->name); }

std::ostream& CodePrinter::line() {
  for (int i = 0; i < indent_; ++i) out_ << "  ";
  return out_;
}

void CodePrinter::open_block(const std::string& head) {
  line() << head << (head.empty() ? "{\n" : " {\n");
  ++indent_;
}

void CodePrinter::close_block(const std::string& tail) {
  --indent_;
  line() << "}" << tail << "\n";
}

// ---- types and constants -------------------------------------------------------------------

std::string CodePrinter::type_name(Type t) {
  KILN_ASSERT(t.lanes == 1, "vector type {} outside a vector copy", to_string(t));
  switch (t.dtype) {
    case DType::Bool: return "bool";
    case DType::Int8: return "int8_t";
    case DType::Int16: return "int16_t";
    case DType::Int32: return "int32_t";
    case DType::Int64: return "int64_t";
    case DType::UInt8: return "uint8_t";
    case DType::UInt16: return "uint16_t";
    case DType::UInt32: return "uint32_t";
    case DType::UInt64: return "uint64_t";
    case DType::Float16:
    case DType::BFloat16: return half_type_name(t.dtype);
    case DType::Float32: return "float";
    case DType::Float64: return "double";
    case DType::Float8E4M3: return "kiln::float8_e4m3fn_t";
    case DType::Float8E4M3FNUZ: return "kiln::float8_e4m3fnuz_t";
    case DType::Float8E5M2: return "kiln::float8_e5m2_t";
    case DType::Float8E5M2FNUZ: return "kiln::float8_e5m2fnuz_t";
    case DType::Float8E8M0: return "kiln::float8_e8m0_t";
    // 4- and 2-bit types in registers (and local/shared arrays), one element per value; global
    // tensors of them are packed bytes (storage_type_name, kiln_packed.h).
    case DType::Float4E2M1: return "kiln::float4_e2m1_t";
    case DType::Int4:
    case DType::Int2: return "int8_t";
    case DType::UInt4:
    case DType::UInt2: return "uint8_t";
  }
  internal_error("no C type for dtype " + std::string(dtype_name(t.dtype)));
}

std::string CodePrinter::storage_type_name(DType dtype) { return is_packed(dtype) ? "uint8_t" : type_name(dtype); }

std::string CodePrinter::storage_bytes(const Buffer& b) {
  const std::string n = "static_cast<size_t>(" + expr(b.num_elements()) + ")";
  if (!is_packed(b->dtype)) return n + " * " + std::to_string(dtype_bytes(b->dtype));
  return "(" + n + " * " + std::to_string(dtype_bits(b->dtype)) + " + 7) / 8";
}

std::string CodePrinter::buffer_pointer_type(const Buffer& b, bool is_const) {
  return std::string(is_const ? "const " : "") + storage_type_name(b->dtype) + "* __restrict__";
}

// The kiln_packed.h traits of a 4- or 2-bit dtype.
std::string CodePrinter::packed_traits(DType dtype) {
  switch (dtype) {
    case DType::Int4: return "kiln::packed_int4";
    case DType::UInt4: return "kiln::packed_uint4";
    case DType::Int2: return "kiln::packed_int2";
    case DType::UInt2: return "kiln::packed_uint2";
    case DType::Float4E2M1: return "kiln::packed_float4_e2m1";
    default: internal_error("not a packed dtype: " + std::string(dtype_name(dtype)));
  }
}

std::string CodePrinter::float_const(Type t, double v) {
  // float8/float4/E8M0 constants as their exact bit pattern: from_float is a saturating Cast, which
  // would turn an infinity (a non-saturating Cast's overflow value) into the largest finite value.
  if (is_small_float(t.dtype)) {
    return type_name(t) + "{" + std::to_string(small_float_encode(t.dtype, v, /*saturate=*/false)) + "}";
  }
  const bool half = t.dtype == DType::Float16 || t.dtype == DType::BFloat16;
  const std::string compute = t.dtype == DType::Float64 ? "double" : "float";
  std::string text;
  if (std::isnan(v)) {
    text = "kiln::quiet_nan<" + compute + ">()";
  } else if (std::isinf(v)) {
    text = std::string(v < 0 ? "-" : "") + "kiln::infinity<" + compute + ">()";
  } else {
    char buf[64];
    std::snprintf(buf, sizeof buf, t.dtype == DType::Float64 ? "%.17g" : "%.9g", v);
    text = buf;
    if (text.find_first_of(".en") == std::string::npos) text += ".0";
    if (t.dtype != DType::Float64) text += "f";
  }
  if (half) return "kiln::from_float<" + type_name(t) + ">(" + text + ")";
  return v < 0 || std::isnan(v) || std::isinf(v) ? "(" + text + ")" : text;
}

std::string CodePrinter::int_const(Type t, int64_t v) {
  switch (t.dtype) {
    case DType::Bool: return v ? "true" : "false";
    case DType::Int64:
      if (v == INT64_MIN) return "(-9223372036854775807L - 1)";
      return v < 0 ? "(" + std::to_string(v) + "L)" : std::to_string(v) + "L";
    case DType::Int32:
      if (v == INT32_MIN) return "(-2147483647 - 1)";
      return v < 0 ? "(" + std::to_string(v) + ")" : std::to_string(v);
    case DType::UInt64: return std::to_string(static_cast<uint64_t>(v)) + "UL";
    case DType::UInt32: return std::to_string(static_cast<uint32_t>(v)) + "u";
    default: return type_name(t) + "(" + std::to_string(v) + ")";
  }
}

// ---- expressions ---------------------------------------------------------------------------

namespace {

// Types computed in float: float16, bfloat16 and the float8/float4 formats.
bool is_half(Type t) { return t.dtype == DType::Float16 || t.dtype == DType::BFloat16 || is_small_float(t.dtype); }
// Integer types narrower than int: C promotes them, so results are cast back to wrap as the IR does.
bool is_narrow_int(Type t) { return (t.is_int() || t.is_uint()) && t.bits() < 32; }

}  // namespace

// `text` (an integer of C's promoted type) wrapped to narrow integer type `t`: a C cast, or for
// the 4- and 2-bit types their traits' wrap (their register type alone would wrap at 8 bits).
std::string CodePrinter::wrap_narrow(Type t, const std::string& text) {
  if (is_packed(t.dtype)) return packed_traits(t.dtype) + "::wrap(" + text + ")";
  return type_name(t) + "(" + text + ")";
}

std::string CodePrinter::binary(const Expr& e, const char* op) {
  const auto* node = static_cast<const BinaryNode<Add, NodeKind::Add>*>(e.get());
  const Type operand = node->a.type();
  std::string a = expr(node->a), b = expr(node->b);
  if (is_half(operand)) {
    const std::string value = "(kiln::to_float(" + a + ") " + op + " kiln::to_float(" + b + "))";
    return e.type().is_bool() ? value : "kiln::from_float<" + type_name(e.type()) + ">" + value;
  }
  const std::string value = "(" + a + " " + op + " " + b + ")";
  if (!e.type().is_bool() && is_narrow_int(e.type())) return wrap_narrow(e.type(), value);
  return value;
}

std::string CodePrinter::call(const Call* op) {
  const Type t = op->type;
  auto arg = [&](size_t k) { return expr(op->args[k]); };
  switch (op->op) {
    case Intrinsic::Infinity: return float_const(t, INFINITY);
    case Intrinsic::NaN: return float_const(t, NAN);
    default: break;
  }
  auto typed = [&](const std::string& text) { return is_narrow_int(t) ? wrap_narrow(t, text) : text; };
  switch (op->op) {
    case Intrinsic::BitAnd: return typed("(" + arg(0) + " & " + arg(1) + ")");
    case Intrinsic::BitOr: return typed("(" + arg(0) + " | " + arg(1) + ")");
    case Intrinsic::BitXor: return typed("(" + arg(0) + " ^ " + arg(1) + ")");
    case Intrinsic::BitNot: return typed("(~" + arg(0) + ")");
    case Intrinsic::ShiftLeft: return "kiln::shift_left<" + type_name(t) + ">(" + arg(0) + ", " + arg(1) + ")";
    case Intrinsic::ShiftRight: return "kiln::shift_right<" + type_name(t) + ">(" + arg(0) + ", " + arg(1) + ")";
    case Intrinsic::BitCast:
      if (is_packed(t.dtype) || is_packed(op->args[0].type().dtype)) {
        unsupported("{} code generation of BitCast between {} and {}", target_name(target_),
                    dtype_name(op->args[0].type().dtype), dtype_name(t.dtype));
      }
      return "kiln::bit_cast<" + type_name(t) + ">(" + arg(0) + ")";
    case Intrinsic::SyncThreads: internal_error("sync_threads used as a value");
    case Intrinsic::BlockAllReduce: return print_block_allreduce(op);
    case Intrinsic::Abs:
      if (is_packed(t.dtype) && !t.is_float()) return wrap_narrow(t, "kiln::fabs_<int>(" + arg(0) + ")");
      if (!t.is_float()) return "kiln::fabs_<" + type_name(t) + ">(" + arg(0) + ")";
      break;
    default: break;
  }
  // Float math through the target's table; float16/bfloat16 compute in float.
  const Type operand = op->args.empty() ? t : op->args[0].type();
  KILN_ASSERT(operand.is_float(), "{} of a non-float argument", intrinsic_name(op->op));
  const bool single = operand.dtype != DType::Float64;
  const std::string fn = math_function(op->op, single);
  KILN_ASSERT(!fn.empty(), "no {} function for {}", target_name(target_), intrinsic_name(op->op));
  std::string args;
  for (size_t k = 0; k < op->args.size(); ++k) {
    std::string a = arg(k);
    if (is_half(op->args[k].type())) a = "kiln::to_float(" + a + ")";
    args += (k ? ", " : "") + a;
  }
  std::string value = fn + "(" + args + ")";
  if (is_half(t)) value = "kiln::from_float<" + type_name(t) + ">(" + value + ")";
  return value;
}

std::string CodePrinter::print_block_allreduce(const Call* op) { return expr(op->args[0]); }

void CodePrinter::print_sync_threads() {}

std::string CodePrinter::expr(const Expr& e) {
  switch (e.kind()) {
    case NodeKind::IntImm: return int_const(e.type(), e.as<IntImm>()->value);
    case NodeKind::FloatImm: return float_const(e.type(), e.as<FloatImm>()->value);
    case NodeKind::Variable: return var_name(e);
    case NodeKind::Cast: {
      const Cast* c = e.as<Cast>();
      if (is_packed(e.type().dtype) && !e.type().is_float()) {
        return "kiln::cast_packed<" + packed_traits(e.type().dtype) + ", " + type_name(c->value.type()) + ">(" +
               expr(c->value) + ")";
      }
      return "kiln::cast<" + type_name(e.type()) + ", " + type_name(c->value.type()) + ">(" + expr(c->value) + ")";
    }
    case NodeKind::Add: return binary(e, "+");
    case NodeKind::Sub: return binary(e, "-");
    case NodeKind::Mul: return binary(e, "*");
    case NodeKind::Div:
    case NodeKind::Mod: {
      const bool is_div = e.kind() == NodeKind::Div;
      const auto* node = static_cast<const BinaryNode<Div, NodeKind::Div>*>(e.get());
      const Type t = e.type();
      if (t.is_float()) {
        if (is_div) return binary(e, "/");
        std::string text = math_function(Intrinsic::Fmod, t.dtype != DType::Float64) + "(" +
                           (is_half(t) ? "kiln::to_float(" + expr(node->a) + "), kiln::to_float(" + expr(node->b) + ")"
                                       : expr(node->a) + ", " + expr(node->b)) + ")";
        return is_half(t) ? "kiln::from_float<" + type_name(t) + ">(" + text + ")" : text;
      }
      auto divisor = as_const_int(node->b);
      if (divisor && *divisor > 0) return binary(e, is_div ? "/" : "%");
      return std::string(is_div ? "kiln::idiv<" : "kiln::imod<") + type_name(t) + ">(" + expr(node->a) + ", " +
             expr(node->b) + ")";
    }
    case NodeKind::Min:
    case NodeKind::Max: {
      const auto* node = static_cast<const BinaryNode<Min, NodeKind::Min>*>(e.get());
      return std::string(e.kind() == NodeKind::Min ? "kiln::min_<" : "kiln::max_<") + type_name(e.type()) + ">(" +
             expr(node->a) + ", " + expr(node->b) + ")";
    }
    case NodeKind::EQ: return binary(e, "==");
    case NodeKind::NE: return binary(e, "!=");
    case NodeKind::LT: return binary(e, "<");
    case NodeKind::LE: return binary(e, "<=");
    case NodeKind::GT: return binary(e, ">");
    case NodeKind::GE: return binary(e, ">=");
    case NodeKind::And: return binary(e, "&&");
    case NodeKind::Or: return binary(e, "||");
    case NodeKind::Not: return "(!" + expr(e.as<Not>()->a) + ")";
    case NodeKind::Select: {
      const Select* s = e.as<Select>();
      return "(" + expr(s->condition) + " ? " + expr(s->true_value) + " : " + expr(s->false_value) + ")";
    }
    case NodeKind::Call: return call(e.as<Call>());
    case NodeKind::Load: {
      const Load* l = e.as<Load>();
      KILN_ASSERT(l->index.type().lanes == 1, "vector load outside a vector copy: {}", to_string(e));
      return load_element(l->buffer, expr(l->index));
    }
    case NodeKind::Let: {
      // A temporary on its own line before the statement being printed.
      const Let* l = e.as<Let>();
      const std::string value = expr(l->value);
      line() << "const " << type_name(l->value.type()) << " " << var_name(l->var) << " = " << value << ";\n";
      return expr(l->body);
    }
    default: internal_error(std::string("cannot print ") + node_kind_name(e.kind()) + " as code: " + to_string(e));
  }
}

// ---- statements ----------------------------------------------------------------------------

void CodePrinter::print_store(const Store* op) {
  if (op->index.type().lanes > 1) {
    // A whole-vector copy (lower/VectorizeLoops): dst[ramp] = src[ramp], both stride 1.
    const Ramp* dst = op->index.as<Ramp>();
    const Load* load = op->value.as<Load>();
    const Ramp* src = load ? load->index.as<Ramp>() : nullptr;
    KILN_ASSERT(dst && src && is_one(dst->stride) && is_one(src->stride), "unsupported vector store into {}",
                op->buffer->name);
    const std::string d = expr(dst->base), s = expr(src->base);
    if (is_packed_global(op->buffer) || is_packed_global(load->buffer)) {
      // Packed elements have no vector type: one element at a time, out of or into a local array
      // of one element per byte.
      const std::string k = fresh_name("lane");
      line() << unroll_pragma() << "\n";
      open_block("for (int64_t " + k + " = 0; " + k + " < " + std::to_string(dst->lanes) + "; ++" + k + ")");
      print_store_element(op->buffer, "(" + d + ") + " + k, load_element(load->buffer, "(" + s + ") + " + k));
      close_block();
      return;
    }
    line() << "kiln::copy_vector<" << dst->lanes << ">(&" << buffer_name(op->buffer) << "[" << d << "], &"
           << buffer_name(load->buffer) << "[" << s << "]);\n";
    return;
  }
  const std::string index = expr(op->index);
  const std::string value = expr(op->value);
  print_store_element(op->buffer, index, value);
}

// Element `index` of `b`: an array access, or for a packed global buffer the bits of its byte
// (kiln_packed.h).
std::string CodePrinter::load_element(const Buffer& b, const std::string& index) {
  if (is_packed_global(b)) return "kiln::load_packed<" + packed_traits(b->dtype) + ">(" + buffer_name(b) + ", " + index + ")";
  if (read_only_loads_.count(b.get())) return "__ldg(&" + buffer_name(b) + "[" + index + "])";
  return buffer_name(b) + "[" + index + "]";
}

void CodePrinter::print_store_element(const Buffer& b, const std::string& index, const std::string& value) {
  if (is_packed_global(b)) {
    line() << "kiln::store_packed<" << packed_traits(b->dtype) << ">(" << buffer_name(b) << ", " << index << ", " << value
           << ");\n";
  } else {
    line() << buffer_name(b) << "[" << index << "] = " << value << ";\n";
  }
}

void CodePrinter::print_for(const For* op) {
  const std::string v = var_name(op->var);
  const std::string lo = expr(op->min), n = expr(op->extent);
  if (op->for_kind == ForKind::Unrolled || op->for_kind == ForKind::Vectorized) line() << unroll_pragma() << "\n";
  const std::string end = is_zero(op->min) ? n : lo + " + " + n;
  open_block("for (int64_t " + v + " = " + lo + "; " + v + " < " + end + "; ++" + v + ")");
  stmt(op->body);
  close_block();
}

// Targets without the templates (the CPU) run the reference loops.
void CodePrinter::print_template_contraction(const TemplateContraction* op) { stmt(op->reference); }
void CodePrinter::print_template_attention(const TemplateAttention* op) { stmt(op->reference); }

void CodePrinter::print_allocate(const Allocate* op) {
  const Buffer& b = op->buffer;
  auto n = as_const_int(b.num_elements());
  KILN_ASSERT(n && b->scope != MemoryScope::Global, "allocation of {} inside compute code", b->name);
  line() << type_name(b->dtype) << " " << buffer_name(b) << "[" << *n << "];\n";
  stmt(op->body);
}

void CodePrinter::stmt(const Stmt& s) {
  switch (s.kind()) {
    case NodeKind::For: print_for(s.as<For>()); return;
    case NodeKind::Store: print_store(s.as<Store>()); return;
    case NodeKind::Seq:
      for (const Stmt& x : s.as<Seq>()->stmts) stmt(x);
      return;
    case NodeKind::LetStmt: {
      const LetStmt* l = s.as<LetStmt>();
      const std::string value = expr(l->value);
      line() << "const " << type_name(l->value.type()) << " " << var_name(l->var) << " = " << value << ";\n";
      stmt(l->body);
      return;
    }
    case NodeKind::IfThenElse: {
      const IfThenElse* i = s.as<IfThenElse>();
      open_block("if (" + expr(i->condition) + ")");
      stmt(i->then_case);
      if (i->else_case.defined()) {
        --indent_;
        open_block("} else");
        stmt(i->else_case);
      }
      close_block();
      return;
    }
    case NodeKind::Allocate: {
      line() << "{\n";
      ++indent_;
      print_allocate(s.as<Allocate>());
      close_block();
      return;
    }
    case NodeKind::Evaluate: {
      const Expr& v = s.as<Evaluate>()->value;
      if (const Call* c = v.as<Call>(); c && c->op == Intrinsic::SyncThreads) {
        print_sync_threads();
        return;
      }
      if (as_const_int(v)) return;  // a no-op
      line() << "(void)" << expr(v) << ";\n";
      return;
    }
    case NodeKind::TemplateContraction: print_template_contraction(s.as<TemplateContraction>()); return;
    case NodeKind::TemplateAttention: print_template_attention(s.as<TemplateAttention>()); return;
    default: internal_error(std::string("cannot print statement ") + node_kind_name(s.kind()));
  }
}

// ---- compute functions ---------------------------------------------------------------------

namespace {

class CollectBuffers : public IRVisitor {
 public:
  std::set<const BufferNode*> used, stored;
  using IRVisitor::visit;

 protected:
  void visit(const Load* op) override {
    used.insert(op->buffer.get());
    IRVisitor::visit(op);
  }
  void visit(const Store* op) override {
    used.insert(op->buffer.get());
    stored.insert(op->buffer.get());
    IRVisitor::visit(op);
  }
};

}  // namespace

std::vector<Buffer> CodePrinter::buffers_used(const FunctionLayout& f, const Stmt& body) {
  CollectBuffers c;
  c.visit(body);
  std::vector<Buffer> out;
  for (const Buffer& b : f.params) {
    if (c.used.count(b.get())) out.push_back(b);
  }
  for (const Buffer& b : f.constants) {
    if (c.used.count(b.get())) out.push_back(b);
  }
  for (const Buffer& b : f.temporaries) {
    if (c.used.count(b.get())) out.push_back(b);
  }
  return out;
}

std::string CodePrinter::compute_params(const FunctionLayout& f, const std::vector<Buffer>& buffers, const Stmt& body) {
  CollectBuffers c;
  c.visit(body);
  std::string params;
  for (const Buffer& b : buffers) {
    params += (params.empty() ? "" : ", ") + buffer_pointer_type(b, !c.stored.count(b.get())) + " " + buffer_name(b);
  }
  for (const Expr& s : f.symbols) params += (params.empty() ? "" : ", ") + std::string("[[maybe_unused]] int64_t ") + var_name(s);
  return params;
}

std::string CodePrinter::compute_args(const FunctionLayout& f, const std::vector<Buffer>& buffers) {
  std::string args;
  for (const Buffer& b : buffers) args += (args.empty() ? "" : ", ") + buffer_name(b);
  for (const Expr& s : f.symbols) args += (args.empty() ? "" : ", ") + var_name(s);
  return args;
}

}  // namespace kiln::codegen
