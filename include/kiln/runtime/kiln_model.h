/* The C API of a model library (docs/ARCHITECTURE.md, "Model libraries").
 *
 * `kiln compile model.onnx -o DIR --model` builds DIR/lib<model>.so whose one function, `main`, is
 * exported through the kernel contract (kiln_abi.h: kiln_main, kiln_signature_main, the function
 * table, TVM-FFI's __tvm_ffi_main) and takes only the model's graph inputs and outputs. The
 * model's initializers and Constant outputs belong to the library: those of at most
 * KILN_MODEL_EMBED_BYTES are compiled in, the others are in DIR/<model>.weights, whose layout
 * (each weight's offset and size) and checksum are in the library (kiln_model_info).
 *
 * Weights are loaded once per device: on the first call of kiln_main on that device, or
 * explicitly with kiln_model_load (do that before capturing a CUDA graph: loading synchronizes).
 * The weights file is memory-mapped read-only and its checksum verified once per process; a CPU
 * library runs on the mapping itself (no copy in host memory), a CUDA library copies it to one
 * device allocation per device. Everything here is thread-safe; failures return a KilnStatus
 * (KILN_ERR_WEIGHTS) or NULL with the message in kiln_last_error().
 *
 * This header is C; it is copied into every generated model library's folder.
 */
#ifndef KILN_MODEL_H_
#define KILN_MODEL_H_

#include <dlpack/dlpack.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KILN_MODEL_VERSION 1
#define KILN_MODEL_EMBED_BYTES 4096 /* weights up to this size are compiled into the library */
#define KILN_WEIGHTS_MAGIC "KILNWTS1"
#define KILN_WEIGHTS_HEADER_BYTES 256 /* the file: a header, then the payload at this offset */

/* One weight (an initializer or a Constant output of the model). */
typedef struct {
  const char* name;      /* the ONNX value name */
  DLDataType dtype;
  int32_t ndim;
  const int64_t* shape;
  int32_t in_file;       /* 1: in the weights file, 0: compiled in */
  uint64_t offset;       /* bytes from the start of its payload (file payload or compiled-in), 256-aligned */
  uint64_t bytes;
} KilnWeight;

typedef struct {
  int32_t version;          /* KILN_MODEL_VERSION */
  const char* model;        /* the model's name */
  const char* function;     /* the entry point's function name ("main": kiln_main) */
  int32_t device_type;      /* kDLCPU or kDLCUDA */
  int32_t num_weights;
  const KilnWeight* weights;
  const char* weights_file; /* file name next to the library, NULL when every weight is compiled in */
  uint64_t file_payload_bytes;     /* bytes after the header */
  uint64_t file_checksum;          /* kiln_weights_checksum of the payload */
  uint64_t embedded_payload_bytes; /* compiled-in bytes */
  /* Bytes of the largest set of temporaries alive at once for these symbol values (the memory
   * plan's lower bound; the arena is signature.workspace_bytes(symbols)). */
  size_t (*live_bytes)(const int64_t* symbol_values);
} KilnModelInfo;

/* The file header (little-endian), KILN_WEIGHTS_HEADER_BYTES long with zero padding. */
typedef struct {
  char magic[8];           /* KILN_WEIGHTS_MAGIC */
  uint64_t version;        /* 1 */
  uint64_t payload_bytes;
  uint64_t checksum;
} KilnWeightsHeader;

const KilnModelInfo* kiln_model_info(void);

/* The weights file to use instead of <library folder>/<weights_file>. Before the first load only
 * (KILN_ERR_WEIGHTS afterwards). */
int32_t kiln_model_set_weights_path(const char* path);

/* Maps and verifies the weights file (once per process) and, for a CUDA library, copies the
 * weights to device `device_id` (once per device; synchronous, on `stream`). */
int32_t kiln_model_load(int32_t device_id, void* stream);

/* Each weight's address on `device_id` (kiln_model_info()->weights order), loading first if
 * needed; NULL on failure. */
const void* const* kiln_model_constants(int32_t device_id, void* stream);

/* Bytes the weights take on `device_id` (0 before they are loaded there; for a CPU library, the
 * mapped file plus the compiled-in bytes). */
uint64_t kiln_model_device_bytes(int32_t device_id);

/* The checksum of the weights file: four interleaved 64-bit FNV-1a lanes over little-endian 8-byte
 * words (word i goes to lane i % 4; a last partial word is zero-padded), then the lanes and the
 * length folded by FNV-1a. Four independent multiply chains run at about memory speed, so a
 * 1 GiB file is checked in full at load. */
#define KILN_FNV_OFFSET 1469598103934665603ull
#define KILN_FNV_PRIME 1099511628211ull
static inline uint64_t kiln_weights_checksum_fold(const uint64_t lanes[4], uint64_t bytes) {
  uint64_t h = KILN_FNV_OFFSET;
  for (int l = 0; l < 4; ++l) h = (h ^ lanes[l]) * KILN_FNV_PRIME;
  return (h ^ bytes) * KILN_FNV_PRIME;
}
static inline uint64_t kiln_weights_checksum(const void* data, uint64_t bytes) {
  const unsigned char* p = (const unsigned char*)data;
  uint64_t lanes[4] = {KILN_FNV_OFFSET, KILN_FNV_OFFSET ^ 1, KILN_FNV_OFFSET ^ 2, KILN_FNV_OFFSET ^ 3};
  uint64_t i = 0;
  for (; i + 32 <= bytes; i += 32) {
    uint64_t w[4];
    memcpy(w, p + i, 32); /* little-endian hosts (x86-64, aarch64) */
    lanes[0] = (lanes[0] ^ w[0]) * KILN_FNV_PRIME;
    lanes[1] = (lanes[1] ^ w[1]) * KILN_FNV_PRIME;
    lanes[2] = (lanes[2] ^ w[2]) * KILN_FNV_PRIME;
    lanes[3] = (lanes[3] ^ w[3]) * KILN_FNV_PRIME;
  }
  for (int l = 0; i < bytes; i += 8, ++l) {
    uint64_t w = 0;
    for (int b = 0; b < 8 && i + b < bytes; ++b) w |= (uint64_t)p[i + b] << (8 * b);
    lanes[l] = (lanes[l] ^ w) * KILN_FNV_PRIME;
  }
  return kiln_weights_checksum_fold(lanes, bytes);
}

#ifdef __cplusplus
}
#endif

#endif /* KILN_MODEL_H_ */
