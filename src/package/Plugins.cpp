// `kiln plugins`: the driver. Reads top to bottom: load and type the model, select groups,
// generate each plugin (kernels per dtype, package files, test data), rewrite the model, build,
// report, and only then move the finished folder into place.
#include "kiln/package/Plugins.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>

#include <google/protobuf/util/json_util.h>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unistd.h>

#include "PluginFiles.h"
#include "PluginGroups.h"
#include "PluginKernel.h"
#include "kiln/codegen/Codegen.h"
#include "kiln/ir/IRMutator.h"
#include "kiln/ir/IROperator.h"
#include "kiln/ir/IRPrinter.h"
#include "kiln/ir/Simplify.h"
#include "kiln/onnx/Proto.h"
#include "kiln/ops/GraphTensors.h"
#include "kiln/runtime/GraphRunner.h"
#include "kiln/support/Error.h"

namespace fs = std::filesystem;

namespace kiln::package {

namespace {

std::string short_dtype(DType d) {
  switch (d) {
    case DType::Float32: return "fp32";
    case DType::Float16: return "fp16";
    case DType::BFloat16: return "bf16";
    default: return std::string(dtype_name(d));
  }
}

double tolerance(DType d) { return d == DType::Float32 ? 1e-4 : d == DType::Float16 ? 1e-2 : 4e-2; }

std::string join(const std::vector<std::string>& items, const std::string& sep = ", ") {
  std::string s;
  for (size_t i = 0; i < items.size(); ++i) s += (i ? sep : "") + items[i];
  return s;
}

onnx::ModelProto read_model(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError("cannot open model " + path);
  onnx::ModelProto model;
  if (!model.ParseFromIstream(&in)) throw UserError(path + " is not an ONNX model (protobuf parse failed)");
  return model;
}

Graph import_model(const onnx::ModelProto& model, const std::string& dir) {
  Graph g = graph_from_model_proto(model, ExternalDataSource{dir});
  ops::infer_types(g);
  return g;
}

std::string find_nvcc(const PluginOptions& options) {
  std::vector<std::string> candidates;
  if (!options.nvcc.empty()) candidates.push_back(options.nvcc);
  if (const char* c = std::getenv("CUDACXX"); c && *c) candidates.emplace_back(c);
  if (const char* path = std::getenv("PATH")) {
    std::string p = path;
    for (size_t start = 0, end; start <= p.size(); start = end + 1) {
      end = p.find(':', start);
      if (end == std::string::npos) end = p.size();
      candidates.push_back(p.substr(start, end - start) + "/nvcc");
    }
  }
  candidates.emplace_back("/usr/local/cuda/bin/nvcc");
  for (const std::string& c : candidates) {
    if (!c.empty() && ::access(c.c_str(), X_OK) == 0) return c;
  }
  return "";
}

std::string tensorrt_root(const PluginOptions& options) {
  if (!options.tensorrt_root.empty()) return options.tensorrt_root;
  const char* env = std::getenv("TENSORRT_ROOT");
  return env ? env : "";
}

// Concrete shape of `shape` under the symbol values.
std::vector<int64_t> concrete(const std::vector<ir::Expr>& shape, const std::vector<std::pair<ir::Expr, ir::Expr>>& binding,
                              const std::string& what) {
  std::vector<int64_t> dims;
  for (const ir::Expr& d : shape) {
    auto c = ir::as_const_int(ir::simplify(ir::substitute(d, binding)));
    if (!c) throw UserError(what + ": dim " + ir::to_string(d) + " is not known from the symbol values");
    dims.push_back(*c);
  }
  return dims;
}

struct Generated {
  PluginGroup group;
  PluginKernels kernels;
  std::vector<PluginFieldValue> fields;
  onnx::GraphProto fp32_subgraph;
  std::vector<std::string> replaced;
};

// The plugin's kernels: the fp32 subgraph always (it is the plugin's semantics), each dtype.
PluginKernels generate_kernels(const Graph& graph, const onnx::ModelProto& model, const PluginGroup& group,
                               const PluginOptions& options, onnx::GraphProto* fp32_subgraph, const std::string& replaced) {
  PluginKernels k;
  *fp32_subgraph = plugin_subgraph(graph, model, group, DType::Float32);
  k.fp32_graph = import_model(subgraph_model(*fp32_subgraph, model), "");
  for (DType dtype : options.dtypes) {
    const std::string fn = group.name + "_" + short_dtype(dtype);
    try {
      const Graph sub = dtype == DType::Float32 ? k.fp32_graph
                                                : import_model(subgraph_model(plugin_subgraph(graph, model, group, dtype), model), "");
      std::string note;
      k.lowered.push_back(lower_plugin_subgraph(sub, fn, &options, &note));
      if (!note.empty()) k.schedule_notes.push_back(note);
    } catch (const UserError& e) {
      throw UserError("plugin " + group.name + " (" + replaced + "): cannot generate the " + std::string(dtype_name(dtype)) +
                      " kernel: " + e.what() + " (choose other --dtypes)");
    }
    k.float_types.push_back(dtype);
    k.functions.push_back(fn);
  }
  const Graph& sub = k.fp32_graph;
  for (const std::vector<int>* list : {&sub.inputs, &sub.outputs}) {
    for (int v : *list) {
      const DType d = sub.values[v].type->dtype;
      k.io_types.push_back(is_float(d) ? -1 : trt_data_type(d, "plugin " + group.name + " value '" + sub.values[v].name + "'"));
    }
  }
  k.output_dims = output_shape_programs(sub, group.name);
  for (int v : sub.outputs) k.output_dims_text.push_back(to_string(*sub.values[v].type));
  return k;
}

// Test data of one variant: inputs from the model where it has them (weights), random otherwise,
// rounded to the variant's type; expected outputs from the CPU backend on the fp32 subgraph.
TestCase make_test_case(const Graph& graph, const Generated& gen, size_t variant, const PluginOptions& options) {
  const Graph& sub = gen.kernels.fp32_graph;
  const DType dtype = gen.kernels.float_types[variant];
  TestCase c;
  c.plugin = gen.group.name;
  c.function = gen.kernels.functions[variant];
  c.dtype = short_dtype(dtype);
  std::vector<std::pair<ir::Expr, ir::Expr>> binding, alt;
  int64_t next = 2;
  for (const auto& [name, symbol] : sub.symbols()) {
    int64_t value = next++;
    for (const auto& [n, v] : options.test_symbols) {
      if (n == name) value = v;
    }
    binding.emplace_back(symbol, ir::Expr(value));
    alt.emplace_back(symbol, ir::Expr(value + 3));
    c.symbols.emplace_back(name, value);
    c.alt_symbols.emplace_back(name, value + 3);
  }
  std::mt19937 rng(1234 + static_cast<unsigned>(variant));
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  std::map<std::string, HostTensor> cpu_inputs;
  for (size_t i = 0; i < sub.inputs.size(); ++i) {
    const Value& v = sub.values[sub.inputs[i]];
    const DType at = is_float(v.type->dtype) ? dtype : v.type->dtype;
    TestTensor t;
    t.name = v.name;
    t.trt_type = trt_data_type(at, v.name);
    for (const ir::Expr& d : v.type->shape) t.dim_symbols.push_back(d.as<ir::Variable>() ? d.as<ir::Variable>()->name : "#");
    const std::vector<int64_t> dims = concrete(v.type->shape, binding, "plugin " + c.plugin + " input '" + v.name + "'");
    HostTensor boundary(at, dims), fp32(v.type->dtype, dims);
    const int original = graph.find_value(gen.group.inputs.size() > i ? graph.values[gen.group.inputs[i]].name : v.name);
    const Value* model_value = original >= 0 ? &graph.values[original] : nullptr;
    const bool from_model = model_value && model_value->constant && model_value->constant->shape() == dims;
    for (int64_t e = 0; e < boundary.num_elements(); ++e) {
      const double x = from_model ? model_value->constant->get_double(e)
                                  : is_float(at) ? uniform(rng) : static_cast<double>(rng() % 3);
      boundary.set_double(e, x);
      fp32.set_double(e, boundary.get_double(e));  // the rounded value
    }
    t.data = boundary;
    cpu_inputs[v.name] = fp32;
    c.inputs.push_back(std::move(t));
  }
  const std::vector<HostTensor> expected = run_graph_on_cpu(sub, cpu_inputs);
  for (size_t o = 0; o < sub.outputs.size(); ++o) {
    const Value& v = sub.values[sub.outputs[o]];
    TestTensor t;
    t.name = v.name;
    t.trt_type = trt_data_type(is_float(v.type->dtype) ? dtype : v.type->dtype, v.name);
    HostTensor e(DType::Float32, expected[o].shape());
    for (int64_t i = 0; i < e.num_elements(); ++i) e.set_double(i, expected[o].get_double(i));
    t.data = e;
    t.alt_dims = concrete(v.type->shape, alt, "plugin " + c.plugin + " output '" + v.name + "'");
    t.tolerance = is_float(v.type->dtype) ? tolerance(dtype) : 0;
    c.outputs.push_back(std::move(t));
  }
  return c;
}

void copy_common(const std::string& dir) {
  fs::create_directories(dir + "/include");
  for (const auto& [path, text] : codegen::support_files()) {
    fs::create_directories(fs::path(dir + "/include/" + path).parent_path());
    write_text(dir + "/include/" + path, text);
  }
  for (const char* f : {"kiln_trt_plugin.h", "kiln_trt_plugin.cpp", "kiln_plugin_case.h"}) {
    write_text(dir + "/" + f, template_text(f));
  }
  write_text(dir + "/kiln_last_error.cu", codegen::generate_last_error_module(codegen::Target::Cuda));
}

std::string entry_source(const std::vector<std::string>& plugins) {
  std::string decls, creators, specs;
  for (const std::string& p : plugins) {
    decls += "namespace kiln_trt::" + p + " {\nconst PluginSpec& spec();\nnvinfer1::IPluginCreatorInterface* creator();\n}\n";
    creators += "      kiln_trt::" + p + "::creator(),\n";
    specs += "      &kiln_trt::" + p + "::spec(),\n";
  }
  return fill_template(template_text("plugin_entry.cpp.in"), {{"CREATOR_DECLS", decls}, {"CREATORS", creators}, {"SPECS", specs}});
}

std::string archs_text(const std::vector<int>& archs, const char* sep) {
  std::vector<std::string> s;
  for (int a : archs) s.push_back(std::to_string(a));
  return join(s, sep);
}

void write_package(const std::string& dir, const Generated& gen, const std::vector<std::string>& cases,
                   const PluginOptions& options, const std::string& model_name, const Graph& graph) {
  const std::string& p = gen.group.name;
  copy_common(dir + "/common");
  codegen::ModuleOptions mo;
  mo.define_last_error = false;
  mo.banner = "kiln plugins " + model_name + ": plugin " + p + " (" + join(gen.replaced) + ")";
  write_text(dir + "/" + p + "_kernels.cu", codegen::generate_module(gen.kernels.lowered, codegen::Target::Cuda, mo));
  // With the kernels, a kiln library of their own (kiln.load, tvm_ffi.load_module, --bench);
  // not part of the plugin library, which takes common/kiln_last_error.cu.
  write_text(dir + "/" + p + "_kernel_library.cu", codegen::generate_library_module(codegen::Target::Cuda, gen.kernels.functions));
  write_text(dir + "/" + p + "_plugin.cpp", plugin_source(gen.group, gen.kernels, gen.fields, options, model_name, join(gen.replaced)));
  write_text(dir + "/" + p + "_entry.cpp", entry_source({p}));
  std::string decls, table, case_list;
  for (const std::string& fn : gen.kernels.functions) {
    decls += "int32_t kiln_" + fn + "(const DLTensor*, int32_t, void*, void*);\nconst KilnSignature* kiln_signature_" + fn + "(void);\n";
    table += "    {\"" + fn + "\", kiln_" + fn + ", kiln_signature_" + fn + "},\n";
  }
  for (const std::string& c : cases) case_list += (case_list.empty() ? "\"" : ", \"") + c + "\"";
  write_text(dir + "/test_" + p + ".cpp", fill_template(template_text("test_kernel.cpp.in"),
                                                       {{"PLUGIN", p}, {"KERNEL_DECLS", decls}, {"KERNEL_TABLE", table}, {"CASE_FILES", case_list}}));
  write_text(dir + "/CMakeLists.txt", fill_template(template_text("CMakeLists.txt.in"),
                                                    {{"PLUGIN", p}, {"ARCHS", archs_text(options.archs, ";")}, {"COMMON", "common"}}));
  std::vector<std::string> ins, outs, dtypes, fields, symbols;
  for (int v : gen.group.inputs) ins.push_back("`" + graph.values[v].name + "`");
  for (size_t o = 0; o < gen.group.outputs.size(); ++o) outs.push_back("`" + graph.values[gen.group.outputs[o]].name + "` " + gen.kernels.output_dims_text[o]);
  for (DType d : gen.kernels.float_types) dtypes.push_back(std::string(dtype_name(d)));
  for (const PluginFieldValue& f : gen.fields) fields.push_back("`" + f.describe() + "`");
  for (const auto& [name, s] : gen.kernels.fp32_graph.symbols()) symbols.push_back(name);
  write_text(dir + "/README.md", fill_template(template_text("README.md.in"),
                                               {{"PLUGIN", p}, {"VERSION", options.plugin_version},
                                                {"NAMESPACE", options.plugin_namespace}, {"REPLACED", join(gen.replaced)},
                                                {"MODEL", model_name}, {"INPUTS", join(ins)}, {"OUTPUTS", join(outs)},
                                                {"DTYPES", join(dtypes)}, {"ARCHS", "sm_" + archs_text(options.archs, ", sm_")},
                                                {"FIELDS", fields.empty() ? "none" : join(fields)}, {"SYMBOLS", join(symbols)}}));
  std::string bytes;
  gen.fp32_subgraph.SerializeToString(&bytes);
  onnx::ModelProto m;
  m.set_ir_version(8);
  *m.mutable_graph() = gen.fp32_subgraph;
  m.add_opset_import()->set_version(graph.opset);
  m.SerializeToString(&bytes);
  write_text(dir + "/subgraph.onnx", bytes);
}

void run_build(const std::string& dir, const PluginOptions& options, const std::string& nvcc, const std::string& trt) {
  const std::string log = dir + "/build.log";
  const std::string cmd = "cmake -S '" + dir + "' -B '" + dir + "/build' -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER='" +
                          nvcc + "' -DTENSORRT_ROOT='" + trt + "' > '" + log + "' 2>&1 && cmake --build '" + dir +
                          "/build' -j " + std::to_string(options.build_jobs) + " >> '" + log + "' 2>&1";
  if (std::system(cmd.c_str()) != 0) {
    const std::string kept = dir.substr(0, dir.rfind(".tmp-")) + ".build-failed.log";
    std::error_code ec;
    fs::copy_file(log, kept, fs::copy_options::overwrite_existing, ec);
    throw UserError("building the plugin libraries failed (no output folder was written); see " + kept);
  }
}

nlohmann::json report_json(const PluginsResult& r, const std::string& model, const PluginOptions& options) {
  nlohmann::json j;
  j["model"] = model;
  j["rewritten_model"] = fs::path(r.rewritten_model).filename().string();
  j["combined_library"] = r.combined_library.empty() ? "" : fs::relative(r.combined_library, r.out_dir).string();
  j["built"] = r.built;
  j["archs"] = options.archs;
  j["plugin_namespace"] = options.plugin_namespace;
  j["plugins"] = nlohmann::json::array();
  for (const PluginSummary& p : r.plugins) {
    j["plugins"].push_back({{"name", p.name}, {"version", options.plugin_version}, {"replaced_nodes", p.replaced_nodes},
                            {"inputs", p.inputs}, {"outputs", p.outputs}, {"fields", p.fields}, {"dtypes", p.dtypes},
                            {"library", p.library.empty() ? "" : fs::relative(p.library, r.out_dir).string()},
                            {"functions", p.functions}, {"kernel_sources", p.kernel_sources}});
  }
  return j;
}

std::string report_markdown(const PluginsResult& r, const std::string& model, const PluginOptions& options) {
  std::string s = "# kiln plugins: " + model + "\n\n";
  s += "Rewritten model: `" + fs::path(r.rewritten_model).filename().string() + "`. Combined library: " +
       (r.combined_library.empty() ? std::string("not built") : "`" + fs::relative(r.combined_library, r.out_dir).string() + "`") +
       ". Architectures: sm_" + archs_text(options.archs, ", sm_") + ".\n\n";
  s += "| plugin | replaces | inputs | outputs | dtypes | fields | library |\n| --- | --- | --- | --- | --- | --- | --- |\n";
  for (const PluginSummary& p : r.plugins) {
    std::vector<std::string> fields;
    for (const std::string& f : p.fields) fields.push_back(f.rfind("kiln_subgraph", 0) == 0 ? "kiln_subgraph (CHAR)" : f);
    s += "| `" + p.name + "` v" + options.plugin_version + " | " + join(p.replaced_nodes) + " | " + join(p.inputs) + " | " +
         join(p.outputs) + " | " + join(p.dtypes) + " | " + join(fields, "; ") + " | " +
         (p.library.empty() ? std::string("-") : "`" + fs::relative(p.library, r.out_dir).string() + "`") + " |\n";
  }
  std::string notes;
  for (const PluginSummary& p : r.plugins) {
    for (const std::string& n : p.schedule_notes) notes += "- " + n + "\n";
  }
  if (!notes.empty()) s += "\nSchedules (--records):\n\n" + notes;
  s += "\nKernel timings against PyTorch eager: not measured here (bench/plugins/bench_plugins.py DIR, on a GPU, "
       "adds them to this report).\n";
  return s;
}

}  // namespace

std::vector<DType> parse_plugin_dtypes(const std::string& list) {
  std::vector<DType> out;
  std::string item;
  std::stringstream s(list);
  while (std::getline(s, item, ',')) {
    if (item == "fp32" || item == "float32") out.push_back(DType::Float32);
    else if (item == "fp16" || item == "float16") out.push_back(DType::Float16);
    else if (item == "bf16" || item == "bfloat16") out.push_back(DType::BFloat16);
    else throw UserError("--dtypes: unknown data type '" + item + "' (expected fp32, fp16 or bf16)");
  }
  if (out.empty()) throw UserError("--dtypes: empty list (expected e.g. fp32,fp16,bf16)");
  return out;
}

std::vector<int> parse_plugin_archs(const std::string& list) {
  std::vector<int> out;
  std::string item;
  std::stringstream s(list);
  while (std::getline(s, item, ',')) {
    std::string digits = item.rfind("sm_", 0) == 0 ? item.substr(3) : item.rfind("sm", 0) == 0 ? item.substr(2) : item;
    if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos || std::stoi(digits) < 50) {
      throw UserError("--target: '" + item + "' is not a CUDA architecture (expected sm_80, sm_90, sm_110, ...)");
    }
    out.push_back(std::stoi(digits));
  }
  if (out.empty()) throw UserError("--target: empty list (expected e.g. sm_90)");
  return out;
}

