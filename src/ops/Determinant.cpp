// Det: the determinant of each trailing [n, n] matrix, by the Leibniz formula (a signed sum of
// n! products, written out in one expression) for n <= kMaxOrder; larger matrices would need a
// pivoted elimination, a sequential data-dependent algorithm the IR does not express, and are
// unsupported. Math in float32 (float64 for float64 input).
#include <algorithm>
#include <numeric>

#include "Families.h"
#include "IndexMath.h"
#include "kiln/ops/Helpers.h"

namespace kiln::ops {
namespace {

using namespace ir;

constexpr int64_t kMaxOrder = 5;  // 120 products

std::vector<te::Tensor> det(OpContext& ctx) {
  const te::Tensor& x = ctx.input(0);
  check_dtype(ctx, x, "input 0", kFloatTypes);
  const int rank = x.ndim();
  if (rank < 2) ctx.fail("input {} must have rank 2 or more ([..., M, M])", shape_text(x.shape()));
  auto rows = as_const_int(x.shape(rank - 2)), cols = as_const_int(x.shape(rank - 1));
  if (!rows || !cols) ctx.unsupported("a symbolic matrix size ({})", shape_text(x.shape()));
  if (*rows != *cols) ctx.fail("input {} must hold square matrices", shape_text(x.shape()));
  const int64_t n = *rows;
  if (n > kMaxOrder)
    ctx.unsupported("{}x{} matrices (kiln computes determinants up to {}x{})", n, n, kMaxOrder,
                    kMaxOrder);
  const Type acc(x.dtype() == DType::Float64 ? DType::Float64 : DType::Float32);
  const std::vector<Expr> shape(x.shape().begin(), x.shape().end() - 2);
  return {te::compute(
      ctx.output_name(0), shape,
      [&](const std::vector<Expr>& i) {
        auto at = [&](int64_t r, int64_t c) {
          std::vector<Expr> index = i;
          index.push_back(Expr(r));
          index.push_back(Expr(c));
          return cast(acc, x(index));
        };
        if (n == 0) return cast(Type(x.dtype()), make_one(acc));
        std::vector<int64_t> perm(static_cast<size_t>(n));
        std::iota(perm.begin(), perm.end(), 0);
        Expr total;
        do {
          int inversions = 0;
          for (int64_t a = 0; a < n; ++a) {
            for (int64_t b = a + 1; b < n; ++b) inversions += perm[a] > perm[b];
          }
          Expr term = at(0, perm[0]);
          for (int64_t r = 1; r < n; ++r) term = term * at(r, perm[r]);
          if (!total.defined())
            total = inversions % 2 ? -term : term;
          else
            total = inversions % 2 ? total - term : total + term;
        } while (std::next_permutation(perm.begin(), perm.end()));
        return cast(Type(x.dtype()), total);
      },
      ctx.node().describe())};
}

}  // namespace

void register_determinant(OpTable& table) {
  table.add(OpKind::Det, det);
}

}  // namespace kiln::ops
