#include "kiln/tune/Runner.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <random>
#include <stdexcept>

#include "FileLock.h"
#include "GpuRuntime.h"
#include "kiln/ir/IROperator.h"
#include "kiln/runtime/Interpreter.h"
#include "kiln/runtime/kiln_call.h"
#include "kiln/support/Error.h"

namespace kiln::tune {

namespace {

std::vector<int64_t> constant_shape(const te::Tensor& t, const std::string& kernel) {
  std::vector<int64_t> shape;
  for (const ir::Expr& d : t.shape()) {
    auto c = ir::as_const_int(d);
    if (!c) user_error("kernel {}: tensor {} has a symbolic shape; tuning needs concrete shapes (a model with fixed input shapes)", kernel, t.name());
    shape.push_back(*c);
  }
  return shape;
}

HostTensor random_tensor(DType dtype, const std::vector<int64_t>& shape, std::mt19937_64& rng) {
  HostTensor t(dtype, shape);
  std::uniform_real_distribution<double> real(-2.0, 2.0);
  std::uniform_int_distribution<int> small(0, 3);
  const bool is_float = dtype_class(dtype) == DTypeClass::Float;
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    if (is_float) t.set_double(i, real(rng));
    else t.set_int(i, dtype_class(dtype) == DTypeClass::Bool ? small(rng) % 2 : small(rng));
  }
  return t;
}

DLTensor dl_view(void* data, const KilnParam& param, const std::vector<int64_t>& shape, DLDeviceType device) {
  DLTensor t{};
  t.data = data;
  t.device = DLDevice{device, 0};
  t.ndim = static_cast<int32_t>(shape.size());
  t.dtype = param.dtype;
  t.shape = const_cast<int64_t*>(shape.data());
  return t;
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5));
  return v[i];
}

// Absolute tolerance relative to the largest expected magnitude (a softmax over 32000 columns has
// outputs near 3e-5: a fixed absolute tolerance would accept zeros), plus a relative one.
void tolerances(const HostTensor& want, double& atol, double& rtol) {
  const DType d = want.dtype();
  if (dtype_class(d) != DTypeClass::Float) {
    atol = rtol = 0;
    return;
  }
  double largest = 0;
  for (int64_t i = 0; i < want.num_elements(); ++i) {
    const double w = std::abs(want.get_double(i));
    if (std::isfinite(w)) largest = std::max(largest, w);
  }
  const bool narrow = dtype_bytes(d) <= 2;
  atol = (narrow ? 1e-2 : 1e-5) * std::max(largest, 1e-30);
  rtol = narrow ? 2e-2 : 1e-3;
}

// A digest of the inputs' dtypes, shapes and bytes (hex), for the reference-output cache's name.
std::string inputs_digest(const std::vector<HostTensor>& inputs) {
  std::string text;
  for (const HostTensor& t : inputs) {
    text += t.describe();
    text.append(reinterpret_cast<const char*>(t.data()), t.num_bytes());
  }
  char hex[20];
  std::snprintf(hex, sizeof hex, "%016zx", std::hash<std::string>()(text));
  return hex;
}

// Reads the reference outputs saved by save_expected; false (nothing read) when the file is absent
// or does not hold exactly the outputs' bytes.
bool load_expected(const std::string& path, const codegen::KernelDefinition& kernel,
                   const std::vector<std::vector<int64_t>>& shapes, std::vector<HostTensor>& expected) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::vector<HostTensor> outputs;
  for (size_t k = 0; k < shapes.size(); ++k) {
    outputs.emplace_back(kernel.outputs[k].dtype(), shapes[k]);
    if (!in.read(reinterpret_cast<char*>(outputs.back().data()), static_cast<std::streamsize>(outputs.back().num_bytes()))) return false;
  }
  if (in.peek() != std::ifstream::traits_type::eof()) return false;
  expected = std::move(outputs);
  return true;
}

// Written under a name of this process, then renamed: workers sharing the folder never read a
// half-written file. A failure to write only costs the next worker the reference run.
void save_expected(const std::string& path, const std::vector<HostTensor>& expected) {
  const std::string tmp = path + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary);
    for (const HostTensor& t : expected) out.write(reinterpret_cast<const char*>(t.data()), static_cast<std::streamsize>(t.num_bytes()));
    if (!out) return (void)std::remove(tmp.c_str());
  }
  std::rename(tmp.c_str(), path.c_str());
}

}  // namespace

