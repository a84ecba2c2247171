#pragma once
// Two kinds of failure, kept apart (STYLE.md point 6):
//  - UserError: the input was wrong (bad model, bad argument). The message says what was wrong,
//    where (node, attribute, tensor, argument) and what was expected. Shown to users as is.
//  - InternalError: kiln itself is wrong (a broken invariant). Carries the source location.
#include <fmt/format.h>

#include <source_location>
#include <stdexcept>
#include <string>

namespace kiln {

class UserError : public std::runtime_error {
 public:
  explicit UserError(const std::string& message) : std::runtime_error(message) {}
};

// A UserError for input that is valid but that kiln does not handle (yet): an op, a dtype, an
// attribute value. The conformance runner counts these as skipped, with the message as reason.
class UnsupportedError : public UserError {
 public:
  explicit UnsupportedError(const std::string& message) : UserError(message) {}
};

class InternalError : public std::logic_error {
 public:
  explicit InternalError(const std::string& message) : std::logic_error(message) {}
};

template <typename... Args>
[[noreturn]] void user_error(fmt::format_string<Args...> format, Args&&... args) {
  throw UserError(fmt::format(format, std::forward<Args>(args)...));
}

template <typename... Args>
[[noreturn]] void unsupported(fmt::format_string<Args...> format, Args&&... args) {
  throw UnsupportedError(fmt::format(format, std::forward<Args>(args)...));
}

[[noreturn]] void internal_error(const std::string& message,
                                 std::source_location where = std::source_location::current());

}  // namespace kiln

// Checks an internal invariant; failure is a bug in kiln, never the user's input.
#define KILN_ASSERT(cond, ...)                                                             \
  do {                                                                                     \
    if (!(cond)) ::kiln::internal_error(std::string("assertion failed: " #cond " ") +     \
                                        ::fmt::format("" __VA_ARGS__));                    \
  } while (0)
