// kiln._kiln: calls kiln library functions with any DLPack tensors (torch, JAX, CuPy, NumPy),
// zero-copy, on the framework's current stream.
//
// The call path is written against the CPython API directly (a vectorcall type), because it is
// the product: per call it does one type-cache lookup per argument, takes each DLTensor through
// the framework's DLPack C exchange API where it has one (torch >= 2.10: no allocation, no Python
// call) or `__dlpack__` otherwise, then calls the kernel through the contract (kiln_abi.h), which
// validates every argument (validate.h). Failures raise TypeError / ValueError with the message
// the library wrote; nothing a caller passes reaches the kernel unchecked. Device workspace comes
// from the framework's allocator or cudaMallocAsync (DeviceWorkspace below), host workspace from
// a per-thread buffer.
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>

#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "dlpack_exchange.h"
#include "kiln/runtime/kiln_abi.h"
#include "kiln/runtime/validate.h"

namespace kiln::py {
namespace {

constexpr int32_t kMaxArgs = 64;

// ---------------------------------------------------------------------------------------------
// How to get a DLTensor out of an object of a given Python type, decided once per type.
enum class Route {
  kExchangeDLTensor,  // api->dltensor_from_py_object_no_sync: fills a DLTensor, borrows
  kExchangeManaged,   // api->managed_tensor_from_py_object_no_sync: owned, released after the call
  kDunderVersioned,   // obj.__dlpack__(max_version=(1, 0), stream=...)
  kDunderLegacy,      // obj.__dlpack__(stream=...) (producers without max_version)
  kNotTensor,
};

struct TypeRoute {
  PyTypeObject* type = nullptr;  // strong reference while cached
  Route route = Route::kNotTensor;
  const ExchangeAPI* api = nullptr;
  bool is_cupy = false;  // its current stream is cupy.cuda.get_current_stream()
};

constexpr int kRouteCacheSize = 16;
TypeRoute g_routes[kRouteCacheSize];
int g_num_routes = 0;

PyObject* g_str_dlpack = nullptr;             // "__dlpack__"
PyObject* g_str_exchange = nullptr;           // "__dlpack_c_exchange_api__"
PyObject* g_str_dlpack_device = nullptr;      // "__dlpack_device__"
PyObject* g_kwnames_versioned = nullptr;      // ("max_version", "stream")
PyObject* g_kwnames_legacy = nullptr;         // ("stream",)
PyObject* g_max_version = nullptr;            // (1, 0)

const ExchangeAPI* exchange_api_of(PyTypeObject* type) {
  PyObject* attr = PyObject_GetAttr(reinterpret_cast<PyObject*>(type), g_str_exchange);
  if (attr == nullptr) {
    PyErr_Clear();
    return nullptr;
  }
  const ExchangeAPI* api = nullptr;
  if (PyCapsule_CheckExact(attr) && PyCapsule_IsValid(attr, "dlpack_exchange_api")) {
    api = static_cast<const ExchangeAPI*>(PyCapsule_GetPointer(attr, "dlpack_exchange_api"));
  } else if (PyLong_Check(attr)) {
    api = static_cast<const ExchangeAPI*>(PyLong_AsVoidPtr(attr));
  }
  Py_DECREF(attr);
  PyErr_Clear();
  if (api != nullptr && api->header.version.major != 1) return nullptr;  // an unknown layout
  return api;
}

TypeRoute route_of(PyTypeObject* type) {
  for (int i = 0; i < g_num_routes; ++i) {
    if (g_routes[i].type == type) return g_routes[i];
  }
  TypeRoute r;
  r.type = type;
  if (const ExchangeAPI* api = exchange_api_of(type)) {
    r.api = api;
    r.route = api->dltensor_from_py_object_no_sync ? Route::kExchangeDLTensor
                                                   : Route::kExchangeManaged;
  } else if (PyObject_HasAttr(reinterpret_cast<PyObject*>(type), g_str_dlpack)) {
    r.route = Route::kDunderVersioned;
  }
  const char* name = type->tp_name ? type->tp_name : "";
  PyObject* module = PyObject_GetAttrString(reinterpret_cast<PyObject*>(type), "__module__");
  if (module != nullptr && PyUnicode_Check(module)) {
    const char* m = PyUnicode_AsUTF8(module);
    r.is_cupy = m != nullptr && std::strncmp(m, "cupy", 4) == 0;
  }
  Py_XDECREF(module);
  PyErr_Clear();
  r.is_cupy = r.is_cupy || std::strncmp(name, "cupy", 4) == 0;
  if (g_num_routes == kRouteCacheSize) return r;  // rare: many tensor types, not cached
  Py_INCREF(type);
  g_routes[g_num_routes] = r;
  return g_routes[g_num_routes++];
}

void set_route(PyTypeObject* type, Route route) {
  for (int i = 0; i < g_num_routes; ++i) {
    if (g_routes[i].type == type) g_routes[i].route = route;
  }
}

// ---------------------------------------------------------------------------------------------
// What a call must release after the kernel returns.
struct Releases {
  ManagedTensorVersioned* versioned[kMaxArgs];
  DLManagedTensor* legacy[kMaxArgs];
  int num_versioned = 0;
  int num_legacy = 0;
  ~Releases() {
    if (num_versioned == 0 && num_legacy == 0) return;
    // A deleter may run Python code (a producer written in Python); keep a pending exception.
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    for (int i = 0; i < num_versioned; ++i) {
      if (versioned[i]->deleter) versioned[i]->deleter(versioned[i]);
    }
    for (int i = 0; i < num_legacy; ++i) {
      if (legacy[i]->deleter) legacy[i]->deleter(legacy[i]);
    }
    PyErr_Restore(type, value, traceback);
  }
};

// ---------------------------------------------------------------------------------------------
// The CUDA runtime's stream-ordered allocator, looked up in a CUDA kiln library's dependencies
// (generated libraries link libcudart; the extension itself does not).
struct CudaAllocator {
  int (*malloc_async)(void** ptr, size_t bytes, void* stream) = nullptr;
  int (*free_async)(void* ptr, void* stream) = nullptr;
  const char* (*error_string)(int error) = nullptr;
};

// Device workspace of one call: allocated before the launch, released after it; the allocators
// used are stream-ordered, so releasing while the kernel runs is safe. Order of preference:
//   1. the framework's allocator (DLPack C exchange API's managed_tensor_allocator, e.g. torch's
//      caching allocator), when the kernel runs on that framework's current stream;
//   2. cudaMallocAsync / cudaFreeAsync on the call's stream (an explicit stream=, CuPy, JAX...).
// 256-byte aligned: generated code carves its temporaries at 256-byte offsets.
class DeviceWorkspace {
 public:
  DeviceWorkspace() = default;
  DeviceWorkspace(const DeviceWorkspace&) = delete;
  DeviceWorkspace& operator=(const DeviceWorkspace&) = delete;
  ~DeviceWorkspace() {
    if (managed_ != nullptr && managed_->deleter != nullptr) managed_->deleter(managed_);
    if (raw_ != nullptr && cuda_ != nullptr) cuda_->free_async(raw_, stream_);
  }

