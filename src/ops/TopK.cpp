// TopK by rank counting, a sort written as reductions: along the axis, element j's rank is the
// number of elements that come before it (larger, or equal with a smaller index; smaller for
// largest = 0), and output position p holds the element whose rank is p. O(n^2) per row, every
// element independent: correct and parallel, not fast for long rows. k must be known when
// compiling (it is the output's extent). Ties keep the lower index first, as the ONNX reference.
#include "Families.h"
#include "IndexMath.h"
#include "kiln/ops/Helpers.h"

namespace kiln::ops {
namespace {

using namespace ir;

std::vector<te::Tensor> top_k(OpContext& ctx) {
  const te::Tensor& x = ctx.input(0);
  check_dtype(ctx, x, "input 0",
              {DType::Int8, DType::Int16, DType::Int32, DType::Int64, DType::UInt8, DType::UInt16, DType::UInt32,
               DType::UInt64, DType::Float16, DType::BFloat16, DType::Float32, DType::Float64});
  const int axis = normalize_axis(ctx, ctx.node().attr_int("axis", -1), x.ndim(), "attribute 'axis'");
  int64_t k = 0;
  if (ctx.opset() < 10) {
    if (!ctx.node().has_attribute("k")) ctx.fail("attribute 'k' is required");
    k = ctx.node().attr_int("k", 0);
  } else {
    if (!ctx.is_known(1)) {
      ctx.unsupported("K (input 1) is not known when compiling; it is the size of the outputs");
    }
    const std::vector<int64_t> ks = ctx.constant_ints(1, "K");
    if (ks.size() != 1) ctx.fail("input 1 ('K') must hold one value, got {}", ks.size());
    k = ks[0];
  }
  const bool largest = ctx.node().attr_int("largest", 1) != 0;
  const Expr n = x.shape(axis);
  if (k < 0) ctx.fail("k is {}, expected a non-negative number", k);
  if (auto c = as_const_int(n); c && k > *c) {
    ctx.fail("k is {} but dimension {} of {} has only {} elements", k, axis, shape_text(x.shape()), *c);
  }
  auto at = [&](const std::vector<Expr>& i, const Expr& position) {
    std::vector<Expr> index = i;
    index[axis] = position;
    return upcast(x(index));
  };
  // rank[j] = #{m : x[m] before x[j]}.
  const IterVar m = te::reduce_axis(n, ctx.stage_name("m"));
  const te::Tensor rank = te::compute(
      ctx.stage_name("rank"), x.shape(),
      [&](const std::vector<Expr>& i) {
        const Expr xj = at(i, i[axis]), xm = at(i, m.var);
        const Expr before = (largest ? xm > xj : xm < xj) || (xm == xj && m.var < i[axis]);
        return te::sum(Expr(1), {m}, before);
      },
      ctx.node().describe());
  std::vector<Expr> shape = x.shape();
  shape[axis] = Expr(k);
  // The position of the element of rank p (exactly one matches).
  const IterVar j = te::reduce_axis(n, ctx.stage_name("j"));
  const te::Tensor indices = te::compute(
      ctx.output_name(1), shape,
      [&](const std::vector<Expr>& i) {
        std::vector<Expr> index = i;
        index[axis] = j.var;
        return te::sum(j.var, {j}, rank(index) == i[axis]);
      },
      ctx.node().describe());
  const te::Tensor values = te::compute(
      ctx.output_name(0), shape,
      [&](const std::vector<Expr>& i) {
        std::vector<Expr> index = i;
        index[axis] = clamp(indices(i), Expr(0), n - 1);
        return x(index);
      },
      ctx.node().describe());
  return {values, indices};
}

}  // namespace

void register_sorting(OpTable& table) { table.add(OpKind::TopK, top_k); }

}  // namespace kiln::ops
