#include "kiln/ir/IRPrinter.h"

#include <sstream>

#include "kiln/ir/IROperator.h"
#include "kiln/ir/IRVisitor.h"
#include "kiln/te/Tensor.h"

namespace kiln::ir {
namespace {

class Printer : public IRVisitor {
 public:
  explicit Printer(std::ostream& os) : os_(os) {}
  using IRVisitor::visit;

 protected:
  void indent() { os_ << std::string(2 * depth_, ' '); }

  void visit(const IntImm* op) override {
    if (op->type.is_bool()) os_ << (op->value ? "true" : "false");
    else if (op->type == kIndexType) os_ << op->value;
    else os_ << dtype_name(op->type.dtype) << "(" << op->value << ")";
  }
  void visit(const FloatImm* op) override {
    std::ostringstream s;
    s.precision(9);
    s << op->value;
    os_ << s.str();
    if (op->type.dtype != DType::Float32) os_ << "_" << dtype_name(op->type.dtype);
    else os_ << "f";
  }
  void visit(const Variable* op) override { os_ << op->name; }
  void visit(const Cast* op) override {
    os_ << kiln::to_string(op->type) << "(";
    visit(op->value);
    os_ << ")";
  }
  void binary(const Expr& a, const char* sym, const Expr& b) {
    os_ << "(";
    visit(a);
    os_ << " " << sym << " ";
    visit(b);
    os_ << ")";
  }
  void function(const char* name, const Expr& a, const Expr& b) {
    os_ << name << "(";
    visit(a);
    os_ << ", ";
    visit(b);
    os_ << ")";
  }
  void visit(const Add* op) override { binary(op->a, "+", op->b); }
  void visit(const Sub* op) override { binary(op->a, "-", op->b); }
  void visit(const Mul* op) override { binary(op->a, "*", op->b); }
  void visit(const Div* op) override { binary(op->a, "/", op->b); }
  void visit(const Mod* op) override { binary(op->a, "%", op->b); }
  void visit(const Min* op) override { function("min", op->a, op->b); }
  void visit(const Max* op) override { function("max", op->a, op->b); }
  void visit(const EQ* op) override { binary(op->a, "==", op->b); }
  void visit(const NE* op) override { binary(op->a, "!=", op->b); }
  void visit(const LT* op) override { binary(op->a, "<", op->b); }
  void visit(const LE* op) override { binary(op->a, "<=", op->b); }
  void visit(const GT* op) override { binary(op->a, ">", op->b); }
  void visit(const GE* op) override { binary(op->a, ">=", op->b); }
  void visit(const And* op) override { binary(op->a, "&&", op->b); }
  void visit(const Or* op) override { binary(op->a, "||", op->b); }
  void visit(const Not* op) override {
    os_ << "!";
    visit(op->a);
  }
  void visit(const Select* op) override {
    os_ << "select(";
    visit(op->condition);
    os_ << ", ";
    visit(op->true_value);
    os_ << ", ";
    visit(op->false_value);
    os_ << ")";
  }
  void visit(const Call* op) override {
    os_ << intrinsic_name(op->op) << "(";
    for (size_t i = 0; i < op->args.size(); ++i) {
      if (i) os_ << ", ";
      visit(op->args[i]);
    }
    os_ << ")";
  }
  void visit(const Load* op) override {
    os_ << op->buffer->name << "[";
    visit(op->index);
    os_ << "]";
  }
  void visit(const Ramp* op) override {
    os_ << "ramp(";
    visit(op->base);
    os_ << ", ";
    visit(op->stride);
    os_ << ", " << op->lanes << ")";
  }
  void visit(const Broadcast* op) override {
    os_ << "x" << op->lanes << "(";
    visit(op->value);
    os_ << ")";
  }
  void visit(const Let* op) override {
    os_ << "(let " << op->var.as<Variable>()->name << " = ";
    visit(op->value);
    os_ << " in ";
    visit(op->body);
    os_ << ")";
  }
  void visit(const TensorRead* op) override {
    os_ << op->tensor->name << "(";
    for (size_t i = 0; i < op->indices.size(); ++i) {
      if (i) os_ << ", ";
      visit(op->indices[i]);
    }
    os_ << ")";
  }
  void visit(const Reduce* op) override {
    os_ << reduce_kind_name(op->reduce_kind) << "(";
    visit(op->source);
    os_ << ", axes=[";
    for (size_t i = 0; i < op->axes.size(); ++i) {
      if (i) os_ << ", ";
      visit(op->axes[i].var);
      os_ << ":";
      visit(op->axes[i].extent);
    }
    os_ << "]";
    if (!is_one(op->condition)) {
      os_ << ", where=";
      visit(op->condition);
    }
    os_ << ")";
  }

