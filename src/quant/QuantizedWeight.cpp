#include "kiln/quant/QuantizedWeight.h"

#include <string>

#include "kiln/support/Error.h"

namespace kiln::quant {

std::string_view format_name(QuantFormat format) {
  switch (format) {
    case QuantFormat::NvFp4: return "nvfp4";
    case QuantFormat::MxFp4: return "mxfp4";
    case QuantFormat::Int4: return "int4";
  }
  internal_error("unknown QuantFormat");
}

void check_quantized_weight(const QuantizedWeight& w, std::string_view what) {
  const std::string_view name = format_name(w.format);
  if (w.n <= 0 || w.k <= 0) user_error("{} ({}): shape [{}, {}] must be positive", what, name, w.n, w.k);
  switch (w.format) {
    case QuantFormat::NvFp4:
      if (w.group != 16) user_error("{} (nvfp4): group is {}, expected 16", what, w.group);
      if (w.scale_dtype != DType::Float8E4M3) {
        user_error("{} (nvfp4): scale dtype is {}, expected float8_e4m3fn", what, dtype_name(w.scale_dtype));
      }
      break;
    case QuantFormat::MxFp4:
      if (w.group != 32) user_error("{} (mxfp4): group is {}, expected 32", what, w.group);
      if (w.scale_dtype != DType::Float8E8M0) {
        user_error("{} (mxfp4): scale dtype is {}, expected float8_e8m0fnu", what, dtype_name(w.scale_dtype));
      }
      break;
    case QuantFormat::Int4:
      if (w.group != 32 && w.group != 64 && w.group != 128) {
        user_error("{} (int4): group is {}, expected 32, 64 or 128", what, w.group);
      }
      if (w.scale_dtype != DType::Float16 && w.scale_dtype != DType::BFloat16) {
        user_error("{} (int4): scale dtype is {}, expected float16 or bfloat16", what, dtype_name(w.scale_dtype));
      }
      break;
  }
  if (w.k % w.group != 0) {
    user_error("{} ({}): k = {} is not a multiple of the block size {}", what, name, w.k, w.group);
  }
  const std::string shape = "n = " + std::to_string(w.n) + ", k = " + std::to_string(w.k);
  if (w.data.size() != static_cast<size_t>(w.n * (w.k / 2))) {
    user_error("{} ({}): data has {} bytes, expected {} ([n, k/2] with {})", what, name, w.data.size(),
               w.n * (w.k / 2), shape);
  }
  const int64_t scale_bytes = w.n * w.groups_per_row() * w.scale_bytes_per_element();
  if (w.scales.size() != static_cast<size_t>(scale_bytes)) {
    user_error("{} ({}): scales have {} bytes, expected {} ([n, k/{}] of {} with {})", what, name,
               w.scales.size(), scale_bytes, w.group, dtype_name(w.scale_dtype), shape);
  }
  const int64_t zero_bytes = w.format == QuantFormat::Int4 ? scale_bytes : 0;
  if (w.zeros.size() != static_cast<size_t>(zero_bytes)) {
    user_error("{} ({}): zeros have {} bytes, expected {}", what, name, w.zeros.size(), zero_bytes);
  }
}

}  // namespace kiln::quant
