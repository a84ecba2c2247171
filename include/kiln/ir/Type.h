#pragma once
// Scalar and vector types of kiln's IR. Dtypes are an enum everywhere inside kiln; ONNX's
// integer codes and names stop at the importer (onnx/).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kiln {

// Every dtype kiln knows. The X-macro gives: enumerator, short name, bits, class.
#define KILN_DTYPES(X)                     \
  X(Bool, "bool", 8, Bool)                 \
  X(Int8, "int8", 8, Int)                  \
  X(Int16, "int16", 16, Int)               \
  X(Int32, "int32", 32, Int)               \
  X(Int64, "int64", 64, Int)               \
  X(UInt8, "uint8", 8, UInt)               \
  X(UInt16, "uint16", 16, UInt)            \
  X(UInt32, "uint32", 32, UInt)            \
  X(UInt64, "uint64", 64, UInt)            \
  X(Float16, "float16", 16, Float)         \
  X(BFloat16, "bfloat16", 16, Float)       \
  X(Float32, "float32", 32, Float)         \
  X(Float64, "float64", 64, Float)         \
  X(Float8E4M3, "float8_e4m3fn", 8, Float) \
  X(Float8E8M0, "float8_e8m0fnu", 8, Float) \
  X(Float8E4M3FNUZ, "float8_e4m3fnuz", 8, Float) \
  X(Float8E5M2, "float8_e5m2", 8, Float) \
  X(Float8E5M2FNUZ, "float8_e5m2fnuz", 8, Float) \
  X(Float4E2M1, "float4_e2m1fn", 4, Float) \
  X(Int4, "int4", 4, Int) \
  X(UInt4, "uint4", 4, UInt) \
  X(Int2, "int2", 2, Int) \
  X(UInt2, "uint2", 2, UInt)

enum class DType : uint8_t {
#define KILN_DTYPE_ENUM(name, str, bits, cls) name,
  KILN_DTYPES(KILN_DTYPE_ENUM)
#undef KILN_DTYPE_ENUM
};

enum class DTypeClass : uint8_t { Bool, Int, UInt, Float };

std::string_view dtype_name(DType dtype);
std::optional<DType> dtype_from_name(std::string_view name);
int dtype_bits(DType dtype);
DTypeClass dtype_class(DType dtype);
// Bytes of one element; 4- and 2-bit dtypes (packed) have none of their own: use
// dtype_storage_bytes for a count of them.
inline int dtype_bytes(DType dtype) { return dtype_bits(dtype) / 8; }
// 4-bit dtypes are packed two per byte, element 2k in the low nibble of byte k; 2-bit dtypes
// four per byte, element 4k + j in bits 2j..2j+1 of byte k (ONNX's layouts).
inline bool is_packed(DType d) { return dtype_bits(d) < 8; }
inline int64_t dtype_storage_bytes(DType d, int64_t num_elements) {
  return (num_elements * dtype_bits(d) + 7) / 8;
}
// The float8/float4 formats: stored as bit patterns, computed in float32 (like float16).
inline bool is_small_float(DType d) {
  return d == DType::Float8E4M3 || d == DType::Float8E8M0 || d == DType::Float8E4M3FNUZ ||
         d == DType::Float8E5M2 || d == DType::Float8E5M2FNUZ || d == DType::Float4E2M1;
}
inline bool is_float(DType d) { return dtype_class(d) == DTypeClass::Float; }
inline bool is_int(DType d) { return dtype_class(d) == DTypeClass::Int; }
inline bool is_uint(DType d) { return dtype_class(d) == DTypeClass::UInt; }
inline bool is_bool(DType d) { return d == DType::Bool; }
inline bool is_integral(DType d) { return is_int(d) || is_uint(d); }

// A value type in the IR: a dtype and a lane count (lanes > 1 after vectorization).
struct Type {
  DType dtype = DType::Float32;
  uint16_t lanes = 1;

  constexpr Type() = default;
  constexpr Type(DType d, uint16_t n = 1) : dtype(d), lanes(n) {}  // NOLINT: implicit on purpose

  bool is_float() const { return kiln::is_float(dtype); }
  bool is_int() const { return kiln::is_int(dtype); }
  bool is_uint() const { return kiln::is_uint(dtype); }
  bool is_bool() const { return dtype == DType::Bool; }
  bool is_scalar() const { return lanes == 1; }
  int bits() const { return dtype_bits(dtype); }
  Type with_lanes(uint16_t n) const { return Type(dtype, n); }
  Type element_of() const { return Type(dtype, 1); }

  friend bool operator==(Type, Type) = default;
};

std::string to_string(Type type);

// Index arithmetic is done in int64 everywhere: ONNX shapes are int64 and tensors of more than
// 2^31 elements are real (the 4-bit weight benchmarks use several GB).
inline constexpr Type kIndexType{DType::Int64};
inline constexpr Type kBoolType{DType::Bool};

}  // namespace kiln
