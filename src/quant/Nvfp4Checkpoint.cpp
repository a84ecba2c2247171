#include "kiln/quant/Nvfp4Checkpoint.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "kiln/quant/SafeTensors.h"
#include "kiln/support/Error.h"

namespace kiln::quant {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// quant_algo of a Model Optimizer config beside the checkpoint, "" when there is none.
std::string configured_algo(const std::filesystem::path& dir) {
  for (const char* file : {"hf_quant_config.json", "config.json"}) {
    const std::filesystem::path p = dir / file;
    if (!std::filesystem::exists(p)) continue;
    std::ifstream in(p);
    nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) user_error("'{}' is not JSON", p.string());
    const nlohmann::json* q = nullptr;
    if (j.contains("quantization") && j["quantization"].is_object()) q = &j["quantization"];
    if (j.contains("quantization_config") && j["quantization_config"].is_object()) q = &j["quantization_config"];
    if (q && q->contains("quant_algo") && (*q)["quant_algo"].is_string()) return (*q)["quant_algo"].get<std::string>();
  }
  return "";
}

float scalar_f32(const SafeTensorsFile& f, const std::string& name) {
  const SafeTensorInfo* t = f.find(name);
  int64_t elems = 1;
  for (int64_t d : t->shape) elems *= d;
  if (t->dtype != "F32" || elems != 1) user_error("'{}': tensor '{}' is {} with {} elements, expected one F32", f.path(), name, t->dtype, elems);
  const std::vector<uint8_t> b = f.read(name);
  float v;
  std::memcpy(&v, b.data(), sizeof v);
  return v;
}

}  // namespace

std::map<std::string, QuantizedWeight> read_nvfp4_checkpoint(const std::string& path) {
  const std::string algo = configured_algo(std::filesystem::path(path).parent_path());
  if (!algo.empty() && algo != "NVFP4") {
    user_error("the checkpoint's config says quant_algo '{}'; kiln reads NVFP4 checkpoints (quant_algo 'NVFP4')", algo);
  }
  const SafeTensorsFile f(path);
  std::map<std::string, QuantizedWeight> out;
  for (const auto& [name, info] : f.tensors()) {
    std::string prefix, global;
    bool inverse = false;
    if (ends_with(name, ".weight_scale_2")) {
      prefix = name.substr(0, name.size() - std::strlen(".weight_scale_2"));
      global = name;
    } else if (ends_with(name, ".weight_global_scale")) {
      prefix = name.substr(0, name.size() - std::strlen(".weight_global_scale"));
      global = name;
      inverse = true;
    } else {
      continue;
    }
    const std::string data_name = f.find(prefix + ".weight_packed") ? prefix + ".weight_packed" : prefix + ".weight";
    const std::string scale_name = prefix + ".weight_scale";
    const SafeTensorInfo* data = f.find(data_name);
    const SafeTensorInfo* scale = f.find(scale_name);
    if (!data || !scale) user_error("'{}': '{}' has no '{}' and '{}' beside it", path, global, data_name, scale_name);
    if (data->dtype != "U8" || data->shape.size() != 2) {
      user_error("'{}': '{}' is {} of rank {}, expected U8 [N, K/2] (packed E2M1)", path, data_name, data->dtype, data->shape.size());
    }
    if (scale->dtype != "F8_E4M3" || scale->shape.size() != 2) {
      user_error("'{}': '{}' is {} of rank {}, expected F8_E4M3 [N, K/16]", path, scale_name, scale->dtype, scale->shape.size());
    }
    QuantizedWeight q;
    q.format = QuantFormat::NvFp4;
    q.n = data->shape[0];
    q.k = 2 * data->shape[1];
    q.group = 16;
    q.scale_dtype = DType::Float8E4M3;
    if (scale->shape[0] != q.n || scale->shape[1] * 16 != q.k) {
      user_error("'{}': '{}' is [{}, {}], expected [{}, {}] for '{}' [{}, {}] (one E4M3 scale per 16 elements)", path, scale_name,
                 scale->shape[0], scale->shape[1], q.n, q.k / 16, data_name, data->shape[0], data->shape[1]);
    }
    q.data = f.read(data_name);
    q.scales = f.read(scale_name);
    const float g = scalar_f32(f, global);
    q.tensor_scale = inverse ? 1.0f / g : g;
    check_quantized_weight(q, "'" + prefix + "' in '" + path + "'");
    out[prefix + ".weight"] = std::move(q);
  }
  return out;
}

}  // namespace kiln::quant
