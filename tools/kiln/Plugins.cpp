// kiln plugins model.onnx -o DIR: TensorRT IPluginV3 plugins for chosen nodes, a rewritten ONNX
// model that names them, and a report (package/Plugins.h).
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "Commands.h"
#include "kiln/package/Plugins.h"
#include "kiln/support/Error.h"
#include "kiln/tune/Apply.h"

namespace kiln::cli {

namespace {

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size() && !s.empty()) {
    size_t end = s.find(',', start);
    if (end == std::string::npos) end = s.size();
    if (end > start) out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

struct PluginsArgs {
  std::string model, out, nodes, op_types, target = "sm_90", dtypes = "fp32,fp16,bf16";
  std::string plugin_namespace, prefix = "kiln_", tensorrt_root, nvcc;
  std::string records;      // --records: tuning records (kiln tune -o)
  std::string bench_sizes;  // --bench: symbol values for the timing run, e.g. batch=32,seq=1024
  bool fuse = false, no_build = false;
  int jobs = 2;
};

// Times every plugin's kernel against PyTorch eager on this machine's GPU and writes the times
// into the report (bench/plugins/bench_plugins.py; needs a GPU, torch and nvcc).
int run_bench(const std::string& out_dir, const std::string& sizes) {
  const std::filesystem::path script = std::filesystem::path(KILN_SOURCE_DIR) / "bench/plugins/bench_plugins.py";
  if (!std::filesystem::exists(script)) {
    throw UserError("--bench needs " + script.string() + " (the kiln source tree this kiln was built from)");
  }
  const std::string command = "python3 '" + script.string() + "' '" + out_dir + "' --sizes '" + sizes + "'";
  std::cout << "benchmarking: " << command << std::endl;
  const int status = std::system(command.c_str());
  if (status != 0) {
    throw UserError("--bench failed (exit status " + std::to_string(status) +
                    "); it needs a CUDA GPU with PyTorch; the packages are complete without it");
  }
  return 0;
}

int run_plugins(const PluginsArgs& a) {
  if (!a.bench_sizes.empty() && a.no_build) throw UserError("--bench needs the libraries built; drop --no-build");
  package::PluginOptions o;
  o.nodes = split_list(a.nodes);
  o.op_types = split_list(a.op_types);
  o.fuse = a.fuse;
  o.archs = package::parse_plugin_archs(a.target);
  o.dtypes = package::parse_plugin_dtypes(a.dtypes);
  o.plugin_namespace = a.plugin_namespace;
  o.prefix = a.prefix;
  o.build = !a.no_build;
  o.tensorrt_root = a.tensorrt_root;
  o.nvcc = a.nvcc;
  o.build_jobs = a.jobs;
  o.progress = [](const std::string& line) { std::cout << line << std::endl; };
  // Tuning records: a tuned schedule per kernel where one matches (shapes must be concrete).
  auto records = std::make_shared<tune::Database>();
  const std::string records_path = a.records.empty() ? tune::default_records_path() : a.records;
  if (!a.records.empty() && !std::filesystem::exists(a.records)) throw UserError("--records " + a.records + ": no such file or folder");
  if (!records_path.empty()) records->load(records_path);
  if (!records->records().empty()) {
    const std::string arch = "sm_" + std::to_string(o.archs.at(0));
    o.schedule_for = [records, arch](const codegen::KernelDefinition& k, std::string& note) {
      tune::ChosenSchedule c = tune::choose_schedule(*records, k, codegen::Target::Cuda, arch);
      note = c.note;
      return c.schedule;
    };
  }
  const package::PluginsResult r = package::make_plugins(a.model, a.out, o);
  std::cout << r.plugins.size() << " plugin(s) in " << r.out_dir << "\n  rewritten model: " << r.rewritten_model
            << "\n  combined library: " << (r.built ? r.combined_library : std::string("not built (--no-build)"))
            << "\n  report: " << r.out_dir << "/report.md\n";
  return a.bench_sizes.empty() ? 0 : run_bench(r.out_dir, a.bench_sizes);
}

}  // namespace

void register_plugins(CLI::App& app) {
  auto a = std::make_shared<PluginsArgs>();
  CLI::App* cmd = app.add_subcommand(
      "plugins",
      "Generate TensorRT 10 IPluginV3 plugins for chosen nodes (one package per plugin, one combined\n"
      "library), a rewritten ONNX model whose replaced nodes name them, and report.md/report.json.");
  cmd->add_option("model", a->model, "The .onnx file")->required();
  cmd->add_option("-o,--output", a->out, "Output folder (written completely or not at all)")->required();
  cmd->add_option("--nodes", a->nodes, "Node names to replace, comma-separated");
  cmd->add_option("--op-types", a->op_types, "Replace every node of these op types, comma-separated");
  cmd->add_flag("--fuse", a->fuse, "One plugin (one fused kernel) per connected group of selected nodes");
  cmd->add_option("--target", a->target, "CUDA architectures, comma-separated (sm_80,sm_90,sm_110)")->capture_default_str();
  cmd->add_option("--dtypes", a->dtypes, "Float types each plugin accepts (fp32,fp16,bf16)")->capture_default_str();
  cmd->add_option("--plugin-namespace", a->plugin_namespace, "TensorRT plugin namespace (default: none)");
  cmd->add_option("--prefix", a->prefix, "Prefix of plugin names")->capture_default_str();
  cmd->add_option("--tensorrt-root", a->tensorrt_root, "TensorRT root with include/ (default: $TENSORRT_ROOT)");
  cmd->add_option("--nvcc", a->nvcc, "nvcc to build with (default: $CUDACXX, PATH, /usr/local/cuda/bin/nvcc)");
  cmd->add_flag("--no-build", a->no_build, "Only write the sources; do not build the libraries");
  cmd->add_option("-j,--jobs", a->jobs, "Parallel build jobs")->capture_default_str();
  cmd->add_option("--records", a->records,
                  "Tuning records (kiln tune -o) or a folder of them; default: $KILN_RECORDS or ~/.cache/kiln/records "
                  "when it exists. The report says which kernels got a tuned schedule");
  cmd->add_option("--bench", a->bench_sizes,
                  "On a GPU: time each plugin's kernel against PyTorch eager at these symbol values\n"
                  "(e.g. batch=32,seq=1024) and write the times into report.md/report.json");
  cmd->callback([a] { set_exit_code(run_plugins(*a)); });
}

}  // namespace kiln::cli