  // Returns "" on success, else why no workspace could be had.
  std::string allocate(size_t bytes, DLDevice device, void* stream, ManagedTensorAllocator framework,
                       const CudaAllocator* cuda) {
    const size_t padded = bytes + kAlignment;
    if (framework != nullptr) {
      int64_t shape[1] = {static_cast<int64_t>(padded)};
      DLTensor prototype{};
      prototype.device = device;
      prototype.ndim = 1;
      prototype.dtype = DLDataType{kDLUInt, 8, 1};
      prototype.shape = shape;
      std::string error;
      if (framework(&prototype, &managed_, &error, record_error) != 0 || managed_ == nullptr ||
          managed_->dl_tensor.data == nullptr) {
        managed_ = nullptr;
        return "the framework's allocator failed (" + error + ")";
      }
      data_ = align(static_cast<char*>(managed_->dl_tensor.data) + managed_->dl_tensor.byte_offset);
      return "";
    }
    if (cuda == nullptr || cuda->malloc_async == nullptr || cuda->free_async == nullptr) {
      return "no allocator: the tensors' framework offers none through the DLPack C exchange API "
             "and the library does not link libcudart (cudaMallocAsync)";
    }
    if (const int e = cuda->malloc_async(&raw_, padded, stream); e != 0) {
      raw_ = nullptr;
      return std::string("cudaMallocAsync failed (") + (cuda->error_string ? cuda->error_string(e) : "?") + ")";
    }
    cuda_ = cuda;
    stream_ = stream;
    data_ = align(static_cast<char*>(raw_));
    return "";
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

  ManagedTensorVersioned* managed_ = nullptr;
  const CudaAllocator* cuda_ = nullptr;
  void* raw_ = nullptr;
  void* stream_ = nullptr;
  void* data_ = nullptr;
};

// ---------------------------------------------------------------------------------------------
struct FunctionObject {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  const KilnFunction* function;
  const KilnSignature* signature;
  KilnLastErrorFn last_error;
  const CudaAllocator* cuda;  // of the library; never freed, as the library is never closed
  PyObject* doc;
  PyObject* library_path;
};

PyObject* raise_status(int32_t status, const std::string& message) {
  const char* kind = abi::status_error_kind(status);
  PyObject* type = std::strcmp(kind, "TypeError") == 0    ? PyExc_TypeError
                   : std::strcmp(kind, "ValueError") == 0 ? PyExc_ValueError
                                                          : PyExc_RuntimeError;
  PyErr_SetString(type, message.c_str());
  return nullptr;
}

// Replaces the pending exception (raised by a producer's DLPack export) with one that names the
// function and the argument, chained to the original.
PyObject* raise_export_error(const KilnSignature& sig, int32_t index) {
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  PyErr_NormalizeException(&type, &value, &traceback);
  std::string original = "unknown error";
  if (value != nullptr) {
    if (PyObject* text = PyObject_Str(value)) {
      if (const char* utf8 = PyUnicode_AsUTF8(text)) original = utf8;
      Py_DECREF(text);
    }
  }
  PyErr_Clear();
  const std::string what = std::string(sig.params[index].name) +
                           " could not be taken through DLPack (" +
                           (type ? reinterpret_cast<PyTypeObject*>(type)->tp_name : "error") +
                           ": " + original + ")";
  PyErr_SetString(PyExc_ValueError, abi::format_argument_error(sig, what).c_str());
  if (value != nullptr) {
    PyObject *type2, *value2, *traceback2;
    PyErr_Fetch(&type2, &value2, &traceback2);
    PyErr_NormalizeException(&type2, &value2, &traceback2);
    PyException_SetCause(value2, value);  // steals value
    Py_INCREF(value);
    PyException_SetContext(value2, value);  // steals the new reference
    PyErr_Restore(type2, value2, traceback2);
  }
  Py_XDECREF(type);
  Py_XDECREF(traceback);
  return nullptr;
}

// The DLPack stream value that asks a producer to order its work before ours: 1 is CUDA's legacy
// default stream (0 is not allowed for CUDA), anything else is the stream's address.
PyObject* dlpack_stream_argument(const KilnSignature& sig, void* stream) {
  if (sig.device_type == kDLCPU) Py_RETURN_NONE;
  if (stream == nullptr) return PyLong_FromLong(1);
  return PyLong_FromVoidPtr(stream);
}

void* cupy_current_stream() {
  PyObject* cuda = PyImport_ImportModule("cupy.cuda");
  if (cuda == nullptr) {
    PyErr_Clear();
    return nullptr;
  }
  PyObject* stream = PyObject_CallMethod(cuda, "get_current_stream", nullptr);
  Py_DECREF(cuda);
  if (stream == nullptr) {
    PyErr_Clear();
    return nullptr;
  }
  PyObject* ptr = PyObject_GetAttrString(stream, "ptr");
  Py_DECREF(stream);
  void* result = ptr ? PyLong_AsVoidPtr(ptr) : nullptr;
  Py_XDECREF(ptr);
  PyErr_Clear();
  return result;
}

// Takes the DLTensor of `obj` through `__dlpack__`. Returns false with an exception set.
bool tensor_from_dunder(const KilnSignature& sig, int32_t index, PyObject* obj,
                        const TypeRoute& route, void* stream, DLTensor* out, bool* read_only,
                        Releases* releases) {
  PyObject* stream_arg = dlpack_stream_argument(sig, stream);
  if (stream_arg == nullptr) return false;
  PyObject* capsule = nullptr;
  if (route.route == Route::kDunderVersioned) {
    PyObject* call_args[] = {obj, g_max_version, stream_arg};
    capsule = PyObject_VectorcallMethod(g_str_dlpack, call_args, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                        g_kwnames_versioned);
    if (capsule == nullptr && PyErr_ExceptionMatches(PyExc_TypeError)) {
      // A producer from before DLPack 1.0 has no max_version.
      PyErr_Clear();
      set_route(route.type, Route::kDunderLegacy);
    }
  }
  if (capsule == nullptr && !PyErr_Occurred()) {
    PyObject* call_args[] = {obj, stream_arg};
    capsule = PyObject_VectorcallMethod(g_str_dlpack, call_args, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                        g_kwnames_legacy);
  }
  Py_DECREF(stream_arg);
  if (capsule == nullptr) {
    // A CPU array asked for a CUDA stream (or the reverse) fails in the producer; say which
    // device the argument is on instead, as validation would.
    PyObject* device = PyObject_CallMethodNoArgs(obj, g_str_dlpack_device);
    if (device != nullptr && PyTuple_Check(device) && PyTuple_GET_SIZE(device) == 2) {
      const long type = PyLong_AsLong(PyTuple_GET_ITEM(device, 0));
      Py_DECREF(device);
      if (type != sig.device_type && !PyErr_Occurred()) {
        PyErr_Clear();
        raise_status(KILN_ERR_DEVICE,
                     abi::format_argument_error(sig, std::string(sig.params[index].name) +
                                                         " is on " + abi::device_type_name(type) +
                                                         ", expected " +
                                                         abi::device_type_name(sig.device_type)));
        return false;
      }
    } else {
      Py_XDECREF(device);
    }
    if (!PyErr_Occurred()) {
      PyErr_SetString(PyExc_ValueError, "__dlpack__ failed");
    }
    raise_export_error(sig, index);
    return false;
  }
  bool ok = false;
  if (PyCapsule_IsValid(capsule, "dltensor_versioned")) {
    auto* managed = static_cast<ManagedTensorVersioned*>(PyCapsule_GetPointer(capsule, "dltensor_versioned"));
    if (managed->version.major != 1) {
      PyErr_SetString(PyExc_ValueError,
                      abi::format_argument_error(sig, std::string(sig.params[index].name) +
                                                          " has an unsupported DLPack version")
                          .c_str());
    } else {
      PyCapsule_SetName(capsule, "used_dltensor_versioned");
      releases->versioned[releases->num_versioned++] = managed;
      *out = managed->dl_tensor;
      *read_only = (managed->flags & kDLPackFlagReadOnly) != 0;
      ok = true;
    }
  } else if (PyCapsule_IsValid(capsule, "dltensor")) {
    auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
    PyCapsule_SetName(capsule, "used_dltensor");
    releases->legacy[releases->num_legacy++] = managed;
    *out = managed->dl_tensor;
    ok = true;
  } else {
    PyErr_SetString(PyExc_TypeError,
                    abi::format_argument_error(sig, std::string(sig.params[index].name) +
                                                        ".__dlpack__() did not return a DLPack capsule")
                        .c_str());
  }
  Py_DECREF(capsule);  // the managed tensor stays alive until Releases calls its deleter
  return ok;
}

PyObject* function_call(PyObject* self_object, PyObject* const* args, size_t nargsf,
                        PyObject* kwnames) {
  auto* self = reinterpret_cast<FunctionObject*>(self_object);
  const KilnSignature& sig = *self->signature;
  const Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);

