#include "PluginFiles.h"

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "kiln/support/Error.h"

namespace kiln::package {

namespace {

std::string hex_bytes(const std::vector<unsigned char>& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (unsigned char b : bytes) s += std::string{digits[b >> 4], digits[b & 15]};
  return s;
}

// nvinfer1::PluginFieldType values.
constexpr int kFieldFloat32 = 1, kFieldInt32 = 5, kFieldChar = 6;

template <typename T>
void append(std::vector<unsigned char>& bytes, T value) {
  unsigned char b[sizeof(T)];
  std::memcpy(b, &value, sizeof(T));
  bytes.insert(bytes.end(), b, b + sizeof(T));
}

const char* field_type_name(int type) { return type == kFieldFloat32 ? "FLOAT32" : type == kFieldInt32 ? "INT32" : "CHAR"; }

}  // namespace

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) throw UserError("cannot write " + path);
}

std::string template_text(const std::string& name) {
  const char* env = std::getenv("KILN_TEMPLATE_DIR");
  const std::string dir = env && *env ? std::string(env) : std::string(KILN_SOURCE_DIR) + "/package_templates/trt_plugin";
  std::ifstream in(dir + "/" + name, std::ios::binary);
  if (!in) throw UserError("template " + dir + "/" + name + " not found (set KILN_TEMPLATE_DIR to kiln's package_templates/trt_plugin)");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string fill_template(const std::string& text, const std::map<std::string, std::string>& values) {
  std::string out;
  size_t pos = 0;
  while (true) {
    const size_t open = text.find("{{", pos);
    if (open == std::string::npos) break;
    // "{{{" is a brace followed by a key.
    const size_t key_start = text.compare(open, 3, "{{{") == 0 && text.compare(open + 1, 3, "{{{") != 0 ? open + 3 : open + 2;
    const size_t close = text.find("}}", key_start);
    KILN_ASSERT(close != std::string::npos, "unterminated template key");
    const std::string key = text.substr(key_start, close - key_start);
    auto it = values.find(key);
    KILN_ASSERT(it != values.end(), "template key {{{{{}}}}} has no value", key);
    out += text.substr(pos, key_start - 2 - pos) + it->second;
    pos = close + 2;
  }
  return out + text.substr(pos);
}

std::string PluginFieldValue::describe() const {
  std::string s = name + ": " + field_type_name(type);
  if (type == kFieldChar) return s + "[" + std::to_string(length) + "]";
  s += " [";
  for (int i = 0; i < length && i < 8; ++i) {
    if (i) s += ", ";
    if (type == kFieldInt32) {
      int32_t v;
      std::memcpy(&v, bytes.data() + 4 * i, 4);
      s += std::to_string(v);
    } else {
      float v;
      std::memcpy(&v, bytes.data() + 4 * i, 4);
      std::ostringstream o;
      o << v;
      s += o.str();
    }
  }
  return s + (length > 8 ? ", ...]" : "]");
}

std::vector<PluginFieldValue> plugin_fields(const std::vector<onnx::AttributeProto>& attributes) {
  std::vector<PluginFieldValue> fields;
  for (const onnx::AttributeProto& a : attributes) {
    PluginFieldValue f;
    f.name = a.name();
    switch (a.type()) {
      case onnx::AttributeProto::INT: f.type = kFieldInt32, f.length = 1, append(f.bytes, static_cast<int32_t>(a.i())); break;
      case onnx::AttributeProto::FLOAT: f.type = kFieldFloat32, f.length = 1, append(f.bytes, a.f()); break;
      case onnx::AttributeProto::STRING:
        f.type = kFieldChar, f.length = static_cast<int>(a.s().size());
        f.bytes.assign(a.s().begin(), a.s().end());
        break;
      case onnx::AttributeProto::INTS:
        f.type = kFieldInt32, f.length = a.ints_size();
        for (int64_t v : a.ints()) append(f.bytes, static_cast<int32_t>(v));
        break;
      case onnx::AttributeProto::FLOATS:
        f.type = kFieldFloat32, f.length = a.floats_size();
        for (float v : a.floats()) append(f.bytes, v);
        break;
      default: continue;
    }
    fields.push_back(std::move(f));
  }
  return fields;
}

std::string plugin_source(const PluginGroup& group, const PluginKernels& kernels, const std::vector<PluginFieldValue>& fields,
                          const PluginOptions& options, const std::string& model_name, const std::string& replaced) {
  static const char* kTrtTypes[] = {"kFLOAT", "kHALF", "kINT8", "kINT32", "kBOOL", "kUINT8", "kFP8", "kBF16"};
  std::string decls, variants;
  for (size_t v = 0; v < kernels.functions.size(); ++v) {
    const std::string& fn = kernels.functions[v];
    decls += "int32_t kiln_" + fn + "(const DLTensor*, int32_t, void*, void*);\nconst KilnSignature* kiln_signature_" + fn + "(void);\n";
    variants += "    {nvinfer1::DataType::" + std::string(kTrtTypes[trt_data_type(kernels.float_types[v], fn)]) + ", kiln_" + fn +
                ", kiln_signature_" + fn + "},\n";
  }
  std::string io, ndims, dims, ops, dims_text;
  int op_count = 0;
  for (int t : kernels.io_types) io += (io.empty() ? "" : ", ") + std::to_string(t);
  for (size_t o = 0; o < kernels.output_dims.size(); ++o) {
    ndims += (o ? ", " : "") + std::to_string(kernels.output_dims[o].size());
    dims_text += (o ? "; " : "") + kernels.output_dims_text[o];
    for (const auto& program : kernels.output_dims[o]) {
      dims += (dims.empty() ? "{" : ", {") + std::to_string(op_count) + ", " + std::to_string(program.size()) + "}";
      for (const ShapeStep& s : program) {
        ops += (op_count++ ? ", {" : "{") + std::to_string(s.code) + ", " + std::to_string(s.a) + ", " + std::to_string(s.b) + "}";
      }
    }
  }
  if (dims.empty()) dims = "{0, 0}";  // arrays may not be empty
  if (ops.empty()) ops = "{0, 0, 0}";
  std::string field_data, field_list;
  for (size_t f = 0; f < fields.size(); ++f) {
    std::string bytes;
    for (size_t b = 0; b < fields[f].bytes.size(); ++b) {
      bytes += (b ? "," : "") + std::to_string(fields[f].bytes[b]) + (b % 24 == 23 ? "\n    " : "");
    }
    field_data += "const unsigned char kField" + std::to_string(f) + "[] = {" + (bytes.empty() ? "0" : bytes) + "};\n";
    field_list += "    {\"" + fields[f].name + "\", static_cast<nvinfer1::PluginFieldType>(" + std::to_string(fields[f].type) +
                  "), " + std::to_string(fields[f].length) + ", kField" + std::to_string(f) + "},\n";
  }
  if (field_list.empty()) field_list = "    {\"\", nvinfer1::PluginFieldType::kUNKNOWN, 0, nullptr},\n";
  return fill_template(template_text("plugin.cpp.in"),
                       {{"PLUGIN", group.name},
                        {"VERSION", options.plugin_version},
                        {"NAMESPACE", options.plugin_namespace},
                        {"REPLACED", replaced},
                        {"MODEL", model_name},
                        {"KERNEL_DECLS", decls},
                        {"VARIANTS", variants},
                        {"IO_TYPES", io},
                        {"OUTPUT_NDIMS", ndims.empty() ? "0" : ndims},
                        {"OUTPUT_DIMS_TEXT", dims_text},
                        {"OUTPUT_DIMS", dims},
                        {"SHAPE_OPS", ops},
                        {"FIELD_DATA", field_data},
                        {"FIELDS", field_list},
                        {"NUM_INPUTS", std::to_string(group.inputs.size())},
                        {"NUM_OUTPUTS", std::to_string(group.outputs.size())},
                        {"NUM_FIELDS", std::to_string(fields.size())}});
}

std::string write_test_case(const std::string& dir, const TestCase& c, const std::vector<PluginFieldValue>& fields,
                            const PluginOptions& options) {
  const std::string name = "case_" + c.dtype + ".txt";
  std::ostringstream s;
  s << "# kiln plugin test case (package_templates/trt_plugin/kiln_plugin_case.h reads it)\n";
  s << "case " << c.plugin << " " << options.plugin_version << " "
    << (options.plugin_namespace.empty() ? "-" : options.plugin_namespace) << " " << c.function << " " << c.dtype << "\n";
  for (const auto& [n, v] : c.symbols) s << "symbol " << n << " " << v << "\n";
  for (const auto& [n, v] : c.alt_symbols) s << "alt_symbol " << n << " " << v << "\n";
  for (const PluginFieldValue& f : fields) s << "field " << f.name << " " << f.type << " " << f.length << " " << hex_bytes(f.bytes) << ".\n";
  auto tensor_line = [&](const char* kind, const TestTensor& t, size_t index) {
    const std::string file = c.dtype + "_" + kind + std::to_string(index) + ".bin";
    write_text(dir + "/" + file, std::string(reinterpret_cast<const char*>(t.data.data()), t.data.num_bytes()));
    s << kind << " " << t.name << " " << t.trt_type << " " << t.data.ndim();
    for (int64_t d : t.data.shape()) s << " " << d;
    for (int d = 0; d < t.data.ndim(); ++d) s << " " << (d < static_cast<int>(t.dim_symbols.size()) ? t.dim_symbols[d] : "#");
    s << " " << file;
  };
  for (size_t i = 0; i < c.inputs.size(); ++i) tensor_line("input", c.inputs[i], i), s << "\n";
  for (size_t o = 0; o < c.outputs.size(); ++o) {
    tensor_line("output", c.outputs[o], o);
    s << " " << c.outputs[o].tolerance;
    for (int64_t d : c.outputs[o].alt_dims) s << " " << d;
    s << "\n";
  }
  write_text(dir + "/" + name, s.str());
  return name;
}

}  // namespace kiln::package
