#pragma once
// Walks IR. The default visit of each node visits its children; override the nodes you need.
#include "kiln/ir/IR.h"

namespace kiln::ir {

class IRVisitor {
 public:
  virtual ~IRVisitor() = default;
  void visit(const Expr& e);
  void visit(const Stmt& s);

 protected:
#define KILN_EXPR_NODE(name) virtual void visit(const name* op);
#define KILN_STMT_NODE(name) virtual void visit(const name* op);
#include "kiln/ir/Nodes.def"
};

}  // namespace kiln::ir
