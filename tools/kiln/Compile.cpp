// kiln compile model.onnx -o DIR [--target sm_80,sm_90,sm_110|cpu] [--model | --nodes a,b] [--outputs v,w] [--no-build]
//              [--records FILE] [--tf32] [--float-intermediates] [--no-conv-wgmma] [--jobs N]
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>

#include "Commands.h"
#include "kiln/codegen/Build.h"
#include "kiln/codegen/Codegen.h"
#include "kiln/codegen/GraphFunctions.h"
#include "kiln/onnx/Import.h"
#include "kiln/ops/GraphTensors.h"
#include "kiln/package/ModelLibrary.h"
#include "kiln/quant/PrequantizedOnnx.h"
#include "kiln/support/Error.h"
#include "kiln/support/Parallel.h"
#include "kiln/schedule/Defaults.h"
#include "kiln/tune/Apply.h"
#include "kiln/tune/SearchSpace.h"

namespace kiln::cli {

namespace {

namespace fs = std::filesystem;

struct CompileOptions {
  std::string model;
  std::string out_dir;
  std::vector<std::string> targets = {"sm_90"};
  std::vector<std::string> nodes;
  std::vector<std::string> outputs;  // --outputs: compile the graph up to these values
  bool no_build = false;
  std::string records;  // "": the default cache folder when it exists
  bool tf32 = false;     // float32 contractions may use TF32 tensor cores
  bool float_intermediates = false;  // fused float16/bfloat16 chains keep float32 intermediates
  bool conv_wgmma = DefaultScheduleOptions().conv_wgmma;  // convolutions try the Hopper kernel (--no-conv-wgmma: not)
  bool model_library = false;  // --model
  bool reference = false;      // --reference
  int jobs = 0;                // --jobs: compilers at once (0: the cores this process may run on)
};

// Whether `file` is a template unit kiln compile writes for function `name`: <name>_gemm<i><ext>.
bool is_template_unit(const std::string& file, const std::string& name, const std::string& ext) {
  const std::string prefix = name + "_gemm";
  if (file.size() <= prefix.size() + ext.size() || !file.starts_with(prefix) || !file.ends_with(ext)) return false;
  return file.substr(prefix.size(), file.size() - prefix.size() - ext.size()).find_first_not_of("0123456789") == std::string::npos;
}

std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (size_t p = text.find(from); p != std::string::npos; p = text.find(from, p + to.size())) {
    text.replace(p, from.size(), to);
  }
  return text;
}

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  if (!(out << text)) user_error("cannot write {}", path.string());
}

// One line per node that kiln cannot build: op, name, why (build_graph_tensors' keep_going mode).
std::string unsupported_nodes(const Graph& graph) {
  ops::BuildOptions keep_going;
  keep_going.keep_going = true;
  const ops::GraphTensors built = ops::build_graph_tensors(graph, keep_going);
  std::string lines;
  int count = 0;
  std::vector<bool> failed(graph.nodes.size(), false);
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    if (built.node_errors[n].empty()) continue;
    failed[n] = true;
    // A supported op that fails only because an input comes from a failed node is not listed.
    bool downstream = false;
    for (int v : graph.nodes[n].inputs) {
      const int producer = v >= 0 ? graph.values[v].producer : -1;
      downstream = downstream || (producer >= 0 && failed[producer]);
    }
    if (downstream && graph.nodes[n].op != OpKind::Unsupported) continue;
    if (++count <= 50) {
      lines += "  " + graph.nodes[n].op_type + " '" + graph.nodes[n].name + "': " + built.node_errors[n] + "\n";
    }
  }
  if (count > 50) lines += "  ... and " + std::to_string(count - 50) + " more\n";
  return lines;
}

