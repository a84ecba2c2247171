#include "kiln/tune/Builder.h"

#include <filesystem>
#include <fstream>
#include <mutex>
#include <regex>
#include <sstream>
#include <thread>
#include <unistd.h>
#include <unordered_map>

#include "kiln/codegen/Build.h"
#include "kiln/support/Error.h"

namespace kiln::tune {

namespace fs = std::filesystem;

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// One library per source: the function and the library entry points in one translation unit.
std::string library_source(const LoweredFunc& f, codegen::Target target) {
  codegen::ModuleOptions module;
  module.banner = "kiln tune candidate";
  return codegen::generate_module({f}, target, module);
}

}  // namespace

void parse_ptxas_report(const std::string& log, int& registers, int& spill_bytes) {
  static const std::regex used(R"(Used (\d+) registers)");
  static const std::regex spill(R"((\d+) bytes spill stores)");
  registers = -1, spill_bytes = -1;
  for (auto it = std::sregex_iterator(log.begin(), log.end(), used); it != std::sregex_iterator(); ++it) {
    registers = std::max(registers, std::stoi((*it)[1]));
  }
  for (auto it = std::sregex_iterator(log.begin(), log.end(), spill); it != std::sregex_iterator(); ++it) {
    spill_bytes = std::max(spill_bytes, std::stoi((*it)[1]));
  }
}

std::vector<BuiltCandidate> build_candidates(const codegen::KernelDefinition& kernel, const SearchSpace& space,
                                             const std::vector<Candidate>& candidates, const BuildRequest& request) {
  fs::create_directories(request.work_dir);
  const std::string include_dir = (fs::path(request.work_dir) / "include").string();
  if (!fs::exists(include_dir)) codegen::write_support_files(include_dir);
  const bool cuda = request.target == codegen::Target::Cuda;
  std::vector<BuiltCandidate> built(candidates.size());
  std::vector<std::string> sources(candidates.size());
  std::unordered_map<std::string, int> first_with_source;
  for (size_t i = 0; i < candidates.size(); ++i) {
    BuiltCandidate& b = built[i];
    b.knobs = candidates[i];
    b.function = kernel.name;
    b.error = space.illegal_reason(candidates[i]);
    if (!b.error.empty()) {
      b.illegal = true;
      continue;
    }
    try {
      std::optional<Schedule> schedule;
      if (cuda) schedule = default_gpu_schedule(kernel.inputs, kernel.outputs, schedule_options(candidates[i]));
      const codegen::GraphFunction f = codegen::lower_kernel(kernel, request.target, schedule ? &*schedule : nullptr);
      // The CPU target's knobs are compiler flags: they are part of what is built.
      std::string text = library_source(f.func, request.target);
      if (!cuda) {
        for (const std::string& flag : cpu_flags(candidates[i])) text += "\n// flag " + flag;
      }
      auto [it, added] = first_with_source.emplace(text, static_cast<int>(i));
      if (!added) {
        b.same_as = it->second;
        continue;
      }
      sources[i] = std::move(text);
    } catch (const std::exception& e) {
      b.error = std::string("lowering failed: ") + e.what();
    }
  }
  std::mutex mutex;
  size_t next = 0;
  auto worker = [&] {
    for (;;) {
      size_t i;
      {
        std::lock_guard<std::mutex> lock(mutex);
        while (next < candidates.size() && sources[next].empty()) ++next;
        if (next >= candidates.size()) return;
        i = next++;
      }
      BuiltCandidate& b = built[i];
      const std::string stem = (fs::path(request.work_dir) / ("cand_" + std::to_string(std::hash<std::string>()(sources[i])))).string();
      const std::string source = stem + (cuda ? ".cu" : ".cpp");
      std::ofstream(source) << sources[i];
      codegen::BuildOptions options;
      options.target = request.target;
      options.archs = {request.arch};
      options.include_dir = include_dir;
      options.log_path = stem + ".log";
      options.extra_flags = cuda ? std::vector<std::string>{"-Xptxas", "-v"} : cpu_flags(b.knobs);
      try {
        codegen::build_shared_library({source}, stem + ".so", options);
        b.library = stem + ".so";
        if (cuda) parse_ptxas_report(read_file(options.log_path), b.registers, b.spill_bytes);
      } catch (const UserError& e) {
        b.error = e.what();
      }
    }
  };
  std::vector<std::thread> threads;
  for (int j = 0; j < std::max(1, request.jobs); ++j) threads.emplace_back(worker);
  for (std::thread& t : threads) t.join();
  // Registers past the SM's file cannot launch: illegal, known after building.
  for (BuiltCandidate& b : built) {
    if (b.library.empty() || b.registers <= 0) continue;
    const int64_t threads_per_block = space.block_threads(b.knobs);
    if (b.registers * threads_per_block > 65536) {
      b.illegal = true;
      b.error = std::to_string(b.registers) + " registers x " + std::to_string(threads_per_block) +
                " threads exceed the 65536 registers of an SM";
      b.library.clear();
    }
  }
  return built;
}

std::string build_reference(const codegen::KernelDefinition& kernel, const std::string& work_dir) {
  fs::create_directories(work_dir);
  const codegen::GraphFunction f = codegen::lower_kernel(kernel, codegen::Target::Cpu);
  const std::string text = library_source(f.func, codegen::Target::Cpu);
  const std::string stem = (fs::path(work_dir) / ("reference_" + std::to_string(std::hash<std::string>()(text)))).string();
  if (fs::exists(stem + ".so")) return stem + ".so";
  const std::string include_dir = (fs::path(work_dir) / "include").string();
  if (!fs::exists(include_dir)) codegen::write_support_files(include_dir);
  // Built under a name of this process, then renamed: workers sharing the folder never load a
  // half-written library.
  const std::string tmp = stem + ".tmp" + std::to_string(::getpid());
  std::ofstream(tmp + ".cpp") << text;
  codegen::BuildOptions options;
  options.target = codegen::Target::Cpu;
  options.include_dir = include_dir;
  codegen::build_shared_library({tmp + ".cpp"}, tmp + ".so", options);
  fs::rename(tmp + ".so", stem + ".so");
  return stem + ".so";
}

}  // namespace kiln::tune