  void visit(const For* op) override {
    indent();
    os_ << "for " << for_kind_name(op->for_kind) << " (" << op->var.as<Variable>()->name << ", ";
    visit(op->min);
    os_ << ", ";
    visit(op->extent);
    os_ << ") {\n";
    ++depth_;
    visit(op->body);
    --depth_;
    indent();
    os_ << "}\n";
  }
  void visit(const Store* op) override {
    indent();
    os_ << op->buffer->name << "[";
    visit(op->index);
    os_ << "] = ";
    visit(op->value);
    os_ << "\n";
  }
  void visit(const LetStmt* op) override {
    indent();
    os_ << "let " << op->var.as<Variable>()->name << " = ";
    visit(op->value);
    os_ << "\n";
    visit(op->body);
  }
  void visit(const IfThenElse* op) override {
    indent();
    os_ << "if (";
    visit(op->condition);
    os_ << ") {\n";
    ++depth_;
    visit(op->then_case);
    --depth_;
    if (op->else_case.defined()) {
      indent();
      os_ << "} else {\n";
      ++depth_;
      visit(op->else_case);
      --depth_;
    }
    indent();
    os_ << "}\n";
  }
  void visit(const Allocate* op) override {
    indent();
    os_ << "allocate " << op->buffer->name << ": " << dtype_name(op->buffer->dtype) << "["
        << to_string(op->buffer.num_elements()) << "] in " << memory_scope_name(op->buffer->scope) << "\n";
    visit(op->body);
  }
  void visit(const Evaluate* op) override {
    indent();
    visit(op->value);
    os_ << "\n";
  }
  void visit(const TemplateAttention* op) override {
    indent();
    os_ << "template attention (" << op->description << "): batch [";
    for (size_t d = 0; d < op->batch_extents.size(); ++d) {
      os_ << (d ? ", " : "");
      visit(op->batch_extents[d]);
    }
    os_ << "], seq_q ";
    visit(op->seq_q);
    os_ << ", seq_k ";
    visit(op->seq_k);
    os_ << ", head dim " << op->head_dim << ", scale " << op->scale;
    if (op->scale_expr.defined()) {
      os_ << " x ";
      visit(op->scale_expr);
    }
    os_ << ", Q " << op->q.buffer->name
        << ", K " << op->k.buffer->name << ", V " << op->v.buffer->name;
    if (op->mask) os_ << ", mask " << op->mask->buffer->name;
    epilogue_and_reference({op->batch_var, op->row_var, op->d_var}, op->epilogue, op->reference);
  }
  void visit(const TemplateContraction* op) override {
    indent();
    os_ << "template contraction (" << op->description << "): batch [";
    for (size_t d = 0; d < op->batch_extents.size(); ++d) {
      os_ << (d ? ", " : "");
      visit(op->batch_extents[d]);
    }
    os_ << "], m ";
    visit(op->m);
    os_ << ", n ";
    visit(op->n);
    os_ << ", k ";
    visit(op->k);
    os_ << ", A " << op->a.buffer->name;
    for (const ContractionOperand& b : op->b) os_ << ", B " << b.buffer->name << (b.window ? " (im2col)" : "");
    if (op->w4) os_ << ", 4-bit B " << op->w4->weight->name << " (scales " << op->w4->scales->name << ")";
    epilogue_and_reference({op->batch_var, op->m_var, op->n_var}, op->epilogue, op->reference);
  }

 private:
  // The tail of a template node: its epilogue over `vars`, then its reference loops.
  void epilogue_and_reference(const std::vector<Expr>& vars, const Stmt& epilogue, const Stmt& reference) {
    os_ << "; epilogue at (";
    for (size_t i = 0; i < vars.size(); ++i) {
      os_ << (i ? ", " : "");
      visit(vars[i]);
    }
    os_ << ") {\n";
    ++depth_;
    visit(epilogue);
    --depth_;
    indent();
    os_ << "} reference {\n";
    ++depth_;
    visit(reference);
    --depth_;
    indent();
    os_ << "}\n";
  }

  std::ostream& os_;
  int depth_ = 0;
};

}  // namespace

std::string to_string(const Expr& e) {
  std::ostringstream os;
  os << e;
  return os.str();
}

std::string to_string(const Stmt& s) {
  std::ostringstream os;
  os << s;
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Expr& e) {
  if (!e.defined()) return os << "<undefined>";
  Printer(os).visit(e);
  return os;
}

std::ostream& operator<<(std::ostream& os, const Stmt& s) {
  if (!s.defined()) return os << "<undefined>\n";
  Printer(os).visit(s);
  return os;
}

}  // namespace kiln::ir
