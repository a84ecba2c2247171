// kiln's TensorRT plugin harness (issue 3, verification (b)). Without libnvinfer, it does what
// TensorRT's ONNX parser, builder and runtime do with a plugin library:
//   dlopen + setLoggerFinder + getCreators; the creator by name, version and namespace;
//   createPlugin(kBUILD) from the rewritten node's attributes as the parser converts them;
//   getNbOutputs, getOutputDataTypes, supportsFormatCombination (accepted and rejected
//   combinations), getOutputShapes with symbolic input dims (through a minimal IExprBuilder:
//   symbolic dims must stay symbolic and evaluate right under two sets of symbol values) and
//   with concrete dims, getWorkspaceSize;
//   getFieldsToSerialize -> createPlugin(kRUNTIME) round trip, clone (the original destroyed
//   before the clone is used), attachToContext;
//   then, on a GPU, enqueue on a non-default stream with device buffers (outputs poisoned) and a
//   comparison with kiln's CPU backend (the case's expected outputs).
// Usage: kiln_plugin_harness [--no-gpu] LIBRARY CASE_FILE...   (exit 1 if anything fails)
#include <NvInferRuntime.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <cstdio>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kiln_plugin_case.h"

using namespace nvinfer1;

namespace {

// ---- a minimal IExprBuilder: expressions as trees over named symbols ----

class Dim;
class DimImpl : public apiv::VDimensionExpr {
 public:
  bool isConstant() const override { return constant; }
  int64_t getConstantValue() const override { return constant ? value : -1; }
  bool isSizeTensor() const override { return false; }
  bool constant = false;
  int64_t value = 0;
  std::string symbol;  // a leaf symbol, when not constant and no operation
  DimensionOperation op = DimensionOperation::kSUM;
  const Dim* a = nullptr;
  const Dim* b = nullptr;
};

class Dim : public IDimensionExpr {
 public:
  Dim() { mImpl = &impl; }
  ~Dim() noexcept override = default;
  DimImpl impl;

