#pragma once
// Compiles a generated CUDA module the way CI checks generated code: nvcc, C++20, every warning an
// error, for sm_80, sm_90 (as sm_90a, as kiln builds it: the Hopper contraction kernel too) and
// sm_110 (no GPU needed). Used by the codegen tests.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "kiln/codegen/Build.h"

namespace kiln::test {

// Writes `source_text` with the support headers into a fresh folder named after `name`, compiles
// it for `archs`, and expects nvcc to succeed silently. Skips (with the reason) where nvcc is missing.
inline void expect_cuda_compiles(const std::string& name, const std::string& source_text,
                                 const std::vector<std::string>& archs) {
  namespace fs = std::filesystem;
  const std::string nvcc = codegen::find_nvcc();
  if (nvcc.empty()) GTEST_SKIP() << "nvcc not found: generated CUDA is not compiled here";
  const fs::path dir = fs::temp_directory_path() / ("kiln_codegen_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  codegen::write_support_files((dir / "include").string());
  const fs::path source = dir / "module.cu";
  std::ofstream(source) << source_text;
  const std::string log = (dir / "nvcc.log").string();
  // --threads 0: the architectures compile in parallel on every core (the conv stack took 500-570 s
  // of CI's 600 s test limit one architecture after another).
  const std::string cmd = "'" + nvcc + "' -std=c++20 -c --threads 0 --expt-relaxed-constexpr -Werror all-warnings -Xcompiler -Wall,-Wextra,-Werror" +
                          codegen::cuda_arch_flags(archs) + " -I'" + (dir / "include").string() + "' -o '" +
                          (dir / "module.o").string() + "' '" + source.string() + "' > '" + log + "' 2>&1";
  const int status = std::system(cmd.c_str());
  std::ifstream in(log);
  const std::string output((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(status, 0) << cmd << "\n" << output;
  EXPECT_EQ(output, "") << "nvcc printed warnings:\n" << output;
  fs::remove_all(dir);
}

inline void expect_cuda_compiles_for_every_architecture(const std::string& name, const std::string& source_text) {
  expect_cuda_compiles(name, source_text, {"sm_80", "sm_90", "sm_110"});
}

}  // namespace kiln::test