  // The only keyword is stream= (an int address, e.g. torch.cuda.Stream().cuda_stream).
  bool have_stream = false;
  void* stream = nullptr;
  if (kwnames != nullptr) {
    const Py_ssize_t nkw = PyTuple_GET_SIZE(kwnames);
    for (Py_ssize_t i = 0; i < nkw; ++i) {
      PyObject* key = PyTuple_GET_ITEM(kwnames, i);
      if (PyUnicode_CompareWithASCIIString(key, "stream") != 0) {
        return raise_status(KILN_ERR_ARGUMENT_COUNT,
                            abi::format_argument_error(sig, std::string("unexpected keyword argument '") +
                                                                PyUnicode_AsUTF8(key) +
                                                                "', expected only stream="));
      }
      PyObject* value = args[nargs + i];
      if (value != Py_None) {
        stream = PyLong_AsVoidPtr(value);
        if (stream == nullptr && PyErr_Occurred()) {
          PyErr_Clear();
          return raise_status(KILN_ERR_TYPE,
                              abi::format_argument_error(sig, std::string("stream is ") +
                                                                  Py_TYPE(value)->tp_name +
                                                                  ", expected an int (a cudaStream_t address)"));
        }
        have_stream = true;
      }
    }
  }
  if (nargs != sig.num_params || nargs > kMaxArgs) {
    return raise_status(KILN_ERR_ARGUMENT_COUNT,
                        abi::format_argument_error(sig, "takes " + std::to_string(sig.num_params) +
                                                            " tensors, got " + std::to_string(nargs)));
  }
  if (!have_stream && sig.device_type != kDLCPU && nargs > 0) {
    // The stream of the first argument's framework, when it says.
    const TypeRoute route = route_of(Py_TYPE(args[0]));
    if (route.is_cupy) stream = cupy_current_stream();
  }

