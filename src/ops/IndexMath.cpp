#include "IndexMath.h"

#include "kiln/ir/IRPrinter.h"
#include "kiln/ir/Simplify.h"

namespace kiln::ops {

using namespace ir;

Expr product(const std::vector<Expr>& dims) {
  Expr p = Expr(1);
  for (const Expr& d : dims) p = is_one(p) ? d : p * d;
  return simplify(p);
}

Expr flatten_index(const std::vector<Expr>& indices, const std::vector<Expr>& dims) {
  Expr flat = Expr(0);
  for (size_t d = 0; d < indices.size(); ++d) flat = flat * dims[d] + indices[d];
  return flat;
}

std::vector<Expr> unflatten_index(const Expr& flat, const std::vector<Expr>& dims) {
  std::vector<Expr> out(dims.size());
  Expr rest = flat;
  for (size_t k = dims.size(); k-- > 0;) {
    if (k == 0) {
      out[k] = rest;
    } else {
      out[k] = is_one(dims[k]) ? Expr(0) : rest % dims[k];
      rest = is_one(dims[k]) ? rest : rest / dims[k];
    }
  }
  return out;
}

Expr clamp(const Expr& x, const Expr& lo, const Expr& hi) { return min(max(x, lo), hi); }

Expr ceil_div(const Expr& a, const Expr& b) { return floor_div(a + b - 1, b); }

std::string shape_text(const std::vector<Expr>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + to_string(simplify(shape[i]));
  return s + "]";
}

std::vector<Expr> simplified(std::vector<Expr> shape) {
  for (Expr& d : shape) d = simplify(d);
  return shape;
}

}  // namespace kiln::ops
