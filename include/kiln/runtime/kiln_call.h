#pragma once
// Calling kiln library functions from C++ (the seed's "integrate with existing CUDA code"):
// load a library that `kiln compile` produced, wrap existing device pointers as DLTensors, and
// call on your stream. No copies, no allocation per call; validation is the kernel's own
// (validate.h). Header-only; needs only dlopen and DLPack.
//
//     auto lib = kiln::runtime::Library::open("out/libmodel.so");
//     kiln::runtime::Function gemv = lib.function("gemv");
//     using kiln::runtime::TensorRef;
//     TensorRef w(d_w, {n, k}, kiln::runtime::kFloat16), x(d_x, {k}, kiln::runtime::kFloat16),
//               y(d_y, {n}, kiln::runtime::kFloat16);
//     gemv({w.dl(), x.dl(), y.dl()}, stream);   // throws kiln::runtime::CallError on bad input
//
// Functions that need a workspace (signature().workspace_bytes) take it as the last argument;
// workspace_bytes(args) says how much for given arguments.
#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "kiln/runtime/kiln_abi.h"
#include "kiln/runtime/validate.h"

namespace kiln::runtime {

inline constexpr DLDataType kFloat32{kDLFloat, 32, 1};
inline constexpr DLDataType kFloat16{kDLFloat, 16, 1};
inline constexpr DLDataType kBFloat16{kDLBfloat, 16, 1};
inline constexpr DLDataType kInt8{kDLInt, 8, 1};
inline constexpr DLDataType kUInt8{kDLUInt, 8, 1};
inline constexpr DLDataType kInt32{kDLInt, 32, 1};
inline constexpr DLDataType kInt64{kDLInt, 64, 1};

// A failed call or load. `status` is a KilnStatus (0 for load failures); `kind()` is the Python
// exception kind it maps to ("TypeError", "ValueError", ...).
class CallError : public std::runtime_error {
 public:
  CallError(int32_t status, const std::string& message) : std::runtime_error(message), status_(status) {}
  int32_t status() const { return status_; }
  const char* kind() const { return abi::status_error_kind(status_); }

 private:
  int32_t status_;
};

// A compact row-major DLTensor view of memory the caller owns. The DLTensor from dl() points into
// this object (its shape), so it is valid while the TensorRef lives.
class TensorRef {
 public:
  static constexpr int kMaxDims = 8;
  TensorRef(void* data, std::initializer_list<int64_t> shape, DLDataType dtype,
            DLDevice device = {kDLCUDA, 0})
      : data_(data), dtype_(dtype), device_(device) {
    if (shape.size() > kMaxDims) throw CallError(KILN_ERR_SHAPE, "TensorRef: more than 8 dimensions");
    ndim_ = static_cast<int32_t>(shape.size());
    std::copy(shape.begin(), shape.end(), shape_);
  }
  DLTensor dl() const {
    DLTensor t{};
    t.data = data_;
    t.device = device_;
    t.ndim = ndim_;
    t.dtype = dtype_;
    t.shape = const_cast<int64_t*>(shape_);
    t.strides = nullptr;  // compact row-major
    t.byte_offset = 0;
    return t;
  }

 private:
  void* data_;
  DLDataType dtype_;
  DLDevice device_;
  int32_t ndim_ = 0;
  int64_t shape_[kMaxDims] = {};
};

// One function of a loaded library. Cheap to copy; keeps the library loaded.
class Function {
 public:
  Function(std::shared_ptr<void> library, const KilnFunction* function, KilnLastErrorFn last_error_fn)
      : library_(std::move(library)), function_(function), last_error_(last_error_fn) {}

  const char* name() const { return function_->name; }
  const KilnSignature& signature() const { return *function_->signature(); }

  // Calls the kernel on `stream` (a cudaStream_t; ignored by CPU functions). Returns the
  // KilnStatus; on failure last_error() says why. Never throws.
  int32_t try_call(std::span<const DLTensor> args, void* stream = nullptr,
                   void* workspace = nullptr) const noexcept {
    return function_->call(args.data(), static_cast<int32_t>(args.size()), workspace, stream);
  }

