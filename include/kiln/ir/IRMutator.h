#pragma once
// Rebuilds IR. The default visit of each node mutates its children and returns the node itself
// when none changed (so unchanged subtrees stay shared), a new node otherwise.
#include "kiln/ir/IR.h"

namespace kiln::ir {

class IRMutator {
 public:
  virtual ~IRMutator() = default;
  Expr mutate(const Expr& e);
  Stmt mutate(const Stmt& s);

 protected:
#define KILN_EXPR_NODE(name) virtual Expr visit(const name* op, const Expr& self);
#define KILN_STMT_NODE(name) virtual Stmt visit(const name* op, const Stmt& self);
#include "kiln/ir/Nodes.def"

  // A template node's operand with its offset, strides and window mutated; sets `changed` when
  // any of them changed.
  ContractionOperand mutate_operand(const ContractionOperand& x, bool& changed);
};

// Replaces each Variable in `map` (by identity) with its expression.
Expr substitute(const Expr& e, const std::vector<std::pair<Expr, Expr>>& map);
Stmt substitute(const Stmt& s, const std::vector<std::pair<Expr, Expr>>& map);

}  // namespace kiln::ir
