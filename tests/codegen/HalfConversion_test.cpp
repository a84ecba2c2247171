// The float16 conversions of generated C++ through the CPU's instructions (kiln_cpu.h's
// KILN_FAST_HALF: x86 F16C, AArch64) give the portable code's results bit for bit: every half
// pattern to float (NaNs: a NaN of the same sign), and a sweep of floats (normal, subnormal,
// halfway cases, overflow, infinities, NaN) to half. Built as generated code is, with the flag
// that turns the instructions on (-mf16c on x86), then loaded and run.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "kiln/codegen/Build.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

constexpr const char* kProbe = R"(#include "kiln/codegen/runtime/kiln_cpu.h"
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

static unsigned float_bits(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }

extern "C" int half_mismatches(char* message, int size) {
#if !defined(KILN_FAST_HALF)
  std::snprintf(message, size, "KILN_FAST_HALF is not defined under these flags");
  return -1;
#else
  int bad = 0;
  for (unsigned h = 0; h < 65536; ++h) {
    const float fast = kiln::fast_half_bits_to_float(static_cast<uint16_t>(h));
    const float slow = kiln::half_bits_to_float(static_cast<uint16_t>(h));
    const bool same = std::isnan(slow) ? std::isnan(fast) && std::signbit(fast) == std::signbit(slow)
                                       : float_bits(fast) == float_bits(slow);
    if (!same && bad++ == 0) std::snprintf(message, size, "half 0x%04x: %a against %a", h, fast, slow);
  }
  std::vector<float> inputs = {0.0f, -0.0f, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                               std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(),
                               65504.0f, 65519.99f, 65520.0f, 1e30f, 0x1p-24f, 0x1p-25f, 0x1.8p-25f, 0x1p-26f, 0x1p-14f};
  for (unsigned u = 0; u < 0xff800000u; u += 4099u) {  // every exponent, many mantissas, both signs
    float f;
    std::memcpy(&f, &u, 4);
    inputs.push_back(f);
  }
  for (unsigned h = 0; h < 0x7c00u; ++h) {  // halfway between neighbouring halves, and just off it
    const float lo = kiln::half_bits_to_float(static_cast<uint16_t>(h)), hi = kiln::half_bits_to_float(static_cast<uint16_t>(h + 1));
    const float mid = lo + (hi - lo) / 2;
    inputs.push_back(mid);
    inputs.push_back(-mid);
    inputs.push_back(std::nextafter(mid, 0.0f));
    inputs.push_back(std::nextafter(mid, 1e9f));
  }
  for (float f : inputs) {
    const uint16_t fast = kiln::fast_float_to_half_bits(f), slow = kiln::float_to_half_bits(f);
    if (fast != slow && bad++ == 0) std::snprintf(message, size, "float %a: 0x%04x against 0x%04x", f, fast, slow);
  }
  return bad;
#endif
}
)";

TEST(HalfConversion, CpuInstructionsMatchThePortableCode) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("f16c")) GTEST_SKIP() << "this CPU has no F16C: generated code keeps the portable conversions";
  const std::vector<std::string> flags = {"-mf16c"};
#elif defined(__aarch64__)
  const std::vector<std::string> flags;
#else
  GTEST_SKIP() << "no conversion instructions kiln_cpu.h uses on this architecture";
#endif
  const fs::path dir = fs::temp_directory_path() / "kiln_half_conversion";
  fs::remove_all(dir);
  fs::create_directories(dir);
  codegen::write_support_files(dir.string());
  std::ofstream(dir / "probe.cpp") << kProbe;
  codegen::BuildOptions build;
  build.target = codegen::Target::Cpu;
  build.include_dir = dir.string();
  build.extra_flags = flags;
  const std::string library = (dir / "libprobe.so").string();
  codegen::build_shared_library({(dir / "probe.cpp").string()}, library, build);
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << dlerror();
  auto mismatches = reinterpret_cast<int (*)(char*, int)>(dlsym(handle, "half_mismatches"));
  ASSERT_NE(mismatches, nullptr);
  char message[256] = "";
  EXPECT_EQ(mismatches(message, sizeof message), 0) << message;
  dlclose(handle);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kiln