  // As try_call, but throws CallError with the kernel's message.
  void operator()(std::span<const DLTensor> args, void* stream = nullptr, void* workspace = nullptr) const {
    const int32_t status = try_call(args, stream, workspace);
    if (status != KILN_OK) throw CallError(status, last_error());
  }
  void operator()(std::initializer_list<DLTensor> args, void* stream = nullptr, void* workspace = nullptr) const {
    (*this)(std::span<const DLTensor>(args.begin(), args.size()), stream, workspace);
  }

  // Bytes of workspace the call with `args` needs (validates them; throws CallError if invalid).
  size_t workspace_bytes(std::span<const DLTensor> args) const {
    const KilnSignature& sig = signature();
    if (sig.workspace_bytes == nullptr) return 0;
    std::vector<int64_t> symbols(static_cast<size_t>(sig.num_symbols) + 1);
    std::string message;
    const int32_t status = abi::validate_arguments(sig, args.data(), static_cast<int32_t>(args.size()),
                                                   symbols.data(), &message);
    if (status != KILN_OK) throw CallError(status, message);
    return sig.workspace_bytes(symbols.data());
  }

  // This thread's last failure message of the function's library.
  std::string last_error() const {
    const char* message = last_error_ ? last_error_() : nullptr;
    return message ? std::string(message) : std::string();
  }

 private:
  std::shared_ptr<void> library_;
  const KilnFunction* function_;
  KilnLastErrorFn last_error_;
};

// A loaded kiln library (dlopen'ed once; closed when the last Library/Function copy goes).
class Library {
 public:
  static Library open(const std::string& path) {
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* why = dlerror();
      throw CallError(0, "kiln: cannot load " + path + ": " + (why ? why : "?"));
    }
    std::shared_ptr<void> library(handle, [](void* h) { dlclose(h); });
    auto functions = reinterpret_cast<KilnLibraryFunctionsFn>(dlsym(handle, "kiln_library_functions"));
    auto last_error = reinterpret_cast<KilnLastErrorFn>(dlsym(handle, "kiln_last_error"));
    if (functions == nullptr || last_error == nullptr) {
      throw CallError(0, "kiln: " + path + " is not a kiln library (no kiln_library_functions / kiln_last_error)");
    }
    const KilnFunction* table = nullptr;
    const int32_t count = functions(&table);
    if (count < 0 || (count > 0 && table == nullptr)) throw CallError(0, "kiln: " + path + ": bad function table");
    for (int32_t i = 0; i < count; ++i) {
      const KilnSignature* sig = table[i].signature ? table[i].signature() : nullptr;
      if (sig == nullptr || sig->abi_version != KILN_ABI_VERSION) {
        throw CallError(0, "kiln: " + path + ": function " + (table[i].name ? table[i].name : "?") +
                               " has no signature of kiln ABI version " + std::to_string(KILN_ABI_VERSION));
      }
    }
    return Library(path, std::move(library), std::span<const KilnFunction>(table, static_cast<size_t>(count)),
                   last_error);
  }

  const std::string& path() const { return path_; }
  std::span<const KilnFunction> functions() const { return functions_; }

  Function function(const std::string& name) const {
    for (const KilnFunction& f : functions_) {
      if (name == f.name) return Function(library_, &f, last_error_);
    }
    std::string known;
    for (const KilnFunction& f : functions_) known += (known.empty() ? "" : ", ") + std::string(f.name);
    throw CallError(0, "kiln: " + path_ + " has no function '" + name + "'; it has: " + known);
  }

 private:
  Library(std::string path, std::shared_ptr<void> library, std::span<const KilnFunction> functions,
          KilnLastErrorFn last_error)
      : path_(std::move(path)), library_(std::move(library)), functions_(functions), last_error_(last_error) {}

  std::string path_;
  std::shared_ptr<void> library_;
  std::span<const KilnFunction> functions_;
  KilnLastErrorFn last_error_;
};

}  // namespace kiln::runtime
