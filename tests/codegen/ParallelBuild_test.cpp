// codegen::build_shared_library_parallel (kiln compile's build): each source compiled on its own,
// at once, into DIR/objects/, then one link; the library holds every source's functions; a source
// that does not compile fails the build with its compiler's message and its path.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "kiln/codegen/Build.h"
#include "kiln/support/Error.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("kiln_parallel_build_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

codegen::BuildOptions cpu_build(const fs::path& dir) {
  codegen::BuildOptions build;
  build.target = codegen::Target::Cpu;
  build.include_dir = dir.string();
  return build;
}

TEST(ParallelBuild, EverySourceIsCompiledAndLinkedOnce) {
  const fs::path dir = fresh_dir("ok");
  std::vector<std::string> sources;
  for (int i = 0; i < 3; ++i) {
    const fs::path s = dir / ("part" + std::to_string(i) + ".cpp");
    std::ofstream(s) << "extern \"C\" int part" << i << "() { return " << (10 + i) << "; }\n";
    sources.push_back(s.string());
  }
  const std::string library = (dir / "libparts.so").string();
  codegen::build_shared_library_parallel(sources, library, cpu_build(dir), 2);
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(fs::exists(dir / "objects" / ("part" + std::to_string(i) + ".cpp.o"))) << i;
    EXPECT_FALSE(fs::exists(dir / "objects" / ("part" + std::to_string(i) + ".cpp.o.log"))) << "a built object's log is removed";
  }
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << dlerror();
  for (int i = 0; i < 3; ++i) {
    auto fn = reinterpret_cast<int (*)()>(dlsym(handle, ("part" + std::to_string(i)).c_str()));
    ASSERT_NE(fn, nullptr) << i;
    EXPECT_EQ(fn(), 10 + i);
  }
  dlclose(handle);
}

TEST(ParallelBuild, ASourceThatDoesNotCompileFailsTheBuildWithItsMessage) {
  const fs::path dir = fresh_dir("bad");
  const fs::path good = dir / "good.cpp", bad = dir / "bad.cpp";
  std::ofstream(good) << "extern \"C\" int good() { return 1; }\n";
  std::ofstream(bad) << "extern \"C\" int bad() { return undeclared_name; }\n";
  try {
    codegen::build_shared_library_parallel({good.string(), bad.string()}, (dir / "libx.so").string(), cpu_build(dir), 2);
    FAIL() << "the build should fail";
  } catch (const UserError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("bad.cpp"), std::string::npos) << what;
    EXPECT_NE(what.find("undeclared_name"), std::string::npos) << what;
  }
  EXPECT_FALSE(fs::exists(dir / "libx.so"));
}

}  // namespace
}  // namespace kiln
