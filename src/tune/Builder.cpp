#include "kiln/tune/Builder.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <regex>
#include <sstream>
#include <thread>
#include <unistd.h>
#include <unordered_map>

#include "FileLock.h"
#include "kiln/codegen/Build.h"
#include "kiln/support/Error.h"
#include "kiln/support/Parallel.h"

namespace kiln::tune {

namespace fs = std::filesystem;

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// One library per candidate: the function and the library entry points in one translation unit,
// plus (CUDA) a unit per GEMM template call.
struct LibrarySource {
  std::string main;
  std::vector<std::string> units;
};

LibrarySource library_source(const LoweredFunc& f, codegen::Target target) {
  LibrarySource source;
  codegen::ModuleOptions module;
  module.banner = "kiln tune candidate";
  // KILN_TUNE_TEMPLATE_UNITS=0 prints the calls inline, as kiln compile does (docs/TUNING.md).
  const char* units = std::getenv("KILN_TUNE_TEMPLATE_UNITS");
  if (target == codegen::Target::Cuda && !(units && std::string(units) == "0")) module.template_units = &source.units;
  source.main = codegen::generate_module({f}, target, module);
  return source;
}

std::string hex_hash(const std::string& text) {
  char hex[20];
  std::snprintf(hex, sizeof hex, "%016zx", std::hash<std::string>()(text));
  return hex;
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
  std::vector<std::vector<std::string>> units(candidates.size());
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
      LibrarySource source = library_source(f.func, request.target);
      std::string text = source.main;
      for (const std::string& u : source.units) text += u;
      if (!cuda) {
        for (const std::string& flag : cpu_flags(candidates[i])) text += "\n// flag " + flag;
      }
      auto [it, added] = first_with_source.emplace(text, static_cast<int>(i));
      if (!added) {
        b.same_as = it->second;
        continue;
      }
      sources[i] = std::move(source.main);
      units[i] = std::move(source.units);
    } catch (const std::exception& e) {
      b.error = std::string("lowering failed: ") + e.what();
    }
  }
  // 1. The template units every candidate to build needs, each compiled once into the cache
  //    (shared by workers: written under a name of this process, then renamed).
  codegen::BuildOptions unit_options;
  unit_options.target = request.target;
  unit_options.archs = {request.arch};
  unit_options.include_dir = include_dir;
  unit_options.compile_only = true;
  const std::string cache = request.object_cache.empty() ? (fs::path(request.work_dir) / "objects").string() : request.object_cache;
  // An object is reused for the same text, flags and support headers (the headers' folder differs
  // between workers; their text between kiln versions).
  codegen::BuildOptions key_options = unit_options;
  key_options.include_dir = "include";
  const std::string unit_key = codegen::build_command({"unit.cu"}, "unit.o", key_options) + codegen::support_files_digest();
  std::map<std::string, std::string> unit_object;  // text -> object file
  std::map<std::string, std::string> unit_error;   // text -> why it did not compile
  std::vector<std::string> to_compile;
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (sources[i].empty()) continue;
    for (const std::string& u : units[i]) {
      if (unit_object.count(u)) continue;
      const std::string object = (fs::path(cache) / ("unit_" + hex_hash(u + unit_key) + ".o")).string();
      unit_object[u] = object;
      if (!fs::exists(object)) to_compile.push_back(u);
    }
  }
  if (!to_compile.empty()) fs::create_directories(cache);
  // Workers building at once split the units: each unit is compiled under a lock beside its
  // object; a unit another worker holds is left for a second pass, which waits for it (and
  // compiles it only if that worker failed to).
  std::mutex mutex;
  std::vector<size_t> held_elsewhere;
  auto compile_unit = [&](size_t j, FileLock::Mode mode) {
    const std::string& u = to_compile[j];
    const std::string object = unit_object.at(u);
    const FileLock lock(object + ".lock", mode);
    if (!lock.held() && lock.error() == EWOULDBLOCK) {
      std::lock_guard<std::mutex> guard(mutex);
      held_elsewhere.push_back(j);
      return;
    }
    if (fs::exists(object)) return;  // compiled by another worker meanwhile
    const std::string tmp = object.substr(0, object.size() - 2) + ".tmp" + std::to_string(::getpid());
    std::ofstream(tmp + ".cu") << u;
    codegen::BuildOptions options = unit_options;
    options.log_path = tmp + ".log";
    try {
      codegen::build_shared_library({tmp + ".cu"}, tmp + ".o", options);
      fs::rename(tmp + ".o", object);
      fs::remove(tmp + ".cu"), fs::remove(tmp + ".log");
    } catch (const UserError& e) {
      std::lock_guard<std::mutex> guard(mutex);
      unit_error[u] = e.what();
    }
  };
  // 2. Each candidate's own unit, compiled in the same pool as the template units: it needs none of
  //    them until it is linked, so the candidates do not wait for the slowest unit (the Hopper
  //    GEMM's) to start. The units go first, longest text first (a proxy for compile time).
  std::vector<std::string> stems(candidates.size());
  auto compile_candidate = [&](size_t i) {
    BuiltCandidate& b = built[i];
    stems[i] = (fs::path(request.work_dir) / ("cand_" + std::to_string(std::hash<std::string>()(sources[i])))).string();
    const std::string source = stems[i] + (cuda ? ".cu" : ".cpp");
    std::ofstream(source) << sources[i];
    codegen::BuildOptions options = unit_options;
    options.log_path = stems[i] + ".log";
    options.extra_flags = cuda ? std::vector<std::string>{"-Xptxas", "-v"} : cpu_flags(b.knobs);
    try {
      codegen::build_shared_library({source}, stems[i] + ".o", options);
      if (cuda) parse_ptxas_report(read_file(options.log_path), b.registers, b.spill_bytes);
    } catch (const UserError& e) {
      b.error = e.what();
    }
  };
  std::vector<size_t> unit_order(to_compile.size());
  for (size_t j = 0; j < unit_order.size(); ++j) unit_order[j] = j;
  std::stable_sort(unit_order.begin(), unit_order.end(),
                   [&](size_t x, size_t y) { return to_compile[x].size() > to_compile[y].size(); });
  std::vector<size_t> to_build;
  for (size_t i = 0; i < candidates.size(); ++i)
    if (!sources[i].empty()) to_build.push_back(i);
  parallel_for(unit_order.size() + to_build.size(), request.jobs, [&](size_t n) {
    if (n < unit_order.size()) {
      compile_unit(unit_order[n], FileLock::Mode::Try);
    } else {
      compile_candidate(to_build[n - unit_order.size()]);
    }
  });
  const std::vector<size_t> second_pass = std::move(held_elsewhere);
  parallel_for(second_pass.size(), request.jobs, [&](size_t i) { compile_unit(second_pass[i], FileLock::Mode::Wait); });
  // 3. Each compiled candidate linked with its template objects.
  parallel_for(to_build.size(), request.jobs, [&](size_t n) {
    const size_t i = to_build[n];
    BuiltCandidate& b = built[i];
    if (!b.error.empty()) return;
    std::vector<std::string> inputs = {stems[i] + ".o"};
    for (const std::string& u : units[i]) {
      if (unit_error.count(u)) {
        b.error = unit_error.at(u);
        return;
      }
      inputs.push_back(unit_object.at(u));
    }
    codegen::BuildOptions options = unit_options;
    options.compile_only = false;
    options.log_path = stems[i] + ".link.log";
    if (!cuda) options.extra_flags = cpu_flags(b.knobs);
    try {
      codegen::build_shared_library(inputs, stems[i] + ".so", options);
      b.library = stems[i] + ".so";
    } catch (const UserError& e) {
      b.error = e.what();
    }
  });
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

std::string reference_source(const LoweredFunc& cpu_func) { return library_source(cpu_func, codegen::Target::Cpu).main; }

std::string build_reference(const std::string& text, const std::string& work_dir) {
  fs::create_directories(work_dir);
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
