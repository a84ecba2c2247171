/* The one kernel contract (docs/ARCHITECTURE.md, "The kernel contract").
 *
 * Every function kiln compiles, generated or hand-written, CUDA or CPU, is exported as
 *
 *     int32_t kiln_<name>(const DLTensor* args, int32_t num_args, void* workspace, void* stream);
 *     const KilnSignature* kiln_signature_<name>(void);
 *
 * `args` are the parameters in signature order (inputs, then outputs), each a plain DLTensor
 * (data pointer, device, ndim, dtype, shape, strides, byte_offset). `workspace` points to at least
 * `signature->workspace_bytes(symbol values)` bytes of device memory (may be NULL when that is
 * 0). `stream` is a cudaStream_t for CUDA functions (NULL = the legacy default stream) and is
 * ignored by CPU functions. The function validates its arguments against its signature, launches
 * on `stream` only, allocates nothing, never synchronizes, and returns 0 or a KilnStatus; the
 * message of the last failure on this thread is `kiln_last_error()`.
 *
 * Tensors of 4- and 2-bit dtypes (int4, uint4, int2, uint2, float4 E2M1; DLDataType bits 4 or 2)
 * are packed in ONNX's layout: 4-bit element 2k in the low nibble of byte k, 2-bit element 4k + j
 * in bits 2j..2j+1 of byte k. A function that writes one updates, on the GPU, the aligned 32-bit
 * words that hold its bytes (atomically, other bits unchanged): such an output's signature asks
 * 4-byte alignment, and its allocation must extend to the end of the word holding its last byte
 * (cudaMalloc, the workspace plan and framework allocators all round sizes up further).
 *
 * Every adapter (TensorRT plugin enqueue, TVM-FFI export, the Python module, the whole-model
 * runtime, tests, benchmarks) calls kernels through this entry point only.
 *
 * This header is C so that generated packages, TVM-FFI wrappers and plugins can include it
 * without the rest of kiln; it is copied into every generated package.
 */
#ifndef KILN_ABI_H_
#define KILN_ABI_H_

#include <dlpack/dlpack.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KILN_ABI_VERSION 1

typedef enum {
  KILN_OK = 0,
  KILN_ERR_ARGUMENT_COUNT = 1,
  KILN_ERR_DTYPE = 2,
  KILN_ERR_SHAPE = 3,
  KILN_ERR_LAYOUT = 4,    /* strides not compact row-major, or misaligned data */
  KILN_ERR_DEVICE = 5,
  KILN_ERR_LAUNCH = 6,    /* the CUDA launch failed */
  KILN_ERR_WORKSPACE = 7, /* workspace missing or too small */
  KILN_ERR_TYPE = 8,      /* an argument is not a tensor, or an output tensor is read-only */
  KILN_ERR_WEIGHTS = 9,   /* a model library's weights could not be loaded (runtime/kiln_model.h) */
} KilnStatus;

/* A dimension of a parameter: a constant (>= 0) or symbol number s, written -(s + 1). */
typedef int64_t KilnDim;
#define KILN_DIM_SYMBOL(s) (-((int64_t)(s)) - 1)
#define KILN_DIM_IS_SYMBOL(d) ((d) < 0)
#define KILN_DIM_SYMBOL_INDEX(d) (-(d)-1)

typedef struct {
  const char* name;
  DLDataType dtype;
  int32_t ndim;
  const KilnDim* shape;   /* ndim entries */
  int32_t alignment;      /* required alignment of the data pointer in bytes (>= element size) */
  int32_t is_output;
} KilnParam;

typedef struct {
  const char* name;
  int32_t abi_version;     /* KILN_ABI_VERSION */
  int32_t device_type;     /* kDLCUDA or kDLCPU */
  int32_t num_params;
  const KilnParam* params;
  int32_t num_symbols;
  const char* const* symbol_names;
  const int64_t* symbol_divisors; /* each symbol's value must be a multiple of this (1 = any) */
  const int64_t* symbol_minimums; /* and at least this (usually 1) */
  /* Bytes of device workspace for the given symbol values (num_symbols entries). */
  size_t (*workspace_bytes)(const int64_t* symbol_values);
  const char* text; /* human-readable, e.g. "gemv(x: Tensor([m, 2048], bfloat16), ...)" */
  const char* json; /* the same, machine-readable (schema: docs/ARCHITECTURE.md) */
} KilnSignature;

typedef int32_t (*KilnKernelFn)(const DLTensor* args, int32_t num_args, void* workspace,
                                void* stream);
typedef const KilnSignature* (*KilnSignatureFn)(void);

/* Every kiln library also exports its table of functions, so loaders (the Python module, the
 * TensorRT plugin, the whole-model runtime) can enumerate them without knowing their names:
 *
 *     int32_t kiln_library_functions(const KilnFunction** functions);  // returns the count
 *     const char* kiln_last_error(void);  // message of this thread's last failed call
 */
typedef struct {
  const char* name;
  KilnKernelFn call;
  KilnSignatureFn signature;
} KilnFunction;

typedef int32_t (*KilnLibraryFunctionsFn)(const KilnFunction** functions);
typedef const char* (*KilnLastErrorFn)(void);

#ifdef __cplusplus
}
#endif

#endif /* KILN_ABI_H_ */
