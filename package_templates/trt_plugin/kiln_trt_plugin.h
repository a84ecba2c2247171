// kiln's TensorRT IPluginV3 adapter of the kernel contract (include/kiln/runtime/kiln_abi.h).
//
// One generic plugin class, driven by a PluginSpec (data written by `kiln plugins` into each
// plugin's <plugin>_plugin.cpp): which dtype variants were compiled (one kiln_<fn> each), the
// type class of each input/output position, the output shapes as small programs over the input
// dims (so symbolic dims stay symbolic through IExprBuilder), and the settings fields.
//
// Contract kept here (issue 3): enqueue builds DLTensors from PluginTensorDesc + pointers and
// calls kiln_<fn> on the given stream only; it allocates nothing, never synchronizes and returns
// an error code (logged through setLoggerFinder's logger) instead of exiting. The plugin holds no
// weights: initializers arrive as constant inputs, which TensorRT keeps in device memory.
#pragma once

#include <NvInferRuntime.h>
#include <dlpack/dlpack.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kiln/runtime/kiln_abi.h"

extern "C" const char* kiln_last_error(void);  // defined once per library (kiln_last_error.cu)

namespace kiln_trt {

// A dtype variant of the plugin's kernel: the type of every float position, and its function.
struct Variant {
  nvinfer1::DataType float_type;
  KilnKernelFn call;
  KilnSignatureFn signature;
};

// Output shapes as postfix programs over the input dims (evaluated with IExprBuilder at build
// time, with plain integers by the harness).
enum ShapeOpCode : int32_t {
  kShapeConst = 0,     // push a
  kShapeInputDim = 1,  // push input a's dim b
  kShapeAdd = 2,
  kShapeSub = 3,
  kShapeMul = 4,
  kShapeFloorDiv = 5,
  kShapeCeilDiv = 6,
  kShapeMax = 7,
  kShapeMin = 8,
};
struct ShapeOp {
  int32_t code;
  int64_t a;
  int64_t b;
};
struct OutputDim {
  int32_t first_op;  // the dim's program is shape_ops[first_op, first_op + num_ops)
  int32_t num_ops;
};

// A setting of the replaced node(s), as the ONNX parser passes it (INT->INT32, FLOAT->FLOAT32,
// STRING->CHAR, INTS->INT32 array, FLOATS->FLOAT32 array). The kernel was compiled for these
// values: createPlugin rejects a field of the same name with another value.
struct Field {
  const char* name;
  nvinfer1::PluginFieldType type;
  int32_t length;
  const void* data;
};

constexpr int32_t kFloatClass = -1;  // io_types entry: the position takes the variant's float type

struct PluginSpec {
  const char* name;
  const char* version;
  int32_t num_inputs;
  int32_t num_outputs;
  const int32_t* io_types;  // num_inputs + num_outputs entries: kFloatClass or a DataType value
  const Variant* variants;
  int32_t num_variants;
  const int32_t* output_ndims;     // num_outputs entries
  const OutputDim* output_dims;    // sum(output_ndims) entries, output by output
  const ShapeOp* shape_ops;
  const Field* fields;
  int32_t num_fields;
};

void log_error(const std::string& message) noexcept;
void set_logger_finder(nvinfer1::ILoggerFinder* finder) noexcept;

size_t field_element_size(nvinfer1::PluginFieldType type) noexcept;
DLDataType dl_dtype(nvinfer1::DataType type) noexcept;
// Evaluates output dim `d` (index into spec.output_dims) with integer input dims.
int64_t eval_output_dim(const PluginSpec& spec, int32_t d, const nvinfer1::Dims* inputs) noexcept;

class Plugin : public nvinfer1::IPluginV3,
               public nvinfer1::IPluginV3OneCore,
               public nvinfer1::IPluginV3OneBuild,
               public nvinfer1::IPluginV3OneRuntime {
 public:
  Plugin(const PluginSpec& spec, std::string layer_name, std::string plugin_namespace,
         std::vector<std::vector<char>> field_values);
  ~Plugin() override = default;

  // IPluginV3
  nvinfer1::IPluginCapability* getCapabilityInterface(nvinfer1::PluginCapabilityType type) noexcept override;
  nvinfer1::IPluginV3* clone() noexcept override;

  // IPluginV3OneCore
  char const* getPluginName() const noexcept override { return spec_->name; }
  char const* getPluginVersion() const noexcept override { return spec_->version; }
  char const* getPluginNamespace() const noexcept override { return namespace_.c_str(); }

  // IPluginV3OneBuild
  int32_t configurePlugin(nvinfer1::DynamicPluginTensorDesc const* in, int32_t nbInputs,
                          nvinfer1::DynamicPluginTensorDesc const* out, int32_t nbOutputs) noexcept override;
  int32_t getOutputDataTypes(nvinfer1::DataType* outputTypes, int32_t nbOutputs,
                             nvinfer1::DataType const* inputTypes, int32_t nbInputs) const noexcept override;
  int32_t getOutputShapes(nvinfer1::DimsExprs const* inputs, int32_t nbInputs, nvinfer1::DimsExprs const* shapeInputs,
                          int32_t nbShapeInputs, nvinfer1::DimsExprs* outputs, int32_t nbOutputs,
                          nvinfer1::IExprBuilder& exprBuilder) noexcept override;
  bool supportsFormatCombination(int32_t pos, nvinfer1::DynamicPluginTensorDesc const* inOut, int32_t nbInputs,
                                 int32_t nbOutputs) noexcept override;
  int32_t getNbOutputs() const noexcept override { return spec_->num_outputs; }
  size_t getWorkspaceSize(nvinfer1::DynamicPluginTensorDesc const* inputs, int32_t nbInputs,
                          nvinfer1::DynamicPluginTensorDesc const* outputs, int32_t nbOutputs) const noexcept override;

  // IPluginV3OneRuntime
  int32_t onShapeChange(nvinfer1::PluginTensorDesc const* in, int32_t nbInputs, nvinfer1::PluginTensorDesc const* out,
                        int32_t nbOutputs) noexcept override;
  int32_t enqueue(nvinfer1::PluginTensorDesc const* inputDesc, nvinfer1::PluginTensorDesc const* outputDesc,
                  void const* const* inputs, void* const* outputs, void* workspace, cudaStream_t stream) noexcept override;
  nvinfer1::IPluginV3* attachToContext(nvinfer1::IPluginResourceContext* context) noexcept override;
  nvinfer1::PluginFieldCollection const* getFieldsToSerialize() noexcept override;

  const std::string& layer_name() const { return layer_name_; }

 private:
  const Variant* find_variant(nvinfer1::DataType float_type) const noexcept;
  // The float type of a type list (that of the first float position), or false when none.
  bool float_type_of(const nvinfer1::DataType* types, int32_t count, int32_t first, nvinfer1::DataType* out) const;

  const PluginSpec* spec_;
  std::string layer_name_;
  std::string namespace_;
  std::vector<std::vector<char>> field_values_;  // per spec field, its bytes
  std::vector<nvinfer1::PluginField> serialized_;
  nvinfer1::PluginFieldCollection serialized_collection_{};
};

class Creator : public nvinfer1::IPluginCreatorV3One {
 public:
  Creator(const PluginSpec& spec, const char* plugin_namespace);
  nvinfer1::IPluginV3* createPlugin(char const* name, nvinfer1::PluginFieldCollection const* fc,
                                    nvinfer1::TensorRTPhase phase) noexcept override;
  nvinfer1::PluginFieldCollection const* getFieldNames() noexcept override { return &field_names_; }
  char const* getPluginName() const noexcept override { return spec_->name; }
  char const* getPluginVersion() const noexcept override { return spec_->version; }
  char const* getPluginNamespace() const noexcept override { return namespace_.c_str(); }

 private:
  const PluginSpec* spec_;
  std::string namespace_;
  std::vector<nvinfer1::PluginField> fields_;
  nvinfer1::PluginFieldCollection field_names_{};
};

}  // namespace kiln_trt
