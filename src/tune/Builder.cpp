#include "kiln/tune/Builder.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
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
// plus (CUDA) a unit per template call.
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

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

std::string hex_hash(const std::string& text) {
  char hex[20];
  std::snprintf(hex, sizeof hex, "%016zx", std::hash<std::string>()(text));
  return hex;
}

// Whether a mangled function name is that of a free function whose name starts with `prefix`
// (_Z<length><name>...): not a template instantiated with a type of that name (a template kernel's
// epilogue functor is named after its stage).
bool is_named(const std::string& mangled, const std::string& prefix) {
  if (mangled.rfind("_Z", 0) != 0) return mangled.rfind(prefix, 0) == 0;  // extern "C"
  size_t at = 2;
  while (at < mangled.size() && std::isdigit(static_cast<unsigned char>(mangled[at]))) ++at;
  return at > 2 && mangled.compare(at, prefix.size(), prefix) == 0;
}

}  // namespace

void parse_ptxas_report(const std::string& log, const std::string& kernels, int& registers, int& spill_bytes) {
  static const std::regex entry(R"((?:Compiling entry function|Function properties for) '?([A-Za-z0-9_$]+))");
  static const std::regex used(R"(Used (\d+) registers)");
  static const std::regex spill(R"((\d+) bytes spill stores)");
  registers = -1, spill_bytes = -1;
  std::istringstream lines(log);
  bool counted = kernels.empty();
  std::smatch m;
  for (std::string line; std::getline(lines, line);) {
    if (std::regex_search(line, m, entry)) {
      counted = kernels.empty() || is_named(m[1].str(), kernels);
    } else if (counted && std::regex_search(line, m, used)) {
      registers = std::max(registers, std::stoi(m[1]));
    } else if (counted && std::regex_search(line, m, spill)) {
      spill_bytes = std::max(spill_bytes, std::stoi(m[1]));
    }
  }
}

namespace {

// The candidates lowered and printed: each candidate's own unit and its template units (CUDA), or
// why it is not built (illegal, the same source as an earlier one, lowering failed).
struct Plan {
  std::vector<BuiltCandidate> built;
  std::vector<std::string> sources;              // "" for a candidate not to build
  std::vector<std::string> texts;                // all that is built: sources, units and (CPU) flags
  std::vector<std::vector<std::string>> units;   // its template units' texts
};

Plan plan_candidates(const codegen::KernelDefinition& kernel, const SearchSpace& space,
                     const std::vector<Candidate>& candidates, codegen::Target target, int jobs) {
  const bool cuda = target == codegen::Target::Cuda;
  Plan plan;
  plan.built.resize(candidates.size());
  plan.sources.resize(candidates.size());
  plan.units.resize(candidates.size());
  plan.texts.resize(candidates.size());
  // Lowered in parallel (the IR is immutable and shared; a schedule's options are per thread),
  // then compared in order, so that a candidate is the same as the first one with its text.
  parallel_for(candidates.size(), jobs, [&](size_t i) {
    BuiltCandidate& b = plan.built[i];
    b.knobs = candidates[i];
    b.function = kernel.name;
    b.error = space.illegal_reason(candidates[i]);
    if (!b.error.empty()) {
      b.illegal = true;
      return;
    }
    try {
      std::optional<Schedule> schedule;
      if (cuda) schedule = default_gpu_schedule(kernel.inputs, kernel.outputs, schedule_options(candidates[i]));
      const codegen::GraphFunction f = codegen::lower_kernel(kernel, target, schedule ? &*schedule : nullptr);
      // The CPU target's knobs are compiler flags: they are part of what is built.
      LibrarySource source = library_source(f.func, target);
      std::string text = source.main;
      for (const std::string& u : source.units) text += u;
      if (!cuda) {
        for (const std::string& flag : cpu_flags(candidates[i])) text += "\n// flag " + flag;
      }
      plan.sources[i] = std::move(source.main);
      plan.units[i] = std::move(source.units);
      plan.texts[i] = std::move(text);
    } catch (const std::exception& e) {
      b.error = std::string("lowering failed: ") + e.what();
    }
  });
  std::unordered_map<std::string, int> first_with_text;
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (plan.sources[i].empty()) continue;
    auto [it, added] = first_with_text.emplace(plan.texts[i], static_cast<int>(i));
    if (added) continue;
    plan.built[i].same_as = it->second;
    plan.sources[i].clear(), plan.units[i].clear(), plan.texts[i].clear();
  }
  return plan;
}

