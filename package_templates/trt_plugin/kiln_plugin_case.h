// Test cases of kiln plugin packages (testdata/case_<dtype>.txt, written by `kiln plugins`):
// inputs drawn at random (weights from the model), expected outputs from kiln's CPU backend.
// Shared by each package's test program (the kernel through the kernel contract) and kiln's
// TensorRT harness (the plugin through IPluginV3). Header-only, no TensorRT needed.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace kiln_case {

// nvinfer1::DataType values.
enum TrtType : int32_t { kFloat = 0, kHalf = 1, kInt8 = 2, kInt32 = 3, kUInt8 = 5, kBF16 = 7 };

inline size_t type_size(int32_t t) { return t == kFloat || t == kInt32 ? 4 : (t == kHalf || t == kBF16) ? 2 : 1; }

struct Tensor {
  std::string name;
  int32_t type = kFloat;
  std::vector<int64_t> dims;
  std::vector<std::string> dim_symbols;  // per dim: a symbol name, or "#" for a constant
  std::vector<char> data;                // inputs: in `type`; outputs: expected values as float32
  double tolerance = 0;                  // outputs: max |got - expected| / max |expected|
  std::vector<int64_t> alt_dims;         // outputs: dims under the alternative symbol values
  int64_t elements() const {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    return n;
  }
};

struct Field {
  std::string name;
  int32_t type = 0;  // nvinfer1::PluginFieldType value
  std::vector<char> data;
  int32_t length = 0;
};

struct Case {
  std::string plugin, version, plugin_namespace, function, dtype;
  std::vector<std::pair<std::string, int64_t>> symbols, alt_symbols;
  std::vector<Field> fields;
  std::vector<Tensor> inputs, outputs;
};

inline std::vector<char> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Throws std::runtime_error naming the file and line on a malformed case.
inline Case load_case(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path);
  const std::string dir = path.substr(0, path.find_last_of('/') + 1);
  Case c;
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    std::istringstream s(line);
    std::string kind;
    if (!(s >> kind) || kind[0] == '#') continue;
    auto fail = [&] { throw std::runtime_error(path + ":" + std::to_string(number) + ": malformed line: " + line); };
    if (kind == "case") {
      s >> c.plugin >> c.version >> c.plugin_namespace >> c.function >> c.dtype;
      if (c.plugin_namespace == "-") c.plugin_namespace.clear();
    } else if (kind == "symbol" || kind == "alt_symbol") {
      std::string name;
      int64_t value = 0;
      if (!(s >> name >> value)) fail();
      (kind == "symbol" ? c.symbols : c.alt_symbols).emplace_back(name, value);
    } else if (kind == "field") {
      Field f;
      std::string hex;
      if (!(s >> f.name >> f.type >> f.length >> hex)) fail();
      for (size_t i = 0; i + 1 < hex.size(); i += 2) f.data.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
      c.fields.push_back(f);
    } else if (kind == "input" || kind == "output") {
      Tensor t;
      size_t ndim = 0;
      std::string file;
      if (!(s >> t.name >> t.type >> ndim)) fail();
      t.dims.resize(ndim);
      t.dim_symbols.resize(ndim);
      for (auto& d : t.dims) s >> d;
      for (auto& d : t.dim_symbols) s >> d;
      if (!(s >> file)) fail();
      t.data = read_file(dir + file);
      const size_t want = static_cast<size_t>(t.elements()) * (kind == "input" ? type_size(t.type) : 4);
      if (t.data.size() != want) {
        throw std::runtime_error(dir + file + ": " + std::to_string(t.data.size()) + " bytes, expected " + std::to_string(want));
      }
      if (kind == "output") {
        s >> t.tolerance;
        t.alt_dims.resize(ndim);
        for (auto& d : t.alt_dims) s >> d;
      }
      (kind == "input" ? c.inputs : c.outputs).push_back(std::move(t));
    } else {
      fail();
    }
  }
  return c;
}

inline float half_to_float(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  float f;
  if (exp == 0) f = std::ldexp(static_cast<float>(man), -24);
  else if (exp == 31) f = man ? NAN : INFINITY;
  else f = std::ldexp(static_cast<float>(man | 0x400), static_cast<int>(exp) - 25);
  return sign ? -f : f;
}

inline float bf16_to_float(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Element i of a buffer of `type` as double.
inline double element(const char* data, int32_t type, int64_t i) {
  switch (type) {
    case kFloat: { float f; std::memcpy(&f, data + 4 * i, 4); return f; }
    case kHalf: { uint16_t h; std::memcpy(&h, data + 2 * i, 2); return half_to_float(h); }
    case kBF16: { uint16_t h; std::memcpy(&h, data + 2 * i, 2); return bf16_to_float(h); }
    case kInt32: { int32_t v; std::memcpy(&v, data + 4 * i, 4); return v; }
    case kInt8: return static_cast<int8_t>(data[i]);
    default: return static_cast<uint8_t>(data[i]);
  }
}

// Compares a result (in the output's type) with the expected float32 values: returns "" or why not.
inline std::string compare(const Tensor& out, const std::vector<char>& got, double* error_out) {
  double max_err = 0, max_ref = 0;
  for (int64_t i = 0; i < out.elements(); ++i) {
    const double e = element(out.data.data(), kFloat, i), g = element(got.data(), out.type, i);
    if (std::isnan(g) != std::isnan(e)) {
      return out.name + "[" + std::to_string(i) + "] is " + std::to_string(g) + ", expected " + std::to_string(e);
    }
    if (std::isnan(e)) continue;
    max_err = std::max(max_err, std::fabs(g - e));
    max_ref = std::max(max_ref, std::fabs(e));
  }
  const double rel = max_err / std::max(max_ref, 1e-6);
  *error_out = rel;
  if (rel > out.tolerance) {
    return out.name + ": max |error| / max |expected| = " + std::to_string(rel) + " > " + std::to_string(out.tolerance);
  }
  return "";
}

}  // namespace kiln_case