bool outputs_match(const HostTensor& got, const HostTensor& want, std::string& error) {
  if (got.shape() != want.shape() || got.dtype() != want.dtype()) {
    error = "output is " + got.describe() + ", expected " + want.describe();
    return false;
  }
  double atol, rtol;
  tolerances(want, atol, rtol);
  for (int64_t i = 0; i < want.num_elements(); ++i) {
    const double g = got.get_double(i), w = want.get_double(i);
    const bool ok = std::isnan(w) ? std::isnan(g) : std::abs(g - w) <= atol + rtol * std::abs(w);
    if (!ok) {
      error = "element " + std::to_string(i) + " is " + std::to_string(g) + ", expected " + std::to_string(w) +
              " (tolerance " + std::to_string(atol) + " + " + std::to_string(rtol) + " x |expected|)";
      return false;
    }
  }
  return true;
}

DeviceInfo device_info(codegen::Target target) {
  DeviceInfo info;
  if (target == codegen::Target::Cuda) {
    const GpuRuntime& rt = GpuRuntime::get();
    std::vector<char> props(1 << 16, 0);
    info.name = rt.device_properties && rt.device_properties(props.data(), 0) == 0 ? std::string(props.data()) : "unknown GPU";
    int major = 0, minor = 0;
    rt.device_attribute(&major, GpuRuntime::kAttrMajor, 0);
    rt.device_attribute(&minor, GpuRuntime::kAttrMinor, 0);
    info.arch = "sm_" + std::to_string(major) + std::to_string(minor);
    return info;
  }
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) {
      info.name = line.substr(line.find(':') + 2);
      break;
    }
  }
  struct utsname u;
  info.arch = uname(&u) == 0 ? u.machine : "cpu";
  if (info.name.empty()) info.name = info.arch;
  return info;
}

struct Runner::State {
  codegen::KernelDefinition kernel;
  RunRequest request;
  // Every input of the kernel, in kernel.inputs order: a function passes those its signature
  // names (the CPU reference and a CUDA candidate may drop different unread constants).
  std::vector<HostTensor> inputs;
  std::vector<std::string> names;
  std::vector<std::vector<int64_t>> output_shapes;  // of the parameters after the inputs
  std::vector<HostTensor> expected;
  std::string work_dir;          // where the reference library is built
  LoweredFunc reference_func;    // the CPU lowering (the interpreter's fallback)
  std::string reference_text;    // its C++
  // CUDA: device copies of the inputs and an L2-sized flush buffer.
  std::vector<void*> device_inputs;
  void* flush = nullptr;
  size_t flush_bytes = 0;
  std::vector<char> host_flush;
  bool attached() const { return flush != nullptr || !host_flush.empty(); }  // attach_device ran
  // For each input parameter of `sig` (those before the outputs), the index of the input of that
  // name; std::runtime_error naming `who` when the parameters are not the kernel's inputs and
  // outputs.
  std::vector<size_t> bind(const KilnSignature& sig, const std::string& who) const {
    const int64_t n_in = static_cast<int64_t>(sig.num_params) - static_cast<int64_t>(output_shapes.size());
    if (n_in < 0) throw std::runtime_error(who + " has " + std::to_string(sig.num_params) + " parameters, fewer than the outputs");
    std::vector<size_t> bound;
    for (int64_t j = 0; j < n_in; ++j) {
      const std::string name = sig.params[j].name ? sig.params[j].name : "";
      auto it = std::find(names.begin(), names.end(), name);
      if (it == names.end()) throw std::runtime_error(who + "'s parameter " + std::to_string(j) + " '" + name + "' is not an input of " + kernel.name);
      bound.push_back(static_cast<size_t>(it - names.begin()));
    }
    return bound;
  }
  ~State() {
    if (request.target != codegen::Target::Cuda) return;
    const GpuRuntime& rt = GpuRuntime::get();
    for (void* p : device_inputs) rt.free_(p);
    if (flush) rt.free_(flush);
  }
};