  DLTensor tensors[kMaxArgs];
  Releases releases;
  uint64_t read_only_mask = 0;
  const ExchangeAPI* stream_api = nullptr;
  for (Py_ssize_t i = 0; i < nargs; ++i) {
    PyObject* obj = args[i];
    const TypeRoute route = route_of(Py_TYPE(obj));
    switch (route.route) {
      case Route::kExchangeDLTensor:
        if (route.api->dltensor_from_py_object_no_sync(obj, &tensors[i]) != 0) {
          return raise_export_error(sig, static_cast<int32_t>(i));
        }
        if (stream_api == nullptr) stream_api = route.api;
        break;
      case Route::kExchangeManaged: {
        ManagedTensorVersioned* managed = nullptr;
        if (route.api->managed_tensor_from_py_object_no_sync(obj, &managed) != 0 || managed == nullptr) {
          return raise_export_error(sig, static_cast<int32_t>(i));
        }
        releases.versioned[releases.num_versioned++] = managed;
        tensors[i] = managed->dl_tensor;
        if ((managed->flags & kDLPackFlagReadOnly) != 0) read_only_mask |= uint64_t{1} << i;
        if (stream_api == nullptr) stream_api = route.api;
        break;
      }
      case Route::kDunderVersioned:
      case Route::kDunderLegacy: {
        bool read_only = false;
        if (!tensor_from_dunder(sig, static_cast<int32_t>(i), obj, route, stream, &tensors[i],
                                &read_only, &releases)) {
          return nullptr;
        }
        if (read_only) read_only_mask |= uint64_t{1} << i;
        break;
      }
      case Route::kNotTensor:
        return raise_status(KILN_ERR_TYPE,
                            abi::format_argument_error(sig, std::string(sig.params[i].name) + " is " +
                                                                Py_TYPE(obj)->tp_name +
                                                                ", expected a tensor (an object with "
                                                                "__dlpack__)"));
    }
  }
  if (!have_stream && stream_api != nullptr && sig.device_type != kDLCPU && nargs > 0 &&
      tensors[0].device.device_type != kDLCPU && stream_api->current_work_stream != nullptr) {
    void* current = nullptr;
    if (stream_api->current_work_stream(tensors[0].device.device_type, tensors[0].device.device_id,
                                        &current) != 0) {
      return nullptr;
    }
    stream = current;
  }

