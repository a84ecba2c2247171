#pragma once
// The conformance runner: runs ONNX backend test case folders (model.onnx plus
// test_data_set_*/input_*.pb and output_*.pb, the layout of onnx's backend node tests) and
// compares every output with per-dtype tolerances.
#include <functional>
#include <string>
#include <vector>

#include "kiln/graph/Graph.h"
#include "kiln/runtime/HostTensor.h"

namespace kiln {

enum class CaseStatus { Passed, Failed, Skipped };

struct CaseResult {
  std::string name;  // the case folder's name
  CaseStatus status = CaseStatus::Passed;
  std::string message;  // why it failed or was skipped
};

// Runs one graph on a backend. The runner passes the test inputs keyed by graph input name;
// the backend returns one tensor per graph output.
using Backend = std::function<std::vector<HostTensor>(const Graph&, const std::map<std::string, HostTensor>&)>;

Backend cpu_backend();

// Every folder under `roots` (recursively, roots included) that holds a model.onnx, sorted.
std::vector<std::string> find_test_cases(const std::vector<std::string>& roots);

CaseResult run_test_case(const std::string& folder, const Backend& backend);

// Compares `actual` with `expected`: equal dtype and shape, and per element
// |a - e| <= atol + rtol * |e| with (rtol, atol) by dtype; NaN matches NaN. Returns "" when they
// match, otherwise a message naming the first mismatching element.
std::string compare_tensors(const HostTensor& actual, const HostTensor& expected);

}  // namespace kiln