  int64_t eval(const std::map<std::string, int64_t>& env) const {
    if (impl.constant) return impl.value;
    if (!impl.a) return env.at(impl.symbol);
    const int64_t x = impl.a->eval(env), y = impl.b->eval(env);
    switch (impl.op) {
      case DimensionOperation::kSUM: return x + y;
      case DimensionOperation::kPROD: return x * y;
      case DimensionOperation::kMAX: return std::max(x, y);
      case DimensionOperation::kMIN: return std::min(x, y);
      case DimensionOperation::kSUB: return x - y;
      case DimensionOperation::kEQUAL: return x == y;
      case DimensionOperation::kLESS: return x < y;
      case DimensionOperation::kFLOOR_DIV: return x / y - ((x % y != 0) && ((x < 0) != (y < 0)));
      case DimensionOperation::kCEIL_DIV: return (x + y - 1) / y;
    }
    return -1;
  }
  std::string text() const {
    if (impl.constant) return std::to_string(impl.value);
    if (!impl.a) return impl.symbol;
    static const char* ops[] = {"+", "*", "max", "min", "-", "==", "<", "//", "ceildiv"};
    return "(" + impl.a->text() + " " + ops[static_cast<int>(impl.op)] + " " + impl.b->text() + ")";
  }
};

class BuilderImpl : public apiv::VExprBuilder {
 public:
  std::deque<Dim> dims;  // stable addresses
  const Dim* make() { return &dims.emplace_back(); }
  IDimensionExpr const* constant(int64_t value) override {
    Dim* d = &dims.emplace_back();
    d->impl.constant = true;
    d->impl.value = value;
    return d;
  }
  IDimensionExpr const* operation(DimensionOperation op, IDimensionExpr const& first, IDimensionExpr const& second) override {
    const Dim& a = static_cast<const Dim&>(first);
    const Dim& b = static_cast<const Dim&>(second);
    Dim* d = &dims.emplace_back();
    if (a.impl.constant && b.impl.constant) {  // TensorRT folds constants too
      d->impl.constant = true;
      d->impl.a = &a, d->impl.b = &b, d->impl.op = op;
      d->impl.value = d->eval({});
      d->impl.a = d->impl.b = nullptr;
      return d;
    }
    d->impl.op = op;
    d->impl.a = &a;
    d->impl.b = &b;
    return d;
  }
  IDimensionExpr const* declareSizeTensor(int32_t, IDimensionExpr const&, IDimensionExpr const&) override { return nullptr; }
  const Dim* symbol(const std::string& name) {
    Dim* d = &dims.emplace_back();
    d->impl.symbol = name;
    return d;
  }
};

class Builder : public IExprBuilder {
 public:
  Builder() { mImpl = &impl; }
  ~Builder() noexcept override = default;
  BuilderImpl impl;
};

// ---- logging ----

class Logger : public ILogger {
 public:
  void log(Severity severity, AsciiChar const* msg) noexcept override {
    if (severity <= Severity::kWARNING) std::printf("    [plugin log] %s\n", msg);
    errors += severity <= Severity::kERROR;
  }
  int errors = 0;
};
class Finder : public ILoggerFinder {
 public:
  ILogger* findLogger() override { return &logger; }
  Logger logger;
};

// ---- checks ----

struct Result {
  std::vector<std::string> failures;
  std::vector<std::string> notes;
  void check(bool ok, const std::string& what) {
    if (!ok) failures.push_back(what);
  }
};

DataType trt(int32_t t) { return static_cast<DataType>(t); }

Dims dims_of(const std::vector<int64_t>& d) {
  Dims out{};
  out.nbDims = static_cast<int32_t>(d.size());
  for (size_t i = 0; i < d.size(); ++i) out.d[i] = d[i];
  return out;
}

std::vector<PluginField> parser_fields(const kiln_case::Case& c) {
  std::vector<PluginField> fields;
  for (const kiln_case::Field& f : c.fields) {
    fields.emplace_back(f.name.c_str(), f.data.data(), static_cast<PluginFieldType>(f.type), f.length);
  }
  return fields;
}

void check_shapes(IPluginV3OneBuild* build, const kiln_case::Case& c, Result& r) {
  const int32_t ni = static_cast<int32_t>(c.inputs.size()), no = static_cast<int32_t>(c.outputs.size());
  // Symbolic.
  {
    Builder builder;
    std::vector<DimsExprs> in(ni), out(no);
    for (int32_t i = 0; i < ni; ++i) {
      in[i].nbDims = static_cast<int32_t>(c.inputs[i].dims.size());
      for (int32_t d = 0; d < in[i].nbDims; ++d) {
        const std::string& s = c.inputs[i].dim_symbols[d];
        in[i].d[d] = s == "#" ? builder.constant(c.inputs[i].dims[d]) : builder.impl.symbol(s);
      }
    }
    const int32_t status = build->getOutputShapes(in.data(), ni, nullptr, 0, out.data(), no, builder);
    r.check(status == 0, "getOutputShapes (symbolic) returned " + std::to_string(status));
    if (status != 0) return;
    std::map<std::string, int64_t> env(c.symbols.begin(), c.symbols.end()), alt(c.alt_symbols.begin(), c.alt_symbols.end());
    for (int32_t o = 0; o < no; ++o) {
      const kiln_case::Tensor& t = c.outputs[o];
      r.check(out[o].nbDims == static_cast<int32_t>(t.dims.size()), t.name + ": symbolic rank " + std::to_string(out[o].nbDims));
      std::string text;
      for (int32_t d = 0; d < out[o].nbDims && d < static_cast<int32_t>(t.dims.size()); ++d) {
        const Dim* e = static_cast<const Dim*>(out[o].d[d]);
        text += (d ? ", " : "") + e->text();
        const bool varies = t.dims[d] != t.alt_dims[d];
        r.check(!varies || !e->isConstant(), t.name + " dim " + std::to_string(d) + " is the constant " + e->text() + " but depends on the symbols");
        r.check(e->eval(env) == t.dims[d], t.name + " dim " + std::to_string(d) + " = " + e->text() + " is " +
                                               std::to_string(e->eval(env)) + ", expected " + std::to_string(t.dims[d]));
        r.check(e->eval(alt) == t.alt_dims[d], t.name + " dim " + std::to_string(d) + " = " + e->text() + " under the other symbol values is " +
                                                   std::to_string(e->eval(alt)) + ", expected " + std::to_string(t.alt_dims[d]));
      }
      r.notes.push_back(t.name + ": [" + text + "]");
    }
  }
  // Concrete.
  {
    Builder builder;
    std::vector<DimsExprs> in(ni), out(no);
    for (int32_t i = 0; i < ni; ++i) {
      in[i].nbDims = static_cast<int32_t>(c.inputs[i].dims.size());
      for (int32_t d = 0; d < in[i].nbDims; ++d) in[i].d[d] = builder.constant(c.inputs[i].dims[d]);
    }
    const int32_t status = build->getOutputShapes(in.data(), ni, nullptr, 0, out.data(), no, builder);
    r.check(status == 0, "getOutputShapes (concrete) returned " + std::to_string(status));
    for (int32_t o = 0; status == 0 && o < no; ++o) {
      for (int32_t d = 0; d < out[o].nbDims; ++d) {
        r.check(out[o].d[d]->isConstant() && out[o].d[d]->getConstantValue() == c.outputs[o].dims[d],
                c.outputs[o].name + " dim " + std::to_string(d) + " with concrete inputs is not the constant " +
                    std::to_string(c.outputs[o].dims[d]));
      }
    }
  }
}

std::vector<DynamicPluginTensorDesc> descs(const kiln_case::Case& c) {
  std::vector<DynamicPluginTensorDesc> d;
  for (const auto* list : {&c.inputs, &c.outputs}) {
    for (const kiln_case::Tensor& t : *list) {
      DynamicPluginTensorDesc x{};
      x.desc.dims = dims_of(t.dims);
      x.desc.type = trt(t.type);
      x.desc.format = TensorFormat::kLINEAR;
      x.min = x.opt = x.max = x.desc.dims;
      d.push_back(x);
    }
  }
  return d;
}

void check_build(IPluginV3OneBuild* build, const kiln_case::Case& c, Result& r) {
  const int32_t ni = static_cast<int32_t>(c.inputs.size()), no = static_cast<int32_t>(c.outputs.size());
  r.check(build->getNbOutputs() == no, "getNbOutputs is " + std::to_string(build->getNbOutputs()));
  std::vector<DataType> in_types, out_types(no);
  for (const auto& t : c.inputs) in_types.push_back(trt(t.type));
  r.check(build->getOutputDataTypes(out_types.data(), no, in_types.data(), ni) == 0, "getOutputDataTypes failed");
  for (int32_t o = 0; o < no; ++o) {
    r.check(out_types[o] == trt(c.outputs[o].type), c.outputs[o].name + ": getOutputDataTypes gives type " +
                                                        std::to_string(static_cast<int>(out_types[o])));
  }
  std::vector<DynamicPluginTensorDesc> d = descs(c);
  for (int32_t p = 0; p < ni + no; ++p) {
    r.check(build->supportsFormatCombination(p, d.data(), ni, no), "supportsFormatCombination rejects position " + std::to_string(p));
  }
  for (int32_t p = 0; p < ni + no; ++p) {  // other formats are rejected
    std::vector<DynamicPluginTensorDesc> bad = d;
    bad[p].desc.format = TensorFormat::kCHW32;
    r.check(!build->supportsFormatCombination(p, bad.data(), ni, no), "supportsFormatCombination accepts kCHW32 at " + std::to_string(p));
  }
  // Mixed float types are rejected at the second float position.
  int32_t first = -1;
  for (int32_t p = 0; p < ni + no; ++p) {
    const DataType t = d[p].desc.type;
    if (t != DataType::kFLOAT && t != DataType::kHALF && t != DataType::kBF16) continue;
    if (first < 0) {
      first = p;
      continue;
    }
    std::vector<DynamicPluginTensorDesc> bad = d;
    bad[p].desc.type = t == DataType::kFLOAT ? DataType::kHALF : DataType::kFLOAT;
    r.check(!build->supportsFormatCombination(p, bad.data(), ni, no), "supportsFormatCombination accepts mixed float types at " + std::to_string(p));
    break;
  }
  r.check(build->configurePlugin(d.data(), ni, d.data() + ni, no) == 0, "configurePlugin failed");
  const size_t ws = build->getWorkspaceSize(d.data(), ni, d.data() + ni, no);
  r.notes.push_back("workspace " + std::to_string(ws) + " bytes");
  check_shapes(build, c, r);
}

bool same_fields(const PluginFieldCollection* fc, const kiln_case::Case& c, std::string* why) {
  if (!fc || fc->nbFields != static_cast<int32_t>(c.fields.size())) {
    *why = "getFieldsToSerialize gives " + std::to_string(fc ? fc->nbFields : -1) + " fields, expected " + std::to_string(c.fields.size());
    return false;
  }
  for (int32_t i = 0; i < fc->nbFields; ++i) {
    const PluginField& f = fc->fields[i];
    const kiln_case::Field& e = c.fields[i];
    if (e.name != f.name || static_cast<int32_t>(f.type) != e.type || f.length != e.length ||
        std::memcmp(f.data, e.data.data(), e.data.size()) != 0) {
      *why = "serialized field '" + std::string(f.name ? f.name : "") + "' differs from '" + e.name + "'";
      return false;
    }
  }
  return true;
}

std::string run_gpu(IPluginV3OneRuntime* runtime, IPluginV3OneBuild* build, const kiln_case::Case& c, Result& r) {
  const int32_t ni = static_cast<int32_t>(c.inputs.size()), no = static_cast<int32_t>(c.outputs.size());
  std::vector<DynamicPluginTensorDesc> d = descs(c);
  std::vector<PluginTensorDesc> in, out;
  for (int32_t p = 0; p < ni + no; ++p) (p < ni ? in : out).push_back(d[p].desc);
  if (runtime->onShapeChange(in.data(), ni, out.data(), no) != 0) return "onShapeChange failed";
  cudaStream_t stream;
  if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) return "cudaStreamCreate failed";
  std::vector<void*> ins, outs;
  for (const auto& t : c.inputs) {
    void* p = nullptr;
    cudaMalloc(&p, std::max<size_t>(1, t.data.size()));
    cudaMemcpy(p, t.data.data(), t.data.size(), cudaMemcpyHostToDevice);
    ins.push_back(p);
  }
  for (const auto& t : c.outputs) {
    void* p = nullptr;
    const size_t bytes = static_cast<size_t>(t.elements()) * kiln_case::type_size(t.type);
    cudaMalloc(&p, std::max<size_t>(1, bytes));
    cudaMemset(p, 0xff, bytes);  // poison
    outs.push_back(p);
  }
  const size_t ws = build->getWorkspaceSize(d.data(), ni, d.data() + ni, no);
  void* workspace = nullptr;
  if (ws) cudaMalloc(&workspace, ws);
  cudaDeviceSynchronize();
  std::string error;
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  cudaEventRecord(start, stream);
  const int32_t status = runtime->enqueue(in.data(), out.data(), ins.data(), outs.data(), workspace, stream);
  cudaEventRecord(stop, stream);
  if (status != 0) error = "enqueue returned " + std::to_string(status);
  else if (cudaStreamSynchronize(stream) != cudaSuccess) error = std::string("CUDA error: ") + cudaGetErrorString(cudaGetLastError());
  float ms = 0;
  cudaEventElapsedTime(&ms, start, stop);
  for (int32_t o = 0; error.empty() && o < no; ++o) {
    const auto& t = c.outputs[o];
    std::vector<char> got(static_cast<size_t>(t.elements()) * kiln_case::type_size(t.type));
    cudaMemcpy(got.data(), outs[o], got.size(), cudaMemcpyDeviceToHost);
    double rel = 0;
    error = kiln_case::compare(t, got, &rel);
    r.notes.push_back(t.name + " rel. error " + std::to_string(rel) + " (tolerance " + std::to_string(t.tolerance) + ")");
  }
  r.notes.push_back("first enqueue " + std::to_string(ms * 1000.0f) + " us (not a benchmark)");
  for (void* p : ins) cudaFree(p);
  for (void* p : outs) cudaFree(p);
  if (workspace) cudaFree(workspace);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaStreamDestroy(stream);
  return error;
}

