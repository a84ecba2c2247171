// libFuzzer target over the ONNX loader: any bytes either load (and then export and load again)
// or give a UserError. Anything else (a crash, a sanitizer report, an InternalError or another
// exception escaping) is a bug that libFuzzer reports.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string_view>

#include "kiln/onnx/Export.h"
#include "kiln/onnx/Import.h"
#include "kiln/onnx/Proto.h"
#include "kiln/support/Error.h"

namespace {

// A folder with one 64-byte data file, so that external data references are resolved (and
// escapes refused) for real.
const std::string& external_data_dir() {
  static const std::string dir = [] {
    const auto path = std::filesystem::temp_directory_path() / "kiln_fuzz_external";
    std::filesystem::create_directories(path);
    std::ofstream(path / "weights.bin", std::ios::binary) << std::string(64, '\x3f');
    return path.string();
  }();
  return dir;
}

// The same bytes read as one TensorProto (the test data files' format).
void fuzz_tensor(std::string_view bytes) {
  onnx::TensorProto proto;
  if (!proto.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) return;
  try {
    const kiln::HostTensor t = kiln::tensor_from_proto(proto, {external_data_dir()}, "tensor");
    (void)t.describe();
  } catch (const kiln::UserError&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  fuzz_tensor(bytes);
  kiln::Graph graph;
  try {
    graph = kiln::load_onnx_from_bytes(bytes, external_data_dir());
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
