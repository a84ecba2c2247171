#pragma once
// Operator kinds: an enum after import (STYLE.md point 2). ONNX op_type strings map to it only
// in the importer and exporter.
#include <optional>
#include <string_view>

namespace kiln {

enum class OpKind : uint16_t {
#define KILN_OP(kind, onnx_name, domain) kind,
#include "kiln/graph/OpKinds.def"
  Unsupported,  // an op kiln cannot import; the node keeps its ONNX op_type for messages
};

std::string_view op_kind_name(OpKind kind);    // the ONNX op_type ("Relu")
std::string_view op_kind_domain(OpKind kind);  // "" for ai.onnx, "kiln" for kiln's own
std::optional<OpKind> op_kind_from_onnx(std::string_view domain, std::string_view op_type);

}  // namespace kiln
