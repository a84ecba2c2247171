#pragma once
// A dense, row-major tensor in host memory: test data, constants and initializers, and the CPU
// backend's buffers. Elements are stored in their dtype's own bytes (float16/bfloat16/float8 as
// their bit patterns, bool as one byte; 4-bit dtypes packed two per byte, element 2k in the low
// nibble of byte k, 2-bit dtypes four per byte from the low bits up, as ONNX stores them).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kiln/ir/Type.h"

namespace kiln {

class HostTensor {
 public:
  HostTensor() = default;
  HostTensor(DType dtype, std::vector<int64_t> shape);  // zero-filled

  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int ndim() const { return static_cast<int>(shape_.size()); }
  int64_t num_elements() const;
  size_t num_bytes() const { return data_->size(); }
  uint8_t* data() { return data_->data(); }
  const uint8_t* data() const { return data_->data(); }
  template <typename T>
  T* data_as() { return reinterpret_cast<T*>(data()); }
  template <typename T>
  const T* data_as() const { return reinterpret_cast<const T*>(data()); }

  // Element i (row-major) converted to double / int64, whatever the dtype.
  double get_double(int64_t i) const;
  int64_t get_int(int64_t i) const;
  // Stores `value` into element i, converted to the dtype (round to nearest even for floats).
  void set_double(int64_t i, double value);
  void set_int(int64_t i, int64_t value);

  std::string describe() const;  // "float32[2, 3]"

 private:
  uint32_t packed(int64_t i) const;  // element i of a 4- or 2-bit dtype
  void set_packed(int64_t i, uint32_t v);

  DType dtype_ = DType::Float32;
  std::vector<int64_t> shape_;
  std::shared_ptr<std::vector<uint8_t>> data_ = std::make_shared<std::vector<uint8_t>>();
};

// Half-precision conversions (round to nearest even), shared by the CPU backend and tests.
uint16_t float_to_half_bits(float f);
float half_bits_to_float(uint16_t h);
uint16_t float_to_bfloat16_bits(float f);
float bfloat16_bits_to_float(uint16_t b);

}  // namespace kiln
