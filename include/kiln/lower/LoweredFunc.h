#pragma once
// The result of lowering: one function's loop nest over its buffer parameters. The CPU backend
// interprets it (runtime/Interpreter.h) or prints it as C++; the CUDA backend prints it as a
// kernel (codegen/).
#include <string>
#include <vector>

#include "kiln/ir/IR.h"

namespace kiln {

struct LoweredFunc {
  std::string name;
  std::vector<ir::Buffer> inputs;   // global buffers the function reads
  std::vector<ir::Buffer> outputs;  // global buffers it writes
  std::vector<ir::Expr> symbols;    // size symbols (Variables) the shapes use, in first-use order
  ir::Stmt body;
  std::string comment;              // the source node(s) and the schedule, for generated code
  // One line per top-level stage of `body` (inside the temporaries' allocations), in order: the
  // source node and the stage's schedule, printed above the stage's kernel.
  std::vector<std::string> stage_notes;
};

}  // namespace kiln