std::string include_dir_of(const BuildRequest& request) {
  fs::create_directories(request.work_dir);
  const std::string include_dir = (fs::path(request.work_dir) / "include").string();
  if (!fs::exists(include_dir)) codegen::write_support_files(include_dir);
  return include_dir;
}

codegen::BuildOptions unit_build_options(const BuildRequest& request, const std::string& include_dir) {
  codegen::BuildOptions options;
  options.target = request.target;
  options.archs = {request.arch};
  options.include_dir = include_dir;
  options.compile_only = true;
  return options;
}

// The template units of one build, compiled once into the object cache that workers (and kiln
// tune itself) share: each under a lock beside its object, written under a name of this process,
// then renamed.
class TemplateUnits {
 public:
  TemplateUnits(const BuildRequest& request, const std::string& include_dir)
      : options_(unit_build_options(request, include_dir)),
        cache_(request.object_cache.empty() ? (fs::path(request.work_dir) / "objects").string() : request.object_cache) {
    // An object is reused for the same text, flags and support headers (the headers' folder
    // differs between workers; their text between kiln versions).
    codegen::BuildOptions key_options = options_;
    key_options.include_dir = "include";
    key_ = codegen::build_command({"unit.cu"}, "unit.o", key_options) + codegen::support_files_digest();
  }

  // Adds a unit to the build: compiled unless its object is in the cache.
  void need(const std::string& text) {
    if (object_.count(text)) return;
    const std::string object = (fs::path(cache_) / ("unit_" + hex_hash(text + key_) + ".o")).string();
    object_[text] = object;
    if (!fs::exists(object)) missing_.push_back(text);
  }
  // The units to compile, longest text first (a proxy for compile time).
  const std::vector<std::string>& missing() {
    std::stable_sort(missing_.begin(), missing_.end(), [](const std::string& x, const std::string& y) { return x.size() > y.size(); });
    if (!missing_.empty()) fs::create_directories(cache_);
    return missing_;
  }
  // Compiles a unit. Mode::Try leaves a unit another process holds (compiling it) and returns
  // false; Mode::Wait waits for that process and compiles the unit only if it did not.
  bool compile(const std::string& text, FileLock::Mode mode) {
    const std::string object = object_.at(text);
    const FileLock lock(object + ".lock", mode);
    if (!lock.held() && lock.error() == EWOULDBLOCK) return false;
    if (fs::exists(object)) return true;  // compiled by another process meanwhile
    const std::string tmp = object.substr(0, object.size() - 2) + ".tmp" + std::to_string(::getpid());
    std::ofstream(tmp + ".cu") << text;
    codegen::BuildOptions options = options_;
    options.log_path = tmp + ".log";
    try {
      codegen::build_shared_library({tmp + ".cu"}, tmp + ".o", options);
      fs::rename(tmp + ".o", object);
      fs::remove(tmp + ".cu"), fs::remove(tmp + ".log");
    } catch (const UserError& e) {
      std::lock_guard<std::mutex> guard(mutex_);
      error_[text] = e.what();
    }
    return true;
  }
  const std::string& object(const std::string& text) const { return object_.at(text); }
  // The compiler, flags and support headers the objects are built with (part of every name).
  const std::string& key() const { return key_; }
  // Why a unit did not compile here ("" when it did, or was compiled elsewhere).
  std::string error(const std::string& text) {
    std::lock_guard<std::mutex> guard(mutex_);
    auto it = error_.find(text);
    return it == error_.end() ? "" : it->second;
  }

