#pragma once
// The parts of DLPack >= 1.0 that the kiln module consumes, declared here because the DLPack
// header kiln builds against (Debian's libdlpack-dev, DLPack 0.6) predates them: the versioned
// managed tensor (capsule "dltensor_versioned") and the DLPack C exchange API
// (`type(tensor).__dlpack_c_exchange_api__`, a capsule "dlpack_exchange_api" or an int address).
// Layouts follow dlpack.h 1.3 field for field.
#include <dlpack/dlpack.h>

#include <cstdint>

namespace kiln::py {

struct DLPackVersion {
  uint32_t major;
  uint32_t minor;
};

struct ManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(ManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
};

constexpr uint64_t kDLPackFlagReadOnly = 1u << 0;

struct ExchangeAPIHeader {
  DLPackVersion version;
  ExchangeAPIHeader* prev_api;
};

// DLPackManagedTensorAllocator: a tensor from the framework's allocator (torch: its caching
// allocator, ordered on the current stream); only dtype, ndim, shape and device of `prototype`
// are read. Non-zero on failure, after calling set_error(error_ctx, kind, message).
using ManagedTensorAllocator = int (*)(DLTensor* prototype, ManagedTensorVersioned** out, void* error_ctx,
                                       void (*set_error)(void* error_ctx, const char* kind, const char* message));

struct ExchangeAPI {
  ExchangeAPIHeader header;
  ManagedTensorAllocator managed_tensor_allocator;
  int (*managed_tensor_from_py_object_no_sync)(void* py_object, ManagedTensorVersioned** out);
  void* managed_tensor_to_py_object_no_sync;
  // May be null: the producer does not offer the non-owning fast path.
  int (*dltensor_from_py_object_no_sync)(void* py_object, DLTensor* out);
  int (*current_work_stream)(int32_t device_type, int32_t device_id, void** out_stream);
};

}  // namespace kiln::py
