#include "kiln/graph/OpKind.h"

#include <array>
#include <cstdint>

namespace kiln {
namespace {

struct OpKindInfo {
  std::string_view onnx_name;
  std::string_view domain;
};

constexpr std::array kOpKindInfo = {
#define KILN_OP(kind, onnx_name, domain) OpKindInfo{onnx_name, domain},
#include "kiln/graph/OpKinds.def"
};

// ONNX's default domain has two spellings.
std::string_view canonical_domain(std::string_view domain) { return domain == "ai.onnx" ? "" : domain; }

}  // namespace

std::string_view op_kind_name(OpKind kind) {
  const auto i = static_cast<size_t>(kind);
  return i < kOpKindInfo.size() ? kOpKindInfo[i].onnx_name : "Unsupported";
}

std::string_view op_kind_domain(OpKind kind) {
  const auto i = static_cast<size_t>(kind);
  return i < kOpKindInfo.size() ? kOpKindInfo[i].domain : "";
}

std::optional<OpKind> op_kind_from_onnx(std::string_view domain, std::string_view op_type) {
  domain = canonical_domain(domain);
  for (size_t i = 0; i < kOpKindInfo.size(); ++i) {
    if (kOpKindInfo[i].onnx_name == op_type && kOpKindInfo[i].domain == domain) return static_cast<OpKind>(i);
  }
  return std::nullopt;
}

}  // namespace kiln
