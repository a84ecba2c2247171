#pragma once
// The CUDA runtime entry points the tuner's runner needs, loaded with dlopen (kiln starts without
// a GPU; CI has none). Private to src/tune/.
#include <string>

namespace kiln::tune {

struct GpuRuntime {
  int (*malloc_)(void**, size_t) = nullptr;
  int (*free_)(void*) = nullptr;
  int (*memcpy_)(void*, const void*, size_t, int) = nullptr;
  int (*memset_async)(void*, int, size_t, void*) = nullptr;
  int (*synchronize)() = nullptr;
  int (*get_last_error)() = nullptr;
  const char* (*error_string)(int) = nullptr;
  int (*event_create)(void**) = nullptr;
  int (*event_record)(void*, void*) = nullptr;
  int (*event_synchronize)(void*) = nullptr;
  int (*event_elapsed)(float*, void*, void*) = nullptr;
  int (*event_destroy)(void*) = nullptr;
  int (*device_attribute)(int*, int, int) = nullptr;
  int (*device_properties)(void*, int) = nullptr;

  static constexpr int kHostToDevice = 1, kDeviceToHost = 2;
  static constexpr int kAttrL2CacheSize = 38, kAttrMajor = 75, kAttrMinor = 76;

  // UserError when libcudart cannot be loaded.
  static const GpuRuntime& get();
  // Throws std::runtime_error naming `what` when status != 0.
  void check(int status, const char* what) const;
};

}  // namespace kiln::tune
