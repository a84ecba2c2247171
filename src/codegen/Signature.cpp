// The machine-readable and the human-readable signature of a generated function, and the C
// identifiers of model-derived names.
#include <nlohmann/json.hpp>

#include "CodePrinter.h"
#include "kiln/ir/IRPrinter.h"
#include "kiln/ir/IROperator.h"

namespace kiln::codegen {

using namespace ir;

const char* target_name(Target target) { return target == Target::Cuda ? "cuda" : "cpu"; }

std::string c_identifier(const std::string& name) {
  std::string id;
  for (char c : name) id += (std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : '_';
  if (id.empty() || std::isdigit(static_cast<unsigned char>(id[0]))) id = "v" + id;
  return id;
}

std::string string_literal(const std::string& text) {
  std::string s = "\"";
  for (char c : text) {
    switch (c) {
      case '"': s += "\\\""; break;
      case '\\': s += "\\\\"; break;
      case '\n': s += "\\n"; break;
      default: s += c;
    }
  }
  return s + "\"";
}

namespace {

std::string dim_text(const FunctionLayout& f, const Expr& d) {
  for (size_t s = 0; s < f.symbols.size(); ++s) {
    if (f.symbols[s].same_as(d)) return f.symbols[s].as<Variable>()->name;
  }
  return to_string(d);
}

}  // namespace

std::string signature_text(const FunctionLayout& f) {
  std::string s = f.name + "(";
  for (size_t i = 0; i < f.params.size(); ++i) {
    const Buffer& b = f.params[i];
    if (i == f.num_inputs) s += ") -> (";
    else if (i) s += ", ";
    std::string shape;
    for (size_t d = 0; d < b->shape.size(); ++d) shape += (d ? ", " : "") + dim_text(f, b->shape[d]);
    s += b->name + ": Tensor([" + shape + "], " + std::string(dtype_name(b->dtype)) + ")";
  }
  if (f.params.size() == f.num_inputs) s += ") -> (";
  return s + ")";
}

std::string signature_json(const LoweredFunc& func, Target target, const std::vector<int>& library_constants) {
  const FunctionLayout f = layout_function(func, library_constants);
  nlohmann::json j;
  j["name"] = f.name;
  j["abi_version"] = 1;
  j["target"] = target_name(target);
  j["source"] = func.comment;
  j["params"] = nlohmann::json::array();
  for (size_t i = 0; i < f.params.size(); ++i) {
    const Buffer& b = f.params[i];
    nlohmann::json p;
    p["name"] = b->name;
    p["dtype"] = std::string(dtype_name(b->dtype));
    p["is_output"] = i >= f.num_inputs;
    p["shape"] = nlohmann::json::array();
    for (const Expr& d : b->shape) {
      if (auto c = as_const_int(d)) p["shape"].push_back(*c);
      else p["shape"].push_back(dim_text(f, d));
    }
    auto it = f.alignment.find(b.get());
    p["alignment"] = std::max(dtype_bytes(b->dtype), it == f.alignment.end() ? 1 : it->second);
    j["params"].push_back(p);
  }
  j["symbols"] = nlohmann::json::array();
  for (const Expr& s : f.symbols) j["symbols"].push_back(s.as<Variable>()->name);
  j["derived_dims"] = nlohmann::json::array();
  for (const auto& d : f.derived) j["derived_dims"].push_back({{"where", d.where}, {"equals", to_string(d.expression)}});
  nlohmann::json ws = nlohmann::json::array();
  for (const Buffer& t : f.temporaries) {
    ws.push_back({{"name", t->name}, {"dtype", std::string(dtype_name(t->dtype))}, {"elements", to_string(t.num_elements())}});
  }
  j["workspace"] = {{"buffers", ws}, {"alignment", 256}};
  j["text"] = signature_text(f);
  return j.dump(2);
}

}  // namespace kiln::codegen