int run_compile(const CompileOptions& options) {
  bool cpu = false;
  for (const std::string& t : options.targets) {
    if (t == "cpu") {
      cpu = true;
    } else if (t.rfind("sm_", 0) != 0 || t.size() < 5 || t.find_first_not_of("0123456789", 3) != std::string::npos) {
      user_error("--target '{}' is not a target (expected sm_<NN> such as sm_80, sm_90, sm_110, or cpu)", t);
    }
  }
  if (cpu && options.targets.size() > 1) user_error("--target cpu cannot be combined with GPU targets");
  const codegen::Target target = cpu ? codegen::Target::Cpu : codegen::Target::Cuda;
  if (!cpu && !options.no_build && codegen::find_nvcc().empty()) {
    user_error("nvcc was not found (looked at $KILN_NVCC, $CUDA_HOME/bin, PATH, /usr/local/cuda/bin); install the "
               "CUDA toolkit or set KILN_NVCC, or pass --no-build to only write the sources");
  }
  if (options.model_library && !options.nodes.empty()) {
    user_error("--model compiles the whole graph; it cannot be combined with --nodes");
  }
  // Model Optimizer NVFP4 weights (DequantizeLinear of FLOAT4E2M1) become kiln.QuantLinear as shipped.
  Graph graph = quant::load_onnx_prequantized(options.model);
  if (!options.outputs.empty()) graph = cut_graph(graph, options.outputs);
  const std::string model_name = fs::path(options.model).stem().string();
  // Tuning records: the best schedule per kernel where one was measured, the default otherwise.
  tune::Database records;
  const std::string records_path = options.records.empty() ? tune::default_records_path() : options.records;
  if (!options.records.empty() && !fs::exists(options.records)) user_error("--records {}: no such file or folder", options.records);
  if (!records_path.empty()) records.load(records_path);
  std::vector<codegen::KernelDefinition> kernels;
  try {
    kernels = codegen::kernel_definitions(
        graph, options.model_library ? package::kModelFunction : (graph.name.empty() ? model_name : graph.name),
        options.nodes);
  } catch (const UserError& e) {
    if (!options.nodes.empty()) throw;
    // The whole graph: name every node kiln cannot build, not only the first.
    const std::string nodes = unsupported_nodes(graph);
    if (nodes.empty()) throw;
    throw UnsupportedError(options.model + ": kiln cannot compile these nodes (op 'name': why):\n" + nodes +
                           "Compile the graph up to a cut before them with --outputs, the nodes kiln supports with --nodes "
                           "(one function per node), or see docs/OPS_GUIDE.md to add an op.");
  }
  std::vector<codegen::GraphFunction> functions;
  std::vector<std::string> schedule_notes, cpu_flags;
  for (const codegen::KernelDefinition& k : kernels) {
    tune::ChosenSchedule chosen = tune::choose_schedule(records, k, target, cpu ? "" : options.targets.at(0));
    if ((options.tf32 || options.float_intermediates || options.conv_wgmma != DefaultScheduleOptions().conv_wgmma) && !cpu) {
      DefaultScheduleOptions o = chosen.record ? tune::schedule_options(chosen.record->knobs) : DefaultScheduleOptions();
      o.allow_tf32 = options.tf32;
      o.float_intermediates = o.float_intermediates || options.float_intermediates;  // (a record may have chosen it)
      o.conv_wgmma = options.conv_wgmma;
      chosen.schedule = default_gpu_schedule(k.inputs, k.outputs, o);
      if (options.float_intermediates) chosen.note += "; float16/bfloat16 intermediates in float32 (--float-intermediates)";
    }
    functions.push_back(codegen::lower_kernel(k, target, chosen.schedule ? &*chosen.schedule : nullptr));
    schedule_notes.push_back(chosen.note);
    if (!chosen.cpu_flags.empty()) cpu_flags = chosen.cpu_flags;
  }

  const fs::path dir(options.out_dir);
  fs::create_directories(dir);
  codegen::write_support_files((dir / "include").string());
  const std::string ext = cpu ? ".cpp" : ".cu";
  std::vector<std::string> sources;
  if (options.model_library) {
    const codegen::GraphFunction& f = functions[0];
    const package::ModelWeights weights =
        package::write_model_weights(f, target, codegen::c_identifier(model_name), dir.string());
    codegen::ModuleOptions module;
    module.banner = "kiln compile --model " + options.model + " (nodes: " + std::to_string(f.nodes.size()) + ")";
    module.library_constants[f.func.name] = weights.constants;
    write_file(dir / (f.func.name + ext), codegen::generate_module({f.func}, target, module));
    write_file(dir / (f.func.name + ".json"), codegen::signature_json(f.func, target, weights.constants));
    write_file(dir / ("kiln_model_weights" + ext), weights.source);
    sources = {f.func.name + ext, "kiln_model_weights" + ext};
    std::cout << "model " << model_name << ": " << std::max<size_t>(1, f.func.stage_notes.size()) << " kernel(s), "
              << weights.constants.size() << " weight(s): " << weights.embedded_bytes << " bytes compiled in, "
              << weights.file_payload_bytes << " bytes in "
              << (weights.weights_file.empty() ? "(no weights file)" : (dir / weights.weights_file).string()) << "\n";
    functions.clear();
  }
  if (options.reference) {
    package::write_model_reference(graph, dir.string());
    std::cout << "reference inputs and CPU-backend outputs -> " << (dir / "reference").string() << "\n";
  }
  // CUDA: each template call (GEMM, convolution, attention) in a translation unit of its own
  // (<function>_gemm<i>.cu, the same text for the same call and epilogue, written once), so that
  // the units, which hold most of the build, compile in parallel here and in a CMake build of the
  // folder.
  std::set<std::string> units_written;
  for (const codegen::GraphFunction& f : functions) {  // units an earlier build of the folder left
    for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
      if (is_template_unit(e.path().filename().string(), f.func.name, ext)) fs::remove(e.path());
    }
  }
  for (size_t k = 0; k < functions.size(); ++k) {
    const LoweredFunc& f = functions[k].func;
    codegen::ModuleOptions module;
    module.define_last_error = false;
    module.banner = "kiln compile " + options.model + " (nodes: " + std::to_string(functions[k].nodes.size()) + ")";
    std::vector<std::string> units;
    if (!cpu) module.template_units = &units;
    const fs::path source = dir / (f.name + ext);
    write_file(source, codegen::generate_module({f}, target, module));
    write_file(dir / (f.name + ".json"), codegen::signature_json(f, target));
    sources.push_back(source.filename().string());
    size_t written = 0;
    for (const std::string& u : units) {
      if (!units_written.insert(u).second) continue;
      const std::string name = f.name + "_gemm" + std::to_string(written++) + ext;
      write_file(dir / name, "// Generated by kiln (cuda backend): a template call of " + f.name + ext + " (" + options.model +
                                 "), its template call in a translation unit of its own. Do not edit: regenerate.\n" + u);
      sources.push_back(name);
    }
    std::cout << "[" << (k + 1) << "/" << functions.size() << "] " << f.name << ": "
              << std::max<size_t>(1, f.stage_notes.size()) << " kernel(s) -> " << source.string()
              << (written ? " and " + std::to_string(written) + " template unit(s) beside it" : std::string()) << "\n";
    std::cout.flush();
  }
  std::string notes = "# Schedules\n\nrecords: " + (records_path.empty() ? std::string("(none)") : records_path) + " (" +
                      std::to_string(records.records().size()) + " records)\n\n";
  for (const std::string& n : schedule_notes) {
    notes += "- " + n + "\n";
    std::cout << "schedule: " << n << "\n";
  }
  write_file(dir / "schedules.md", notes);
  if (!options.model_library) {
    const fs::path module = dir / ("kiln_module" + ext);
    std::vector<std::string> names;
    for (const codegen::GraphFunction& f : functions) names.push_back(codegen::c_identifier(f.func.name));
    write_file(module, codegen::generate_library_module(target, names));
    sources.push_back(module.filename().string());
  }

  std::string list;
  for (const std::string& s : sources) list += " " + s;
  std::string arch_list;
  for (const std::string& t : options.targets) arch_list += (arch_list.empty() ? "" : ";") + (cpu ? "" : t.substr(3));
  std::string tmpl = codegen::embedded_template("templates/CMakeLists.txt.in");
  tmpl = replace_all(tmpl, "@NAME@", codegen::c_identifier(model_name));
  tmpl = replace_all(tmpl, "@LANGUAGES@", cpu ? "" : "CUDA");
  tmpl = replace_all(tmpl, "@CUDA_SETTINGS@", cpu ? "" : "set(CMAKE_CUDA_STANDARD 20)\nset(CMAKE_CUDA_ARCHITECTURES " + arch_list + ")");
  tmpl = replace_all(tmpl, "@SOURCES@", list.substr(1));
  write_file(dir / "CMakeLists.txt", tmpl);

  if (options.no_build) {
    std::cout << "sources written to " << dir.string() << " (not built: --no-build)\n";
    return 0;
  }
  codegen::BuildOptions build;
  build.target = target;
  if (!cpu) build.archs = options.targets;
  build.include_dir = (dir / "include").string();
  build.extra_flags = cpu_flags;  // CPU: the tuned compiler flags (one set per library)
  const fs::path library = dir / ("lib" + codegen::c_identifier(model_name) + ".so");
  std::vector<std::string> paths;
  for (const std::string& s : sources) paths.push_back((dir / s).string());
  const int jobs = options.jobs > 0 ? options.jobs : available_cores();
  std::cout << "building " << library.string() << " (" << paths.size() << " sources, " << jobs << " at once) ...\n";
  std::cout.flush();
  codegen::build_shared_library_parallel(paths, library.string(), build, jobs);
  std::cout << "built " << library.string() << "\n";
  return 0;
}

}  // namespace