Result run_case(IPluginCreatorV3One* creator, const kiln_case::Case& c, bool gpu) {
  Result r;
  std::vector<PluginField> fields = parser_fields(c);
  PluginFieldCollection fc{static_cast<int32_t>(fields.size()), fields.data()};
  std::unique_ptr<IPluginV3> plugin(creator->createPlugin("harness_layer", &fc, TensorRTPhase::kBUILD));
  if (!plugin) {
    r.failures.push_back("createPlugin(kBUILD) from the node's attributes returned null");
    return r;
  }
  auto* core = static_cast<IPluginV3OneCore*>(plugin->getCapabilityInterface(PluginCapabilityType::kCORE));
  auto* build = static_cast<IPluginV3OneBuild*>(plugin->getCapabilityInterface(PluginCapabilityType::kBUILD));
  auto* runtime = static_cast<IPluginV3OneRuntime*>(plugin->getCapabilityInterface(PluginCapabilityType::kRUNTIME));
  r.check(core && build && runtime, "a capability interface is missing");
  if (!r.failures.empty()) return r;
  r.check(c.plugin == core->getPluginName() && c.version == core->getPluginVersion() &&
              c.plugin_namespace == core->getPluginNamespace(),
          "core name/version/namespace differ");
  // A changed setting is rejected (the kernel was generated for the node's values).
  for (size_t i = 0; i < fields.size(); ++i) {
    if (fields[i].type != PluginFieldType::kINT32 || fields[i].length < 1) continue;
    std::vector<PluginField> changed = fields;
    int32_t other = *static_cast<const int32_t*>(fields[i].data) + 1;
    changed[i].data = &other;
    PluginFieldCollection cfc{static_cast<int32_t>(changed.size()), changed.data()};
    std::unique_ptr<IPluginV3> bad(creator->createPlugin("harness_bad", &cfc, TensorRTPhase::kBUILD));
    r.check(bad == nullptr, "createPlugin accepts a changed value of field '" + std::string(fields[i].name) + "'");
    break;
  }
  check_build(build, c, r);

  // Serialization round trip and deep clone.
  std::string why;
  const PluginFieldCollection* serialized = runtime->getFieldsToSerialize();
  r.check(same_fields(serialized, c, &why), why);
  std::unique_ptr<IPluginV3> restored(creator->createPlugin("harness_layer", serialized, TensorRTPhase::kRUNTIME));
  r.check(restored != nullptr, "createPlugin(kRUNTIME) from getFieldsToSerialize returned null");
  std::unique_ptr<IPluginV3> cloned(plugin->clone());
  r.check(cloned != nullptr, "clone returned null");
  plugin.reset();  // the clone must not share anything with the original
  if (!restored || !cloned) return r;
  auto* cloned_runtime = static_cast<IPluginV3OneRuntime*>(cloned->getCapabilityInterface(PluginCapabilityType::kRUNTIME));
  r.check(same_fields(cloned_runtime->getFieldsToSerialize(), c, &why), "clone: " + why);
  std::unique_ptr<IPluginV3> attached(cloned_runtime->attachToContext(nullptr));
  r.check(attached != nullptr, "attachToContext returned null");

  if (gpu) {
    // The engine's path: the plugin deserialized (kRUNTIME) does the work.
    auto* rt = static_cast<IPluginV3OneRuntime*>(restored->getCapabilityInterface(PluginCapabilityType::kRUNTIME));
    auto* rb = static_cast<IPluginV3OneBuild*>(restored->getCapabilityInterface(PluginCapabilityType::kBUILD));
    const std::string error = run_gpu(rt, rb, c, r);
    r.check(error.empty(), "enqueue: " + error);
  }
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  bool gpu = true;
  int arg = 1;
  if (arg < argc && std::string(argv[arg]) == "--no-gpu") gpu = false, ++arg;
  if (argc - arg < 2) {
    std::fprintf(stderr, "usage: kiln_plugin_harness [--no-gpu] LIBRARY CASE_FILE...\n");
    return 2;
  }
  int devices = 0;
  if (gpu && (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0)) {
    std::printf("no CUDA device: enqueue checks skipped (the TensorRT interface checks still run)\n");
    gpu = false;
  }
  void* lib = dlopen(argv[arg], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    std::printf("FAIL dlopen %s: %s\n", argv[arg], dlerror());
    return 1;
  }
  using GetCreators = IPluginCreatorInterface* const* (*)(int32_t&);
  using SetLoggerFinder = void (*)(ILoggerFinder*);
  auto get_creators = reinterpret_cast<GetCreators>(dlsym(lib, "getCreators"));
  auto set_finder = reinterpret_cast<SetLoggerFinder>(dlsym(lib, "setLoggerFinder"));
  if (!get_creators || !set_finder) {
    std::printf("FAIL %s does not export getCreators and setLoggerFinder\n", argv[arg]);
    return 1;
  }
  static Finder finder;
  set_finder(&finder);
  int32_t count = 0;
  IPluginCreatorInterface* const* creators = get_creators(count);
  std::printf("%s: %d creator(s)\n", argv[arg], count);
  int failures = 0;
  for (int i = arg + 1; i < argc; ++i) {
    kiln_case::Case c;
    try {
      c = kiln_case::load_case(argv[i]);
    } catch (const std::exception& e) {
      std::printf("FAIL %s: %s\n", argv[i], e.what());
      ++failures;
      continue;
    }
    IPluginCreatorV3One* creator = nullptr;
    for (int32_t k = 0; k < count; ++k) {
      if (std::string(creators[k]->getInterfaceInfo().kind) != "PLUGIN CREATOR_V3ONE") continue;
      auto* v3 = static_cast<IPluginCreatorV3One*>(creators[k]);
      if (c.plugin == v3->getPluginName() && c.version == v3->getPluginVersion() && c.plugin_namespace == v3->getPluginNamespace()) {
        creator = v3;
      }
    }
    Result r;
    if (!creator) r.failures.push_back("no creator " + c.plugin + " version " + c.version);
    else r = run_case(creator, c, gpu);
    std::string sym;
    for (const auto& [n, v] : c.symbols) sym += (sym.empty() ? "" : ",") + n + "=" + std::to_string(v);
    std::printf("%s %s %s (%s)%s\n", r.failures.empty() ? "PASS" : "FAIL", c.plugin.c_str(), c.dtype.c_str(), sym.c_str(),
                gpu ? " [interface + enqueue]" : " [interface only]");
    for (const std::string& n : r.notes) std::printf("    %s\n", n.c_str());
    for (const std::string& f : r.failures) std::printf("    FAILED: %s\n", f.c_str());
    failures += !r.failures.empty();
  }
  std::printf("%d case(s) failed\n", failures);
  return failures ? 1 : 0;
}
