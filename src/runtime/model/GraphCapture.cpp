// CUDA graphs per shape: a run is captured once per (stream, argument addresses, symbol values,
// workspace) and replayed with one cudaGraphLaunch afterwards, so a replay costs one launch
// instead of the entry point's validation and one launch per kernel.
#include "CudaApi.h"
#include "ModelImpl.h"

namespace kiln::model_runtime {

namespace {

constexpr int kCaptureModeThreadLocal = 1;  // cudaStreamCaptureModeThreadLocal

std::vector<const void*> pointers_of(const std::vector<DLTensor>& args, void* workspace) {
  std::vector<const void*> p;
  for (const DLTensor& t : args) p.push_back(static_cast<const char*>(t.data) + t.byte_offset);
  p.push_back(workspace);
  return p;
}

}  // namespace

void destroy_graphs(std::vector<CapturedGraph>& graphs) {
  const CudaApi* cuda = graphs.empty() ? nullptr : cuda_api(nullptr);
  for (CapturedGraph& g : graphs) {
    if (cuda && g.exec) cuda->GraphExecDestroy(g.exec);
  }
  graphs.clear();
}

Status run_captured(const Model::Impl& model, std::vector<CapturedGraph>& graphs, const std::vector<DLTensor>& args,
                    const std::vector<int64_t>& symbols, void* workspace, void* stream, bool* replayed) {
  std::string error;
  const CudaApi* cuda = cuda_api(&error);
  if (!cuda) return Status::error(-1, error);
  const std::vector<const void*> pointers = pointers_of(args, workspace);
  for (const CapturedGraph& g : graphs) {
    if (g.stream == stream && g.pointers == pointers && g.symbols == symbols) {
      const int e = cuda->GraphLaunch(g.exec, stream);
      if (e != 0) return Status::error(KILN_ERR_LAUNCH, cuda->message("cudaGraphLaunch", e));
      *replayed = true;
      return Status();
    }
  }
  // Loading weights synchronizes and allocates: never inside a capture.
  if (model.load(args[0].device.device_id, stream) != KILN_OK) {
    return Status::error(KILN_ERR_WEIGHTS, model.last_error_message());
  }
  int e = cuda->StreamBeginCapture(stream, kCaptureModeThreadLocal);
  if (e != 0) {
    return Status::error(KILN_ERR_LAUNCH, cuda->message("cudaStreamBeginCapture (capturing needs a stream other "
                                                        "than the legacy default stream)", e));
  }
  const int32_t status = model.call(args.data(), static_cast<int32_t>(args.size()), workspace, stream);
  void* graph = nullptr;
  e = cuda->StreamEndCapture(stream, &graph);
  if (status != KILN_OK) {
    if (graph) cuda->GraphDestroy(graph);
    return Status::error(status, model.last_error_message());
  }
  if (e != 0) return Status::error(KILN_ERR_LAUNCH, cuda->message("cudaStreamEndCapture", e));
  CapturedGraph captured;
  captured.pointers = pointers;
  captured.symbols = symbols;
  captured.stream = stream;
  e = cuda->GraphInstantiateWithFlags(&captured.exec, graph, 0);
  cuda->GraphDestroy(graph);
  if (e != 0) return Status::error(KILN_ERR_LAUNCH, cuda->message("cudaGraphInstantiateWithFlags", e));
  graphs.push_back(captured);
  e = cuda->GraphLaunch(captured.exec, stream);
  if (e != 0) return Status::error(KILN_ERR_LAUNCH, cuda->message("cudaGraphLaunch", e));
  return Status();
}

}  // namespace kiln::model_runtime
