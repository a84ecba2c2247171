// TensorProto <-> HostTensor, including external data. Sizes are checked against the data
// actually present before anything is allocated, so a corrupt dims field cannot make the
// importer allocate more than the file holds.
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "kiln/onnx/Proto.h"
#include "kiln/support/Error.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

int64_t checked_num_elements(const onnx::TensorProto& proto, const std::string& what) {
  int64_t n = 1;
  for (int64_t d : proto.dims()) {
    if (d < 0) user_error("{}: dimension {} is negative; expected dims >= 0", what, d);
    if (__builtin_mul_overflow(n, d, &n)) {
      user_error("{}: the product of its dims overflows int64", what);
    }
  }
  return n;
}

// `location` must name a regular file inside `base_dir`, through symlinks too.
fs::path resolve_external_path(const std::string& location, const ExternalDataSource& source,
                               const std::string& what) {
  if (source.base_dir.empty()) {
    user_error("{}: its data is in external file '{}', but the model was not loaded from a file", what,
               location);
  }
  const fs::path rel(location);
  if (location.empty() || rel.is_absolute() || rel.has_root_name() || rel.has_root_directory()) {
    user_error("{}: external data location '{}' must be a relative path inside the model's folder", what,
               location);
  }
  for (const auto& part : rel) {
    if (part == "..") {
      user_error("{}: external data location '{}' escapes the model's folder", what, location);
    }
  }
  std::error_code ec;
  const fs::path base = fs::weakly_canonical(fs::path(source.base_dir), ec);
  const fs::path full = fs::weakly_canonical(fs::path(source.base_dir) / rel, ec);
  if (ec) user_error("{}: cannot resolve external data file '{}': {}", what, location, ec.message());
  const auto [base_end, full_it] = std::mismatch(base.begin(), base.end(), full.begin(), full.end());
  if (base_end != base.end()) {
    user_error("{}: external data location '{}' escapes the model's folder", what, location);
  }
  if (!fs::is_regular_file(full, ec)) {
    user_error("{}: external data file '{}' does not exist (looked for {})", what, location, full.string());
  }
  return full;
}

int64_t parse_external_int(const std::string& text, const std::string& key, const std::string& what) {
  int64_t v = -1;
  const auto [end, err] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (err != std::errc() || end != text.data() + text.size() || v < 0) {
    user_error("{}: external data {} '{}' is not a non-negative integer", what, key, text);
  }
  return v;
}

std::string read_external_data(const onnx::TensorProto& proto, const ExternalDataSource& source,
                               const std::string& what) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& entry : proto.external_data()) {
    if (entry.key() == "location") location = entry.value();
    else if (entry.key() == "offset") offset = parse_external_int(entry.value(), "offset", what);
    else if (entry.key() == "length") length = parse_external_int(entry.value(), "length", what);
  }
  if (location.empty()) user_error("{}: data_location is EXTERNAL but no 'location' is given", what);
  const fs::path path = resolve_external_path(location, source, what);
  std::error_code ec;
  const auto file_size = static_cast<int64_t>(fs::file_size(path, ec));
  if (ec) user_error("{}: cannot read external data file '{}': {}", what, location, ec.message());
  if (offset > file_size) {
    user_error("{}: external data offset {} is past the end of '{}' ({} bytes)", what, offset, location,
               file_size);
  }
  if (length < 0) length = file_size - offset;
  if (length > file_size - offset) {
    user_error("{}: external data '{}' has {} bytes after offset {}, expected {}", what, location,
               file_size - offset, offset, length);
  }
  std::string bytes(static_cast<size_t>(length), '\0');
  std::ifstream in(path, std::ios::binary);
  in.seekg(offset);
  if (!in.read(bytes.data(), length)) user_error("{}: cannot read external data file '{}'", what, location);
  return bytes;
}

template <typename Field>
void check_count(const Field& field, int64_t n, const char* field_name, const std::string& what) {
  if (static_cast<int64_t>(field.size()) != n) {
    user_error("{}: {} holds {} values, expected {} (the product of its dims)", what, field_name,
               field.size(), n);
  }
}

