#pragma once
// Lowering pass: applies a stage's loop transformations (schedule/Schedule.h) to its loop nest.
#include "kiln/ir/IR.h"
#include "kiln/schedule/Schedule.h"
#include "kiln/te/Tensor.h"

namespace kiln {

// `stage` is the loop nest lower() built for tensor `t`: one loop per output axis, outermost
// first, around the stage's body. UserError-free: a schedule naming a loop the stage does not
// have is an internal error (schedules are made by kiln, or validated when loaded).
ir::Stmt apply_schedule(const ir::Stmt& stage, const te::Tensor& t, const StageSchedule& schedule);

}  // namespace kiln
