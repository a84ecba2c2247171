#include "kiln/tune/KernelKey.h"

#include <cctype>
#include <cstdio>
#include <sstream>
#include <unordered_map>

#include "kiln/ir/IRPrinter.h"
#include "kiln/lower/Lower.h"

namespace kiln::tune {

namespace {

// Every identifier replaced by "v<k>", k its order of first appearance: the text of two loop nests
// that differ only in names becomes the same.
std::string canonical_names(const std::string& text) {
  std::unordered_map<std::string, size_t> ids;
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const unsigned char ch = static_cast<unsigned char>(text[i]);
    if (std::isalpha(ch) || ch == '_') {
      size_t j = i;
      while (j < text.size() && (std::isalnum(static_cast<unsigned char>(text[j])) || text[j] == '_' || text[j] == '.')) ++j;
      const auto [it, added] = ids.emplace(text.substr(i, j - i), ids.size());
      out += "v" + std::to_string(it->second);
      i = j;
    } else {
      out += text[i++];
    }
  }
  return out;
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::string dims_text(const std::vector<ir::Expr>& shape) {
  std::ostringstream os;
  for (size_t k = 0; k < shape.size(); ++k) os << (k ? "x" : "") << shape[k];
  return shape.empty() ? "scalar" : os.str();
}

}  // namespace

KernelKey kernel_key(const codegen::KernelDefinition& kernel) {
  // The computation with serial loops (no schedule): what the kernel computes, not how.
  const LoweredFunc f = lower("kernel", kernel.inputs, kernel.outputs);
  std::ostringstream text;
  for (const ir::Buffer& b : f.inputs) text << "in " << b->name << " " << dims_text(b->shape) << " " << dtype_name(b->dtype) << "\n";
  for (const ir::Buffer& b : f.outputs) text << "out " << b->name << " " << dims_text(b->shape) << " " << dtype_name(b->dtype) << "\n";
  text << f.body;
  KernelKey key;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fnv1a(canonical_names(text.str()))));
  key.hash = hex;
  auto side = [](const std::vector<te::Tensor>& ts, bool dtypes) {
    std::string s;
    for (const te::Tensor& t : ts) s += (s.empty() ? "" : ",") + (dtypes ? std::string(dtype_name(t.dtype())) : dims_text(t.shape()));
    return s;
  };
  key.dtypes = side(kernel.inputs, true) + "->" + side(kernel.outputs, true);
  key.shape = side(kernel.inputs, false) + "->" + side(kernel.outputs, false);
  return key;
}

}  // namespace kiln::tune
