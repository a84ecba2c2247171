#pragma once
// Using tuning records when compiling (`kiln compile --records`, `kiln plugins --records`): the
// best record of a kernel becomes its schedule (CUDA) or compiler flags (CPU); without one, the
// default stays and the note says so.
#include <optional>
#include <string>
#include <vector>

#include "kiln/tune/Records.h"

namespace kiln::tune {

struct ChosenSchedule {
  std::optional<Schedule> schedule;  // CUDA: set when a record was found
  std::vector<std::string> cpu_flags;  // CPU: set when a record was found
  const Record* record = nullptr;
  std::string note;  // one line for the report
};

// `arch`: the GPU architecture compiled for (sm_90), or "" for the CPU target (any CPU's records).
ChosenSchedule choose_schedule(const Database& db, const codegen::KernelDefinition& kernel, codegen::Target target,
                               const std::string& arch);

}  // namespace kiln::tune
