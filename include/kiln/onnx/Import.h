#pragma once
// Loading ONNX models into kiln's typed graph (graph/Graph.h).
//
// The importer maps op_type strings to OpKind (unknown ops become OpKind::Unsupported with their
// op_type kept, so that every unsupported op can be reported at once), converts attributes and
// initializers, turns declared tensor types into TensorTypes with symbolic dims (dim_param →
// graph.symbol(name); an unnamed unknown dim → a fresh symbol "<value>_d<i>"), and sorts the
// nodes topologically. Shapes and dtypes of undeclared values are left for ops/ to infer.
//
// Everything wrong with the file is a UserError naming the node, attribute or tensor: an
// unreadable, truncated or corrupt file, an opset outside 11..21, a node input nothing produces,
// a cycle, a value produced twice, an unsupported tensor data type, a negative dim or one whose
// product overflows, an external data reference that is missing, too short or escapes the
// model's folder.
#include <string>
#include <string_view>
#include <vector>

#include "kiln/graph/Graph.h"

namespace kiln {

// Older opsets load too: most ops are unchanged since (the node test suite records each op at
// the opset it last changed), and definitions whose older forms differ check ctx.opset() and
// report the older form as unsupported. Opsets 26-28 (onnx 1.23's newest) load too: the ops kiln
// defines that changed there check ctx.opset() (BitShift's signed types, SpaceToDepth's mode,
// Range's float16/bfloat16 with stash_type; the rest only added types kiln lacks, float6/int2).
// A newer opset is unsupported (valid ONNX kiln does not know), naming the opset and a node.
inline constexpr int64_t kMinOpset = 1;
inline constexpr int64_t kMaxOpset = 28;

// Loads `path`; external data files are looked up relative to the model's folder.
Graph load_onnx(const std::string& path);

// Loads a serialized ModelProto from memory. External data is looked up relative to
// `external_data_dir`; when it is empty, a tensor with external data is a UserError.
Graph load_onnx_from_bytes(std::string_view bytes, const std::string& external_data_dir = "");

// One line per unsupported op type, "Loop: nodes 'a', 'b'" (with the reason where kiln knows the
// op but not one of its attributes), sorted by op type; empty when kiln supports every node.
std::vector<std::string> unsupported_ops(const Graph& graph);

}  // namespace kiln