  // Read-only outputs, and the workspace size, need the symbol values: validate here as well
  // (the kernel validates again; both read the same signature through validate.h).
  void* workspace = nullptr;
  DeviceWorkspace device_workspace;
  if (read_only_mask != 0 || sig.workspace_bytes != nullptr) {
    std::vector<int64_t> symbols(static_cast<size_t>(sig.num_symbols) + 1);
    std::string message;
    const int32_t status = abi::validate_arguments(sig, tensors, static_cast<int32_t>(nargs),
                                                   symbols.data(), &message, read_only_mask);
    if (status != KILN_OK) return raise_status(status, message);
    const size_t bytes = sig.workspace_bytes ? sig.workspace_bytes(symbols.data()) : 0;
    if (bytes > 0 && sig.device_type == kDLCPU) {
      static thread_local std::vector<std::max_align_t> host_workspace;
      const size_t words = (bytes + sizeof(std::max_align_t) - 1) / sizeof(std::max_align_t);
      if (host_workspace.size() < words) host_workspace.resize(words);
      workspace = host_workspace.data();
    } else if (bytes > 0) {
      // The framework's allocator only when the kernel runs on the framework's current stream.
      const ManagedTensorAllocator framework =
          !have_stream && stream_api != nullptr ? stream_api->managed_tensor_allocator : nullptr;
      const std::string why = device_workspace.allocate(bytes, tensors[0].device, stream, framework, self->cuda);
      if (!why.empty()) {
        return raise_status(KILN_ERR_WORKSPACE,
                            abi::format_argument_error(sig, "needs " + std::to_string(bytes) +
                                                                " bytes of device workspace: " + why));
      }
      workspace = device_workspace.data();
    }
  }

