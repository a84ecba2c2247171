#include "kiln/runtime/CudaBackend.h"

#include <dlfcn.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <mutex>
#include <thread>

#include "kiln/codegen/Build.h"
#include "kiln/codegen/Codegen.h"
#include "kiln/codegen/GraphFunctions.h"
#include "kiln/ir/IROperator.h"
#include "kiln/runtime/validate.h"
#include "kiln/support/Error.h"

namespace kiln {

namespace fs = std::filesystem;

namespace {

// The few CUDA runtime entry points the backend needs, loaded with dlopen.
struct CudaRuntime {
  int (*malloc_)(void**, size_t) = nullptr;
  int (*free_)(void*) = nullptr;
  int (*memcpy_)(void*, const void*, size_t, int) = nullptr;
  int (*memset_)(void*, int, size_t) = nullptr;
  int (*synchronize)() = nullptr;
  const char* (*error_string)(int) = nullptr;

  static const CudaRuntime& get() {
    static CudaRuntime rt = load();
    return rt;
  }

 private:
  static CudaRuntime load() {
    void* lib = nullptr;
    for (const char* name : {"libcudart.so", "libcudart.so.13", "libcudart.so.12", "/usr/local/cuda/lib64/libcudart.so"}) {
      if ((lib = dlopen(name, RTLD_NOW | RTLD_GLOBAL))) break;
    }
    if (!lib) user_error("the CUDA runtime (libcudart.so) could not be loaded: {}", dlerror());
    CudaRuntime rt;
    auto sym = [&](const char* n) {
      void* p = dlsym(lib, n);
      if (!p) user_error("libcudart has no {}", n);
      return p;
    };
    rt.malloc_ = reinterpret_cast<int (*)(void**, size_t)>(sym("cudaMalloc"));
    rt.free_ = reinterpret_cast<int (*)(void*)>(sym("cudaFree"));
    rt.memcpy_ = reinterpret_cast<int (*)(void*, const void*, size_t, int)>(sym("cudaMemcpy"));
    rt.memset_ = reinterpret_cast<int (*)(void*, int, size_t)>(sym("cudaMemset"));
    rt.synchronize = reinterpret_cast<int (*)()>(sym("cudaDeviceSynchronize"));
    rt.error_string = reinterpret_cast<const char* (*)(int)>(sym("cudaGetErrorString"));
    return rt;
  }
};

constexpr int kHostToDevice = 1, kDeviceToHost = 2;

void check(int status, const char* what) {
  if (status != 0) throw InternalError(std::string(what) + " failed: " + CudaRuntime::get().error_string(status));
}

// One backend call of the generate pass: the function to run, or why there is none.
struct Prepared {
  LoweredFunc func;
  std::vector<std::optional<HostTensor>> known;
  size_t unit = 0;
  std::string error;  // non-empty: rethrown in the run pass
  enum class ErrorKind { None, Unsupported, User, Internal } error_kind = ErrorKind::None;
};

DLDataType dl_type(DType d) {
  DLDataType t;
  t.bits = static_cast<uint8_t>(dtype_bits(d));
  t.lanes = 1;
  switch (dtype_class(d)) {
    case DTypeClass::Bool: t.code = 6; break;
    case DTypeClass::Int: t.code = kDLInt; break;
    case DTypeClass::UInt: t.code = kDLUInt; break;
    case DTypeClass::Float: t.code = d == DType::BFloat16 ? kDLBfloat : kDLFloat; break;
  }
  return t;
}

std::vector<int64_t> constant_shape(const ir::Buffer& b) {
  std::vector<int64_t> shape;
  for (const ir::Expr& d : b->shape) {
    auto c = ir::as_const_int(d);
    if (!c) unsupported("output {} has a shape that is not known before running", b->name);
    shape.push_back(*c);
  }
  return shape;
}

struct DeviceBuffer {
  void* ptr = nullptr;
  explicit DeviceBuffer(size_t bytes) { check(CudaRuntime::get().malloc_(&ptr, std::max<size_t>(bytes, 256)), "cudaMalloc"); }
  ~DeviceBuffer() { CudaRuntime::get().free_(ptr); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

std::vector<HostTensor> run_through_contract(void* library, const Prepared& p,
                                             const std::map<std::string, HostTensor>& inputs) {
  const CudaRuntime& rt = CudaRuntime::get();
  const std::string name = codegen::c_identifier(p.func.name);
  auto fn = reinterpret_cast<KilnKernelFn>(dlsym(library, ("kiln_" + name).c_str()));
  auto sig_fn = reinterpret_cast<KilnSignatureFn>(dlsym(library, ("kiln_signature_" + name).c_str()));
  if (!fn || !sig_fn) internal_error("library has no kiln_" + name);
  const KilnSignature& sig = *sig_fn();
  std::vector<HostTensor> host;
  for (size_t k = 0; k < p.func.inputs.size(); ++k) {
    if (p.known[k]) {
      host.push_back(*p.known[k]);
      continue;
    }
    auto it = inputs.find(p.func.inputs[k]->name);
    if (it == inputs.end()) user_error("no value given for input '{}'", p.func.inputs[k]->name);
    host.push_back(it->second);
  }
  for (const ir::Buffer& b : p.func.outputs) host.emplace_back(b->dtype, constant_shape(b));
  std::vector<std::unique_ptr<DeviceBuffer>> device;
  std::vector<DLTensor> args(host.size());
  for (size_t k = 0; k < host.size(); ++k) {
    device.push_back(std::make_unique<DeviceBuffer>(host[k].num_bytes()));
    if (k < p.func.inputs.size()) {
      check(rt.memcpy_(device[k]->ptr, host[k].data(), host[k].num_bytes(), kHostToDevice), "cudaMemcpy");
    } else {
      check(rt.memset_(device[k]->ptr, 0x7f, std::max<size_t>(host[k].num_bytes(), 1)), "cudaMemset");  // poison
    }
    DLTensor& t = args[k];
    t.data = device[k]->ptr;
    t.device = DLDevice{kDLCUDA, 0};
    t.ndim = host[k].ndim();
    t.dtype = dl_type(host[k].dtype());
    t.shape = const_cast<int64_t*>(host[k].shape().data());
    t.strides = nullptr;
    t.byte_offset = 0;
  }
  std::vector<int64_t> symbols(std::max(1, sig.num_symbols));
  std::string message;
  if (kiln::abi::validate_arguments(sig, args.data(), static_cast<int32_t>(args.size()), symbols.data(), &message) != KILN_OK) {
    internal_error("the generated signature rejects the test's own tensors: " + message);
  }
  DeviceBuffer workspace(sig.workspace_bytes(symbols.data()));
  const int32_t status = fn(args.data(), static_cast<int32_t>(args.size()), workspace.ptr, nullptr);
  if (status != KILN_OK) {
    auto last_error = reinterpret_cast<const char* (*)()>(dlsym(library, "kiln_last_error"));
    internal_error("kiln_" + name + " returned " + std::to_string(status) + ": " + (last_error ? last_error() : ""));
  }
  check(rt.synchronize(), "kernel execution");
  std::vector<HostTensor> outputs;
  for (size_t k = p.func.inputs.size(); k < host.size(); ++k) {
    check(rt.memcpy_(host[k].data(), device[k]->ptr, host[k].num_bytes(), kDeviceToHost), "cudaMemcpy");
    outputs.push_back(host[k]);
  }
  return outputs;
}

}  // namespace

std::string build_stamp(const std::string& arch) { return arch + " support " + codegen::support_files_digest(); }

bool built_library_current(const std::string& source_file, const std::string& source_text, const std::string& library,
                           const std::string& arch) {
  auto read = [](const std::string& path, std::string& text) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return false;
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    return true;
  };
  std::string old_source, stamp;
  return fs::exists(library) && read(library + ".stamp", stamp) && stamp == build_stamp(arch) && read(source_file, old_source) &&
         old_source == source_text;
}

std::vector<CaseResult> run_test_cases_cuda(const std::vector<std::string>& folders, const CudaTestOptions& options) {
  CudaRuntime::get();  // fail early, before the long passes, when there is no CUDA runtime
  fs::create_directories(options.work_dir);
  codegen::write_support_files((fs::path(options.work_dir) / "include").string());

  // 1. Generate.
  std::vector<Prepared> prepared;
  auto generate = [&](const Graph& graph, const std::map<std::string, HostTensor>& inputs) {
    Prepared p;
    std::vector<HostTensor> dummy;
    try {
      ops::BuildOptions build;
      build.specialize = inputs;
      const std::string name = "case" + std::to_string(prepared.size()) + "_" + graph.name;
      auto functions = codegen::lower_graph(graph, codegen::Target::Cuda, name, {}, build);
      p.func = functions.at(0).func;
      p.known = functions.at(0).known_inputs;
      for (const ir::Buffer& b : p.func.outputs) dummy.emplace_back(b->dtype, constant_shape(b));
      codegen::generate_module({p.func}, codegen::Target::Cuda);  // printing errors belong to this case
    } catch (const UnsupportedError& e) {
      p.error = e.what(), p.error_kind = Prepared::ErrorKind::Unsupported;
    } catch (const UserError& e) {
      p.error = e.what(), p.error_kind = Prepared::ErrorKind::User;
    } catch (const InternalError& e) {
      p.error = e.what(), p.error_kind = Prepared::ErrorKind::Internal;
    }
    prepared.push_back(std::move(p));
    return dummy;
  };
  std::vector<CaseResult> results;
  for (const std::string& folder : folders) results.push_back(run_test_case(folder, generate));

  // 2. Build: round-robin into translation units, compiled in parallel.
  const size_t units = std::max(1, options.translation_units);
  std::vector<std::vector<LoweredFunc>> unit_funcs(units);
  size_t n = 0;
  for (Prepared& p : prepared) {
    if (p.error_kind != Prepared::ErrorKind::None) continue;
    p.unit = n++ % units;
    unit_funcs[p.unit].push_back(p.func);
  }
  std::vector<std::string> libraries(units), build_errors(units);
  std::mutex mutex;
  size_t next_unit = 0;
  auto worker = [&] {
    for (;;) {
      size_t u;
      {
        std::lock_guard<std::mutex> lock(mutex);
        if (next_unit >= units) return;
        u = next_unit++;
      }
      if (unit_funcs[u].empty()) continue;
      const fs::path source = fs::path(options.work_dir) / ("unit" + std::to_string(u) + ".cu");
      const std::string text = codegen::generate_module(unit_funcs[u], codegen::Target::Cuda);
      const std::string library = (fs::path(options.work_dir) / ("libunit" + std::to_string(u) + ".so")).string();
      if (options.reuse_built && built_library_current(source.string(), text, library, options.arch)) {
        libraries[u] = library;
        std::lock_guard<std::mutex> lock(mutex);
        std::cerr << "reused unit " << u << " (" << unit_funcs[u].size() << " functions, built by an earlier run)\n";
        continue;
      }
      fs::remove(library + ".stamp");
      std::ofstream(source) << text;
      codegen::BuildOptions build;
      build.archs = {options.arch};
      build.include_dir = (fs::path(options.work_dir) / "include").string();
      try {
        codegen::build_shared_library({source.string()}, library, build);
        std::ofstream(library + ".stamp") << build_stamp(options.arch);
        libraries[u] = library;
      } catch (const UserError& e) {
        build_errors[u] = e.what();
      }
      std::lock_guard<std::mutex> lock(mutex);
      std::cerr << "built unit " << u << " (" << unit_funcs[u].size() << " functions)"
                << (build_errors[u].empty() ? "" : ": FAILED") << "\n";
    }
  };
  std::vector<std::thread> threads;
  for (int j = 0; j < std::max(1, options.jobs); ++j) threads.emplace_back(worker);
  for (std::thread& t : threads) t.join();

  // 3. Run through the contract.
  std::vector<void*> handles(units, nullptr);
  for (size_t u = 0; u < units; ++u) {
    if (libraries[u].empty()) continue;
    handles[u] = dlopen(libraries[u].c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handles[u]) build_errors[u] = std::string("dlopen failed: ") + dlerror();
  }
  size_t call = 0;
  auto run = [&](const Graph&, const std::map<std::string, HostTensor>& inputs) {
    KILN_ASSERT(call < prepared.size(), "more backend calls in the run pass than in the generate pass");
    const Prepared& p = prepared[call++];
    switch (p.error_kind) {
      case Prepared::ErrorKind::Unsupported: throw UnsupportedError(p.error);
      case Prepared::ErrorKind::User: throw UserError(p.error);
      case Prepared::ErrorKind::Internal: throw InternalError(p.error);
      case Prepared::ErrorKind::None: break;
    }
    if (!handles[p.unit]) throw InternalError("translation unit " + std::to_string(p.unit) + ": " + build_errors[p.unit]);
    return run_through_contract(handles[p.unit], p, inputs);
  };
  for (size_t k = 0; k < folders.size(); ++k) results[k] = run_test_case(folders[k], run);
  return results;
}

}  // namespace kiln
