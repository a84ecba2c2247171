#pragma once
// Checks and times built candidates (TVM MetaSchedule's "runner"). For one kernel: random inputs
// (fixed seed; constants of the model keep their values), the reference outputs from the CPU
// backend's library, then for each candidate: outputs poisoned, one call, outputs compared with
// the reference (a wrong candidate is recorded as "wrong" and never timed), then warm-up calls and
// timed repeats. CUDA: CUDA events around each call, L2 flushed before it (a memset of a buffer
// twice the L2's size); CPU: a steady clock, caches flushed the same way. The median, the minimum
// and the 90th percentile are recorded.
#include <string>
#include <vector>

#include "kiln/runtime/HostTensor.h"
#include "kiln/tune/Builder.h"
#include "kiln/tune/Records.h"

namespace kiln::tune {

struct RunRequest {
  codegen::Target target = codegen::Target::Cuda;
  int warmup = 3;
  int repeats = 20;
  uint64_t seed = 1;
};

// The device measurements run on ("NVIDIA H200", "sm_90"; for the CPU its model name and arch).
struct DeviceInfo {
  std::string name, arch;
};
DeviceInfo device_info(codegen::Target target);

class Runner {
 public:
  // Lowers the reference (the CPU backend's C++) and draws the inputs; no compiling, no device.
  Runner(const codegen::KernelDefinition& kernel, const RunRequest& request, const std::string& work_dir);
  // Builds (or reuses) the reference library in `work_dir` and computes the reference outputs
  // (or reads them from the cache beside it). Lowers nothing: it may run on a thread of its own
  // while the candidates are lowered and built. std::runtime_error when the reference has no
  // finite value to check against.
  void compute_reference();
  // CUDA: copies the inputs to the device and allocates the L2 flush buffer; the CPU: the flush
  // buffer. Once, after compute_reference and before measure (the tune-worker holds the GPU then).
  void attach_device();
  ~Runner();
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;

  // Fills the measurement fields of `record` (status, times, error) for one built candidate.
  void measure(const BuiltCandidate& built, Record& record);

 private:
  struct State;
  State* state_;
};

// |got - want| <= atol + rtol * |want| for every element (NaN only where NaN is expected); on
// failure, `error` names the first bad element.
bool outputs_match(const HostTensor& got, const HostTensor& want, std::string& error);

}  // namespace kiln::tune
