#pragma once
// The few CUDA runtime entry points the model runtime needs, opened with dlopen on first use so
// that libkiln_runtime links no libcudart and CPU model libraries run where there is no CUDA.
// Private to src/runtime/model/.
#include <string>

namespace kiln::model_runtime {

struct CudaApi {
  using Stream = void*;
  int (*Malloc)(void**, size_t);
  int (*Free)(void*);
  int (*GetDevice)(int*);
  int (*SetDevice)(int);
  int (*StreamBeginCapture)(Stream, int mode);
  int (*StreamEndCapture)(Stream, void** graph);
  int (*GraphInstantiateWithFlags)(void** exec, void* graph, unsigned long long flags);
  int (*GraphLaunch)(void* exec, Stream);
  int (*GraphExecDestroy)(void* exec);
  int (*GraphDestroy)(void* graph);
  const char* (*GetErrorString)(int);
  int (*GetLastError)();
  std::string message(const char* what, int code) const;  // "what: <CUDA's message>"
};

// The API, or null with *error set when libcudart cannot be opened. Thread-safe.
const CudaApi* cuda_api(std::string* error);

}  // namespace kiln::model_runtime
