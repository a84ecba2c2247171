#include "kiln/support/Error.h"

namespace kiln {

void internal_error(const std::string& message, std::source_location where) {
  throw InternalError(fmt::format("internal error at {}:{} ({}): {}", where.file_name(), where.line(),
                                  where.function_name(), message));
}

}  // namespace kiln
