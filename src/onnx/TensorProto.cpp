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

// Codes newer than Debian's onnx.proto (1.12) has names for.
constexpr int32_t kFloat8E4M3FN = 17;
constexpr int32_t kFloat8E8M0 = 24;

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

// Values from int32_data: the low bits of each int32 are the element's bit pattern (float16,
// bfloat16, float8) or its value (small integers, bool).
HostTensor from_int32_data(const onnx::TensorProto& proto, DType dtype, std::vector<int64_t> shape,
                           int64_t n, const std::string& what) {
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

std::optional<DType> dtype_from_onnx(int32_t data_type) {
  switch (data_type) {
    case onnx::TensorProto::FLOAT: return DType::Float32;
    case onnx::TensorProto::UINT8: return DType::UInt8;
    case onnx::TensorProto::INT8: return DType::Int8;
    case onnx::TensorProto::UINT16: return DType::UInt16;
    case onnx::TensorProto::INT16: return DType::Int16;
    case onnx::TensorProto::INT32: return DType::Int32;
    case onnx::TensorProto::INT64: return DType::Int64;
    case onnx::TensorProto::BOOL: return DType::Bool;
    case onnx::TensorProto::FLOAT16: return DType::Float16;
    case onnx::TensorProto::DOUBLE: return DType::Float64;
    case onnx::TensorProto::UINT32: return DType::UInt32;
    case onnx::TensorProto::UINT64: return DType::UInt64;
    case onnx::TensorProto::BFLOAT16: return DType::BFloat16;
    case kFloat8E4M3FN: return DType::Float8E4M3;
    case kFloat8E8M0: return DType::Float8E8M0;
    default: return std::nullopt;
  }
}

int32_t dtype_to_onnx(DType dtype) {
  switch (dtype) {
    case DType::Float32: return onnx::TensorProto::FLOAT;
    case DType::UInt8: return onnx::TensorProto::UINT8;
    case DType::Int8: return onnx::TensorProto::INT8;
    case DType::UInt16: return onnx::TensorProto::UINT16;
    case DType::Int16: return onnx::TensorProto::INT16;
    case DType::Int32: return onnx::TensorProto::INT32;
    case DType::Int64: return onnx::TensorProto::INT64;
    case DType::Bool: return onnx::TensorProto::BOOL;
    case DType::Float16: return onnx::TensorProto::FLOAT16;
    case DType::Float64: return onnx::TensorProto::DOUBLE;
    case DType::UInt32: return onnx::TensorProto::UINT32;
    case DType::UInt64: return onnx::TensorProto::UINT64;
    case DType::BFloat16: return onnx::TensorProto::BFLOAT16;
    case DType::Float8E4M3: return kFloat8E4M3FN;
    case DType::Float8E8M0: return kFloat8E8M0;
  }
  internal_error("dtype_to_onnx: unknown dtype");
}

std::string onnx_data_type_name(int32_t data_type) {
  static const char* const kNewer[] = {"FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ",
                                       "UINT4",        "INT4",           "FLOAT4E2M1", "FLOAT8E8M0"};
  if (onnx::TensorProto::DataType_IsValid(data_type)) {
    return onnx::TensorProto::DataType_Name(static_cast<onnx::TensorProto::DataType>(data_type));
  }
  if (data_type >= 17 && data_type <= 24) return kNewer[data_type - 17];
  return "data type " + std::to_string(data_type);
}

HostTensor tensor_from_proto(const onnx::TensorProto& proto, const ExternalDataSource& source,
                             const std::string& what) {
  const std::optional<DType> dtype = dtype_from_onnx(proto.data_type());
  if (!dtype) {
    user_error("{}: data type {} is not supported; expected one of float, float16, bfloat16, double, "
               "int8-64, uint8-64, bool, float8e4m3fn, float8e8m0",
               what, onnx_data_type_name(proto.data_type()));
  }
  if (proto.has_segment()) user_error("{}: segmented tensors are not supported", what);
  const int64_t n = checked_num_elements(proto, what);
  int64_t num_bytes = 0;
  if (__builtin_mul_overflow(n, static_cast<int64_t>(dtype_bytes(*dtype)), &num_bytes)) {
    user_error("{}: its size in bytes overflows int64", what);
  }
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