// The unused high bits of a packed tensor's last byte (a count that does not fill it).
void clear_padding(HostTensor& t, int64_t n) {
  const int64_t used_bits = n * dtype_bits(t.dtype()) % 8;
  if (used_bits != 0) t.data()[t.num_bytes() - 1] &= static_cast<uint8_t>((1u << used_bits) - 1);
}

// Values from int32_data: the low bits of each int32 are the element's bit pattern (float16,
// bfloat16, float8) or its value (small integers, bool); 4- and 2-bit dtypes hold one packed
// byte per int32 (two or four elements), packed like raw_data.
HostTensor from_int32_data(const onnx::TensorProto& proto, DType dtype, std::vector<int64_t> shape,
                           int64_t n, const std::string& what) {
  if (is_packed(dtype)) {
    const int64_t bytes = dtype_storage_bytes(dtype, n);
    check_count(proto.int32_data(), bytes, "int32_data", what);
    HostTensor t(dtype, std::move(shape));
    for (int64_t k = 0; k < bytes; ++k) t.data()[k] = static_cast<uint8_t>(proto.int32_data(static_cast<int>(k)));
    clear_padding(t, n);
    return t;
  }
  check_count(proto.int32_data(), n, "int32_data", what);
  HostTensor t(dtype, std::move(shape));
  for (int64_t i = 0; i < n; ++i) {
    const int32_t v = proto.int32_data(static_cast<int>(i));
    switch (dtype) {
      case DType::Bool: t.data_as<uint8_t>()[i] = v != 0; break;
      case DType::Int8: t.data_as<int8_t>()[i] = static_cast<int8_t>(v); break;
      case DType::Int16: t.data_as<int16_t>()[i] = static_cast<int16_t>(v); break;
      case DType::Int32: t.data_as<int32_t>()[i] = v; break;
      case DType::UInt8:
      case DType::Float8E4M3:
      case DType::Float8E4M3FNUZ:
      case DType::Float8E5M2:
      case DType::Float8E5M2FNUZ:
      case DType::Float8E8M0: t.data_as<uint8_t>()[i] = static_cast<uint8_t>(v); break;
      case DType::UInt16:
      case DType::Float16:
      case DType::BFloat16: t.data_as<uint16_t>()[i] = static_cast<uint16_t>(v); break;
      default: internal_error("int32_data for " + std::string(dtype_name(dtype)));
    }
  }
  return t;
}

}  // namespace

#define KILN_ONNX_DTYPES(X)                      \
  X(FLOAT, Float32)                              \
  X(UINT8, UInt8)                                \
  X(INT8, Int8)                                  \
  X(UINT16, UInt16)                              \
  X(INT16, Int16)                                \
  X(INT32, Int32)                                \
  X(INT64, Int64)                                \
  X(BOOL, Bool)                                  \
  X(FLOAT16, Float16)                            \
  X(DOUBLE, Float64)                             \
  X(UINT32, UInt32)                              \
  X(UINT64, UInt64)                              \
  X(BFLOAT16, BFloat16)                          \
  X(FLOAT8E4M3FN, Float8E4M3)                    \
  X(FLOAT8E4M3FNUZ, Float8E4M3FNUZ)              \
  X(FLOAT8E5M2, Float8E5M2)                      \
  X(FLOAT8E5M2FNUZ, Float8E5M2FNUZ)              \
  X(FLOAT8E8M0, Float8E8M0)                      \
  X(UINT4, UInt4)                                \
  X(INT4, Int4)                                  \
  X(FLOAT4E2M1, Float4E2M1)                      \
  X(UINT2, UInt2)                                \
  X(INT2, Int2)

std::optional<DType> dtype_from_onnx(int32_t data_type) {
  switch (data_type) {
#define KILN_FROM_ONNX(onnx_name, kiln_name) \
  case onnx::TensorProto::onnx_name: return DType::kiln_name;
    KILN_ONNX_DTYPES(KILN_FROM_ONNX)
#undef KILN_FROM_ONNX
    default: return std::nullopt;
  }
}

int32_t dtype_to_onnx(DType dtype) {
  switch (dtype) {
#define KILN_TO_ONNX(onnx_name, kiln_name) \
  case DType::kiln_name: return onnx::TensorProto::onnx_name;
    KILN_ONNX_DTYPES(KILN_TO_ONNX)
#undef KILN_TO_ONNX
  }
  internal_error("dtype_to_onnx: unknown dtype");
}

