#pragma once
// kiln's C++ runtime for model libraries (`kiln compile --model`; libkiln_runtime, CMake target
// kiln::runtime). A thin layer over the library's C entry points (kiln_abi.h: kiln_main and its
// signature; kiln_model.h: weights): no exceptions, errors are values whose message names the
// argument and the rule it broke.
//
//     kiln::Model model = kiln::Model::load("out/libgemma.so");
//     if (!model) { std::cerr << model.error() << "\n"; return 1; }
//     for (const kiln::TensorInfo& t : model.inputs()) std::cout << t.describe() << "\n";
//     kiln::Session session = model.new_session();           // one per thread
//     kiln::Status s = session.run({x}, {y}, stream);         // DLTensors over your memory
//     if (!s) std::cerr << s.message() << "\n";
//
// Thread safety:
// - A Model is immutable once loaded (copies share it) and may be used from any number of
//   threads at once: inputs()/outputs()/memory()/new_session()/load_weights() are thread-safe,
//   and so is Model::run (it takes a lock around one shared Session: use a Session per thread to
//   run concurrently).
// - A Session (execution state: the arena, the captured CUDA graphs) is used by one thread at a
//   time. Sessions of one Model run concurrently, on different streams or threads.
// - Weights are loaded once per device, under the library's own lock (kiln_model.h).
//
// CPU model libraries need no CUDA at all: libcudart is opened (dlopen) only when a CUDA model
// library is loaded.
#include <dlpack/dlpack.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace kiln {

// Ok, or a failure with a message (and the KilnStatus of the failing call, or -1 for a failure of
// the runtime itself: a missing file, an allocation).
class Status {
 public:
  Status() = default;
  static Status error(int32_t code, std::string message) { return Status(code, std::move(message)); }
  bool ok() const { return code_ == 0; }
  explicit operator bool() const { return ok(); }
  int32_t code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  Status(int32_t code, std::string message) : code_(code), message_(std::move(message)) {}
  int32_t code_ = 0;
  std::string message_;
};

// A graph input or output: name, dtype, shape (each dim a constant or a symbol such as "batch").
struct TensorInfo {
  std::string name;
  DLDataType dtype{};
  std::vector<int64_t> dims;          // -1 where the dim is a symbol
  std::vector<std::string> symbols;   // per dim: the symbol's name, "" for constants
  std::string describe() const;       // "x: float32[batch, seq, 64]"
};

// Device memory of one run at given input shapes (bytes).
struct MemoryReport {
  uint64_t weights = 0;  // the weights on the device (0 before they are loaded)
  uint64_t arena = 0;    // the workspace: every temporary, placed by the memory plan
  uint64_t live = 0;     // the largest set of temporaries alive at once (the plan's lower bound)
  uint64_t io = 0;       // the caller's inputs and outputs
  uint64_t peak() const { return weights + arena + io; }
};

struct LoadOptions {
  std::string weights_path;   // default: the weights file next to the library
  bool load_weights = true;   // map (and upload, CUDA: to `device_id`) at load, not on first run
  int32_t device_id = 0;
};

struct RunOptions {
  // CUDA libraries: capture the run as a CUDA graph the first time a shape and set of pointers
  // is seen on a stream, replay it afterwards. Inputs and outputs must stay at the same
  // addresses for a replay to see new data (the same as any CUDA graph).
  bool cuda_graph = false;
  // The caller's arena (at least Model::memory(...).arena bytes on the run's device); null: the
  // Session's own, allocated once per shape and reused.
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
};

class Model;

// The execution state of one thread: the arena and the captured graphs. Move-only.
class Session {
 public:
  Session();
  ~Session();
  Session(Session&&) noexcept;
  Session& operator=(Session&&) noexcept;
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Runs the model on `inputs` (graph input order) into `outputs` (graph output order), all on
  // the model's device, on `stream` (a cudaStream_t; ignored on the CPU). Asynchronous for CUDA.
  Status run(std::span<const DLTensor> inputs, std::span<const DLTensor> outputs, void* stream = nullptr,
             const RunOptions& options = RunOptions());
  Status run(std::initializer_list<DLTensor> inputs, std::initializer_list<DLTensor> outputs, void* stream = nullptr,
             const RunOptions& options = RunOptions()) {
    return run(std::span<const DLTensor>(inputs.begin(), inputs.size()),
               std::span<const DLTensor>(outputs.begin(), outputs.size()), stream, options);
  }
  uint64_t arena_bytes() const;      // the arena it holds now
  int graphs_captured() const;       // CUDA graphs captured so far
  int graph_replays() const;         // runs served by replaying one

  struct Impl;

 private:
  friend class Model;
  std::unique_ptr<Impl> impl_;
};

class Model {
 public:
  Model() = default;
  // Opens a model library; on failure the Model is empty and error() says why.
  static Model load(const std::string& path, const LoadOptions& options = LoadOptions());
  explicit operator bool() const { return impl_ != nullptr; }
  const std::string& error() const { return error_; }

  const std::string& name() const;
  DLDeviceType device_type() const;  // kDLCPU or kDLCUDA
  const std::vector<TensorInfo>& inputs() const;
  const std::vector<TensorInfo>& outputs() const;
  std::string signature() const;     // "main(x: Tensor([batch, 64], float32)) -> (y: ...)"

  // Loads the weights onto `device_id` now (else the first run on that device does).
  Status load_weights(int32_t device_id = 0, void* stream = nullptr) const;
  // The memory of a run with these inputs and outputs (shapes checked as run() does; data may
  // be null).
  Status memory(std::span<const DLTensor> inputs, std::span<const DLTensor> outputs, MemoryReport* report) const;
  Status memory(std::initializer_list<DLTensor> inputs, std::initializer_list<DLTensor> outputs,
                MemoryReport* report) const {
    return memory(std::span<const DLTensor>(inputs.begin(), inputs.size()),
                  std::span<const DLTensor>(outputs.begin(), outputs.size()), report);
  }

  Session new_session() const;
  // Runs on a Session shared by every caller of this Model (serialized by a lock).
  Status run(std::span<const DLTensor> inputs, std::span<const DLTensor> outputs, void* stream = nullptr,
             const RunOptions& options = RunOptions()) const;
  Status run(std::initializer_list<DLTensor> inputs, std::initializer_list<DLTensor> outputs, void* stream = nullptr,
             const RunOptions& options = RunOptions()) const {
    return run(std::span<const DLTensor>(inputs.begin(), inputs.size()),
               std::span<const DLTensor>(outputs.begin(), outputs.size()), stream, options);
  }

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
  std::string error_;
};

// A compact row-major DLTensor over memory the caller owns. `shape` must outlive the DLTensor.
inline DLTensor tensor_view(void* data, const std::vector<int64_t>& shape, DLDataType dtype,
                            DLDevice device = {kDLCPU, 0}) {
  DLTensor t{};
  t.data = data;
  t.device = device;
  t.ndim = static_cast<int32_t>(shape.size());
  t.dtype = dtype;
  t.shape = const_cast<int64_t*>(shape.data());
  return t;
}

}  // namespace kiln
