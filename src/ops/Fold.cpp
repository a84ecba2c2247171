// Windows put back into images: Col2Im (the sum of every sliding block that covers a pixel, as
// torch.nn.Fold) and MaxUnpool (each value written where its index says, zeros elsewhere). Both
// are written from the output's side: a pixel reduces the inputs that land on it.
#include "Families.h"
#include "IndexMath.h"
#include "kiln/ir/Simplify.h"
#include "kiln/ops/Helpers.h"

namespace kiln::ops {
namespace {

using namespace ir;

// An attribute of `count` values (default `fallback` each), checked to be positive / non-negative.
std::vector<int64_t> window_attr(const OpContext& ctx, const char* name, size_t count,
                                 int64_t fallback, int64_t min) {
  std::vector<int64_t> v = ctx.node().attr_ints(name, std::vector<int64_t>(count, fallback));
  if (v.size() != count)
    ctx.fail("attribute '{}' has {} values; expected {}", name, v.size(), count);
  for (int64_t x : v) {
    if (x < min) ctx.fail("attribute '{}' holds {}; expected values >= {}", name, x, min);
  }
  return v;
}

// Col2Im: input [N, C * prod(block_shape), L] to [N, C, image_shape...]; pixel p sums the block
// entries at kernel offset o of every block b with b * stride - pad_begin + o * dilation = p.
std::vector<te::Tensor> col2im(OpContext& ctx) {
  const te::Tensor& x = ctx.input(0);
  const std::vector<int64_t> image = ctx.constant_ints(1, "image_shape");
  const std::vector<int64_t> block = ctx.constant_ints(2, "block_shape");
  const size_t dims = image.size();
  if (dims == 0 || block.size() != dims) {
    ctx.fail(
        "image_shape has {} values and block_shape {}; expected one per spatial dim (at least one)",
        dims, block.size());
  }
  if (x.ndim() != 3)
    ctx.fail("input {} must have rank 3 ([N, C * prod(block_shape), L])", shape_text(x.shape()));
  const std::vector<int64_t> dilations = window_attr(ctx, "dilations", dims, 1, 1);
  const std::vector<int64_t> strides = window_attr(ctx, "strides", dims, 1, 1);
  const std::vector<int64_t> pads = window_attr(ctx, "pads", 2 * dims, 0, 0);
  int64_t kernel_size = 1, block_count = 1;
  std::vector<int64_t> blocks(dims);
  for (size_t d = 0; d < dims; ++d) {
    if (block[d] < 1) ctx.fail("block_shape holds {}; expected positive sizes", block[d]);
    kernel_size *= block[d];
    blocks[d] =
        (image[d] + pads[d] + pads[dims + d] - dilations[d] * (block[d] - 1) - 1) / strides[d] + 1;
    if (blocks[d] < 1) ctx.fail("no block fits image dim {} ({} with pads)", d, image[d]);
    block_count *= blocks[d];
  }
  auto planes = as_const_int(x.shape(1));
  auto length = as_const_int(x.shape(2));
  if (!planes || *planes % kernel_size != 0) {
    ctx.fail("input dim 1 of {} must be a multiple of prod(block_shape) = {}",
             shape_text(x.shape()), kernel_size);
  }
  if (!length || *length != block_count) {
    ctx.fail("input dim 2 of {} must be the number of sliding blocks, {}", shape_text(x.shape()),
             block_count);
  }
  std::vector<Expr> shape = {x.shape(0), Expr(*planes / kernel_size)};
  for (int64_t d : image) shape.push_back(Expr(d));
  const Type acc =
      is_float(x.dtype()) && x.dtype() != DType::Float64 ? Type(DType::Float32) : Type(x.dtype());
  const te::Tensor sum = te::compute(
      ctx.stage_name("fold"), shape,
      [&](const std::vector<Expr>& i) {
        std::vector<IterVar> offsets;
        Expr kernel_flat = Expr(0), block_flat = Expr(0), cond = make_bool(true);
        for (size_t d = 0; d < dims; ++d) {
          const IterVar o =
              te::reduce_axis(Expr(block[d]), ctx.stage_name("o" + std::to_string(d)));
          offsets.push_back(o);
          const Expr q = i[2 + d] + Expr(pads[d]) - o.var * Expr(dilations[d]);
          const Expr b = floor_div(q, Expr(strides[d]));
          cond = cond && q >= 0 && floor_mod(q, Expr(strides[d])) == 0 && b < Expr(blocks[d]);
          kernel_flat = kernel_flat * Expr(block[d]) + o.var;
          block_flat = block_flat * Expr(blocks[d]) + clamp(b, Expr(0), Expr(blocks[d] - 1));
        }
        const Expr value = x({i[0], i[1] * Expr(kernel_size) + kernel_flat, block_flat});
        return te::sum(cast(acc, value), offsets, simplify(cond));
      },
      ctx.node().describe());
  return {te::compute(
      ctx.output_name(0), shape,
      [&](const std::vector<Expr>& i) { return cast(Type(x.dtype()), sum(i)); },
      ctx.node().describe())};
}

// MaxUnpool: Y (of the inferred shape (in - 1) * stride - pads + kernel, or output_shape, which
// holds it in its leading corner) is zero except at Y.flat[I[k]] = X.flat[k]; the last k wins,
// as in the reference. Two stages: the last k landing on each position, then its value.
std::vector<te::Tensor> max_unpool(OpContext& ctx) {
  const te::Tensor& x = ctx.input(0);
  const te::Tensor& indices = ctx.input(1);
  check_dtype(ctx, indices, "input 1 (I)", {DType::Int64});
  if (x.ndim() < 3)
    ctx.fail("input X {} must have rank 3 or more (N, C, spatial...)", shape_text(x.shape()));
  const size_t dims = static_cast<size_t>(x.ndim() - 2);
  const std::vector<int64_t> kernel = ctx.node().attr_ints("kernel_shape", {});
  if (kernel.size() != dims)
    ctx.fail("attribute 'kernel_shape' has {} values; expected {}", kernel.size(), dims);
  const std::vector<int64_t> strides = window_attr(ctx, "strides", dims, 1, 1);
  const std::vector<int64_t> pads = window_attr(ctx, "pads", 2 * dims, 0, 0);
  std::vector<Expr> inferred = {x.shape(0), x.shape(1)};
  for (size_t d = 0; d < dims; ++d) {
    inferred.push_back(simplify((x.shape(2 + static_cast<int>(d)) - 1) * Expr(strides[d]) -
                                Expr(pads[d] + pads[dims + d]) + Expr(kernel[d])));
  }
  std::vector<Expr> shape = inferred;
  if (ctx.has_input(2)) {
    const std::vector<int64_t> out = ctx.constant_ints(2, "output_shape");
    if (out.size() != inferred.size()) {
      ctx.fail("output_shape has {} values; expected {} (the rank of X)", out.size(),
               inferred.size());
    }
    shape.clear();
    for (int64_t d : out) shape.push_back(Expr(d));
  }
  std::vector<Expr> in_shape = x.shape();
  const Expr total = product(in_shape);
  const IterVar k = te::reduce_axis(total, ctx.stage_name("k"));
  const te::Tensor source = te::compute(
      ctx.stage_name("source"), shape,
      [&](const std::vector<Expr>& i) {
        Expr inside = make_bool(true);
        for (size_t d = 0; d < i.size(); ++d) inside = inside && i[d] < inferred[d];
        const Expr target = flatten_index(i, inferred);
        const Expr hit = cast(kIndexType, indices(unflatten_index(k.var, in_shape))) == target;
        return te::max_reduce(select(hit && inside, k.var, Expr(-1)), {k});
      },
      ctx.node().describe());
  return {te::compute(
      ctx.output_name(0), shape,
      [&](const std::vector<Expr>& i) {
        const Expr from = source(i);
        const Expr value = x(unflatten_index(max(from, Expr(0)), in_shape));
        return select(from >= 0, value, make_zero(Type(x.dtype())));
      },
      ctx.node().describe())};
}

}  // namespace

void register_fold(OpTable& table) {
  table.add(OpKind::Col2Im, col2im);
  table.add(OpKind::MaxUnpool, max_unpool);
}

}  // namespace kiln::ops
