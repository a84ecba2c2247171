// The weights of a model library (runtime/kiln_model.h): the fixed code that the generated
// model translation unit (package/ModelLibrary.cpp) includes after defining its tables:
//
//   static const KilnModelInfo kiln_model_info_data = {...};   // the layout and checksum
//   alignas(256) static const unsigned char kiln_model_embedded[] = {...};  // compiled-in weights
//
// Loading: the weights file is memory-mapped read-only and checked (header, size, checksum)
// once per process under a mutex; each device's table of weight addresses is published through
// an atomic pointer, so calls after the first take no lock. A CPU library points into the
// mapping (no host copy); a CUDA library copies the mapping and the compiled-in bytes into one
// device allocation per device, synchronously, with the caller's current device restored.
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include "kiln/runtime/kiln_model.h"
#include "kiln/runtime/validate.h"

// Internal linkage on purpose: inline functions with static locals would be STB_GNU_UNIQUE
// symbols, shared by every model library in the process; each library keeps its own state.
namespace kiln::model_weights {
namespace {

constexpr int kMaxDevices = 64;

struct State {
  std::mutex mutex;
  std::string path;  // set by kiln_model_set_weights_path, else found next to the library
  bool mapped = false;
  const unsigned char* payload = nullptr;  // the file's payload in the mapping
  void* mapping = nullptr;
  size_t mapping_bytes = 0;
  std::atomic<const void* const*> tables[kMaxDevices] = {};
  std::vector<const void*> table_storage[kMaxDevices];
  uint64_t device_bytes[kMaxDevices] = {};
};

inline State& state() {
  static State s;
  return s;
}

inline bool fail(const std::string& message) {
  kiln::abi::last_error_storage() = std::string(kiln_model_info_data.model) + ": " + message;
  return false;
}

inline std::string default_weights_path() {
  Dl_info info;
  std::string folder = ".";
  if (dladdr(reinterpret_cast<void*>(&kiln_model_info), &info) && info.dli_fname) {
    const std::string lib = info.dli_fname;
    const size_t slash = lib.rfind('/');
    if (slash != std::string::npos) folder = lib.substr(0, slash);
  }
  return folder + "/" + kiln_model_info_data.weights_file;
}

// Maps and verifies the weights file. Called with the mutex held.
inline bool map_weights(State& s) {
  if (s.mapped || kiln_model_info_data.weights_file == nullptr) return true;
  const std::string path = s.path.empty() ? default_weights_path() : s.path;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fail("cannot open the weights file " + path + " (it is written next to the library by kiln compile --model)");
  struct stat st;
  const uint64_t want = KILN_WEIGHTS_HEADER_BYTES + kiln_model_info_data.file_payload_bytes;
  if (fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) != want) {
    close(fd);
    return fail("weights file " + path + " has " + std::to_string(static_cast<long long>(st.st_size)) +
                " bytes, the library expects " + std::to_string(want));
  }
  void* mapping = mmap(nullptr, want, PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  if (mapping == MAP_FAILED) return fail("cannot map the weights file " + path);
  const auto* header = static_cast<const KilnWeightsHeader*>(mapping);
  const unsigned char* payload = static_cast<const unsigned char*>(mapping) + KILN_WEIGHTS_HEADER_BYTES;
  std::string problem;
  if (std::string(header->magic, 8) != std::string(KILN_WEIGHTS_MAGIC, 8)) {
    problem = "is not a kiln weights file (no " KILN_WEIGHTS_MAGIC " header)";
  } else if (header->payload_bytes != kiln_model_info_data.file_payload_bytes ||
             header->checksum != kiln_model_info_data.file_checksum) {
    problem = "belongs to another library (its header's size or checksum differs from the library's)";
  } else {
    madvise(mapping, want, MADV_SEQUENTIAL);
    const uint64_t sum = kiln_weights_checksum(payload, header->payload_bytes);
    madvise(mapping, want, MADV_NORMAL);
    if (sum != kiln_model_info_data.file_checksum) problem = "is corrupt (its checksum does not match its header)";
  }
  if (!problem.empty()) {
    munmap(mapping, want);
    return fail("weights file " + path + " " + problem);
  }
  s.mapping = mapping;
  s.mapping_bytes = want;
  s.payload = payload;
  s.mapped = true;
  return true;
}

inline const unsigned char* host_address(const State& s, const KilnWeight& w) {
  return (w.in_file ? s.payload : kiln_model_embedded) + w.offset;
}

inline uint64_t round256(uint64_t b) { return (b + 255) / 256 * 256; }

// Builds device `device`'s table. Called with the mutex held.
inline bool load_device(State& s, int device, [[maybe_unused]] void* stream) {
  if (!map_weights(s)) return false;
  const KilnModelInfo& info = kiln_model_info_data;
  std::vector<const void*>& table = s.table_storage[device];
  table.assign(static_cast<size_t>(info.num_weights) + 1, nullptr);
#ifdef __CUDACC__
  const uint64_t file_bytes = round256(info.file_payload_bytes);
  const uint64_t total = file_bytes + info.embedded_payload_bytes;
  int previous = 0;
  cudaGetDevice(&previous);
  if (cudaSetDevice(device) != cudaSuccess) return fail("cannot use CUDA device " + std::to_string(device));
  unsigned char* base = nullptr;
  cudaError_t e = cudaMalloc(&base, total > 0 ? total : 1);
  if (e == cudaSuccess && info.file_payload_bytes > 0) {
    e = cudaMemcpy(base, s.payload, info.file_payload_bytes, cudaMemcpyHostToDevice);
  }
  if (e == cudaSuccess && info.embedded_payload_bytes > 0) {
    e = cudaMemcpy(base + file_bytes, kiln_model_embedded, info.embedded_payload_bytes, cudaMemcpyHostToDevice);
  }
  cudaSetDevice(previous);
  if (e != cudaSuccess) {
    if (base) cudaFree(base);
    return fail("uploading " + std::to_string(total) + " bytes of weights to CUDA device " + std::to_string(device) +
                " failed: " + cudaGetErrorString(e));
  }
  for (int k = 0; k < info.num_weights; ++k) {
    const KilnWeight& w = info.weights[k];
    table[k] = base + (w.in_file ? 0 : file_bytes) + w.offset;
  }
  s.device_bytes[device] = total;
#else
  for (int k = 0; k < info.num_weights; ++k) table[k] = host_address(s, info.weights[k]);
  s.device_bytes[device] = info.file_payload_bytes + info.embedded_payload_bytes;
#endif
  s.tables[device].store(table.data(), std::memory_order_release);
  return true;
}

inline int device_slot(int32_t device_id) {
#ifdef __CUDACC__
  return device_id;
#else
  (void)device_id;
  return 0;  // one host
#endif
}

}  // namespace
}  // namespace kiln::model_weights