  const int32_t status =
      self->function->call(tensors, static_cast<int32_t>(nargs), workspace, stream);
  if (status != KILN_OK) {
    const char* message = self->last_error ? self->last_error() : nullptr;
    return raise_status(status, message && *message ? std::string(message)
                                                    : abi::format_argument_error(sig, "failed with status " +
                                                                                          std::to_string(status)));
  }
  Py_RETURN_NONE;
}

void function_dealloc(PyObject* self_object) {
  auto* self = reinterpret_cast<FunctionObject*>(self_object);
  Py_XDECREF(self->doc);
  Py_XDECREF(self->library_path);
  Py_TYPE(self_object)->tp_free(self_object);
}

PyObject* function_repr(PyObject* self_object) {
  auto* self = reinterpret_cast<FunctionObject*>(self_object);
  return PyUnicode_FromFormat("<kiln function %s>", self->signature->text);
}

PyObject* function_get_doc(PyObject* self_object, void*) {
  auto* self = reinterpret_cast<FunctionObject*>(self_object);
  Py_INCREF(self->doc);
  return self->doc;
}
PyObject* function_get_name(PyObject* self_object, void*) {
  return PyUnicode_FromString(reinterpret_cast<FunctionObject*>(self_object)->signature->name);
}
PyObject* function_get_signature(PyObject* self_object, void*) {
  return PyUnicode_FromString(reinterpret_cast<FunctionObject*>(self_object)->signature->text);
}
PyObject* function_get_json(PyObject* self_object, void*) {
  const char* json = reinterpret_cast<FunctionObject*>(self_object)->signature->json;
  return PyUnicode_FromString(json ? json : "");
}
PyObject* function_get_device(PyObject* self_object, void*) {
  return PyUnicode_FromString(abi::device_type_name(reinterpret_cast<FunctionObject*>(self_object)->signature->device_type));
}
PyObject* function_get_address(PyObject* self_object, void*) {
  return PyLong_FromVoidPtr(reinterpret_cast<void*>(reinterpret_cast<FunctionObject*>(self_object)->function->call));
}

PyGetSetDef function_getset[] = {
    {"__doc__", function_get_doc, nullptr, nullptr, nullptr},
    {"__name__", function_get_name, nullptr, nullptr, nullptr},
    {"signature", function_get_signature, nullptr,
     "The signature, e.g. gemv(x: Tensor([m, 2048], bfloat16), ...)", nullptr},
    {"signature_json", function_get_json, nullptr, "The signature, machine-readable", nullptr},
    {"device", function_get_device, nullptr, "'cpu' or 'cuda'", nullptr},
    {"address", function_get_address, nullptr,
     "Address of the C entry point kiln_<name> (kiln_abi.h), for ctypes or C++ callers", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

PyTypeObject g_function_type = {PyVarObject_HEAD_INIT(nullptr, 0)};

// ---------------------------------------------------------------------------------------------
std::string docstring_of(const KilnSignature& sig) {
  std::string doc = std::string(sig.text) + "\n\nCalls the kiln kernel `" + sig.name + "` on " +
                    (sig.device_type == kDLCPU ? "the CPU" : "the GPU") +
                    " with DLPack tensors (torch, JAX, CuPy, NumPy), zero-copy, in signature order "
                    "(inputs, then outputs, which it writes). Returns None.\n\nParameters\n----------\n";
  for (int32_t i = 0; i < sig.num_params; ++i) {
    const KilnParam& p = sig.params[i];
    doc += std::string(p.name) + " : " + abi::dl_dtype_name(p.dtype) + " tensor, shape [";
    for (int32_t d = 0; d < p.ndim; ++d) {
      const KilnDim dim = p.shape[d];
      doc += (d ? ", " : "") + (KILN_DIM_IS_SYMBOL(dim) ? std::string(sig.symbol_names[KILN_DIM_SYMBOL_INDEX(dim)])
                                                         : std::to_string(dim));
    }
    doc += std::string("]") + (p.is_output ? ", output" : ", input") + ", row-major, " +
           std::to_string(p.alignment) + "-byte aligned\n";
  }
  if (sig.device_type != kDLCPU) {
    doc += "stream : int, optional (keyword)\n    cudaStream_t to launch on; by default the "
           "current stream of the first tensor's framework (torch, CuPy), else the legacy default "
           "stream\n";
  }
  doc += "\nRaises TypeError (not a tensor, wrong dtype, device or count) or ValueError (shape, "
         "layout, alignment, divisibility).";
  return doc;
}

PyObject* open_library(PyObject*, PyObject* arg) {
  PyObject* path_bytes = nullptr;
  if (!PyUnicode_FSConverter(arg, &path_bytes)) return nullptr;
  const std::string path = PyBytes_AS_STRING(path_bytes);
  Py_DECREF(path_bytes);
  // Never closed: functions hold raw pointers into the library.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    PyErr_Format(PyExc_OSError, "kiln.load: cannot load %s: %s", path.c_str(), why ? why : "?");
    return nullptr;
  }
  auto functions_fn = reinterpret_cast<KilnLibraryFunctionsFn>(dlsym(handle, "kiln_library_functions"));
  auto last_error_fn = reinterpret_cast<KilnLastErrorFn>(dlsym(handle, "kiln_last_error"));
  if (functions_fn == nullptr || last_error_fn == nullptr) {
    PyErr_Format(PyExc_ValueError,
                 "kiln.load: %s is not a kiln library (it exports no kiln_library_functions / "
                 "kiln_last_error)",
                 path.c_str());
    return nullptr;
  }
  const KilnFunction* table = nullptr;
  const int32_t count = functions_fn(&table);
  if (count < 0 || (count > 0 && table == nullptr)) {
    PyErr_Format(PyExc_ValueError, "kiln.load: %s returned a bad function table", path.c_str());
    return nullptr;
  }
  auto* cuda = new CudaAllocator;  // lives as long as the library (never closed)
  cuda->malloc_async = reinterpret_cast<decltype(cuda->malloc_async)>(dlsym(handle, "cudaMallocAsync"));
  cuda->free_async = reinterpret_cast<decltype(cuda->free_async)>(dlsym(handle, "cudaFreeAsync"));
  cuda->error_string = reinterpret_cast<decltype(cuda->error_string)>(dlsym(handle, "cudaGetErrorString"));
  PyObject* path_object = PyUnicode_FromString(path.c_str());
  PyObject* list = PyList_New(0);
  for (int32_t i = 0; i < count && list != nullptr; ++i) {
    const KilnSignature* sig = table[i].signature ? table[i].signature() : nullptr;
    if (sig == nullptr || table[i].call == nullptr || sig->abi_version != KILN_ABI_VERSION) {
      PyErr_Format(PyExc_ValueError,
                   "kiln.load: function %d (%s) of %s has no signature or kiln ABI version %d, "
                   "expected version %d",
                   i, table[i].name ? table[i].name : "?", path.c_str(),
                   sig ? sig->abi_version : -1, KILN_ABI_VERSION);
      Py_CLEAR(list);
      break;
    }
    auto* f = PyObject_New(FunctionObject, &g_function_type);
    if (f == nullptr) {
      Py_CLEAR(list);
      break;
    }
    f->vectorcall = function_call;
    f->function = &table[i];
    f->signature = sig;
    f->last_error = last_error_fn;
    f->cuda = cuda;
    f->doc = PyUnicode_FromString(docstring_of(*sig).c_str());
    Py_INCREF(path_object);
    f->library_path = path_object;
    PyList_Append(list, reinterpret_cast<PyObject*>(f));
    Py_DECREF(f);
  }
  Py_DECREF(path_object);
  return list;
}

PyMethodDef module_methods[] = {
    {"open_library", open_library, METH_O,
     "open_library(path) -> list of functions of the kiln library at path"},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_kiln",
                          "kiln's C++ extension: loads kiln libraries and calls their functions.",
                          -1, module_methods, nullptr, nullptr, nullptr, nullptr};

}  // namespace
}  // namespace kiln::py

PyMODINIT_FUNC PyInit__kiln(void) {
  using namespace kiln::py;
  g_function_type.tp_name = "kiln.Function";
  g_function_type.tp_basicsize = sizeof(FunctionObject);
  g_function_type.tp_dealloc = function_dealloc;
  g_function_type.tp_repr = function_repr;
  g_function_type.tp_call = PyVectorcall_Call;
  g_function_type.tp_vectorcall_offset = offsetof(FunctionObject, vectorcall);
  g_function_type.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL;
  g_function_type.tp_getset = function_getset;
  g_function_type.tp_new = nullptr;
  if (PyType_Ready(&g_function_type) < 0) return nullptr;

  g_str_dlpack = PyUnicode_InternFromString("__dlpack__");
  g_str_exchange = PyUnicode_InternFromString("__dlpack_c_exchange_api__");
  g_str_dlpack_device = PyUnicode_InternFromString("__dlpack_device__");
  g_kwnames_versioned = Py_BuildValue("(ss)", "max_version", "stream");
  g_kwnames_legacy = Py_BuildValue("(s)", "stream");
  g_max_version = Py_BuildValue("(ii)", 1, 0);
  if (!g_str_dlpack || !g_str_exchange || !g_str_dlpack_device || !g_kwnames_versioned ||
      !g_kwnames_legacy || !g_max_version) {
    return nullptr;
  }
  PyObject* module = PyModule_Create(&module_def);
  if (module == nullptr) return nullptr;
  Py_INCREF(&g_function_type);
  if (PyModule_AddObject(module, "Function", reinterpret_cast<PyObject*>(&g_function_type)) < 0) {
    Py_DECREF(&g_function_type);
    Py_DECREF(module);
    return nullptr;
  }
  PyModule_AddIntConstant(module, "ABI_VERSION", KILN_ABI_VERSION);
  return module;
}
