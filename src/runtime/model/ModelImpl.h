#pragma once
// What a loaded Model and a Session hold (include/kiln/runtime/Model.h). Private to
// src/runtime/model/: Loader.cpp opens the library, Weights.cpp loads and reports weights and
// memory, Session.cpp is the execution state (arguments, arena), GraphCapture.cpp the CUDA
// graphs per shape.
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kiln/runtime/Model.h"
#include "kiln/runtime/kiln_abi.h"
#include "kiln/runtime/kiln_model.h"

namespace kiln {

struct Model::Impl {
  std::string path;
  std::string name;
  void* handle = nullptr;  // never closed: device weights and captured graphs point into it
  const KilnSignature* signature = nullptr;
  KilnKernelFn call = nullptr;
  KilnLastErrorFn last_error = nullptr;
  const KilnModelInfo* info = nullptr;
  int32_t (*load)(int32_t device_id, void* stream) = nullptr;
  uint64_t (*device_bytes)(int32_t device_id) = nullptr;
  std::vector<TensorInfo> inputs, outputs;

  // Model::run's Session, shared by its callers under the lock.
  mutable std::mutex shared_mutex;
  mutable std::unique_ptr<Session> shared_session;

  std::string last_error_message() const { return last_error ? last_error() : "(no message)"; }
};

namespace model_runtime {

// Checks the argument counts and the arguments against the signature (validate.h), fills
// `args` (inputs then outputs) and `symbols`. The message names the argument and the rule.
Status bind_arguments(const Model::Impl& model, std::span<const DLTensor> inputs, std::span<const DLTensor> outputs,
                      std::vector<DLTensor>* args, std::vector<int64_t>* symbols);

struct CapturedGraph {
  std::vector<const void*> pointers;  // every argument's data + byte_offset, and the workspace
  std::vector<int64_t> symbols;
  void* stream = nullptr;
  void* exec = nullptr;  // cudaGraphExec_t
};

// Replays the graph captured for these arguments on `stream`, capturing it first if needed.
Status run_captured(const Model::Impl& model, std::vector<CapturedGraph>& graphs, const std::vector<DLTensor>& args,
                    const std::vector<int64_t>& symbols, void* workspace, void* stream, bool* replayed);
void destroy_graphs(std::vector<CapturedGraph>& graphs);

}  // namespace model_runtime
}  // namespace kiln
