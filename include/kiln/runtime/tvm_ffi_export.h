#pragma once
// Exports kiln functions under Apache TVM-FFI's stable C ABI, so that `tvm_ffi.load_module(path)`
// loads any kiln library and calls its functions (docs/ARCHITECTURE.md, "Adapters on the contract").
//
// A kiln library includes this header and writes, once per function (at namespace scope):
//
//     KILN_TVM_FFI_EXPORT(gemv)   // exports __tvm_ffi_gemv and __tvm_ffi__doc_gemv
//
// next to its `kiln_gemv` and `kiln_signature_gemv`. The exported symbol has TVM-FFI's safe-call
// signature `int(void* handle, const TVMFFIAny* args, int32_t num_args, TVMFFIAny* result)`. Each
// argument may be a `DLTensor*` (type index kTVMFFIDLTensorPtr) or a TVM-FFI tensor object
// (kTVMFFITensor, layout { TVMFFIObject, DLTensor, ... }); anything else is a TypeError.
//
// kiln does not depend on TVM-FFI: this header declares the handful of C types and constants of
// TVM-FFI's stable ABI that it needs, from the published C ABI (tvm/ffi/c_api.h), and resolves the
// three runtime functions it calls with dlsym at run time:
//   - TVMFFIEnvGetStream: the host's current stream for the call's device (e.g. torch's current
//     stream, which tvm_ffi sets for the duration of a call with torch tensors). If it does not
//     resolve, CUDA functions run on the legacy default stream.
//   - TVMFFIErrorSetRaisedFromCStr: raises the validation failure as a TypeError/ValueError in
//     the host. If it does not resolve, the call returns -1 and the message is kept for
//     kiln_last_error() (the library's thread-local last error); nothing is thrown across the ABI.
//   - TVMFFIStringFromByteArray: returns the docstring from __tvm_ffi__doc_<name>.
//   - TVMFFIEnvGetDLPackManagedTensorAllocator: the host's tensor allocator (tvm_ffi sets torch's
//     for the duration of a call with torch tensors), which gives device workspace.
//
// Workspace (KilnSignature::workspace_bytes > 0): CPU functions get a per-thread host buffer.
// CUDA functions get one allocation per call from the host's DLPack tensor allocator (torch's
// caching allocator on its current stream, the stream the kernel runs on), released right after
// the launch, which the framework's stream-ordered allocator makes safe; without one, when the
// library is compiled as CUDA (cuda_runtime.h included first), from cudaMallocAsync /
// cudaFreeAsync on the call's stream. Otherwise the call fails with a message saying so.
// When the real TVM-FFI headers are included first, the layouts declared here are checked
// against them at compile time.
//
// Cost per call: one switch per argument to find its DLTensor, then the kernel's own validation;
// no allocation (except device workspace, above), no lock. The function pointers are looked up
// once and cached.
#include <dlfcn.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <memory>

#include "kiln/runtime/kiln_abi.h"
#include "kiln/runtime/validate.h"

extern "C" const char* kiln_last_error(void);  // every kiln library defines it (kiln_abi.h)

