#pragma once
// The CPU reference backend: runs a lowered function's loop nest directly on host tensors.
// Clarity over speed (DESIGN.md): it exists so that every op's semantics are testable without a
// GPU, and so that the conformance suite runs without compiling one program per test case.
#include <vector>

#include "kiln/lower/LoweredFunc.h"
#include "kiln/runtime/HostTensor.h"

namespace kiln {

// Binds the function's size symbols from the input shapes, checks every input's dtype and shape
// (UserError naming the input on mismatch), allocates the outputs and runs the body.
std::vector<HostTensor> interpret(const LoweredFunc& func, const std::vector<HostTensor>& inputs);

}  // namespace kiln
