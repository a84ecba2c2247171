// The CUDA backend's reuse of translation units built by an earlier run (kiln test-onnx
// --cuda-reuse-built): a library counts as current only for the same source text, arch and
// kernel templates (the support headers' digest in its stamp).
#include "kiln/runtime/CudaBackend.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace kiln {
namespace {

namespace fs = std::filesystem;

class BuiltLibraryCurrent : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = fs::temp_directory_path() /
          ("kiln_reuse_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
    fs::create_directories(dir);
    source = (dir / "unit0.cu").string();
    library = (dir / "libunit0.so").string();
  }
  void TearDown() override { fs::remove_all(dir); }
  void write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

  fs::path dir;
  std::string source, library;
};

TEST_F(BuiltLibraryCurrent, SameSourceAndArchIsReused) {
  write(source, "__global__ void k() {}\n");
  write(library, "ELF");
  write(library + ".stamp", build_stamp("sm_90"));
  EXPECT_TRUE(built_library_current(source, "__global__ void k() {}\n", library, "sm_90"));
}

TEST_F(BuiltLibraryCurrent, ChangedSourceArchOrMissingPiecesAreRebuilt) {
  write(source, "__global__ void k() {}\n");
  write(library, "ELF");
  write(library + ".stamp", build_stamp("sm_90"));
  EXPECT_FALSE(built_library_current(source, "__global__ void k2() {}\n", library, "sm_90"));
  EXPECT_FALSE(built_library_current(source, "__global__ void k() {}\n", library, "sm_80"));
  fs::remove(library + ".stamp");  // a build that did not finish leaves no stamp
  EXPECT_FALSE(built_library_current(source, "__global__ void k() {}\n", library, "sm_90"));
  write(library + ".stamp", build_stamp("sm_90"));
  fs::remove(library);
  EXPECT_FALSE(built_library_current(source, "__global__ void k() {}\n", library, "sm_90"));
}

TEST_F(BuiltLibraryCurrent, AStampFromOtherKernelTemplatesIsRebuilt) {
  write(source, "__global__ void k() {}\n");
  write(library, "ELF");
  const std::string stamp = build_stamp("sm_90");
  EXPECT_EQ(stamp.rfind("sm_90 support ", 0), 0u) << stamp;
  EXPECT_NE(stamp, build_stamp("sm_80"));
  write(library + ".stamp", "sm_90");  // the stamp of a kiln before the digest: which templates is unknown
  EXPECT_FALSE(built_library_current(source, "__global__ void k() {}\n", library, "sm_90"));
  std::string other = stamp;
  other.back() = other.back() == '0' ? '1' : '0';  // another kiln's kernel templates
  write(library + ".stamp", other);
  EXPECT_FALSE(built_library_current(source, "__global__ void k() {}\n", library, "sm_90"));
  write(library + ".stamp", stamp);
  EXPECT_TRUE(built_library_current(source, "__global__ void k() {}\n", library, "sm_90"));
}

}  // namespace
}  // namespace kiln
