#pragma once
// Human-readable text of IR, for logs (the lowering pipeline prints IR after each pass when
// KILN_LOG_IR is set), error messages and tests. Generated code is printed by codegen/, not here.
#include <ostream>
#include <string>

#include "kiln/ir/IR.h"

namespace kiln::ir {

std::string to_string(const Expr& e);
std::string to_string(const Stmt& s);
std::ostream& operator<<(std::ostream& os, const Expr& e);
std::ostream& operator<<(std::ostream& os, const Stmt& s);

}  // namespace kiln::ir