extern "C" const KilnModelInfo* kiln_model_info(void) { return &kiln_model_info_data; }

extern "C" int32_t kiln_model_set_weights_path(const char* path) {
  using namespace kiln::model_weights;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.mapped) {
    fail("kiln_model_set_weights_path: the weights are already loaded");
    return KILN_ERR_WEIGHTS;
  }
  s.path = path ? path : "";
  return KILN_OK;
}

extern "C" const void* const* kiln_model_constants(int32_t device_id, void* stream) {
  using namespace kiln::model_weights;
  const int slot = device_slot(device_id);
  if (slot < 0 || slot >= kMaxDevices) {
    fail("device " + std::to_string(device_id) + " is out of range (0.." + std::to_string(kMaxDevices - 1) + ")");
    return nullptr;
  }
  State& s = state();
  if (const void* const* table = s.tables[slot].load(std::memory_order_acquire)) return table;
  std::lock_guard<std::mutex> lock(s.mutex);
  if (const void* const* table = s.tables[slot].load(std::memory_order_acquire)) return table;
  if (!load_device(s, slot, stream)) return nullptr;
  return s.tables[slot].load(std::memory_order_acquire);
}

extern "C" int32_t kiln_model_load(int32_t device_id, void* stream) {
  return kiln_model_constants(device_id, stream) ? KILN_OK : KILN_ERR_WEIGHTS;
}

extern "C" uint64_t kiln_model_device_bytes(int32_t device_id) {
  using namespace kiln::model_weights;
  const int slot = device_slot(device_id);
  if (slot < 0 || slot >= kMaxDevices) return 0;
  State& s = state();
  if (!s.tables[slot].load(std::memory_order_acquire)) return 0;
  return s.device_bytes[slot];
}
