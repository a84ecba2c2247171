// Model::load: opens a model library and reads its signature and model info.
#include <dlfcn.h>

#include "ModelImpl.h"
#include "kiln/runtime/validate.h"

namespace kiln {

namespace {

std::vector<TensorInfo> tensor_infos(const KilnSignature& sig, bool outputs) {
  std::vector<TensorInfo> infos;
  for (int32_t p = 0; p < sig.num_params; ++p) {
    const KilnParam& param = sig.params[p];
    if ((param.is_output != 0) != outputs) continue;
    TensorInfo t;
    t.name = param.name;
    t.dtype = param.dtype;
    for (int32_t d = 0; d < param.ndim; ++d) {
      const KilnDim dim = param.shape[d];
      t.dims.push_back(KILN_DIM_IS_SYMBOL(dim) ? -1 : dim);
      t.symbols.push_back(KILN_DIM_IS_SYMBOL(dim) ? sig.symbol_names[KILN_DIM_SYMBOL_INDEX(dim)] : "");
    }
    infos.push_back(std::move(t));
  }
  return infos;
}

}  // namespace

std::string TensorInfo::describe() const {
  std::string s = name + ": " + abi::dl_dtype_name(dtype) + "[";
  for (size_t d = 0; d < dims.size(); ++d) {
    s += (d ? ", " : "") + (dims[d] < 0 ? symbols[d] : std::to_string(dims[d]));
  }
  return s + "]";
}

Model Model::load(const std::string& path, const LoadOptions& options) {
  Model model;
  auto fail = [&](const std::string& message) {
    model.impl_.reset();
    model.error_ = path + ": " + message;
    return model;
  };
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* e = dlerror();
    return fail(std::string("cannot open the library: ") + (e ? e : "unknown error"));
  }
  auto impl = std::make_shared<Impl>();
  impl->path = path;
  impl->handle = handle;
  auto info_fn = reinterpret_cast<const KilnModelInfo* (*)()>(dlsym(handle, "kiln_model_info"));
  if (!info_fn) {
    return fail("not a model library (no kiln_model_info; build it with `kiln compile MODEL.onnx -o DIR --model`)");
  }
  impl->info = info_fn();
  if (impl->info->version != KILN_MODEL_VERSION) {
    return fail("model library version " + std::to_string(impl->info->version) + ", this runtime reads version " +
                std::to_string(KILN_MODEL_VERSION));
  }
  impl->name = impl->info->model;
  const std::string fn = impl->info->function;
  impl->call = reinterpret_cast<KilnKernelFn>(dlsym(handle, ("kiln_" + fn).c_str()));
  auto sig_fn = reinterpret_cast<KilnSignatureFn>(dlsym(handle, ("kiln_signature_" + fn).c_str()));
  impl->last_error = reinterpret_cast<KilnLastErrorFn>(dlsym(handle, "kiln_last_error"));
  impl->load = reinterpret_cast<int32_t (*)(int32_t, void*)>(dlsym(handle, "kiln_model_load"));
  impl->device_bytes = reinterpret_cast<uint64_t (*)(int32_t)>(dlsym(handle, "kiln_model_device_bytes"));
  auto set_path = reinterpret_cast<int32_t (*)(const char*)>(dlsym(handle, "kiln_model_set_weights_path"));
  if (!impl->call || !sig_fn || !impl->last_error || !impl->load || !impl->device_bytes || !set_path) {
    return fail("the library lacks an entry point of kiln_abi.h / kiln_model.h (kiln_" + fn +
                ", kiln_signature_" + fn + ", kiln_last_error, kiln_model_load, ...)");
  }
  impl->signature = sig_fn();
  if (impl->signature->abi_version != KILN_ABI_VERSION) {
    return fail("kernel contract version " + std::to_string(impl->signature->abi_version) + ", this runtime reads " +
                std::to_string(KILN_ABI_VERSION));
  }
  impl->inputs = tensor_infos(*impl->signature, false);
  impl->outputs = tensor_infos(*impl->signature, true);
  if (!options.weights_path.empty() && set_path(options.weights_path.c_str()) != KILN_OK) {
    return fail(impl->last_error_message());
  }
  model.impl_ = impl;
  if (options.load_weights) {
    Status s = model.load_weights(options.device_id);
    if (!s) return fail(s.message());
  }
  return model;
}

const std::string& Model::name() const {
  static const std::string empty;
  return impl_ ? impl_->name : empty;
}

DLDeviceType Model::device_type() const {
  return impl_ ? static_cast<DLDeviceType>(impl_->signature->device_type) : kDLCPU;
}

const std::vector<TensorInfo>& Model::inputs() const {
  static const std::vector<TensorInfo> empty;
  return impl_ ? impl_->inputs : empty;
}

const std::vector<TensorInfo>& Model::outputs() const {
  static const std::vector<TensorInfo> empty;
  return impl_ ? impl_->outputs : empty;
}

std::string Model::signature() const { return impl_ ? impl_->signature->text : ""; }

}  // namespace kiln
