// The kiln library that bench_ffi.py times: two CUDA functions with 3 tensor arguments and the
// full contract (kiln_<fn>, kiln_signature_<fn>, kiln_library_functions, kiln_last_error, TVM-FFI
// exports), plus a bare C entry point for the ctypes row.
//
//   launch3(a, b, c: Tensor([n], float32))    validates, then launches one 1-thread kernel that
//                                              writes c[0] = a[0] + b[0] (checked before timing)
//   validate3(a, b, c: Tensor([n], float32))  validates and launches nothing: the cost of the
//                                              adapter and validation alone
// Build: nvcc -O2 -std=c++20 -arch=sm_90 -shared -Xcompiler -fPIC,-fvisibility=hidden
//        -I include bench/ffi/bench_kernels.cu -o libkiln_bench.so
#include <cuda_runtime.h>

#include <string>

#include "kiln/runtime/kiln_abi.h"
#include "kiln/runtime/tvm_ffi_export.h"
#include "kiln/runtime/validate.h"

#define KILN_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

__global__ void first_sum(const float* a, const float* b, float* c, long long n) {
  if (n > 0) c[0] = a[0] + b[0];
}

constexpr DLDataType kFloat32{kDLFloat, 32, 1};
constexpr KilnDim kShape[] = {KILN_DIM_SYMBOL(0)};
constexpr KilnParam kParams[] = {
    {"a", kFloat32, 1, kShape, 16, 0},
    {"b", kFloat32, 1, kShape, 16, 0},
    {"c", kFloat32, 1, kShape, 16, 1},
};
const char* const kSymbols[] = {"n"};
constexpr int64_t kDivisors[] = {4};
constexpr int64_t kMinimums[] = {1};
const KilnSignature kLaunchSignature = {
    "launch3", KILN_ABI_VERSION, kDLCUDA, 3, kParams, 1, kSymbols, kDivisors, kMinimums, nullptr,
    "launch3(a: Tensor([n], float32), b: Tensor([n], float32), c: Tensor([n], float32)); n % 4 == 0",
    R"({"name":"launch3"})"};
const KilnSignature kValidateSignature = {
    "validate3", KILN_ABI_VERSION, kDLCUDA, 3, kParams, 1, kSymbols, kDivisors, kMinimums, nullptr,
    "validate3(a: Tensor([n], float32), b: Tensor([n], float32), c: Tensor([n], float32)); n % 4 == 0",
    R"({"name":"validate3"})"};

template <typename T>
T* data_of(const DLTensor& t) {
  return reinterpret_cast<T*>(static_cast<char*>(t.data) + t.byte_offset);
}

}  // namespace

KILN_EXPORT const KilnSignature* kiln_signature_launch3(void) { return &kLaunchSignature; }
KILN_EXPORT const KilnSignature* kiln_signature_validate3(void) { return &kValidateSignature; }

KILN_EXPORT int32_t kiln_launch3(const DLTensor* args, int32_t num_args, void*, void* stream) {
  int64_t n = 0;
  if (int32_t status = kiln::abi::validate_arguments(kLaunchSignature, args, num_args, &n,
                                                     &kiln::abi::last_error_storage())) {
    return status;
  }
  first_sum<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(data_of<float>(args[0]), data_of<float>(args[1]),
                                                           data_of<float>(args[2]), n);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) {
    kiln::abi::last_error_storage() = std::string(kLaunchSignature.text) + ": launch failed: " + cudaGetErrorString(e);
    return KILN_ERR_LAUNCH;
  }
  return KILN_OK;
}

KILN_EXPORT int32_t kiln_validate3(const DLTensor* args, int32_t num_args, void*, void*) {
  int64_t n = 0;
  return kiln::abi::validate_arguments(kValidateSignature, args, num_args, &n, &kiln::abi::last_error_storage());
}

namespace {
const KilnFunction kFunctions[] = {
    {"launch3", kiln_launch3, kiln_signature_launch3},
    {"validate3", kiln_validate3, kiln_signature_validate3},
};
}  // namespace

KILN_EXPORT int32_t kiln_library_functions(const KilnFunction** functions) {
  *functions = kFunctions;
  return 2;
}
KILN_EXPORT const char* kiln_last_error(void) { return kiln::abi::last_error_storage().c_str(); }

KILN_TVM_FFI_EXPORT(launch3)
KILN_TVM_FFI_EXPORT(validate3)

// The ctypes peer: the same launch from 3 raw pointers, no tensors, no checks.
KILN_EXPORT int bench_launch_raw(const float* a, const float* b, float* c, void* stream) {
  first_sum<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(a, b, c, 4);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