namespace kiln::tvm_ffi {

// --- The subset of TVM-FFI's stable C ABI used here (tvm/ffi/c_api.h, ABI of tvm-ffi 0.1). ---
constexpr int32_t kTypeNone = 0;             // kTVMFFINone
constexpr int32_t kTypeInt = 1;              // kTVMFFIInt
constexpr int32_t kTypeBool = 2;             // kTVMFFIBool
constexpr int32_t kTypeFloat = 3;            // kTVMFFIFloat
constexpr int32_t kTypeOpaquePtr = 4;        // kTVMFFIOpaquePtr
constexpr int32_t kTypeDLTensorPtr = 7;      // kTVMFFIDLTensorPtr
constexpr int32_t kTypeRawStr = 8;           // kTVMFFIRawStr
constexpr int32_t kTypeSmallStr = 11;        // kTVMFFISmallStr
constexpr int32_t kTypeStaticObjectBegin = 64;
constexpr int32_t kTypeStr = 65;             // kTVMFFIStr
constexpr int32_t kTypeTensor = 70;          // kTVMFFITensor
constexpr int32_t kTypeArray = 71;           // kTVMFFIArray

// TVMFFIObject: the header of every object; a tensor object's DLTensor follows it.
struct Object {
  uint64_t combined_ref_count;
  int32_t type_index;
  uint32_t padding;
  void (*deleter)(void* self, int flags);
};

// TVMFFIAny: a 16-byte tagged value; arguments and results of a safe call.
struct Any {
  int32_t type_index;
  uint32_t zero_padding;
  union {
    int64_t v_int64;
    double v_float64;
    void* v_ptr;
    const char* v_c_str;
    Object* v_obj;
  };
};

struct ByteArray {
  const char* data;
  size_t size;
};

static_assert(sizeof(Object) == 24 && sizeof(Any) == 16 && offsetof(Any, v_ptr) == 8);
#ifdef TVM_FFI_C_API_H_
static_assert(sizeof(Object) == sizeof(TVMFFIObject) && sizeof(Any) == sizeof(TVMFFIAny));
static_assert(offsetof(Object, type_index) == offsetof(TVMFFIObject, type_index));
static_assert(offsetof(Any, v_ptr) == offsetof(TVMFFIAny, v_ptr));
static_assert(kTypeDLTensorPtr == kTVMFFIDLTensorPtr && kTypeTensor == kTVMFFITensor);
static_assert(kTypeNone == kTVMFFINone && kTypeStr == kTVMFFIStr);
#endif

// DLManagedTensorVersioned of DLPack >= 1.0 (the DLPack header kiln builds against may be 0.6).
struct ManagedTensorVersioned {
  uint32_t version_major;
  uint32_t version_minor;
  void* manager_ctx;
  void (*deleter)(ManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
};

using EnvGetStreamFn = void* (*)(int32_t device_type, int32_t device_id);
// DLPackManagedTensorAllocator (dlpack.h >= 1.2) and TVM-FFI's getter for the current one.
using SetErrorFn = void (*)(void* error_ctx, const char* kind, const char* message);
using ManagedTensorAllocatorFn = int (*)(DLTensor* prototype, ManagedTensorVersioned** out, void* error_ctx,
                                         SetErrorFn set_error);
using EnvGetTensorAllocatorFn = ManagedTensorAllocatorFn (*)();
using ErrorSetRaisedFromCStrFn = void (*)(const char* kind, const char* message);
using StringFromByteArrayFn = int (*)(const ByteArray* input, Any* out);

// A runtime function of the host, looked up once in the global namespace (tvm_ffi loads
// libtvm_ffi.so with RTLD_GLOBAL). A miss is retried on the next call, which is only reached by
// hosts without TVM-FFI.
template <typename Fn>
class HostFunction {
 public:
  explicit constexpr HostFunction(const char* name) : name_(name) {}
  Fn get() {
    Fn fn = fn_.load(std::memory_order_acquire);
    if (fn == nullptr) {
      fn = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, name_));
      if (fn != nullptr) fn_.store(fn, std::memory_order_release);
    }
    return fn;
  }

 private:
  const char* name_;
  std::atomic<Fn> fn_{nullptr};
};

inline HostFunction<EnvGetStreamFn>& env_get_stream() {
  static HostFunction<EnvGetStreamFn> fn("TVMFFIEnvGetStream");
  return fn;
}
inline HostFunction<ErrorSetRaisedFromCStrFn>& error_set_raised() {
  static HostFunction<ErrorSetRaisedFromCStrFn> fn("TVMFFIErrorSetRaisedFromCStr");
  return fn;
}
inline HostFunction<StringFromByteArrayFn>& string_from_byte_array() {
  static HostFunction<StringFromByteArrayFn> fn("TVMFFIStringFromByteArray");
  return fn;
}

inline HostFunction<EnvGetTensorAllocatorFn>& env_get_tensor_allocator() {
  static HostFunction<EnvGetTensorAllocatorFn> fn("TVMFFIEnvGetDLPackManagedTensorAllocator");
  return fn;
}

// Keeps `message` for kiln_last_error() and raises it in the host when the host has TVM-FFI's
// error API. Returns the safe-call failure code.
inline int raise(int32_t status, const std::string& message) {
  abi::last_error_storage() = message;
  if (ErrorSetRaisedFromCStrFn set = error_set_raised().get()) {
    set(abi::status_error_kind(status), message.c_str());
  }
  return -1;
}

inline const char* any_type_name(int32_t type_index) {
  switch (type_index) {
    case kTypeNone:
      return "None";
    case kTypeInt:
      return "int";
    case kTypeBool:
      return "bool";
    case kTypeFloat:
      return "float";
    case kTypeOpaquePtr:
      return "an opaque pointer";
    case kTypeRawStr:
    case kTypeSmallStr:
    case kTypeStr:
      return "str";
    case kTypeArray:
      return "an Array";
    default:
      return type_index >= kTypeStaticObjectBegin ? "an object that is not a tensor" : "a value";
  }
}

