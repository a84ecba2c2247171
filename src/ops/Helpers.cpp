#include "kiln/ops/Helpers.h"

#include <algorithm>

#include "kiln/ir/Equality.h"
#include "kiln/ir/IRPrinter.h"

namespace kiln::ops {

using namespace ir;

static std::string shape_text(const std::vector<Expr>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + to_string(shape[i]);
  return s + "]";
}

std::vector<Expr> broadcast_shape(const OpContext& ctx, const std::vector<te::Tensor>& tensors) {
  size_t rank = 0;
  for (const te::Tensor& t : tensors) rank = std::max(rank, static_cast<size_t>(t.ndim()));
  std::vector<Expr> out(rank);
  for (size_t d = 0; d < rank; ++d) {
    Expr chosen;
    for (const te::Tensor& t : tensors) {
      const int offset = static_cast<int>(rank) - t.ndim();
      if (static_cast<int>(d) < offset) continue;
      const Expr& dim = t.shape(static_cast<int>(d) - offset);
      if (is_one(dim)) continue;
      if (!chosen.defined() || structurally_equal(chosen, dim)) {
        chosen = dim;
        continue;
      }
      auto a = as_const_int(chosen), b = as_const_int(dim);
      if (a && b) {
        std::string shapes;
        for (const te::Tensor& u : tensors) shapes += (shapes.empty() ? "" : ", ") + shape_text(u.shape());
        ctx.fail("shapes {} do not broadcast: dimension {} is {} in one input and {} in another", shapes,
                 d, *a, *b);
      }
      // A constant beats a symbol (the symbol must equal it at run time); between two different
      // symbols the first stays.
      if (b) chosen = dim;
    }
    out[d] = chosen.defined() ? chosen : Expr(1);
  }
  return out;
}

Expr broadcast_read(const te::Tensor& t, const std::vector<Expr>& indices) {
  const int offset = static_cast<int>(indices.size()) - t.ndim();
  std::vector<Expr> idx;
  for (int d = 0; d < t.ndim(); ++d) idx.push_back(is_one(t.shape(d)) ? Expr(0) : indices[d + offset]);
  return t(idx);
}

int normalize_axis(const OpContext& ctx, int64_t axis, int rank, const char* what) {
  if (axis < -rank || axis >= std::max(rank, 1)) {
    ctx.fail("{} {} is out of range for a tensor of rank {} (expected [{}, {}))", what, axis, rank, -rank,
             std::max(rank, 1));
  }
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

void check_dtype(const OpContext& ctx, const te::Tensor& t, const char* what, std::initializer_list<DType> allowed) {
  if (std::find(allowed.begin(), allowed.end(), t.dtype()) != allowed.end()) return;
  std::string names;
  for (DType d : allowed) names += (names.empty() ? "" : ", ") + std::string(dtype_name(d));
  ctx.fail("{} has dtype {}, expected one of: {}", what, dtype_name(t.dtype()), names);
}

void check_same_dtype(const OpContext& ctx, const std::vector<te::Tensor>& tensors) {
  for (size_t i = 1; i < tensors.size(); ++i) {
    if (tensors[i].defined() && tensors[i].dtype() != tensors[0].dtype()) {
      ctx.fail("input {} has dtype {} but input 0 has dtype {}; they must match", i, dtype_name(tensors[i].dtype()),
               dtype_name(tensors[0].dtype()));
    }
  }
}

Expr upcast(const Expr& e) {
  const DType d = e.type().dtype;
  return (d == DType::Float16 || d == DType::BFloat16) ? cast(Type(DType::Float32, e.type().lanes), e) : e;
}

Expr downcast(const Expr& e, DType storage) { return cast(Type(storage, e.type().lanes), e); }

}  // namespace kiln::ops
