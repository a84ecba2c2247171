#pragma once
// Argument validation for the kernel contract, driven by the signature: the one place where a
// call's tensors are checked (DESIGN.md, "The one contract"). Header-only so that every generated
// library, plugin and FFI wrapper compiles the same checks in without linking kiln.
//
// Cost: a few comparisons per dimension, no allocation unless a check fails.
#include <cstdint>
#include <cstring>
#include <string>

#include "kiln/runtime/kiln_abi.h"

namespace kiln::abi {

inline const char* dl_dtype_name(DLDataType t) {
  switch (t.code) {
    case kDLFloat:
      return t.bits == 16 ? "float16" : t.bits == 32 ? "float32" : t.bits == 64 ? "float64" : t.bits == 4 ? "float4_e2m1" : "float?";
    case kDLBfloat:
      return t.bits == 16 ? "bfloat16" : "bfloat?";
    case kDLInt:
      return t.bits == 8    ? "int8"
             : t.bits == 16 ? "int16"
             : t.bits == 32 ? "int32"
             : t.bits == 64 ? "int64"
             : t.bits == 4  ? "int4"
             : t.bits == 2  ? "int2"
                            : "int?";
    case kDLUInt:
      return t.bits == 4 || t.bits == 2 ? (t.bits == 4 ? "uint4" : "uint2")
             : t.bits == 1 || t.bits == 8 ? (t.bits == 1 ? "bool" : "uint8")
             : t.bits == 16             ? "uint16"
             : t.bits == 32             ? "uint32"
             : t.bits == 64             ? "uint64"
                                        : "uint?";
    default:
      return t.code == 6 /* kDLBool in DLPack >= 0.8 */ ? "bool" : "unknown";
  }
}

inline bool same_dtype(DLDataType a, DLDataType b) {
  return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes;
}

inline std::string shape_to_string(const int64_t* shape, int32_t ndim) {
  std::string s = "[";
  for (int32_t i = 0; i < ndim; ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// The Python exception kind a status maps to (TVM-FFI error kinds use the same names): a wrong
// kind of argument (not a tensor, wrong dtype or device, wrong count) is a TypeError; a tensor of
// the right kind with a wrong shape, layout or alignment is a ValueError.
inline const char* status_error_kind(int32_t status) {
  switch (status) {
    case KILN_ERR_ARGUMENT_COUNT:
    case KILN_ERR_DTYPE:
    case KILN_ERR_DEVICE:
    case KILN_ERR_TYPE:
      return "TypeError";
    case KILN_ERR_SHAPE:
    case KILN_ERR_LAYOUT:
    case KILN_ERR_WORKSPACE:
      return "ValueError";
    default:
      return "RuntimeError";
  }
}

inline const char* device_type_name(int32_t device_type) {
  switch (device_type) {
    case kDLCPU:
      return "cpu";
    case kDLCUDA:
      return "cuda";
    case kDLCUDAHost:
      return "cuda_host";
    case 13: /* kDLCUDAManaged */
      return "cuda_managed";
    default:
      return "device type ?";
  }
}

// The one message format of a failed call: the signature (which names the function), then what
// was found and what was expected, e.g.
//   gemv(x: Tensor([m, 2048], bfloat16), ...): x.shape[1] is 1024, expected 2048
inline std::string format_argument_error(const KilnSignature& sig, const std::string& what) {
  return std::string(sig.text ? sig.text : sig.name) + ": " + what;
}

// Fails with `status` and a message in the format above.
class ArgumentError {
 public:
  ArgumentError(const KilnSignature& sig, std::string* out) : sig_(sig), out_(out) {}
  int32_t fail(int32_t status, const std::string& what) const {
    if (out_) *out_ = format_argument_error(sig_, what);
    return status;
  }

 private:
  const KilnSignature& sig_;
  std::string* out_;
};

// Checks `args` against `sig`. On success binds every symbol into `symbol_values`
// (sig.num_symbols entries) and returns KILN_OK; otherwise returns the status and fills `message`.
// Bit i of `read_only_mask` says that args[i] must not be written (an adapter that knows it, e.g.
// from DLPack's read-only flag, passes it; an output parameter then fails with KILN_ERR_TYPE).
inline int32_t validate_arguments(const KilnSignature& sig, const DLTensor* args, int32_t num_args,
                                  int64_t* symbol_values, std::string* message,
                                  uint64_t read_only_mask = 0) {
  ArgumentError error(sig, message);
  if (num_args != sig.num_params) {
    return error.fail(KILN_ERR_ARGUMENT_COUNT, "takes " + std::to_string(sig.num_params) +
                                                   " tensors, got " + std::to_string(num_args));
  }
  if (args == nullptr) return error.fail(KILN_ERR_ARGUMENT_COUNT, "argument array is null");
  for (int32_t s = 0; s < sig.num_symbols; ++s) symbol_values[s] = -1;
  // Where each of the first symbols was bound, for the message of a later disagreement.
  constexpr int32_t kTrackedSymbols = 32;
  int32_t bound_arg[kTrackedSymbols] = {};
  int32_t bound_dim[kTrackedSymbols] = {};
  const DLDevice device = args[0].device;
  for (int32_t i = 0; i < num_args; ++i) {
    const KilnParam& p = sig.params[i];
    const DLTensor& t = args[i];
    const std::string arg = p.name;
    if (t.device.device_type != sig.device_type) {
      return error.fail(KILN_ERR_DEVICE, arg + " is on " + device_type_name(t.device.device_type) +
                                             ", expected " + device_type_name(sig.device_type));
    }
    if (t.device.device_id != device.device_id) {
      return error.fail(KILN_ERR_DEVICE, arg + " is on device " + std::to_string(t.device.device_id) +
                                             " but " + sig.params[0].name + " is on device " +
                                             std::to_string(device.device_id));
    }
    if (!same_dtype(t.dtype, p.dtype)) {
      return error.fail(KILN_ERR_DTYPE, arg + ".dtype is " + dl_dtype_name(t.dtype) + ", expected " +
                                            dl_dtype_name(p.dtype));
    }
    if (t.ndim != p.ndim) {
      return error.fail(KILN_ERR_SHAPE, arg + ".ndim is " + std::to_string(t.ndim) + ", expected " +
                                            std::to_string(p.ndim));
    }
    if (t.ndim > 0 && t.shape == nullptr) return error.fail(KILN_ERR_SHAPE, arg + ".shape is null");
    if (p.is_output && i < 64 && (read_only_mask >> i & 1u) != 0) {
      return error.fail(KILN_ERR_TYPE, arg + " is read-only, expected a writable tensor (it is an output)");
    }
    for (int32_t d = 0; d < p.ndim; ++d) {
      const int64_t found = t.shape[d];
      const std::string where = arg + ".shape[" + std::to_string(d) + "] is " + std::to_string(found);
      if (found < 0) return error.fail(KILN_ERR_SHAPE, where + ", expected a size >= 0");
      const KilnDim want = p.shape[d];
      if (!KILN_DIM_IS_SYMBOL(want)) {
        if (found != want) return error.fail(KILN_ERR_SHAPE, where + ", expected " + std::to_string(want));
        continue;
      }
      const int64_t s = KILN_DIM_SYMBOL_INDEX(want);
      if (symbol_values[s] < 0) {
        symbol_values[s] = found;
        if (s < kTrackedSymbols) {
          bound_arg[s] = i;
          bound_dim[s] = d;
        }
      } else if (symbol_values[s] != found) {
        std::string bound_by = "an earlier argument";
        if (s < kTrackedSymbols) {
          bound_by = std::string(sig.params[bound_arg[s]].name) + ".shape[" + std::to_string(bound_dim[s]) + "]";
        }
        return error.fail(KILN_ERR_SHAPE, where + ", expected " + sig.symbol_names[s] + " = " +
                                              std::to_string(symbol_values[s]) + " (from " +
                                              bound_by + ")");
      }
    }
    bool empty = false;
    for (int32_t d = 0; d < t.ndim; ++d) empty = empty || t.shape[d] == 0;
    if (t.strides != nullptr && !empty) {  // an empty tensor's strides say nothing
      int64_t expected = 1;
      for (int32_t d = p.ndim - 1; d >= 0; --d) {
        if (t.shape[d] != 1 && t.strides[d] != expected) {
          return error.fail(KILN_ERR_LAYOUT, arg + " has strides " + shape_to_string(t.strides, t.ndim) +
                                                 ", expected compact row-major strides for shape " +
                                                 shape_to_string(t.shape, t.ndim));
        }
        expected *= t.shape[d];
      }
    }
    const auto address = reinterpret_cast<uintptr_t>(t.data) + t.byte_offset;
    if (p.alignment > 1 && address % static_cast<uintptr_t>(p.alignment) != 0) {
      return error.fail(KILN_ERR_LAYOUT, arg + ".data is not " + std::to_string(p.alignment) +
                                             "-byte aligned");
    }
    if (t.data == nullptr && !empty) return error.fail(KILN_ERR_LAYOUT, arg + ".data is null");
  }
  for (int32_t s = 0; s < sig.num_symbols; ++s) {
    const int64_t v = symbol_values[s];
    if (sig.symbol_divisors && sig.symbol_divisors[s] > 1 && v % sig.symbol_divisors[s] != 0) {
      return error.fail(KILN_ERR_SHAPE, std::string(sig.symbol_names[s]) + " is " + std::to_string(v) +
                                            ", expected a multiple of " +
                                            std::to_string(sig.symbol_divisors[s]));
    }
    if (sig.symbol_minimums && v < sig.symbol_minimums[s]) {
      return error.fail(KILN_ERR_SHAPE, std::string(sig.symbol_names[s]) + " is " + std::to_string(v) +
                                            ", expected at least " +
                                            std::to_string(sig.symbol_minimums[s]));
    }
  }
  return KILN_OK;
}

// The message of the last failed call on this thread, per library (each library that includes
// this header has its own copy, exported as kiln_last_error()).
inline std::string& last_error_storage() {
  static thread_local std::string message;
  return message;
}

}  // namespace kiln::abi
