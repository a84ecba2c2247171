#pragma once
// Private to package/: the text of a plugin package (template files filled with the plugin's
// data), its test cases, and the report.
#include <map>
#include <string>
#include <vector>

#include "PluginGroups.h"
#include "PluginKernel.h"
#include "kiln/runtime/HostTensor.h"

namespace kiln::package {

// A template file of package_templates/trt_plugin/ ($KILN_TEMPLATE_DIR overrides the folder).
std::string template_text(const std::string& name);
// `text` with every {{KEY}} replaced; an unknown or leftover key is an internal error.
std::string fill_template(const std::string& text, const std::map<std::string, std::string>& values);

// A settings or subgraph field as the ONNX parser passes it to the creator.
struct PluginFieldValue {
  std::string name;
  int type = 0;  // nvinfer1::PluginFieldType value
  int length = 0;
  std::vector<unsigned char> bytes;
  std::string describe() const;  // "axis: INT32 [-1]"
};
std::vector<PluginFieldValue> plugin_fields(const std::vector<onnx::AttributeProto>& attributes);

// <plugin>_plugin.cpp: the PluginSpec of kiln_trt_plugin.h.
std::string plugin_source(const PluginGroup& group, const PluginKernels& kernels, const std::vector<PluginFieldValue>& fields,
                          const PluginOptions& options, const std::string& model_name, const std::string& replaced);

struct TestTensor {
  std::string name;
  HostTensor data;                        // inputs: boundary type; outputs: expected as float32
  int trt_type = 0;
  std::vector<std::string> dim_symbols;   // per dim: symbol or "#"
  std::vector<int64_t> alt_dims;          // outputs
  double tolerance = 0;
};
struct TestCase {
  std::string plugin, function, dtype;
  std::vector<std::pair<std::string, int64_t>> symbols, alt_symbols;
  std::vector<TestTensor> inputs, outputs;
};
// Writes case_<dtype>.txt and its .bin files into `dir`; returns the case file name.
std::string write_test_case(const std::string& dir, const TestCase& c, const std::vector<PluginFieldValue>& fields,
                            const PluginOptions& options);

void write_text(const std::string& path, const std::string& text);

}  // namespace kiln::package
