// libFuzzer target over the ONNX loader: any bytes either load (and then export and load again)
// or give a UserError. Anything else (a crash, a sanitizer report, an InternalError or another
// exception escaping) is a bug that libFuzzer reports.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "kiln/onnx/Export.h"
#include "kiln/onnx/Import.h"
#include "kiln/support/Error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  kiln::Graph graph;
  try {
    graph = kiln::load_onnx_from_bytes(bytes);
  } catch (const kiln::UserError&) {
    return 0;
  }
  (void)kiln::unsupported_ops(graph);
  for (const kiln::Node& node : graph.nodes) (void)node.describe();
  for (const kiln::Value& value : graph.values) {
    if (value.type) (void)kiln::to_string(*value.type);
  }
  // What loaded must export, and the export must load again.
  std::string exported;
  try {
    exported = kiln::serialize_onnx(graph);
  } catch (const kiln::UserError&) {
    return 0;  // e.g. a graph of an opset the exporter refuses
  }
  (void)kiln::load_onnx_from_bytes(exported);
  return 0;
}