std::string onnx_data_type_name(int32_t data_type) {
  if (onnx::TensorProto::DataType_IsValid(data_type)) {
    return onnx::TensorProto::DataType_Name(static_cast<onnx::TensorProto::DataType>(data_type));
  }
  return "data type " + std::to_string(data_type);
}

HostTensor tensor_from_proto(const onnx::TensorProto& proto, const ExternalDataSource& source,
                             const std::string& what) {
  const std::optional<DType> dtype = dtype_from_onnx(proto.data_type());
  if (!dtype) {
    user_error("{}: data type {} is not supported; expected one of float, float16, bfloat16, double, "
               "int2-64, uint2-64, bool, float8 (e4m3fn, e4m3fnuz, e5m2, e5m2fnuz, e8m0), float4e2m1",
               what, onnx_data_type_name(proto.data_type()));
  }
  if (proto.has_segment()) user_error("{}: segmented tensors are not supported", what);
  const int64_t n = checked_num_elements(proto, what);
  int64_t num_bytes = 0;
  if (__builtin_mul_overflow(n, static_cast<int64_t>(dtype_bits(*dtype)), &num_bytes)) {
    user_error("{}: its size in bytes overflows int64", what);
  }
  num_bytes = dtype_storage_bytes(*dtype, n);
  std::vector<int64_t> shape(proto.dims().begin(), proto.dims().end());

  const bool external = proto.data_location() == onnx::TensorProto::EXTERNAL;
  if (external || proto.has_raw_data()) {
    const std::string external_bytes = external ? read_external_data(proto, source, what) : std::string();
    const std::string& raw = external ? external_bytes : proto.raw_data();
    if (static_cast<int64_t>(raw.size()) != num_bytes) {
      user_error("{}: {} holds {} bytes, expected {} ({} elements of {})", what,
                 external ? "external data" : "raw_data", raw.size(), num_bytes, n, dtype_name(*dtype));
    }
    HostTensor t(*dtype, std::move(shape));
    if (num_bytes > 0) std::memcpy(t.data(), raw.data(), raw.size());
    if (is_packed(*dtype)) clear_padding(t, n);
    return t;
  }

  switch (*dtype) {
    case DType::Float32: {
      check_count(proto.float_data(), n, "float_data", what);
      HostTensor t(*dtype, std::move(shape));
      if (n > 0) std::memcpy(t.data(), proto.float_data().data(), t.num_bytes());
      return t;
    }
    case DType::Float64: {
      check_count(proto.double_data(), n, "double_data", what);
      HostTensor t(*dtype, std::move(shape));
      if (n > 0) std::memcpy(t.data(), proto.double_data().data(), t.num_bytes());
      return t;
    }
    case DType::Int64: {
      check_count(proto.int64_data(), n, "int64_data", what);
      HostTensor t(*dtype, std::move(shape));
      if (n > 0) std::memcpy(t.data(), proto.int64_data().data(), t.num_bytes());
      return t;
    }
    case DType::UInt32:
    case DType::UInt64: {
      check_count(proto.uint64_data(), n, "uint64_data", what);
      HostTensor t(*dtype, std::move(shape));
      for (int64_t i = 0; i < n; ++i) {
        const uint64_t v = proto.uint64_data(static_cast<int>(i));
        if (*dtype == DType::UInt32) t.data_as<uint32_t>()[i] = static_cast<uint32_t>(v);
        else t.data_as<uint64_t>()[i] = v;
      }
      return t;
    }
    default: return from_int32_data(proto, *dtype, std::move(shape), n, what);
  }
}

onnx::TensorProto tensor_to_proto(const HostTensor& tensor, const std::string& name) {
  onnx::TensorProto proto;
  proto.set_name(name);
  proto.set_data_type(dtype_to_onnx(tensor.dtype()));
  for (int64_t d : tensor.shape()) proto.add_dims(d);
  proto.set_raw_data(tensor.data(), tensor.num_bytes());
  return proto;
}

}  // namespace kiln