// Host workspace for CPU functions: one growing buffer per thread (calls are synchronous).
// (A thread_local std::vector here aborts nvcc 13's C++20 front end; hence unique_ptr.)
inline void* host_workspace(size_t bytes) {
  static thread_local std::unique_ptr<std::max_align_t[]> buffer;
  static thread_local size_t capacity = 0;
  const size_t words = (bytes + sizeof(std::max_align_t) - 1) / sizeof(std::max_align_t);
  if (capacity < words) {
    buffer.reset(new std::max_align_t[words]);
    capacity = words;
  }
  return buffer.get();
}

// Device workspace of one call: allocated before the launch, released after it (stream-ordered
// allocators make the release safe while the kernel still runs). 256-byte aligned, as generated
// code carves its temporaries at 256-byte offsets.
class DeviceWorkspace {
 public:
  DeviceWorkspace() = default;
  DeviceWorkspace(const DeviceWorkspace&) = delete;
  DeviceWorkspace& operator=(const DeviceWorkspace&) = delete;
  ~DeviceWorkspace() { release(); }

  // Returns an empty string on success, else why no workspace could be had.
  std::string allocate(size_t bytes, DLDevice device, void* stream) {
    const size_t padded = bytes + kAlignment;
    if (ManagedTensorAllocatorFn alloc = host_allocator()) {
      int64_t shape[1] = {static_cast<int64_t>(padded)};
      DLTensor prototype{};
      prototype.device = device;
      prototype.ndim = 1;
      prototype.dtype = DLDataType{kDLUInt, 8, 1};
      prototype.shape = shape;
      std::string error;
      if (alloc(&prototype, &managed_, &error, record_error) != 0 || managed_ == nullptr ||
          managed_->dl_tensor.data == nullptr) {
        managed_ = nullptr;
        return "the host's tensor allocator failed (" + error + ")";
      }
      data_ = align(static_cast<char*>(managed_->dl_tensor.data) + managed_->dl_tensor.byte_offset);
      return "";
    }
#ifdef CUDART_VERSION
    const cudaError_t e = cudaMallocAsync(&raw_, padded, static_cast<cudaStream_t>(stream));
    if (e != cudaSuccess) {
      raw_ = nullptr;
      return std::string("cudaMallocAsync failed (") + cudaGetErrorString(e) + ")";
    }
    stream_ = stream;
    data_ = align(static_cast<char*>(raw_));
    return "";
#else
    (void)stream;
    return "the host has no tensor allocator (TVMFFIEnvGetDLPackManagedTensorAllocator)";
#endif
  }
  void* data() const { return data_; }

 private:
  static constexpr size_t kAlignment = 256;
  static void* align(char* p) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    return p + ((kAlignment - a % kAlignment) % kAlignment);
  }
  static void record_error(void* ctx, const char* kind, const char* message) {
    *static_cast<std::string*>(ctx) = std::string(kind ? kind : "Error") + ": " + (message ? message : "");
  }
  static ManagedTensorAllocatorFn host_allocator() {
    EnvGetTensorAllocatorFn get = env_get_tensor_allocator().get();
    return get ? get() : nullptr;
  }
  void release() {
    if (managed_ != nullptr && managed_->deleter != nullptr) managed_->deleter(managed_);
    managed_ = nullptr;
#ifdef CUDART_VERSION
    if (raw_ != nullptr) cudaFreeAsync(raw_, static_cast<cudaStream_t>(stream_));
    raw_ = nullptr;
#endif
  }

  ManagedTensorVersioned* managed_ = nullptr;
  void* raw_ = nullptr;
  void* stream_ = nullptr;
  void* data_ = nullptr;
};

// The largest parameter count handled without allocation; kiln functions have a handful.
constexpr int32_t kMaxArgs = 64;

