#pragma once
// The safetensors file format (Hugging Face): an 8-byte little-endian header length, a JSON
// header {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}, then
// the tensors' bytes (offsets relative to the end of the header). Read lazily: the header at
// construction, one tensor's bytes per read().
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kiln::quant {

struct SafeTensorInfo {
  std::string dtype;  // "U8", "F8_E4M3", "F32", "BF16", ...
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // byte offsets in the data section
};

class SafeTensorsFile {
 public:
  // Throws UserError naming the file if it is missing, truncated, or its header is malformed
  // (not JSON, offsets out of the file or not matching dtype x shape).
  explicit SafeTensorsFile(std::string path);

  const std::string& path() const { return path_; }
  const std::map<std::string, SafeTensorInfo>& tensors() const { return tensors_; }
  const SafeTensorInfo* find(const std::string& name) const;
  std::vector<uint8_t> read(const std::string& name) const;  // UserError if absent

 private:
  std::string path_;
  uint64_t data_start_ = 0;
  std::map<std::string, SafeTensorInfo> tensors_;
};

}  // namespace kiln::quant
