#pragma once
// clang 14 with libstdc++ 12 has <source_location> but not std::source_location (it needs
// __builtin_source_location, clang 15+). kiln/support/Error.h uses it, so the fuzz build,
// and only the fuzz build, force-includes this stand-in built on the older builtins.
#include <version>
#if !defined(__cpp_lib_source_location)
#include <cstdint>
namespace std {
struct source_location {
  static constexpr source_location current(const char* file = __builtin_FILE(),
                                           const char* function = __builtin_FUNCTION(),
                                           uint_least32_t line = __builtin_LINE()) noexcept {
    source_location s;
    s.file_ = file;
    s.function_ = function;
    s.line_ = line;
    return s;
  }
  constexpr const char* file_name() const noexcept { return file_; }
  constexpr const char* function_name() const noexcept { return function_; }
  constexpr uint_least32_t line() const noexcept { return line_; }
  constexpr uint_least32_t column() const noexcept { return 0; }

 private:
  const char* file_ = "";
  const char* function_ = "";
  uint_least32_t line_ = 0;
};
}  // namespace std
#define KILN_SOURCE_LOCATION_SHIM 1
#endif
