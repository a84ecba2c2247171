#pragma once
// The TemplateContraction and TemplateAttention nodes of a lowered function, in order (lowering
// tests).
#include <vector>

#include "kiln/ir/IRVisitor.h"
#include "kiln/lower/LoweredFunc.h"

namespace kiln::test {

class FindTemplates : public ir::IRVisitor {
 public:
  std::vector<const ir::TemplateContraction*> found;
  using ir::IRVisitor::visit;

 protected:
  void visit(const ir::TemplateContraction* op) override {
    found.push_back(op);
    ir::IRVisitor::visit(op);
  }
};

inline std::vector<const ir::TemplateContraction*> templates_in(const LoweredFunc& f) {
  FindTemplates v;
  v.visit(f.body);
  return v.found;
}

// The TemplateAttention nodes of a lowered function, in order.
class FindAttentions : public ir::IRVisitor {
 public:
  std::vector<const ir::TemplateAttention*> found;
  using ir::IRVisitor::visit;

 protected:
  void visit(const ir::TemplateAttention* op) override {
    found.push_back(op);
    ir::IRVisitor::visit(op);
  }
};

inline std::vector<const ir::TemplateAttention*> attentions_in(const LoweredFunc& f) {
  FindAttentions v;
  v.visit(f.body);
  return v.found;
}

}  // namespace kiln::test
