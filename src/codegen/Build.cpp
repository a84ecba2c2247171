#include "kiln/codegen/Build.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <exception>
#include <functional>
#include <mutex>
#include <sstream>

#include "kiln/support/Error.h"
#include "kiln/support/Parallel.h"

namespace kiln::codegen {

namespace fs = std::filesystem;

std::string find_nvcc() {
  std::vector<std::string> candidates;
  if (const char* e = std::getenv("KILN_NVCC")) candidates.push_back(e);
  if (const char* e = std::getenv("CUDA_HOME")) candidates.push_back(std::string(e) + "/bin/nvcc");
  if (const char* path = std::getenv("PATH")) {
    std::stringstream ss(path);
    std::string dir;
    while (std::getline(ss, dir, ':')) {
      if (!dir.empty()) candidates.push_back(dir + "/nvcc");
    }
  }
  candidates.push_back("/usr/local/cuda/bin/nvcc");
  for (const std::string& c : candidates) {
    std::error_code ec;
    if (fs::is_regular_file(c, ec)) return c;
  }
  return "";
}

void write_support_files(const std::string& dir) {
  for (const auto& [name, text] : support_files()) {
    const fs::path path = fs::path(dir) / name;
    fs::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary) << text;
  }
}

std::string support_files_digest() {
  std::string files;
  for (const auto& [name, text] : support_files()) files += name + text;
  char hex[20];
  std::snprintf(hex, sizeof hex, "%016zx", std::hash<std::string>()(files));
  return hex;
}

static std::string quote(const std::string& s) { return "'" + s + "'"; }

std::string cuda_arch_flags(const std::vector<std::string>& archs) {
  std::string flags;
  bool sm90a = false;
  for (const std::string& arch : archs) {
    std::string n = arch.substr(3);
    if (n == "90") n = "90a";
    sm90a = sm90a || n == "90a";
    flags += " -gencode=arch=compute_" + n + ",code=sm_" + n;
  }
  if (sm90a) flags += " -DKILN_GEMM_SM90A";
  return flags;
}

std::string build_command(const std::vector<std::string>& sources, const std::string& output,
                          const BuildOptions& options) {
  std::string cmd;
  if (options.target == Target::Cuda) {
    const std::string nvcc = find_nvcc();
    if (nvcc.empty()) {
      user_error("nvcc was not found (looked at $KILN_NVCC, $CUDA_HOME/bin, PATH, /usr/local/cuda/bin); "
                 "install the CUDA toolkit or set KILN_NVCC, or pass --no-build to only write the sources");
    }
    cmd = quote(nvcc) + " -O3 -std=c++20 " + (options.compile_only ? "-c" : "-shared") +
          " -Xcompiler -fPIC -cudart shared --expt-relaxed-constexpr";
    cmd += cuda_arch_flags(options.archs);
  } else {
    const char* cxx = std::getenv("CXX");
    cmd = std::string(cxx ? cxx : "c++") + " -O2 -std=c++20 " + (options.compile_only ? "-c" : "-shared") + " -fPIC";
  }
  for (const std::string& f : options.extra_flags) cmd += " " + f;
  cmd += " -I" + quote(options.include_dir) + " -o " + quote(output);
  for (const std::string& s : sources) cmd += " " + quote(s);
  return cmd;
}

void build_shared_library(const std::vector<std::string>& sources, const std::string& output,
                          const BuildOptions& options) {
  const std::string log = options.log_path.empty() ? output + ".log" : options.log_path;
  const std::string cmd = build_command(sources, output, options) + " > " + quote(log) + " 2>&1";
  if (std::system(cmd.c_str()) != 0) {
    std::ifstream in(log);
    std::stringstream text;
    text << in.rdbuf();
    std::string s = text.str();
    if (s.size() > 4000) s = "..." + s.substr(s.size() - 4000);
    user_error("building {} failed:\n{}\n{}", output, cmd, s);
  }
}

void build_shared_library_parallel(const std::vector<std::string>& sources, const std::string& output,
                                   const BuildOptions& options, int jobs) {
  if (jobs <= 1 || sources.size() <= 1) {
    build_shared_library(sources, output, options);
    return;
  }
  // Objects in a folder beside the library, named after their sources (each log removed once its
  // object is built; a failure's log tail is in the error).
  const fs::path folder = fs::path(output).parent_path() / "objects";
  fs::create_directories(folder);
  std::vector<std::string> objects;
  for (const std::string& s : sources) objects.push_back((folder / (fs::path(s).filename().string() + ".o")).string());
  std::mutex mutex;
  std::exception_ptr failure;  // the first; no compile starts after it
  parallel_for(sources.size(), std::min<int>(jobs, static_cast<int>(sources.size())), [&](size_t i) {
    {
      const std::lock_guard<std::mutex> lock(mutex);
      if (failure) return;
    }
    BuildOptions one = options;
    one.compile_only = true;
    one.log_path = objects[i] + ".log";
    try {
      build_shared_library({sources[i]}, objects[i], one);
      fs::remove(one.log_path);
    } catch (...) {
      const std::lock_guard<std::mutex> lock(mutex);
      if (!failure) failure = std::current_exception();
    }
  });
  if (failure) std::rethrow_exception(failure);
  BuildOptions link = options;
  link.compile_only = false;
  build_shared_library(objects, output, link);
}

}  // namespace kiln::codegen
