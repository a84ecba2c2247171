#include "GpuRuntime.h"

#include <dlfcn.h>

#include <stdexcept>

#include "kiln/support/Error.h"

namespace kiln::tune {

const GpuRuntime& GpuRuntime::get() {
  static const GpuRuntime rt = [] {
    void* lib = nullptr;
    for (const char* name : {"libcudart.so", "libcudart.so.13", "libcudart.so.12", "/usr/local/cuda/lib64/libcudart.so"}) {
      if ((lib = dlopen(name, RTLD_NOW | RTLD_GLOBAL))) break;
    }
    if (!lib) user_error("the CUDA runtime (libcudart.so) could not be loaded: {}", dlerror());
    GpuRuntime r;
    auto sym = [&](auto& fn, const char* n) {
      void* p = dlsym(lib, n);
      if (!p) user_error("libcudart has no {}", n);
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
    };
    sym(r.malloc_, "cudaMalloc");
    sym(r.free_, "cudaFree");
    sym(r.memcpy_, "cudaMemcpy");
    sym(r.memset_async, "cudaMemsetAsync");
    sym(r.synchronize, "cudaDeviceSynchronize");
    sym(r.get_last_error, "cudaGetLastError");
    sym(r.error_string, "cudaGetErrorString");
    sym(r.event_create, "cudaEventCreate");
    sym(r.event_record, "cudaEventRecord");
    sym(r.event_synchronize, "cudaEventSynchronize");
    sym(r.event_elapsed, "cudaEventElapsedTime");
    sym(r.event_destroy, "cudaEventDestroy");
    sym(r.device_attribute, "cudaDeviceGetAttribute");
    // cudaGetDeviceProperties is a macro for the _v2 symbol since CUDA 12; only its first field
    // (the name) is read, which every version has first.
    void* props = dlsym(lib, "cudaGetDeviceProperties_v2");
    if (!props) props = dlsym(lib, "cudaGetDeviceProperties");
    r.device_properties = reinterpret_cast<int (*)(void*, int)>(props);
    return r;
  }();
  return rt;
}

void GpuRuntime::check(int status, const char* what) const {
  if (status != 0) throw std::runtime_error(std::string(what) + " failed: " + error_string(status));
}

}  // namespace kiln::tune
