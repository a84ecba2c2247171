#include "kiln/runtime/HostTensor.h"

#include <bit>
#include <cmath>
#include <cstring>

#include "kiln/ir/SmallFloat.h"
#include "kiln/support/Error.h"

namespace kiln {

HostTensor::HostTensor(DType dtype, std::vector<int64_t> shape) : dtype_(dtype), shape_(std::move(shape)) {
  int64_t n = 1;
  for (int64_t d : shape_) {
    KILN_ASSERT(d >= 0, "negative dimension");
    n *= d;
  }
  data_ = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(dtype_storage_bytes(dtype_, n)));
}

int64_t HostTensor::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape_) n *= d;
  return n;
}

uint16_t float_to_half_bits(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (abs < 0x38800000u) {                                                // subnormal or zero
    const float af = std::bit_cast<float>(abs);
    const uint32_t m = static_cast<uint32_t>(std::nearbyint(af * 16777216.0f));  // 2^24
    return static_cast<uint16_t>(sign | m);
  }
  const uint32_t mant_odd = (abs >> 13) & 1u;
  abs += 0xc8000fffu + mant_odd;  // rebias exponent (-112 << 23) and round to nearest even
  return static_cast<uint16_t>(sign | (abs >> 13));
}

float half_bits_to_float(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    const float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
}

uint16_t float_to_bfloat16_bits(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet NaN
  const uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>((x + rounding) >> 16);
}

float bfloat16_bits_to_float(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

uint32_t HostTensor::packed(int64_t i) const {
  const int bits = dtype_bits(dtype_), per_byte = 8 / bits;
  const uint32_t mask = (1u << bits) - 1;
  return (data()[i / per_byte] >> (bits * static_cast<int>(i % per_byte))) & mask;
}

void HostTensor::set_packed(int64_t i, uint32_t v) {
  const int bits = dtype_bits(dtype_), per_byte = 8 / bits;
  const uint32_t mask = (1u << bits) - 1;
  uint8_t& byte = data()[i / per_byte];
  const int shift = bits * static_cast<int>(i % per_byte);
  byte = static_cast<uint8_t>((byte & ~(mask << shift)) | ((v & mask) << shift));
}

double HostTensor::get_double(int64_t i) const {
  if (is_small_float(dtype_)) {
    return small_float_decode(dtype_, dtype_ == DType::Float4E2M1 ? packed(i) : data()[i]);
  }
  switch (dtype_) {
    case DType::Bool: return data_as<uint8_t>()[i] != 0;
    case DType::Int8: return data_as<int8_t>()[i];
    case DType::Int16: return data_as<int16_t>()[i];
    case DType::Int32: return data_as<int32_t>()[i];
    case DType::Int64: return static_cast<double>(data_as<int64_t>()[i]);
    case DType::UInt8: return data_as<uint8_t>()[i];
    case DType::UInt16: return data_as<uint16_t>()[i];
    case DType::UInt32: return data_as<uint32_t>()[i];
    case DType::UInt64: return static_cast<double>(data_as<uint64_t>()[i]);
    case DType::Float16: return half_bits_to_float(data_as<uint16_t>()[i]);
    case DType::BFloat16: return bfloat16_bits_to_float(data_as<uint16_t>()[i]);
    case DType::Float32: return data_as<float>()[i];
    case DType::Float64: return data_as<double>()[i];
    default: internal_error(std::string("get_double of ") + std::string(dtype_name(dtype_)));
  }
}

int64_t HostTensor::get_int(int64_t i) const {
  switch (dtype_) {
    case DType::Bool: return data_as<uint8_t>()[i] != 0;
    case DType::Int8: return data_as<int8_t>()[i];
    case DType::Int16: return data_as<int16_t>()[i];
    case DType::Int32: return data_as<int32_t>()[i];
    case DType::Int64: return data_as<int64_t>()[i];
    case DType::UInt8: return data_as<uint8_t>()[i];
    case DType::UInt16: return data_as<uint16_t>()[i];
    case DType::UInt32: return data_as<uint32_t>()[i];
    case DType::UInt64: return static_cast<int64_t>(data_as<uint64_t>()[i]);
    case DType::Int4: return static_cast<int64_t>(packed(i) ^ 8u) - 8;
    case DType::UInt4: return packed(i);
    case DType::Int2: return static_cast<int64_t>(packed(i) ^ 2u) - 2;
    case DType::UInt2: return packed(i);
    default: return static_cast<int64_t>(get_double(i));
  }
}

void HostTensor::set_double(int64_t i, double v) {
  if (is_small_float(dtype_)) {
    // A store is not a cast: values come rounded, and E5M2 infinities stay infinite. E8M0
    // values are powers of two, stored by their exponent (the cast encoder reads float32
    // exponent fields, and 2^-127 is a float32 subnormal).
    int exp = 0;
    const bool e8m0_power = dtype_ == DType::Float8E8M0 && std::frexp(v, &exp) == 0.5 && exp - 1 >= -127 &&
                            exp - 1 <= 127;
    const uint32_t bits = e8m0_power ? static_cast<uint32_t>(exp - 1 + 127)
                                     : small_float_encode(dtype_, v, /*saturate=*/false);
    if (dtype_ == DType::Float4E2M1) set_packed(i, bits);
    else data()[i] = static_cast<uint8_t>(bits);
    return;
  }
  switch (dtype_) {
    case DType::Float16: data_as<uint16_t>()[i] = float_to_half_bits(static_cast<float>(v)); return;
    case DType::BFloat16: data_as<uint16_t>()[i] = float_to_bfloat16_bits(static_cast<float>(v)); return;
    case DType::Float32: data_as<float>()[i] = static_cast<float>(v); return;
    case DType::Float64: data_as<double>()[i] = v; return;
    case DType::Bool: data_as<uint8_t>()[i] = v != 0; return;
    default: set_int(i, static_cast<int64_t>(v)); return;
  }
}

void HostTensor::set_int(int64_t i, int64_t v) {
  switch (dtype_) {
    case DType::Bool: data_as<uint8_t>()[i] = v != 0; return;
    case DType::Int8: data_as<int8_t>()[i] = static_cast<int8_t>(v); return;
    case DType::Int16: data_as<int16_t>()[i] = static_cast<int16_t>(v); return;
    case DType::Int32: data_as<int32_t>()[i] = static_cast<int32_t>(v); return;
    case DType::Int64: data_as<int64_t>()[i] = v; return;
    case DType::UInt8: data_as<uint8_t>()[i] = static_cast<uint8_t>(v); return;
    case DType::UInt16: data_as<uint16_t>()[i] = static_cast<uint16_t>(v); return;
    case DType::UInt32: data_as<uint32_t>()[i] = static_cast<uint32_t>(v); return;
    case DType::UInt64: data_as<uint64_t>()[i] = static_cast<uint64_t>(v); return;
    case DType::Int4:
    case DType::UInt4:
    case DType::Int2:
    case DType::UInt2: set_packed(i, static_cast<uint32_t>(v)); return;
    default: set_double(i, static_cast<double>(v)); return;
  }
}

std::string HostTensor::describe() const {
  std::string s = std::string(dtype_name(dtype_)) + "[";
  for (size_t i = 0; i < shape_.size(); ++i) s += (i ? ", " : "") + std::to_string(shape_[i]);
  return s + "]";
}

}  // namespace kiln