// The body of every __tvm_ffi_<name>: turns TVM-FFI arguments into DLTensors, takes the host's
// stream, and calls the kernel through the contract.
inline int safe_call(KilnKernelFn call, const KilnSignature& sig, const Any* args, int32_t num_args,
                     Any* result) noexcept {
  try {
    if (result != nullptr) {
      result->type_index = kTypeNone;
      result->zero_padding = 0;
      result->v_int64 = 0;
    }
    if (num_args != sig.num_params || num_args > kMaxArgs || (num_args > 0 && args == nullptr)) {
      return raise(KILN_ERR_ARGUMENT_COUNT,
                   abi::format_argument_error(sig, "takes " + std::to_string(sig.num_params) +
                                                       " tensors, got " + std::to_string(num_args)));
    }
    DLTensor tensors[kMaxArgs];
    for (int32_t i = 0; i < num_args; ++i) {
      const Any& a = args[i];
      const DLTensor* t = nullptr;
      if (a.type_index == kTypeDLTensorPtr) {
        t = static_cast<const DLTensor*>(a.v_ptr);
      } else if (a.type_index == kTypeTensor && a.v_obj != nullptr) {
        t = reinterpret_cast<const DLTensor*>(reinterpret_cast<const char*>(a.v_obj) + sizeof(Object));
      }
      if (t == nullptr) {
        return raise(KILN_ERR_TYPE, abi::format_argument_error(
                                        sig, std::string(sig.params[i].name) + " is " +
                                                 any_type_name(a.type_index) + ", expected a tensor"));
      }
      tensors[i] = *t;
    }
    void* stream = nullptr;
    if (sig.device_type != kDLCPU && num_args > 0) {
      if (EnvGetStreamFn get = env_get_stream().get()) {
        stream = get(tensors[0].device.device_type, tensors[0].device.device_id);
      }
    }
    void* workspace = nullptr;
    DeviceWorkspace device_workspace;
    if (sig.workspace_bytes != nullptr) {
      constexpr int32_t kMaxSymbols = 256;
      int64_t symbols[kMaxSymbols];
      std::string message;
      if (sig.num_symbols > kMaxSymbols) {
        return raise(KILN_ERR_WORKSPACE, abi::format_argument_error(sig, "has too many symbols"));
      }
      const int32_t status = abi::validate_arguments(sig, tensors, num_args, symbols, &message);
      if (status != KILN_OK) return raise(status, message);
      const size_t bytes = sig.workspace_bytes(symbols);
      if (bytes > 0 && sig.device_type == kDLCPU) {
        workspace = host_workspace(bytes);
      } else if (bytes > 0) {
        const std::string why = device_workspace.allocate(bytes, tensors[0].device, stream);
        if (!why.empty()) {
          return raise(KILN_ERR_WORKSPACE,
                       abi::format_argument_error(sig, "needs " + std::to_string(bytes) +
                                                           " bytes of device workspace: " + why));
        }
        workspace = device_workspace.data();
      }
    }
    const int32_t status = call(tensors, num_args, workspace, stream);
    if (status != KILN_OK) {
      // (No conditional expression over std::string here: nvcc 13's C++20 front end aborts on it.)
      std::string message = std::string(sig.name) + " failed";
      if (const char* last = kiln_last_error()) message = last;
      return raise(status, message);
    }
    return 0;
  } catch (...) {
    return raise(KILN_ERR_LAUNCH, std::string(sig.name) + ": internal error in the TVM-FFI export");
  }
}

// The body of every __tvm_ffi__doc_<name>: the signature as a TVM-FFI string.
inline int doc(const KilnSignature& sig, Any* result) noexcept {
  StringFromByteArrayFn make = string_from_byte_array().get();
  if (make == nullptr || result == nullptr) {
    return raise(KILN_ERR_LAUNCH, std::string(sig.name) + ": the host has no TVM-FFI string API");
  }
  const ByteArray text{sig.text, std::strlen(sig.text)};
  return make(&text, result);
}

}  // namespace kiln::tvm_ffi

// Exports kiln_<name> (with kiln_signature_<name>) as the TVM-FFI function `name`.
#define KILN_TVM_FFI_EXPORT(name)                                                                 \
  extern "C" __attribute__((visibility("default"))) int __tvm_ffi_##name(                         \
      void* /*handle*/, const ::kiln::tvm_ffi::Any* args, int32_t num_args,                       \
      ::kiln::tvm_ffi::Any* result) {                                                             \
    return ::kiln::tvm_ffi::safe_call(kiln_##name, *kiln_signature_##name(), args, num_args,      \
                                      result);                                                    \
  }                                                                                               \
  extern "C" __attribute__((visibility("default"))) int __tvm_ffi__doc_##name(                    \
      void* /*handle*/, const ::kiln::tvm_ffi::Any* /*args*/, int32_t /*num_args*/,               \
      ::kiln::tvm_ffi::Any* result) {                                                             \
    return ::kiln::tvm_ffi::doc(*kiln_signature_##name(), result);                                \
  }
