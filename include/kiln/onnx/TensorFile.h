#pragma once
// Single serialized TensorProtos: the ONNX backend test data files
// (test_data_set_*/input_*.pb, output_*.pb).
#include <string>

#include "kiln/runtime/HostTensor.h"

namespace kiln {

struct NamedTensor {
  std::string name;  // the TensorProto's name; may be empty
  HostTensor tensor;
};

// A UserError naming the file when it is unreadable, corrupt, or of an unsupported data type.
NamedTensor load_tensor_pb(const std::string& path);
void save_tensor_pb(const NamedTensor& tensor, const std::string& path);

}  // namespace kiln
