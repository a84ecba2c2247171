#include "kiln/tune/Apply.h"

#include <cstdio>

namespace kiln::tune {

ChosenSchedule choose_schedule(const Database& db, const codegen::KernelDefinition& kernel, codegen::Target target,
                               const std::string& arch) {
  ChosenSchedule chosen;
  const KernelKey key = kernel_key(kernel);
  const std::string target_text = codegen::target_name(target);
  const Record* best = nullptr;
  if (target == codegen::Target::Cuda) {
    best = db.best(key, target_text, arch, "");
  } else {
    for (const Record* r : db.of(key, target_text)) {
      if (r->ok() && (!best || r->median_us < best->median_us)) best = r;
    }
  }
  if (!best) {
    size_t other = db.of(key, target_text).size();
    chosen.note = kernel.name + ": default schedule (no usable tuning record for hash " + key.hash + ", " + key.shape +
                  ", " + key.dtypes + ", " + (arch.empty() ? target_text : arch) +
                  (other ? "; " + std::to_string(other) + " records of it are for other devices or did not run" : "") + ")";
    return chosen;
  }
  chosen.record = best;
  char time[64];
  std::snprintf(time, sizeof time, "%.2f us", best->median_us);
  chosen.note = kernel.name + ": tuned schedule `" + candidate_text(best->knobs) + "` (" + time + " on " + best->device +
                ", record of " + best->time + ")";
  if (target == codegen::Target::Cuda) {
    chosen.schedule = default_gpu_schedule(kernel.inputs, kernel.outputs, schedule_options(best->knobs));
  } else {
    chosen.cpu_flags = cpu_flags(best->knobs);
  }
  return chosen;
}

}  // namespace kiln::tune