Runner::Runner(const codegen::KernelDefinition& kernel, const RunRequest& request, const std::string& work_dir)
    : state_(new State) {
  State& s = *state_;
  s.kernel = kernel;
  s.request = request;
  s.work_dir = work_dir;
  // The inputs: the model's values where known, random data for the rest.
  s.reference_func = codegen::lower_kernel(kernel, codegen::Target::Cpu).func;
  s.reference_text = reference_source(s.reference_func);
  std::mt19937_64 rng(request.seed);
  for (size_t k = 0; k < kernel.inputs.size(); ++k) {
    const std::vector<int64_t> shape = constant_shape(kernel.inputs[k], kernel.name);
    s.inputs.push_back(kernel.known_inputs[k] ? *kernel.known_inputs[k] : random_tensor(kernel.inputs[k].dtype(), shape, rng));
    s.names.push_back(kernel.inputs[k].name());
  }
  for (const te::Tensor& t : kernel.outputs) s.output_shapes.push_back(constant_shape(t, kernel.name));
}

void Runner::compute_reference() {
  State& s = *state_;
  const codegen::KernelDefinition& kernel = s.kernel;
  // Workers of one kernel share the reference folder: the first builds and runs the reference,
  // the others wait for it and read its outputs from the cache.
  std::filesystem::create_directories(s.work_dir);
  const FileLock lock(s.work_dir + "/reference_" + std::to_string(std::hash<std::string>()(s.reference_text)) + ".lock",
                      FileLock::Mode::Wait);
  // The reference: the CPU backend's generated C++ under the host compiler; where that cannot be
  // built, the CPU backend's interpreter (the same loop nest; slower on large shapes).
  std::string reference_path;
  try {
    reference_path = build_reference(s.reference_text, s.work_dir);
  } catch (const UserError& e) {
    std::cerr << "tune: the reference library did not build; using the interpreter: " << e.what() << "\n";
  }
  // Reference outputs are cached beside the reference library, keyed by its source (the library's
  // name), the inputs' bytes (model constants differ between kernels of the same structure) and
  // the seed: every round of a kernel runs in a new worker process, and the CPU reference of a large
  // contraction takes seconds to minutes.
  const std::string cache = reference_path.empty() ? "" : reference_path + "." + inputs_digest(s.inputs) + ".expected";
  if (!cache.empty() && load_expected(cache, kernel, s.output_shapes, s.expected)) {
    // reused
  } else if (reference_path.empty()) {
    std::vector<HostTensor> params;  // the reference function's inputs, in its order
    for (const ir::Buffer& b : s.reference_func.inputs) {
      auto it = std::find(s.names.begin(), s.names.end(), b->name);
      KILN_ASSERT(it != s.names.end(), "parameter {} is not an input of the kernel", b->name);
      params.push_back(s.inputs[static_cast<size_t>(it - s.names.begin())]);
    }
    s.expected = interpret(s.reference_func, params);
  } else {
    const runtime::Library reference = runtime::Library::open(reference_path);
    const runtime::Function fn = reference.function(kernel.name);
    std::vector<DLTensor> args;
    std::vector<HostTensor> outputs;
    for (size_t k = 0; k < s.output_shapes.size(); ++k) outputs.emplace_back(kernel.outputs[k].dtype(), s.output_shapes[k]);
    const std::vector<size_t> bound = s.bind(fn.signature(), "the reference");
    for (size_t j = 0; j < bound.size(); ++j) {
      args.push_back(dl_view(s.inputs[bound[j]].data(), fn.signature().params[j], s.inputs[bound[j]].shape(), kDLCPU));
    }
    for (size_t k = 0; k < outputs.size(); ++k) {
      args.push_back(dl_view(outputs[k].data(), fn.signature().params[bound.size() + k], s.output_shapes[k], kDLCPU));
    }
    std::vector<char> workspace(fn.workspace_bytes(args) + 64);
    fn(args, nullptr, workspace.data());
    s.expected = outputs;
    save_expected(cache, s.expected);
  }

  // A float output with no finite reference value would match any poisoned (NaN) output: the
  // check would prove nothing.
  for (size_t k = 0; k < s.expected.size(); ++k) {
    const HostTensor& want = s.expected[k];
    if (dtype_class(want.dtype()) != DTypeClass::Float || want.num_elements() == 0) continue;
    bool finite = false;
    for (int64_t i = 0; i < want.num_elements() && !finite; ++i) finite = std::isfinite(want.get_double(i));
    if (!finite) {
      throw std::runtime_error("the reference output " + std::to_string(k) + " of " + kernel.name +
                               " has no finite value on the random inputs (seed " + std::to_string(s.request.seed) +
                               "), so no candidate can be checked");
    }
  }
}