void register_compile(CLI::App& app) {
  auto options = std::make_shared<CompileOptions>();
  CLI::App* cmd = app.add_subcommand(
      "compile",
      "Generate kernels for an ONNX model (the whole graph as one function, or one function per node\n"
      "given with --nodes) and build them into one shared library. Every function is exported through\n"
      "the kernel contract: kiln_<name>(args, num_args, workspace, stream) and kiln_signature_<name>().\n"
      "Writes DIR/<name>.cu (or .cpp), DIR/<name>_gemm<i>.cu (CUDA: each template call, GEMM, convolution\n"
      "or attention, a translation unit of its own), DIR/<name>.json (signature), DIR/include/ (headers the sources need),\n"
      "DIR/CMakeLists.txt, and DIR/lib<model>.so when nvcc (or the host compiler) is there, its sources\n"
      "compiled in parallel (--jobs).\n"
      "With --model: a model library (kiln/runtime/kiln_model.h): one function `main` over the graph's inputs\n"
      "and outputs only; initializers and Constant outputs belong to the library (small ones compiled in, the\n"
      "others in DIR/<model>.weights, memory-mapped and loaded once per device). Load it with kiln::Model\n"
      "(C++, kiln/runtime/Model.h), kiln.load or tvm_ffi.load_module and call main(inputs..., outputs...).\n"
      "Example: kiln compile model.onnx -o out --target sm_90,sm_110 --nodes softmax_1\n"
      "         kiln compile model.onnx -o out --target cpu --model\n"
      "         kiln compile model.onnx -o out --model --outputs /blocks.3/Add_output_0   (up to a cut)");
  cmd->add_option("model", options->model, "The .onnx file")->required()->check(CLI::ExistingFile);
  cmd->add_option("-o,--output", options->out_dir, "Output folder (created)")->required();
  cmd->add_option("--target", options->targets, "Comma-separated GPU architectures (sm_80,sm_90,sm_110) or cpu")
      ->delimiter(',');
  cmd->add_option("--nodes", options->nodes, "Comma-separated node names: one function per node")->delimiter(',');
  cmd->add_option("--outputs", options->outputs,
                  "Comma-separated value (or node) names: compile the graph up to them, as its outputs (a cut before "
                  "nodes kiln cannot build); works with --model")
      ->delimiter(',');
  cmd->add_flag("--no-build", options->no_build, "Only write the sources");
  cmd->add_flag("--tf32", options->tf32,
                "Let float32 MatMul/Gemm run on tensor cores in TF32 (10-bit mantissas: about 1e-3 relative "
                "error). Without it float32 contractions stay exact FP32");
  cmd->add_flag("--float-intermediates", options->float_intermediates,
                "float16/bfloat16 elementwise chains fused into one kernel keep their intermediate results in float32 "
                "and round once where stored (as torch.compile computes them): fewer instructions per element, results "
                "closer to the exact value, but not the per-op rounding ONNX defines (the CPU reference's); a Cast to "
                "float16/bfloat16 that is at once cast back to float32 is dropped too; in such a chain Erf takes a shorter "
                "formula (absolute error about 2e-7, far below what float16/bfloat16 resolve), GELU's 1 + erf and 1 + tanh "
                "one formula each, Exp the GPU's exp2 unit alone (results below 2^-126 flushed to zero), and a constant over "
                "such a value (Sigmoid) a multiple of its reciprocal");
  cmd->add_flag("--conv-wgmma,!--no-conv-wgmma", options->conv_wgmma,
                "float16/bfloat16 convolutions try the Hopper kernel (kernels/gemm/conv_wgmma.cuh, sm_90) first, with a "
                "workspace for the repacked weight and an NHWC copy of the image (the default; --no-conv-wgmma: the "
                "patch or gather kernels only, no workspace)");
  cmd->add_option("--records", options->records,
                  "Tuning records (kiln tune -o) or a folder of them; default: $KILN_RECORDS or ~/.cache/kiln/records "
                  "when it exists. Kernels without a record keep the default schedule (schedules.md says which)");
  cmd->add_flag("--model", options->model_library,
                "Build a model library: entry point main(graph inputs..., outputs...), weights owned by the library");
  cmd->add_option("--jobs", options->jobs, "Compilers run at once (default: the cores this process may run on)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--reference", options->reference,
                "Also write DIR/reference/: random inputs (symbolic dims = 2) and the CPU backend's outputs for them");
  cmd->callback([options] { set_exit_code(run_compile(*options)); });
}

}  // namespace kiln::cli
