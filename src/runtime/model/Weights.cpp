// The model's weights on a device and the memory report of a run.
#include "ModelImpl.h"

namespace kiln {

Status Model::load_weights(int32_t device_id, void* stream) const {
  if (!impl_) return Status::error(-1, "load_weights: the Model is empty (" + error_ + ")");
  const int32_t status = impl_->load(device_id, stream);
  if (status != KILN_OK) return Status::error(status, impl_->last_error_message());
  return Status();
}

Status Model::memory(std::span<const DLTensor> inputs, std::span<const DLTensor> outputs, MemoryReport* report) const {
  if (!impl_) return Status::error(-1, "memory: the Model is empty (" + error_ + ")");
  // Only shapes matter here: tensors without data are checked at a dummy, aligned address.
  alignas(256) static const char dummy[256] = {};
  std::vector<DLTensor> in(inputs.begin(), inputs.end()), out(outputs.begin(), outputs.end());
  for (DLTensor& t : in) t.data = t.data ? t.data : const_cast<char*>(dummy);
  for (DLTensor& t : out) t.data = t.data ? t.data : const_cast<char*>(dummy);
  std::vector<DLTensor> args;
  std::vector<int64_t> symbols;
  Status s = model_runtime::bind_arguments(*impl_, in, out, &args, &symbols);
  if (!s) return s;
  MemoryReport r;
  const int32_t device = args.empty() ? 0 : args[0].device.device_id;
  r.weights = impl_->device_bytes(device);
  if (r.weights == 0) r.weights = impl_->info->file_payload_bytes + impl_->info->embedded_payload_bytes;
  r.arena = impl_->signature->workspace_bytes(symbols.data());
  r.live = impl_->info->live_bytes(symbols.data());
  for (const DLTensor& t : args) {
    uint64_t n = (t.dtype.bits * t.dtype.lanes + 7) / 8;
    for (int32_t d = 0; d < t.ndim; ++d) n *= static_cast<uint64_t>(t.shape[d]);
    r.io += n;
  }
  *report = r;
  return Status();
}

}  // namespace kiln