void Runner::attach_device() {
  State& s = *state_;
  KILN_ASSERT(s.expected.size() == s.output_shapes.size(), "Runner::attach_device before compute_reference");
  if (s.request.target == codegen::Target::Cuda) {
    const GpuRuntime& rt = GpuRuntime::get();
    for (const HostTensor& t : s.inputs) {
      void* p = nullptr;
      rt.check(rt.malloc_(&p, std::max<size_t>(t.num_bytes(), 256)), "cudaMalloc");
      rt.check(rt.memcpy_(p, t.data(), t.num_bytes(), GpuRuntime::kHostToDevice), "cudaMemcpy");
      s.device_inputs.push_back(p);
    }
    int l2 = 0;
    rt.device_attribute(&l2, GpuRuntime::kAttrL2CacheSize, 0);
    s.flush_bytes = std::max<size_t>(2 * static_cast<size_t>(l2), 64 << 20);
    rt.check(rt.malloc_(&s.flush, s.flush_bytes), "cudaMalloc");
    // The GPU busy for a while before the first timing: an idle GPU runs at a lower clock for the
    // first milliseconds of work, and the first candidate timed (each worker's first: the default
    // schedule in the first round) would read slow. Run s30e: the Gemma layer's default 143-162 us
    // (median 155.6), against 140.8-143.2 us in the other runs.
    const auto warm = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - warm < std::chrono::milliseconds(200)) {
      for (int k = 0; k < 16; ++k) rt.check(rt.memset_async(s.flush, k, s.flush_bytes, nullptr), "cudaMemsetAsync");
      rt.check(rt.synchronize(), "the warm-up");
    }
  } else {
    s.host_flush.resize(64 << 20);
  }
}

Runner::~Runner() { delete state_; }

