// kiln's TensorRT IPluginV3 adapter of the kernel contract: see kiln_trt_plugin.h.
#include "kiln_trt_plugin.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <exception>

namespace kiln_trt {

namespace {

nvinfer1::ILoggerFinder* g_logger_finder = nullptr;

constexpr int32_t kMaxIo = 16;

bool is_float_class(const PluginSpec& spec, int32_t pos) { return spec.io_types[pos] == kFloatClass; }

bool compact_dims(const nvinfer1::Dims& dims) {
  if (dims.nbDims < 0 || dims.nbDims > nvinfer1::Dims::MAX_DIMS) return false;
  for (int32_t d = 0; d < dims.nbDims; ++d) {
    if (dims.d[d] < 0) return false;
  }
  return true;
}

}  // namespace

void set_logger_finder(nvinfer1::ILoggerFinder* finder) noexcept { g_logger_finder = finder; }

void log_error(const std::string& message) noexcept {
  nvinfer1::ILogger* logger = g_logger_finder ? g_logger_finder->findLogger() : nullptr;
  if (logger) logger->log(nvinfer1::ILogger::Severity::kERROR, message.c_str());
}

size_t field_element_size(nvinfer1::PluginFieldType type) noexcept {
  switch (type) {
    case nvinfer1::PluginFieldType::kINT32:
    case nvinfer1::PluginFieldType::kFLOAT32: return 4;
    case nvinfer1::PluginFieldType::kCHAR:
    case nvinfer1::PluginFieldType::kINT8: return 1;
    case nvinfer1::PluginFieldType::kFLOAT64:
    case nvinfer1::PluginFieldType::kINT64: return 8;
    case nvinfer1::PluginFieldType::kFLOAT16:
    case nvinfer1::PluginFieldType::kBF16:
    case nvinfer1::PluginFieldType::kINT16: return 2;
    default: return 0;
  }
}

DLDataType dl_dtype(nvinfer1::DataType type) noexcept {
  switch (type) {
    case nvinfer1::DataType::kFLOAT: return DLDataType{kDLFloat, 32, 1};
    case nvinfer1::DataType::kHALF: return DLDataType{kDLFloat, 16, 1};
    case nvinfer1::DataType::kBF16: return DLDataType{kDLBfloat, 16, 1};
    case nvinfer1::DataType::kINT32: return DLDataType{kDLInt, 32, 1};
    case nvinfer1::DataType::kINT64: return DLDataType{kDLInt, 64, 1};
    case nvinfer1::DataType::kINT8: return DLDataType{kDLInt, 8, 1};
    case nvinfer1::DataType::kUINT8: return DLDataType{kDLUInt, 8, 1};
    default: return DLDataType{kDLOpaqueHandle, 0, 0};
  }
}

int64_t eval_output_dim(const PluginSpec& spec, int32_t d, const nvinfer1::Dims* inputs) noexcept {
  int64_t stack[32];
  int32_t top = 0;
  const OutputDim& od = spec.output_dims[d];
  for (int32_t k = od.first_op; k < od.first_op + od.num_ops; ++k) {
    const ShapeOp& op = spec.shape_ops[k];
    if (op.code == kShapeConst) {
      stack[top++] = op.a;
      continue;
    }
    if (op.code == kShapeInputDim) {
      stack[top++] = inputs[op.a].d[op.b];
      continue;
    }
    const int64_t b = stack[--top], a = stack[--top];
    int64_t r = 0;
    switch (op.code) {
      case kShapeAdd: r = a + b; break;
      case kShapeSub: r = a - b; break;
      case kShapeMul: r = a * b; break;
      case kShapeFloorDiv: r = (a >= 0) == (b >= 0) || a % b == 0 ? a / b : a / b - 1; break;
      case kShapeCeilDiv: r = (a + b - 1) / b; break;
      case kShapeMax: r = std::max(a, b); break;
      case kShapeMin: r = std::min(a, b); break;
      default: return -1;
    }
    stack[top++] = r;
  }
  return top == 1 ? stack[0] : -1;
}

// ---- Plugin ----

Plugin::Plugin(const PluginSpec& spec, std::string layer_name, std::string plugin_namespace,
               std::vector<std::vector<char>> field_values)
    : spec_(&spec),
      layer_name_(std::move(layer_name)),
      namespace_(std::move(plugin_namespace)),
      field_values_(std::move(field_values)) {}

nvinfer1::IPluginCapability* Plugin::getCapabilityInterface(nvinfer1::PluginCapabilityType type) noexcept {
  switch (type) {
    case nvinfer1::PluginCapabilityType::kCORE: return static_cast<nvinfer1::IPluginV3OneCore*>(this);
    case nvinfer1::PluginCapabilityType::kBUILD: return static_cast<nvinfer1::IPluginV3OneBuild*>(this);
    case nvinfer1::PluginCapabilityType::kRUNTIME: return static_cast<nvinfer1::IPluginV3OneRuntime*>(this);
  }
  return nullptr;
}

nvinfer1::IPluginV3* Plugin::clone() noexcept {
  try {
    // Deep: every member is a value (strings, vectors); the spec is immutable static data.
    return new Plugin(*spec_, layer_name_, namespace_, field_values_);
  } catch (const std::exception& e) {
    log_error(std::string(spec_->name) + ": clone failed: " + e.what());
    return nullptr;
  }
}

int32_t Plugin::configurePlugin(nvinfer1::DynamicPluginTensorDesc const* /*in*/, int32_t nbInputs,
                                nvinfer1::DynamicPluginTensorDesc const* /*out*/, int32_t nbOutputs) noexcept {
  if (nbInputs != spec_->num_inputs || nbOutputs != spec_->num_outputs) {
    log_error(layer_name_ + " (" + spec_->name + "): configured with " + std::to_string(nbInputs) + " inputs and " +
              std::to_string(nbOutputs) + " outputs, expected " + std::to_string(spec_->num_inputs) + " and " +
              std::to_string(spec_->num_outputs));
    return -1;
  }
  return 0;
}

bool Plugin::float_type_of(const nvinfer1::DataType* types, int32_t count, int32_t first,
                           nvinfer1::DataType* out) const {
  for (int32_t i = 0; i < count; ++i) {
    if (is_float_class(*spec_, first + i)) {
      *out = types[i];
      return true;
    }
  }
  return false;
}

int32_t Plugin::getOutputDataTypes(nvinfer1::DataType* outputTypes, int32_t nbOutputs,
                                   nvinfer1::DataType const* inputTypes, int32_t nbInputs) const noexcept {
  if (nbInputs != spec_->num_inputs || nbOutputs != spec_->num_outputs) return -1;
  nvinfer1::DataType float_type = spec_->variants[0].float_type;
  float_type_of(inputTypes, nbInputs, 0, &float_type);
  for (int32_t o = 0; o < nbOutputs; ++o) {
    const int32_t t = spec_->io_types[nbInputs + o];
    outputTypes[o] = t == kFloatClass ? float_type : static_cast<nvinfer1::DataType>(t);
  }
  return 0;
}

int32_t Plugin::getOutputShapes(nvinfer1::DimsExprs const* inputs, int32_t nbInputs,
                                nvinfer1::DimsExprs const* /*shapeInputs*/, int32_t /*nbShapeInputs*/,
                                nvinfer1::DimsExprs* outputs, int32_t nbOutputs,
                                nvinfer1::IExprBuilder& exprBuilder) noexcept {
  if (nbInputs != spec_->num_inputs || nbOutputs != spec_->num_outputs) return -1;
  int32_t d = 0;
  for (int32_t o = 0; o < nbOutputs; ++o) {
    outputs[o].nbDims = spec_->output_ndims[o];
    for (int32_t k = 0; k < spec_->output_ndims[o]; ++k, ++d) {
      nvinfer1::IDimensionExpr const* stack[32];
      int32_t top = 0;
      const OutputDim& od = spec_->output_dims[d];
      for (int32_t i = od.first_op; i < od.first_op + od.num_ops; ++i) {
        const ShapeOp& op = spec_->shape_ops[i];
        if (op.code == kShapeConst) {
          stack[top++] = exprBuilder.constant(op.a);
        } else if (op.code == kShapeInputDim) {
          if (op.a >= nbInputs || op.b >= inputs[op.a].nbDims) return -1;
          stack[top++] = inputs[op.a].d[op.b];
        } else {
          static const nvinfer1::DimensionOperation kOps[] = {
              nvinfer1::DimensionOperation::kSUM,       nvinfer1::DimensionOperation::kSUB,
              nvinfer1::DimensionOperation::kPROD,      nvinfer1::DimensionOperation::kFLOOR_DIV,
              nvinfer1::DimensionOperation::kCEIL_DIV,  nvinfer1::DimensionOperation::kMAX,
              nvinfer1::DimensionOperation::kMIN};
          nvinfer1::IDimensionExpr const* b = stack[--top];
          nvinfer1::IDimensionExpr const* a = stack[--top];
          stack[top++] = exprBuilder.operation(kOps[op.code - kShapeAdd], *a, *b);
        }
        if (stack[top - 1] == nullptr) return -1;
      }
      outputs[o].d[k] = stack[0];
    }
  }
  return 0;
}

bool Plugin::supportsFormatCombination(int32_t pos, nvinfer1::DynamicPluginTensorDesc const* inOut,
                                       int32_t nbInputs, int32_t nbOutputs) noexcept {
  if (nbInputs != spec_->num_inputs || nbOutputs != spec_->num_outputs || pos < 0 || pos >= nbInputs + nbOutputs) {
    return false;
  }
  const nvinfer1::PluginTensorDesc& desc = inOut[pos].desc;
  if (desc.format != nvinfer1::TensorFormat::kLINEAR) return false;
  const int32_t t = spec_->io_types[pos];
  if (t != kFloatClass) return desc.type == static_cast<nvinfer1::DataType>(t);
  // The first float position picks the variant; later ones must agree with it.
  for (int32_t p = 0; p < pos; ++p) {
    if (is_float_class(*spec_, p)) return desc.type == inOut[p].desc.type;
  }
  return find_variant(desc.type) != nullptr;
}

size_t Plugin::getWorkspaceSize(nvinfer1::DynamicPluginTensorDesc const* inputs, int32_t nbInputs,
                                nvinfer1::DynamicPluginTensorDesc const* /*outputs*/, int32_t /*nbOutputs*/) const noexcept {
  // The signature's workspace formula at the largest symbol values the profile allows.
  size_t most = 0;
  for (int32_t v = 0; v < spec_->num_variants; ++v) {
    const KilnSignature* sig = spec_->variants[v].signature();
    std::vector<int64_t> symbols(static_cast<size_t>(std::max(1, sig->num_symbols)), 1);
    for (int32_t i = 0; i < std::min(nbInputs, sig->num_params); ++i) {
      const KilnParam& p = sig->params[i];
      for (int32_t d = 0; d < p.ndim && d < inputs[i].max.nbDims; ++d) {
        if (KILN_DIM_IS_SYMBOL(p.shape[d])) symbols[KILN_DIM_SYMBOL_INDEX(p.shape[d])] = inputs[i].max.d[d];
      }
    }
    if (sig->workspace_bytes) most = std::max(most, sig->workspace_bytes(symbols.data()));
  }
  return most;
}

int32_t Plugin::onShapeChange(nvinfer1::PluginTensorDesc const* /*in*/, int32_t nbInputs,
                              nvinfer1::PluginTensorDesc const* /*out*/, int32_t nbOutputs) noexcept {
  if (nbInputs != spec_->num_inputs || nbOutputs != spec_->num_outputs) return -1;
  return 0;
}

const Variant* Plugin::find_variant(nvinfer1::DataType float_type) const noexcept {
  for (int32_t v = 0; v < spec_->num_variants; ++v) {
    if (spec_->variants[v].float_type == float_type) return &spec_->variants[v];
  }
  return nullptr;
}

int32_t Plugin::enqueue(nvinfer1::PluginTensorDesc const* inputDesc, nvinfer1::PluginTensorDesc const* outputDesc,
                        void const* const* inputs, void* const* outputs, void* workspace, cudaStream_t stream) noexcept {
  const int32_t ni = spec_->num_inputs, no = spec_->num_outputs;
  if (ni + no > kMaxIo) return -1;
  nvinfer1::DataType float_type = spec_->variants[0].float_type;
  for (int32_t p = 0; p < ni + no; ++p) {
    if (is_float_class(*spec_, p)) {
      float_type = p < ni ? inputDesc[p].type : outputDesc[p - ni].type;
      break;
    }
  }
  const Variant* variant = find_variant(float_type);
  if (variant == nullptr) {
    log_error(layer_name_ + " (" + spec_->name + "): no kernel was compiled for data type " +
              std::to_string(static_cast<int32_t>(float_type)));
    return KILN_ERR_DTYPE;
  }
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return KILN_ERR_DEVICE;
  // DLTensors over TensorRT's buffers: compact row-major (strides null), on the current device.
  DLTensor args[kMaxIo];
  for (int32_t p = 0; p < ni + no; ++p) {
    const nvinfer1::PluginTensorDesc& desc = p < ni ? inputDesc[p] : outputDesc[p - ni];
    if (!compact_dims(desc.dims)) return KILN_ERR_SHAPE;
    DLTensor& t = args[p];
    t.data = p < ni ? const_cast<void*>(inputs[p]) : outputs[p - ni];
    t.device = DLDevice{kDLCUDA, device};
    t.ndim = desc.dims.nbDims;
    t.dtype = dl_dtype(desc.type);
    t.shape = const_cast<int64_t*>(desc.dims.d);
    t.strides = nullptr;
    t.byte_offset = 0;
  }
  const int32_t status = variant->call(args, ni + no, workspace, stream);
  if (status != KILN_OK) {
    log_error(layer_name_ + " (" + spec_->name + "): " + kiln_last_error());
  }
  return status;
}

nvinfer1::IPluginV3* Plugin::attachToContext(nvinfer1::IPluginResourceContext* /*context*/) noexcept {
  return clone();
}

nvinfer1::PluginFieldCollection const* Plugin::getFieldsToSerialize() noexcept {
  serialized_.clear();
  for (int32_t f = 0; f < spec_->num_fields; ++f) {
    const Field& field = spec_->fields[f];
    const std::vector<char>& bytes = field_values_[f];
    const size_t size = field_element_size(field.type);
    serialized_.emplace_back(field.name, bytes.data(), field.type, static_cast<int32_t>(bytes.size() / size));
  }
  serialized_collection_.nbFields = static_cast<int32_t>(serialized_.size());
  serialized_collection_.fields = serialized_.data();
  return &serialized_collection_;
}

// ---- Creator ----

Creator::Creator(const PluginSpec& spec, const char* plugin_namespace) : spec_(&spec), namespace_(plugin_namespace) {
  for (int32_t f = 0; f < spec.num_fields; ++f) {
    fields_.emplace_back(spec.fields[f].name, nullptr, spec.fields[f].type, spec.fields[f].length);
  }
  field_names_.nbFields = static_cast<int32_t>(fields_.size());
  field_names_.fields = fields_.data();
}

nvinfer1::IPluginV3* Creator::createPlugin(char const* name, nvinfer1::PluginFieldCollection const* fc,
                                           nvinfer1::TensorRTPhase /*phase*/) noexcept {
  try {
    const std::string layer = name ? name : "";
    const std::string where = layer + " (" + spec_->name + ")";
    std::vector<std::vector<char>> values;
    for (int32_t f = 0; f < spec_->num_fields; ++f) {
      const Field& field = spec_->fields[f];
      const char* p = static_cast<const char*>(field.data);
      values.emplace_back(p, p + field.length * field_element_size(field.type));
    }
    // Every field given must be one of ours, of our type, with the value the kernel was compiled
    // for (a different setting would need a different kernel: regenerate the plugin).
    for (int32_t i = 0; fc != nullptr && i < fc->nbFields; ++i) {
      const nvinfer1::PluginField& given = fc->fields[i];
      const std::string given_name = given.name ? given.name : "";
      int32_t match = -1;
      for (int32_t f = 0; f < spec_->num_fields; ++f) {
        if (given_name == spec_->fields[f].name) match = f;
      }
      if (match < 0) {
        log_error(where + ": unknown field '" + given_name + "'");
        return nullptr;
      }
      const Field& field = spec_->fields[match];
      const size_t bytes = static_cast<size_t>(field.length) * field_element_size(field.type);
      // The parser passes STRING attributes as CHAR with or without a terminating NUL.
      const bool same_length = given.length == field.length ||
                               (field.type == nvinfer1::PluginFieldType::kCHAR && given.length == field.length + 1);
      if (given.type != field.type || !same_length || (bytes && given.data == nullptr) ||
          std::memcmp(given.data, field.data, bytes) != 0) {
        log_error(where + ": field '" + given_name + "' differs from the value the kernel was generated for");
        return nullptr;
      }
    }
    return new Plugin(*spec_, layer, namespace_, std::move(values));
  } catch (const std::exception& e) {
    log_error(std::string(spec_->name) + ": createPlugin failed: " + e.what());
    return nullptr;
  }
}

}  // namespace kiln_trt
