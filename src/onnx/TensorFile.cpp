#include "kiln/onnx/TensorFile.h"

#include <climits>
#include <filesystem>
#include <fstream>

#include "kiln/onnx/Proto.h"
#include "kiln/support/Error.h"

namespace kiln {

NamedTensor load_tensor_pb(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) user_error("{}: no such file", path);
  const auto size = fs::file_size(path, ec);
  if (ec || size > static_cast<uintmax_t>(INT_MAX)) user_error("{}: cannot read a tensor file of this size", path);
  std::string bytes(size, '\0');
  std::ifstream in(path, std::ios::binary);
  if (!in.read(bytes.data(), static_cast<std::streamsize>(size))) user_error("{}: cannot read", path);
  onnx::TensorProto proto;
  if (!proto.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    user_error("{}: cannot parse: the file is truncated, corrupt or not a serialized TensorProto", path);
  }
  std::string dir = fs::path(path).parent_path().string();
  const std::string what = path + ": tensor '" + proto.name() + "'";
  return NamedTensor{proto.name(), tensor_from_proto(proto, ExternalDataSource{dir.empty() ? "." : dir}, what)};
}

void save_tensor_pb(const NamedTensor& tensor, const std::string& path) {
  const onnx::TensorProto proto = tensor_to_proto(tensor.tensor, tensor.name);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out || !proto.SerializeToOstream(&out)) user_error("{}: cannot write", path);
}

}  // namespace kiln
