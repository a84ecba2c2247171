#include "kiln/runtime/Conformance.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "kiln/ir/IROperator.h"
#include "kiln/onnx/Import.h"
#include "kiln/onnx/TensorFile.h"
#include "kiln/runtime/GraphRunner.h"
#include "kiln/support/Error.h"

namespace kiln {

namespace fs = std::filesystem;

Backend cpu_backend() {
  return [](const Graph& graph, const std::map<std::string, HostTensor>& inputs) {
    ops::BuildOptions options;
    options.specialize = inputs;  // shape operands (Reshape's shape, Slice's starts...) from the test data
    return run_graph_on_cpu(graph, inputs, options);
  };
}

std::vector<std::string> find_test_cases(const std::vector<std::string>& roots) {
  std::vector<std::string> cases;
  for (const std::string& root : roots) {
    if (!fs::is_directory(root)) user_error("test folder '{}' does not exist or is not a folder", root);
    if (fs::exists(fs::path(root) / "model.onnx")) cases.push_back(root);
    for (const auto& entry : fs::recursive_directory_iterator(root)) {
      if (entry.is_directory() && fs::exists(entry.path() / "model.onnx")) cases.push_back(entry.path().string());
    }
  }
  std::sort(cases.begin(), cases.end());
  cases.erase(std::unique(cases.begin(), cases.end()), cases.end());
  return cases;
}

namespace {

struct Tolerance {
  double rtol, atol;
};

Tolerance tolerance_for(DType dtype) {
  switch (dtype) {
    case DType::Float16: return {1e-3, 1e-3};
    case DType::BFloat16: return {1e-2, 1e-2};
    case DType::Float32: return {1e-4, 1e-5};
    case DType::Float64: return {1e-7, 1e-9};
    default: return {0, 0};
  }
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::vector<std::string> sorted_files(const fs::path& dir, const std::string& prefix) {
  std::vector<std::pair<int, std::string>> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) == 0 && name.size() > 3 && name.substr(name.size() - 3) == ".pb") {
      files.emplace_back(std::stoi(name.substr(prefix.size())), entry.path().string());
    }
  }
  std::sort(files.begin(), files.end());
  std::vector<std::string> out;
  for (auto& f : files) out.push_back(f.second);
  return out;
}

// ONNX test data written before bfloat16 had its own TensorProto code stores bfloat16 tensors as
// UINT16 holding the same bits; read them as the bfloat16 the model declares.
HostTensor as_declared(const HostTensor& t, const Value& declared) {
  if (t.dtype() != DType::UInt16 || !declared.type || declared.type->dtype != DType::BFloat16) return t;
  HostTensor out(DType::BFloat16, t.shape());
  std::copy(t.data(), t.data() + t.num_bytes(), out.data());
  return out;
}

// A few test cases feed an input whose shape contradicts the static dims the model declares
// (CastLike's `like`); such a case tests nothing kiln can run. Empty when consistent.
std::string contradicts_declared_shape(const HostTensor& t, const Value& declared) {
  if (!declared.type) return "";
  const std::vector<ir::Expr>& dims = declared.type->shape;
  bool contradicts = static_cast<int>(dims.size()) != t.ndim();
  for (size_t d = 0; !contradicts && d < dims.size(); ++d) {
    auto n = ir::as_const_int(dims[d]);
    contradicts = n && *n != t.shape()[d];
  }
  if (!contradicts) return "";
  return fmt::format("input '{}' has shape {} but the model declares {}", declared.name, shape_text(t.shape()),
                     to_string(*declared.type));
}

}  // namespace

std::string compare_tensors(const HostTensor& actual, const HostTensor& expected) {
  if (actual.dtype() != expected.dtype()) {
    return fmt::format("dtype {} but expected {}", dtype_name(actual.dtype()), dtype_name(expected.dtype()));
  }
  if (actual.shape() != expected.shape()) {
    return fmt::format("shape {} but expected {}", shape_text(actual.shape()), shape_text(expected.shape()));
  }
  const Tolerance tol = tolerance_for(expected.dtype());
  const bool floating = is_float(expected.dtype());
  for (int64_t i = 0; i < expected.num_elements(); ++i) {
    bool ok;
    if (floating) {
      const double a = actual.get_double(i), e = expected.get_double(i);
      ok = (std::isnan(a) && std::isnan(e)) || a == e || std::fabs(a - e) <= tol.atol + tol.rtol * std::fabs(e);
      if (!ok) return fmt::format("element {} is {} but expected {} (rtol {}, atol {})", i, a, e, tol.rtol, tol.atol);
    } else {
      ok = actual.get_int(i) == expected.get_int(i);
      if (!ok) return fmt::format("element {} is {} but expected {}", i, actual.get_int(i), expected.get_int(i));
    }
  }
  return "";
}

CaseResult run_test_case(const std::string& folder, const Backend& backend) {
  CaseResult result;
  result.name = fs::path(folder).filename().string();
  try {
    Graph graph = load_onnx((fs::path(folder) / "model.onnx").string());
    std::vector<std::string> data_sets;
    for (const auto& entry : fs::directory_iterator(folder)) {
      if (entry.is_directory() && entry.path().filename().string().rfind("test_data_set_", 0) == 0) {
        data_sets.push_back(entry.path().string());
      }
    }
    std::sort(data_sets.begin(), data_sets.end());
    if (data_sets.empty()) {
      result.status = CaseStatus::Skipped;
      result.message = "no test_data_set_* folder";
      return result;
    }
    for (const std::string& set : data_sets) {
      std::vector<std::string> input_files = sorted_files(set, "input_");
      std::vector<std::string> output_files = sorted_files(set, "output_");
      std::map<std::string, HostTensor> inputs;
      for (size_t k = 0; k < input_files.size(); ++k) {
        NamedTensor t = load_tensor_pb(input_files[k]);
        // Inputs are matched by position among the graph inputs (names in .pb files are optional).
        if (k >= graph.inputs.size()) user_error("test data has more inputs than the model");
        const Value& declared = graph.values[graph.inputs[k]];
        inputs[declared.name] = as_declared(t.tensor, declared);
        if (std::string why = contradicts_declared_shape(t.tensor, declared); !why.empty()) {
          result.status = CaseStatus::Skipped;
          result.message = fmt::format("{}: inconsistent test case: {}", fs::path(set).filename().string(), why);
          return result;
        }
      }
      std::vector<HostTensor> outputs = backend(graph, inputs);
      if (outputs.size() != output_files.size()) {
        result.status = CaseStatus::Failed;
        result.message = fmt::format("{} outputs but {} expected", outputs.size(), output_files.size());
        return result;
      }
      for (size_t k = 0; k < outputs.size(); ++k) {
        NamedTensor expected = load_tensor_pb(output_files[k]);
        std::string diff = compare_tensors(outputs[k], as_declared(expected.tensor, graph.values[graph.outputs[k]]));
        if (!diff.empty()) {
          result.status = CaseStatus::Failed;
          result.message = fmt::format("{}: output {} ('{}'): {}", fs::path(set).filename().string(), k,
                                       graph.values[graph.outputs[k]].name, diff);
          return result;
        }
      }
    }
  } catch (const UnsupportedError& e) {
    result.status = CaseStatus::Skipped;
    result.message = e.what();
  } catch (const UserError& e) {
    result.status = CaseStatus::Failed;
    result.message = e.what();
  } catch (const InternalError& e) {
    result.status = CaseStatus::Failed;
    result.message = e.what();
  }
  return result;
}

}  // namespace kiln