PluginsResult make_plugins(const std::string& model_path, const std::string& out_dir, const PluginOptions& options) {
  auto progress = [&](const std::string& line) {
    if (options.progress) options.progress(line);
  };
  // Tools first: a missing nvcc or TensorRT is reported before any work.
  const std::string nvcc = options.build ? find_nvcc(options) : "";
  const std::string trt = tensorrt_root(options);
  if (options.build && nvcc.empty()) {
    throw UserError("nvcc not found (looked at --nvcc, $CUDACXX, PATH, /usr/local/cuda/bin); install CUDA or pass --no-build");
  }
  if (options.build && (trt.empty() || !fs::exists(trt + "/include/NvInferRuntime.h"))) {
    throw UserError("TensorRT headers not found: " + (trt.empty() ? std::string("TENSORRT_ROOT is not set") : trt + "/include/NvInferRuntime.h does not exist") +
                    " (pass --tensorrt-root, set TENSORRT_ROOT, or pass --no-build)");
  }
  const onnx::ModelProto model = read_model(model_path);
  const std::string model_dir = fs::path(model_path).parent_path().string();
  const Graph graph = import_model(model, model_dir.empty() ? "." : model_dir);
  const std::vector<PluginGroup> groups = select_plugin_groups(graph, model, options);
  const std::string model_name = fs::path(model_path).filename().string();

  const fs::path final_dir = fs::absolute(out_dir);
  const fs::path tmp = final_dir.string() + ".tmp-" + std::to_string(::getpid());
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  PluginsResult result;
  try {
    std::vector<Generated> generated;
    std::vector<onnx::GraphProto> subgraphs;
    for (const PluginGroup& group : groups) {
      Generated gen;
      gen.group = group;
      for (int n : group.nodes) gen.replaced.push_back(graph.nodes[n].name + " (" + graph.nodes[n].op_type + ")");
      progress("[" + std::to_string(generated.size() + 1) + "/" + std::to_string(groups.size()) + "] " + group.name + ": " +
               join(gen.replaced) + ", dtypes " + std::to_string(options.dtypes.size()));
      gen.kernels = generate_kernels(graph, model, group, options, &gen.fp32_subgraph, join(gen.replaced));
      std::vector<onnx::AttributeProto> attributes = plugin_settings(model, group);
      onnx::AttributeProto sub_attr;
      std::string json;
      (void)google::protobuf::util::MessageToJsonString(gen.fp32_subgraph, &json);
      sub_attr.set_name("kiln_subgraph");
      sub_attr.set_type(onnx::AttributeProto::STRING);
      sub_attr.set_s(json);
      attributes.push_back(sub_attr);
      gen.fields = plugin_fields(attributes);

      const std::string dir = (tmp / group.name).string();
      fs::create_directories(dir + "/testdata");
      std::vector<std::string> cases;
      for (size_t v = 0; v < gen.kernels.functions.size(); ++v) {
        cases.push_back(write_test_case(dir + "/testdata", make_test_case(graph, gen, v, options), gen.fields, options));
      }
      write_package(dir, gen, cases, options, model_name, graph);
      subgraphs.push_back(gen.fp32_subgraph);
      generated.push_back(std::move(gen));
    }

    // The rewritten model; it must import and still build on kiln's side.
    const onnx::ModelProto rewritten = rewrite_model(model, graph, groups, subgraphs, options);
    const std::string rewritten_name = fs::path(model_path).stem().string() + ".plugins.onnx";
    std::string bytes;
    rewritten.SerializeToString(&bytes);
    write_text((tmp / rewritten_name).string(), bytes);

    // Combined library and harness.
    std::vector<std::string> names;
    for (const Generated& g : generated) names.push_back(g.group.name);
    copy_common((tmp / "common").string());
    write_text((tmp / "common/combined_entry.cpp").string(), entry_source(names));
    write_text((tmp / "common/kiln_plugin_harness.cpp").string(), template_text("kiln_plugin_harness.cpp"));
    const std::string library = codegen::c_identifier(options.prefix + fs::path(model_path).stem().string() + "_plugins");
    write_text((tmp / "CMakeLists.txt").string(),
               fill_template(template_text("combined_CMakeLists.txt.in"),
                             {{"MODEL", model_name}, {"LIBRARY", library}, {"ARCHS", archs_text(options.archs, ";")}, {"PLUGINS", join(names, " ")}}));
    if (options.build) {
      progress("building " + std::to_string(names.size()) + " plugin libraries and lib" + library + ".so for sm_" +
               archs_text(options.archs, ", sm_") + " (log: build/build.log)");
      run_build(tmp.string(), options, nvcc, trt);
      result.built = true;
    }

    result.out_dir = final_dir.string();
    result.rewritten_model = (final_dir / rewritten_name).string();
    if (result.built) result.combined_library = (final_dir / "build" / ("lib" + library + ".so")).string();
    for (const Generated& g : generated) {
      PluginSummary s;
      s.name = g.group.name;
      s.replaced_nodes = g.replaced;
      for (int v : g.group.inputs) s.inputs.push_back(graph.values[v].name);
      for (int v : g.group.outputs) s.outputs.push_back(graph.values[v].name);
      for (const PluginFieldValue& f : g.fields) s.fields.push_back(f.describe());
      for (DType d : g.kernels.float_types) s.dtypes.push_back(short_dtype(d));
      if (result.built) s.library = (final_dir / "build" / g.group.name / ("lib" + g.group.name + ".so")).string();
      s.functions = g.kernels.functions;
      s.schedule_notes = g.kernels.schedule_notes;
      s.kernel_sources = {g.group.name + "/" + g.group.name + "_kernels.cu", g.group.name + "/" + g.group.name + "_kernel_library.cu"};
      result.plugins.push_back(std::move(s));
    }
    write_text((tmp / "report.json").string(), report_json(result, model_name, options).dump(2) + "\n");
    write_text((tmp / "report.md").string(), report_markdown(result, model_name, options));
    // Complete: only now does the output folder appear (replacing an older one).
    fs::remove_all(final_dir);
    fs::rename(tmp, final_dir);
  } catch (...) {
    fs::remove_all(tmp);
    throw;
  }
  return result;
}

}  // namespace kiln::package
