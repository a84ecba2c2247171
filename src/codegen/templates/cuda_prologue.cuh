// ---- prologue (src/codegen/templates/cuda_prologue.cuh) ----
#include <cuda_runtime.h>
#include <dlpack/dlpack.h>
#include <stddef.h>
#include <stdint.h>

#include <string>

#include "kiln/codegen/runtime/kiln_cuda.cuh"
#include "kiln/gemm/kiln_gemm.cuh"  // contraction templates (TemplateContraction stages)
// 4-bit weight kernels (kiln.QuantLinear stages), reading the weights in the exported nibble order
// kiln.QuantLinear stores (kiln/quant/w4_nibbles.h).
#define KILN_QUANT_EXPORT_NIBBLE_ORDER 1
#include "kiln/quant/w4_launch.cuh"
#include "kiln/runtime/kiln_abi.h"
#include "kiln/runtime/tvm_ffi_export.h"  // KILN_TVM_FFI_EXPORT after each entry point
#include "kiln/runtime/validate.h"

// Grid size for a grid-stride loop over `extent` iterations: every iteration is covered whatever
// the grid, so the grid is capped at a few waves of blocks and kept at least 1.
[[maybe_unused]] static inline unsigned kiln_grid_size(int64_t extent, int64_t cap) {
  return static_cast<unsigned>(extent < 1 ? 1 : extent < cap ? extent : cap);
}

// Grid size for a kernel that handles whole rows, a block per row in turn, re-reading each row:
// few enough rows in flight that their bytes stay within part of L2, so that the re-reads hit L2
// and DRAM sees each row once, and at least two blocks per multiprocessor.
[[maybe_unused]] static inline unsigned kiln_row_grid_size(int64_t rows, int64_t row_bytes) {
  static const int64_t multiprocessors = [] {
    int device = 0, count = 0;
    cudaGetDevice(&device);
    cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device);
    return static_cast<int64_t>(count > 0 ? count : 132);
  }();
  int64_t cap = (int64_t(24) << 20) / (row_bytes > 0 ? row_bytes : 1);
  cap = cap < 2 * multiprocessors ? 2 * multiprocessors : cap > 8192 ? 8192 : cap;
  return kiln_grid_size(rows, cap);
}

// Returns KILN_ERR_LAUNCH with the CUDA error after a launch that failed.
[[maybe_unused]] static inline int32_t kiln_check_launch(const KilnSignature& signature, const char* kernel) {
  const cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) return KILN_OK;
  kiln::abi::last_error_storage() = std::string(signature.text) + ": launch of " + kernel + " failed: " + cudaGetErrorString(e);
  return KILN_ERR_LAUNCH;
}
// Returns KILN_ERR_LAUNCH for a template launch that returned `e` (its own cudaGetLastError).
[[maybe_unused]] static inline int32_t kiln_launch_failed(const KilnSignature& signature, const char* kernel, cudaError_t e) {
  kiln::abi::last_error_storage() = std::string(signature.text) + ": launch of " + kernel + " failed: " + cudaGetErrorString(e);
  return KILN_ERR_LAUNCH;
}
// ---- end of prologue ----
