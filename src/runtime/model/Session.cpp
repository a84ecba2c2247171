// The execution state of one thread (Session): binds arguments, owns the arena (allocated once
// per shape, grown when a larger shape comes), runs the library's entry point or replays a
// captured CUDA graph.
#include <cstdlib>

#include "CudaApi.h"
#include "ModelImpl.h"
#include "kiln/runtime/validate.h"

namespace kiln {

struct Session::Impl {
  std::shared_ptr<const Model::Impl> model;
  void* arena = nullptr;
  uint64_t arena_bytes = 0;
  int32_t arena_device = 0;
  std::vector<model_runtime::CapturedGraph> graphs;
  int replays = 0;
  std::vector<DLTensor> args;      // reused between runs
  std::vector<int64_t> symbols;
  std::vector<int64_t> planned_symbols;  // the symbols of the last workspace size asked for
  uint64_t planned_bytes = 0;

  uint64_t workspace_bytes() {
    if (planned_symbols != symbols) {
      planned_bytes = model->signature->workspace_bytes(symbols.data());
      planned_symbols = symbols;
    }
    return planned_bytes;
  }

  ~Impl() {
    model_runtime::destroy_graphs(graphs);
    release_arena();
  }
  void release_arena() {
    if (!arena) return;
    if (model->signature->device_type == kDLCUDA) {
      if (const model_runtime::CudaApi* cuda = model_runtime::cuda_api(nullptr)) cuda->Free(arena);
    } else {
      std::free(arena);
    }
    arena = nullptr;
    arena_bytes = 0;
  }
  Status ensure_arena(uint64_t bytes, int32_t device) {
    if (bytes == 0 || (arena && arena_bytes >= bytes && arena_device == device)) return Status();
    // A new arena moves every temporary: graphs captured over the old one are stale.
    model_runtime::destroy_graphs(graphs);
    release_arena();
    const uint64_t rounded = (bytes + 255) / 256 * 256;
    if (model->signature->device_type == kDLCUDA) {
      std::string error;
      const model_runtime::CudaApi* cuda = model_runtime::cuda_api(&error);
      if (!cuda) return Status::error(-1, error);
      int previous = 0;
      cuda->GetDevice(&previous);
      cuda->SetDevice(device);
      const int e = cuda->Malloc(&arena, rounded);
      cuda->SetDevice(previous);
      if (e != 0) {
        arena = nullptr;
        return Status::error(-1, cuda->message(("allocating the arena (" + std::to_string(rounded) + " bytes)").c_str(), e));
      }
    } else {
      arena = std::aligned_alloc(256, rounded);
      if (!arena) return Status::error(-1, "allocating the arena (" + std::to_string(rounded) + " bytes) failed");
    }
    arena_bytes = rounded;
    arena_device = device;
    return Status();
  }
};

namespace model_runtime {

Status bind_arguments(const Model::Impl& model, std::span<const DLTensor> inputs, std::span<const DLTensor> outputs,
                      std::vector<DLTensor>* args, std::vector<int64_t>* symbols) {
  const KilnSignature& sig = *model.signature;
  auto names = [](const std::vector<TensorInfo>& infos) {
    std::string s;
    for (const TensorInfo& t : infos) s += (s.empty() ? "" : ", ") + t.name;
    return s;
  };
  if (inputs.size() != model.inputs.size()) {
    return Status::error(KILN_ERR_ARGUMENT_COUNT, std::string(sig.text) + ": expected " +
                                                      std::to_string(model.inputs.size()) + " input(s) (" +
                                                      names(model.inputs) + "), got " + std::to_string(inputs.size()));
  }
  if (outputs.size() != model.outputs.size()) {
    return Status::error(KILN_ERR_ARGUMENT_COUNT, std::string(sig.text) + ": expected " +
                                                      std::to_string(model.outputs.size()) + " output(s) (" +
                                                      names(model.outputs) + "), got " + std::to_string(outputs.size()));
  }
  args->assign(inputs.begin(), inputs.end());
  args->insert(args->end(), outputs.begin(), outputs.end());
  symbols->assign(std::max<int32_t>(1, sig.num_symbols), 0);
  std::string error;
  const int32_t status =
      abi::validate_arguments(sig, args->data(), static_cast<int32_t>(args->size()), symbols->data(), &error);
  if (status != KILN_OK) return Status::error(status, error);
  return Status();
}

}  // namespace model_runtime

Session::Session() = default;
Session::~Session() = default;
Session::Session(Session&&) noexcept = default;
Session& Session::operator=(Session&&) noexcept = default;

uint64_t Session::arena_bytes() const { return impl_ ? impl_->arena_bytes : 0; }
int Session::graphs_captured() const { return impl_ ? static_cast<int>(impl_->graphs.size()) : 0; }
int Session::graph_replays() const { return impl_ ? impl_->replays : 0; }

Status Session::run(std::span<const DLTensor> inputs, std::span<const DLTensor> outputs, void* stream,
                    const RunOptions& options) {
  if (!impl_) return Status::error(-1, "Session::run: this Session was not made by Model::new_session()");
  Impl& s = *impl_;
  const Model::Impl& model = *s.model;
  Status bound = model_runtime::bind_arguments(model, inputs, outputs, &s.args, &s.symbols);
  if (!bound) return bound;
  const uint64_t need = s.workspace_bytes();
  void* workspace = options.workspace;
  if (workspace) {
    if (options.workspace_bytes < need) {
      return Status::error(KILN_ERR_WORKSPACE, std::string(model.signature->text) + ": the workspace has " +
                                                   std::to_string(options.workspace_bytes) + " bytes, these shapes need " +
                                                   std::to_string(need));
    }
  } else {
    Status a = s.ensure_arena(need, s.args[0].device.device_id);
    if (!a) return a;
    workspace = s.arena;
  }
  if (options.cuda_graph && model.signature->device_type == kDLCUDA) {
    bool replayed = false;
    Status g = model_runtime::run_captured(model, s.graphs, s.args, s.symbols, workspace, stream, &replayed);
    if (replayed) ++s.replays;
    return g;
  }
  const int32_t status = model.call(s.args.data(), static_cast<int32_t>(s.args.size()), workspace, stream);
  if (status != KILN_OK) return Status::error(status, model.last_error_message());
  return Status();
}

Session Model::new_session() const {
  Session session;
  if (!impl_) return session;
  session.impl_ = std::make_unique<Session::Impl>();
  session.impl_->model = impl_;
  return session;
}

Status Model::run(std::span<const DLTensor> inputs, std::span<const DLTensor> outputs, void* stream,
                  const RunOptions& options) const {
  if (!impl_) return Status::error(-1, "run: the Model is empty (" + error_ + ")");
  std::lock_guard<std::mutex> lock(impl_->shared_mutex);
  if (!impl_->shared_session) impl_->shared_session = std::make_unique<Session>(new_session());
  return impl_->shared_session->run(inputs, outputs, stream, options);
}

}  // namespace kiln