void Runner::measure(const BuiltCandidate& built, Record& record) {
  State& s = *state_;
  KILN_ASSERT(s.attached(), "Runner::measure before attach_device");
  record.registers = built.registers;
  record.spill_bytes = built.spill_bytes;
  if (built.illegal) {
    record.status = "illegal", record.error = built.error;
    return;
  }
  if (built.library.empty()) {
    record.status = "build_failed", record.error = built.error;
    return;
  }
  const bool cuda = s.request.target == codegen::Target::Cuda;
  const runtime::Library library = runtime::Library::open(built.library);
  const runtime::Function fn = library.function(built.function);
  const KilnSignature& sig = fn.signature();
  std::vector<size_t> bound;
  try {
    bound = s.bind(sig, "the candidate");
  } catch (const std::runtime_error& e) {
    record.status = "run_failed", record.error = e.what();
    return;
  }
  const size_t n_in = bound.size();
  const GpuRuntime* rt = cuda ? &GpuRuntime::get() : nullptr;
  std::vector<HostTensor> outputs;
  std::vector<void*> device_outputs;
  std::vector<DLTensor> args;
  for (size_t k = 0; k < s.expected.size(); ++k) outputs.emplace_back(s.expected[k].dtype(), s.output_shapes[k]);
  for (size_t j = 0; j < n_in; ++j) {
    const size_t k = bound[j];
    args.push_back(dl_view(cuda ? s.device_inputs[k] : s.inputs[k].data(), sig.params[j], s.inputs[k].shape(), cuda ? kDLCUDA : kDLCPU));
  }
  for (size_t k = 0; k < outputs.size(); ++k) {
    void* p = outputs[k].data();
    if (cuda) rt->check(rt->malloc_(&p, std::max<size_t>(outputs[k].num_bytes(), 256)), "cudaMalloc");
    device_outputs.push_back(p);
    args.push_back(dl_view(p, sig.params[n_in + k], s.output_shapes[k], cuda ? kDLCUDA : kDLCPU));
  }
  void* workspace = nullptr;
  std::vector<char> host_workspace;
  const size_t workspace_bytes = fn.workspace_bytes(args);
  if (cuda && workspace_bytes > 0) rt->check(rt->malloc_(&workspace, workspace_bytes), "cudaMalloc");
  if (!cuda) host_workspace.resize(workspace_bytes + 64), workspace = host_workspace.data();
  auto release = [&] {
    if (!cuda) return;
    for (void* p : device_outputs) rt->free_(p);
    if (workspace) rt->free_(workspace);
  };
  auto call = [&]() -> bool {
    const int32_t status = fn.try_call(args, nullptr, workspace);
    if (status != KILN_OK) {
      record.status = "run_failed", record.error = "kiln_" + built.function + " returned " + std::to_string(status) + ": " + fn.last_error();
      return false;
    }
    return true;
  };
  try {
    // 1. Check: poisoned outputs, one call, compare with the CPU backend.
    for (size_t k = 0; k < outputs.size(); ++k) {
      if (cuda) rt->check(rt->memset_async(device_outputs[k], 0x7f, outputs[k].num_bytes(), nullptr), "cudaMemset");
      else std::memset(outputs[k].data(), 0x7f, outputs[k].num_bytes());
    }
    if (!call()) return release();
    if (cuda) {
      rt->check(rt->synchronize(), "the kernel");
      for (size_t k = 0; k < outputs.size(); ++k) {
        rt->check(rt->memcpy_(outputs[k].data(), device_outputs[k], outputs[k].num_bytes(), GpuRuntime::kDeviceToHost), "cudaMemcpy");
      }
    }
    for (size_t k = 0; k < outputs.size(); ++k) {
      std::string why;
      if (!outputs_match(outputs[k], s.expected[k], why)) {
        record.status = "wrong", record.error = "output " + std::to_string(k) + ": " + why;
        return release();
      }
    }
    // 2. Time: warm-up, then repeats, caches flushed before each.
    std::vector<double> times_us;
    void *start = nullptr, *stop = nullptr;
    if (cuda) rt->check(rt->event_create(&start), "cudaEventCreate"), rt->check(rt->event_create(&stop), "cudaEventCreate");
    for (int r = 0; r < s.request.warmup + s.request.repeats; ++r) {
      if (cuda) {
        rt->check(rt->memset_async(s.flush, r & 0xff, s.flush_bytes, nullptr), "cudaMemsetAsync");
        rt->check(rt->event_record(start, nullptr), "cudaEventRecord");
        if (!call()) break;
        rt->check(rt->event_record(stop, nullptr), "cudaEventRecord");
        rt->check(rt->event_synchronize(stop), "the kernel");
        float ms = 0;
        rt->check(rt->event_elapsed(&ms, start, stop), "cudaEventElapsedTime");
        if (r >= s.request.warmup) times_us.push_back(1000.0 * ms);
      } else {
        std::memset(s.host_flush.data(), r & 0xff, s.host_flush.size());
        const auto t0 = std::chrono::steady_clock::now();
        if (!call()) break;
        const auto t1 = std::chrono::steady_clock::now();
        if (r >= s.request.warmup) times_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      }
    }
    if (cuda) rt->event_destroy(start), rt->event_destroy(stop);
    if (record.status == "run_failed") return release();
    if (times_us.empty() || !(percentile(times_us, 0.5) > 0)) {
      // CUDA events a clock tick apart: the call enqueued no work on the stream it was given.
      record.status = "run_failed";
      record.error = "timed at 0 us: kiln_" + built.function + " ran no work between the timing events on its stream";
      return release();
    }
    record.status = "ok";
    record.median_us = percentile(times_us, 0.5);
    record.min_us = percentile(times_us, 0.0);
    record.p90_us = percentile(times_us, 0.9);
    record.repeats = static_cast<int>(times_us.size());
  } catch (const std::runtime_error& e) {
    record.status = "run_failed", record.error = e.what();
    release();
    // A CUDA error here is sticky (the context is lost): nothing after it can be measured.
    if (cuda) throw;
    return;
  }
  release();
}

}  // namespace kiln::tune