 private:
  codegen::BuildOptions options_;
  std::string cache_, key_;
  std::map<std::string, std::string> object_;  // text -> object file
  std::vector<std::string> missing_;
  std::mutex mutex_;
  std::map<std::string, std::string> error_;   // text -> the compiler's message
};

}  // namespace

std::vector<BuiltCandidate> build_candidates(const codegen::KernelDefinition& kernel, const SearchSpace& space,
                                             const std::vector<Candidate>& candidates, const BuildRequest& request,
                                             BuildTimes* times) {
  const std::string include_dir = include_dir_of(request);
  const bool cuda = request.target == codegen::Target::Cuda;
  const auto t0 = std::chrono::steady_clock::now();
  Plan plan = plan_candidates(kernel, space, candidates, request.target, request.jobs);
  BuildTimes local;
  BuildTimes& t = times ? *times : local;
  t = BuildTimes();
  t.lowering_s = seconds_since(t0);
  std::vector<BuiltCandidate>& built = plan.built;
  const codegen::BuildOptions unit_options = unit_build_options(request, include_dir);
  // 1. The template units every candidate to build needs, each compiled once into the cache.
  TemplateUnits units(request, include_dir);
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (plan.sources[i].empty()) continue;
    for (const std::string& u : plan.units[i]) units.need(u);
  }
  const std::vector<std::string>& to_compile = units.missing();
  // Builds at once (workers on one host) split the units: a unit another process holds is left
  // for a second pass, which waits for it.
  std::mutex mutex;
  std::vector<size_t> second_pass;
  const size_t first_pass_units = to_compile.size();
  // A candidate is named after all that is built (CPU candidates of one source differ in their
  // flags) and how: a library of that name from an earlier round (or run) in this folder is the
  // same build, and is reused with its compiler log.
  // Its registers are its generated kernels' (<function>_k<stage>...): the unit also holds template
  // kernels (the 4-bit layers'; every template's under KILN_TUNE_TEMPLATE_UNITS=0), whose registers go
  // with their own block sizes, not the knobs'.
  auto read_registers = [&](BuiltCandidate& b, const std::string& log) {
    if (cuda) parse_ptxas_report(read_file(log), b.function + "_k", b.registers, b.spill_bytes);
  };
  std::vector<std::string> stems(candidates.size());
  std::vector<size_t> to_build;
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (plan.sources[i].empty()) continue;
    BuiltCandidate& b = built[i];
    stems[i] = (fs::path(request.work_dir) / ("cand_" + hex_hash(plan.texts[i] + units.key()))).string();
    if (fs::exists(stems[i] + ".so") && fs::exists(stems[i] + ".log")) {
      b.library = stems[i] + ".so";
      read_registers(b, stems[i] + ".log");
      ++t.reused;
      continue;
    }
    to_build.push_back(i);
  }
  // 2. Each candidate's own unit, compiled in the same pool as the template units: it needs none of
  //    them until it is linked, so the candidates do not wait for the slowest unit (the Hopper
  //    GEMM's) to start. The units go first.
  auto compile_candidate = [&](size_t i) {
    BuiltCandidate& b = built[i];
    const std::string source = stems[i] + (cuda ? ".cu" : ".cpp");
    std::ofstream(source) << plan.sources[i];
    codegen::BuildOptions options = unit_options;
    options.log_path = stems[i] + ".log";
    options.extra_flags = cuda ? std::vector<std::string>{"-Xptxas", "-v"} : cpu_flags(b.knobs);
    try {
      codegen::build_shared_library({source}, stems[i] + ".o", options);
      read_registers(b, options.log_path);
    } catch (const UserError& e) {
      b.error = e.what();
    }
  };
  // How long each compile took (BuildTimes: where a round's build time goes).
  auto note = [&](bool unit, double seconds) {
    std::lock_guard<std::mutex> guard(mutex);
    (unit ? t.units : t.candidates) += 1;
    (unit ? t.units_s : t.candidates_s) += seconds;
    double& longest = unit ? t.longest_unit_s : t.longest_candidate_s;
    longest = std::max(longest, seconds);
  };
  const auto c0 = std::chrono::steady_clock::now();
  parallel_for(first_pass_units + to_build.size(), request.jobs, [&](size_t n) {
    const auto j0 = std::chrono::steady_clock::now();
    if (n < first_pass_units) {
      if (units.compile(to_compile[n], FileLock::Mode::Try)) {
        note(true, seconds_since(j0));
      } else {
        std::lock_guard<std::mutex> guard(mutex);
        second_pass.push_back(n);
      }
    } else {
      compile_candidate(to_build[n - first_pass_units]);
      note(false, seconds_since(j0));
    }
  });
  parallel_for(second_pass.size(), request.jobs, [&](size_t i) { units.compile(to_compile[second_pass[i]], FileLock::Mode::Wait); });
  t.compile_s = seconds_since(c0);
  const auto l0 = std::chrono::steady_clock::now();
  // 3. Each compiled candidate linked with its template objects.
  parallel_for(to_build.size(), request.jobs, [&](size_t n) {
    const size_t i = to_build[n];
    BuiltCandidate& b = built[i];
    if (!b.error.empty()) return;
    std::vector<std::string> inputs = {stems[i] + ".o"};
    for (const std::string& u : plan.units[i]) {
      const std::string error = units.error(u);
      if (!error.empty()) {
        b.error = error;
        return;
      }
      inputs.push_back(units.object(u));
    }
    codegen::BuildOptions options = unit_options;
    options.compile_only = false;
    options.log_path = stems[i] + ".link.log";
    if (!cuda) options.extra_flags = cpu_flags(b.knobs);
    // Linked under a name of this process, then renamed: a later round takes a library of the
    // candidate's name as built (a link cut short leaves none).
    const std::string tmp = stems[i] + ".tmp" + std::to_string(::getpid()) + ".so";
    try {
      codegen::build_shared_library(inputs, tmp, options);
      fs::rename(tmp, stems[i] + ".so");
      b.library = stems[i] + ".so";
    } catch (const UserError& e) {
      b.error = e.what();
    }
  });
  t.link_s = seconds_since(l0);
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

