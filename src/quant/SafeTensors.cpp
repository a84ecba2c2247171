#include "kiln/quant/SafeTensors.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "kiln/support/Error.h"

namespace kiln::quant {
namespace {

int64_t dtype_bytes_of(const std::string& dtype) {
  if (dtype == "U8" || dtype == "I8" || dtype == "BOOL" || dtype == "F8_E4M3" || dtype == "F8_E5M2") return 1;
  if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16") return 2;
  if (dtype == "F32" || dtype == "I32" || dtype == "U32") return 4;
  if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
  return 0;
}

}  // namespace

SafeTensorsFile::SafeTensorsFile(std::string path) : path_(std::move(path)) {
  std::ifstream in(path_, std::ios::binary);
  if (!in) user_error("cannot open safetensors file '{}'", path_);
  const uint64_t size = std::filesystem::file_size(path_);
  uint8_t len_bytes[8] = {};
  if (size < 8 || !in.read(reinterpret_cast<char*>(len_bytes), 8)) user_error("'{}' is not a safetensors file: shorter than 8 bytes", path_);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | len_bytes[i];
  if (header_len > size - 8) user_error("'{}' is not a safetensors file: header length {} exceeds the file ({} bytes)", path_, header_len, size);
  std::string header(header_len, '\0');
  in.read(header.data(), static_cast<std::streamsize>(header_len));
  data_start_ = 8 + header_len;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(header);
  } catch (const nlohmann::json::exception& e) {
    user_error("'{}': the safetensors header is not JSON ({})", path_, e.what());
  }
  if (!j.is_object()) user_error("'{}': the safetensors header is not a JSON object", path_);
  const uint64_t data_size = size - data_start_;
  for (const auto& [name, v] : j.items()) {
    if (name == "__metadata__") continue;
    SafeTensorInfo t;
    try {
      t.dtype = v.at("dtype").get<std::string>();
      t.shape = v.at("shape").get<std::vector<int64_t>>();
      const auto off = v.at("data_offsets").get<std::vector<uint64_t>>();
      if (off.size() != 2) throw std::runtime_error("data_offsets is not [begin, end]");
      t.begin = off[0];
      t.end = off[1];
    } catch (const std::exception& e) {
      user_error("'{}': tensor '{}' has a malformed entry in the header ({})", path_, name, e.what());
    }
    int64_t elems = 1;
    for (int64_t d : t.shape) elems *= d;
    const int64_t eb = dtype_bytes_of(t.dtype);
    if (t.begin > t.end || t.end > data_size) {
      user_error("'{}': tensor '{}' has data_offsets [{}, {}] outside the {} data bytes", path_, name, t.begin, t.end, data_size);
    }
    if (eb > 0 && static_cast<uint64_t>(elems * eb) != t.end - t.begin) {
      user_error("'{}': tensor '{}' ({} {}) holds {} bytes, expected {}", path_, name, t.dtype, elems, t.end - t.begin, elems * eb);
    }
    tensors_[name] = std::move(t);
  }
}

const SafeTensorInfo* SafeTensorsFile::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

std::vector<uint8_t> SafeTensorsFile::read(const std::string& name) const {
  const SafeTensorInfo* t = find(name);
  if (!t) user_error("'{}' has no tensor '{}'", path_, name);
  std::ifstream in(path_, std::ios::binary);
  std::vector<uint8_t> out(t->end - t->begin);
  in.seekg(static_cast<std::streamoff>(data_start_ + t->begin));
  if (!in.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(out.size()))) {
    user_error("'{}': could not read tensor '{}'", path_, name);
  }
  return out;
}

}  // namespace kiln::quant
