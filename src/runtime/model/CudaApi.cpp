#include "CudaApi.h"

#include <dlfcn.h>

#include <mutex>

namespace kiln::model_runtime {

std::string CudaApi::message(const char* what, int code) const {
  GetLastError();  // clear the sticky-less error state for the next call
  return std::string(what) + " failed: " + GetErrorString(code) + " (CUDA error " + std::to_string(code) + ")";
}

const CudaApi* cuda_api(std::string* error) {
  static CudaApi api;
  static std::string load_error;
  static bool loaded = false;
  static std::once_flag once;
  std::call_once(once, [] {
    void* lib = nullptr;
    // The libcudart a CUDA model library already loaded comes first (RTLD_NOLOAD), so both share
    // one runtime; else the newest on the search path.
    for (int flags : {RTLD_NOW | RTLD_NOLOAD, RTLD_NOW}) {
      for (const char* name : {"libcudart.so.13", "libcudart.so.12", "libcudart.so", "/usr/local/cuda/lib64/libcudart.so"}) {
        if (!lib) lib = dlopen(name, flags);
      }
    }
    if (!lib) {
      const char* e = dlerror();
      load_error = std::string("the CUDA runtime (libcudart.so) could not be opened: ") + (e ? e : "not found");
      return;
    }
    bool ok = true;
    auto bind = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
      if (!fn) {
        ok = false;
        load_error = std::string("libcudart has no ") + name;
      }
    };
    bind(api.Malloc, "cudaMalloc");
    bind(api.Free, "cudaFree");
    bind(api.GetDevice, "cudaGetDevice");
    bind(api.SetDevice, "cudaSetDevice");
    bind(api.StreamBeginCapture, "cudaStreamBeginCapture");
    bind(api.StreamEndCapture, "cudaStreamEndCapture");
    bind(api.GraphInstantiateWithFlags, "cudaGraphInstantiateWithFlags");
    bind(api.GraphLaunch, "cudaGraphLaunch");
    bind(api.GraphExecDestroy, "cudaGraphExecDestroy");
    bind(api.GraphDestroy, "cudaGraphDestroy");
    bind(api.GetErrorString, "cudaGetErrorString");
    bind(api.GetLastError, "cudaGetLastError");
    loaded = ok;
  });
  if (!loaded) {
    if (error) *error = load_error;
    return nullptr;
  }
  return &api;
}

}  // namespace kiln::model_runtime