namespace {

// The reference's compiler flags: -mf16c where this x86 CPU has F16C, so that its float16
// conversions (most of a float16 model's CPU time: the CNN's reference 46 -> 4.2 s with
// LowerOptions::materialize_reread, session 31) run on the conversion instructions (kiln_cpu.h's
// KILN_FAST_HALF; the same bits, tests/codegen/HalfConversion_test.cpp). AArch64 has them without a
// flag. Not -march=native: it would also let the compiler contract a * b + c into FMAs, and the
// reference would round unlike the CPU backend's default build.
std::vector<std::string> reference_flags() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("f16c")) return {"-mf16c"};
#endif
  return {};
}

}  // namespace

std::string build_reference(const std::string& text, const std::string& work_dir) {
  fs::create_directories(work_dir);
  // Named after the text and the flags: a host without F16C sharing the folder builds its own.
  const std::vector<std::string> flags = reference_flags();
  std::string key = text;
  for (const std::string& f : flags) key += "\n// " + f;
  const std::string stem = (fs::path(work_dir) / ("reference_" + std::to_string(std::hash<std::string>()(key)))).string();
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
  options.extra_flags = flags;
  codegen::build_shared_library({tmp + ".cpp"}, tmp + ".so", options);
  fs::rename(tmp + ".so", stem + ".so");
  return stem + ".so";
}

}  // namespace kiln::tune
