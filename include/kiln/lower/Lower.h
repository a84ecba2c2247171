#pragma once
// Lowers tensor expressions to a loop nest. This header is the whole pipeline's entry point;
// src/lower/Lower.cpp reads top to bottom as the list of passes and logs the IR after each one
// when the environment variable KILN_LOG_IR is set.
#include <vector>

#include "kiln/lower/LoweredFunc.h"
#include "kiln/schedule/Schedule.h"
#include "kiln/te/Tensor.h"

namespace kiln {

struct LowerOptions {
  // Injective tensors that are not outputs are inlined into their consumers when read from one
  // place only (an elementwise chain becomes one loop nest). Off: every tensor gets a stage.
  bool inline_injective = true;
  // Without a schedule, reductions that walk an operand across rows run over a row of
  // accumulators (src/lower/InterchangeReductions.h; bit-identical results). Off: as built.
  bool interchange_reductions = true;
  // An injective tensor that a reduction reads at least twice per element (a convolution's or a
  // matrix product's operand: a Conv's input is read once per output channel and tap) gets a stage
  // of its own instead of being inlined, so that its body runs once per element rather than at every
  // read. Set by the CPU backend (codegen::lower_kernel) and the interpreter's graph runner
  // (run_graph_on_cpu: conformance, `kiln compile --reference`); off for GPU schedules, whose
  // contraction templates keep their operands as buffers anyway, and for kernel keys.
  bool materialize_reread = false;
};

// Lowers the computation of `outputs` from `inputs` (placeholders) into one function. Every
// tensor between them that is not inlined becomes a stage (a loop nest) writing a temporary
// buffer, in producer-before-consumer order. `schedule` gives each stage's loop transformations
// (none: plain serial loops, the CPU reference).
LoweredFunc lower(const std::string& name, const std::vector<te::Tensor>& inputs,
                  const std::vector<te::Tensor>& outputs, const Schedule& schedule = Schedule(),
                  const LowerOptions& options = LowerOptions());

}  // namespace kiln
