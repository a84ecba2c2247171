#pragma once
// The protobuf level of the ONNX frontend, for code that builds or rewrites ModelProtos
// directly (model rewriting in package/ and quant/, test model builders). Everything else uses
// Import.h / Export.h and never sees a protobuf type.
#include <onnx/onnx-ml.pb.h>

#include <cstdint>
#include <optional>
#include <string>

#include "kiln/graph/Graph.h"
#include "kiln/onnx/Export.h"
#include "kiln/runtime/HostTensor.h"

namespace kiln {

// ONNX TensorProto.DataType codes <-> kiln dtypes. Codes kiln has no dtype for give nullopt.
std::optional<DType> dtype_from_onnx(int32_t data_type);
int32_t dtype_to_onnx(DType dtype);
std::string onnx_data_type_name(int32_t data_type);  // "FLOAT", "STRING", or "data type 99"

// Where a tensor's external data is looked up: its location is relative to `base_dir` and may
// not leave it. An empty base_dir means external data is not allowed.
struct ExternalDataSource {
  std::string base_dir;
};

// A TensorProto's contents (raw_data, the typed fields, or external data). `what` names the
// tensor in errors ("initializer 'w'", "attribute 'value' of node 'c' (Constant)").
HostTensor tensor_from_proto(const onnx::TensorProto& proto, const ExternalDataSource& source,
                             const std::string& what);
// Raw little-endian data, inline.
onnx::TensorProto tensor_to_proto(const HostTensor& tensor, const std::string& name);

// The importer and exporter behind Import.h / Export.h, at the protobuf level.
Graph graph_from_model_proto(const onnx::ModelProto& model, const ExternalDataSource& source);
onnx::ModelProto model_proto_from_graph(const Graph& graph, const ExportOptions& options);

}  // namespace kiln
