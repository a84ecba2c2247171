#pragma once
// Handles to immutable IR nodes. An Expr or Stmt is a shared pointer to a const node; passes
// never change a node, they build new ones (STYLE.md point 3). Node structs are in IR.h.
#include <cstdint>
#include <memory>

#include "kiln/ir/Type.h"

namespace kiln::ir {

enum class NodeKind : uint8_t {
#define KILN_EXPR_NODE(name) name,
#define KILN_STMT_NODE(name) name,
#include "kiln/ir/Nodes.def"
};

const char* node_kind_name(NodeKind kind);

struct ExprNode {
  const NodeKind kind;
  const Type type;
  ExprNode(NodeKind k, Type t) : kind(k), type(t) {}
  virtual ~ExprNode() = default;
};

struct StmtNode {
  const NodeKind kind;
  explicit StmtNode(NodeKind k) : kind(k) {}
  virtual ~StmtNode() = default;
};

class Expr {
 public:
  Expr() = default;
  explicit Expr(std::shared_ptr<const ExprNode> node) : node_(std::move(node)) {}
  // An int64 constant: index arithmetic is int64 throughout (see kIndexType).
  Expr(int64_t value);  // NOLINT: implicit, so that `i + 1` reads as it should
  Expr(int value) : Expr(static_cast<int64_t>(value)) {}  // NOLINT

  bool defined() const { return node_ != nullptr; }
  const ExprNode* get() const { return node_.get(); }
  const ExprNode* operator->() const { return node_.get(); }
  Type type() const { return node_->type; }
  NodeKind kind() const { return node_->kind; }
  bool same_as(const Expr& other) const { return node_ == other.node_; }
  template <typename T>
  const T* as() const {
    return node_ && node_->kind == T::kKind ? static_cast<const T*>(node_.get()) : nullptr;
  }

 private:
  std::shared_ptr<const ExprNode> node_;
};

class Stmt {
 public:
  Stmt() = default;
  explicit Stmt(std::shared_ptr<const StmtNode> node) : node_(std::move(node)) {}

  bool defined() const { return node_ != nullptr; }
  const StmtNode* get() const { return node_.get(); }
  const StmtNode* operator->() const { return node_.get(); }
  NodeKind kind() const { return node_->kind; }
  bool same_as(const Stmt& other) const { return node_ == other.node_; }
  template <typename T>
  const T* as() const {
    return node_ && node_->kind == T::kKind ? static_cast<const T*>(node_.get()) : nullptr;
  }

 private:
  std::shared_ptr<const StmtNode> node_;
};

}  // namespace kiln::ir
