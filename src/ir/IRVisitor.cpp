#include "kiln/ir/IRVisitor.h"

#include "kiln/te/Tensor.h"

namespace kiln::ir {

void IRVisitor::visit(const Expr& e) {
  if (!e.defined()) return;
  switch (e.kind()) {
#define KILN_EXPR_NODE(name)                        \
  case NodeKind::name:                              \
    visit(static_cast<const name*>(e.get()));       \
    return;
#include "kiln/ir/Nodes.def"
    default:
      return;
  }
}

void IRVisitor::visit(const Stmt& s) {
  if (!s.defined()) return;
  switch (s.kind()) {
#define KILN_STMT_NODE(name)                        \
  case NodeKind::name:                              \
    visit(static_cast<const name*>(s.get()));       \
    return;
#include "kiln/ir/Nodes.def"
    default:
      return;
  }
}

void IRVisitor::visit(const IntImm*) {}
void IRVisitor::visit(const FloatImm*) {}
void IRVisitor::visit(const Variable*) {}
void IRVisitor::visit(const Cast* op) { visit(op->value); }
#define KILN_BINARY_VISIT(name)                  \
  void IRVisitor::visit(const name* op) {        \
    visit(op->a);                                \
    visit(op->b);                                \
  }
KILN_BINARY_VISIT(Add)
KILN_BINARY_VISIT(Sub)
KILN_BINARY_VISIT(Mul)
KILN_BINARY_VISIT(Div)
KILN_BINARY_VISIT(Mod)
KILN_BINARY_VISIT(Min)
KILN_BINARY_VISIT(Max)
KILN_BINARY_VISIT(EQ)
KILN_BINARY_VISIT(NE)
KILN_BINARY_VISIT(LT)
KILN_BINARY_VISIT(LE)
KILN_BINARY_VISIT(GT)
KILN_BINARY_VISIT(GE)
KILN_BINARY_VISIT(And)
KILN_BINARY_VISIT(Or)
#undef KILN_BINARY_VISIT
void IRVisitor::visit(const Not* op) { visit(op->a); }
void IRVisitor::visit(const Select* op) {
  visit(op->condition);
  visit(op->true_value);
  visit(op->false_value);
}
void IRVisitor::visit(const Call* op) {
  for (const Expr& a : op->args) visit(a);
}
void IRVisitor::visit(const Load* op) { visit(op->index); }
void IRVisitor::visit(const Ramp* op) {
  visit(op->base);
  visit(op->stride);
}
void IRVisitor::visit(const Broadcast* op) { visit(op->value); }
void IRVisitor::visit(const Let* op) {
  visit(op->value);
  visit(op->body);
}
void IRVisitor::visit(const TensorRead* op) {
  for (const Expr& i : op->indices) visit(i);
}
void IRVisitor::visit(const Reduce* op) {
  visit(op->source);
  visit(op->condition);
}
void IRVisitor::visit(const For* op) {
  visit(op->min);
  visit(op->extent);
  visit(op->body);
}
void IRVisitor::visit(const Store* op) {
  visit(op->value);
  visit(op->index);
}
void IRVisitor::visit(const Seq* op) {
  for (const Stmt& s : op->stmts) visit(s);
}
void IRVisitor::visit(const LetStmt* op) {
  visit(op->value);
  visit(op->body);
}
void IRVisitor::visit(const IfThenElse* op) {
  visit(op->condition);
  visit(op->then_case);
  visit(op->else_case);
}
void IRVisitor::visit(const Allocate* op) { visit(op->body); }
void IRVisitor::visit(const Evaluate* op) { visit(op->value); }
void IRVisitor::visit(const TemplateContraction* op) {
  for (const Expr& e : op->batch_extents) visit(e);
  visit(op->m);
  visit(op->n);
  visit(op->k);
  auto operand = [&](const ContractionOperand& x) {
    visit(x.offset);
    visit(x.stride_mn);
    visit(x.stride_k);
    for (const Expr& e : x.batch_strides) visit(e);
    if (x.window) {
      for (const Expr* e : {&x.window->channels, &x.window->height, &x.window->width, &x.window->out_height,
                            &x.window->out_width}) {
        visit(*e);
      }
    }
  };
  operand(op->a);
  for (const ContractionOperand& x : op->b) operand(x);
  visit(op->epilogue);
  visit(op->reference);
}

void IRVisitor::visit(const TemplateAttention* op) {
  for (const Expr& e : op->batch_extents) visit(e);
  visit(op->seq_q);
  visit(op->seq_k);
  auto operand = [&](const ContractionOperand& x) {
    visit(x.offset);
    visit(x.stride_mn);
    visit(x.stride_k);
    for (const Expr& e : x.batch_strides) visit(e);
  };
  operand(op->q);
  operand(op->k);
  operand(op->v);
  if (op->mask) operand(*op->mask);
  if (op->scale_expr.defined()) visit(op->scale_expr);
  visit(op->epilogue);
  visit(op->reference);
}

}  // namespace kiln::ir
