#include "kiln/ir/Type.h"

#include <array>

namespace kiln {
namespace {

struct DTypeInfo {
  std::string_view name;
  int bits;
  DTypeClass cls;
};

constexpr std::array kDTypeInfo = {
#define KILN_DTYPE_INFO(name, str, bits, cls) DTypeInfo{str, bits, DTypeClass::cls},
    KILN_DTYPES(KILN_DTYPE_INFO)
#undef KILN_DTYPE_INFO
};

const DTypeInfo& info(DType dtype) { return kDTypeInfo[static_cast<size_t>(dtype)]; }

}  // namespace

std::string_view dtype_name(DType dtype) { return info(dtype).name; }
int dtype_bits(DType dtype) { return info(dtype).bits; }
DTypeClass dtype_class(DType dtype) { return info(dtype).cls; }

std::optional<DType> dtype_from_name(std::string_view name) {
  for (size_t i = 0; i < kDTypeInfo.size(); ++i) {
    if (kDTypeInfo[i].name == name) return static_cast<DType>(i);
  }
  if (name == "fp32") return DType::Float32;
  if (name == "fp16") return DType::Float16;
  if (name == "bf16") return DType::BFloat16;
  return std::nullopt;
}

std::string to_string(Type type) {
  std::string s(dtype_name(type.dtype));
  if (type.lanes > 1) s += "x" + std::to_string(type.lanes);
  return s;
}

}  // namespace kiln
