// Tensors made from shapes and attributes rather than from input elements: Shape, Size, Range,
// Constant, ConstantOfShape, EyeLike. Their values are usually known when compiling, which is
// what lets Shape -> Gather -> Concat -> Reshape chains give Reshape a (symbolic) target shape.
#include "DataMovement.h"
#include "IndexMath.h"
#include "kiln/ir/Simplify.h"
#include "kiln/onnx/Proto.h"
#include "kiln/ops/Helpers.h"

namespace kiln::ops {
namespace {

using namespace ir;

te::Tensor make_output(OpContext& ctx, std::vector<Expr> shape, const te::ComputeFn& fn) {
  return te::compute(ctx.output_name(0), simplified(std::move(shape)), fn, ctx.node().describe());
}

// Element i of `values` as an expression of i (a select chain; `values` is short).
Expr pick(const Expr& i, const std::vector<Expr>& values, Type type) {
  if (values.empty()) return make_zero(type);
  Expr out = cast(type, values.back());
  for (size_t k = values.size() - 1; k-- > 0;) out = select(i == Expr(static_cast<int64_t>(k)), cast(type, values[k]), out);
  return out;
}

std::vector<te::Tensor> shape_op(OpContext& ctx) {
  const te::Tensor& x = ctx.input(0);
  const int64_t rank = x.ndim();
  int64_t start = ctx.node().attr_int("start", 0), end = ctx.node().attr_int("end", rank);
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, 0, rank);
  std::vector<Expr> dims;
  for (int64_t d = start; d < end; ++d) dims.push_back(simplify(x.shape(static_cast<int>(d))));
  return {make_output(ctx, {Expr(static_cast<int64_t>(dims.size()))},
                      [&](const std::vector<Expr>& i) { return pick(i[0], dims, kIndexType); })};
}

std::vector<te::Tensor> size_op(OpContext& ctx) {
  const Expr n = product(ctx.input(0).shape());
  return {make_output(ctx, {}, [&](const std::vector<Expr>&) { return n; })};
}

std::vector<te::Tensor> range(OpContext& ctx) {
  const te::Tensor& start = ctx.input(0);
  const te::Tensor& delta = ctx.input(2);
  check_same_dtype(ctx, {start, ctx.input(1), delta});
  const DType dtype = start.dtype();
  const bool half = dtype == DType::Float16 || dtype == DType::BFloat16;
  if (half && ctx.opset() >= 27) {
    // Opset 27: float16/bfloat16 with stash_type 1 (the default) compute in float32.
    if (ctx.node().attr_int("stash_type", 1) != 1) {
      ctx.unsupported("Range over {} with stash_type {} (accumulation in {}) is not supported", dtype_name(dtype),
                      ctx.node().attr_int("stash_type", 1), dtype_name(dtype));
    }
  } else {
    check_dtype(ctx, start, "input 0 (start)",
                {DType::Float32, DType::Float64, DType::Int16, DType::Int32, DType::Int64});
  }
  const double s = ctx.constant_floats(0, "start").at(0), l = ctx.constant_floats(1, "limit").at(0),
               d = ctx.constant_floats(2, "delta").at(0);
  if (d == 0) ctx.fail("delta is 0");
  const int64_t n = std::max<int64_t>(static_cast<int64_t>(std::ceil((l - s) / d)), 0);
  return {make_output(ctx, {Expr(n)}, [&](const std::vector<Expr>& i) {
    if (half) return downcast(upcast(start({})) + cast(Type(DType::Float32), i[0]) * upcast(delta({})), dtype);
    return start({}) + cast(Type(dtype), i[0]) * delta({});
  })};
}

HostTensor scalar_or_list(DType dtype, const std::vector<double>& values, bool scalar) {
  HostTensor t(dtype, scalar ? std::vector<int64_t>{} : std::vector<int64_t>{static_cast<int64_t>(values.size())});
  for (size_t k = 0; k < values.size(); ++k) t.set_double(static_cast<int64_t>(k), values[k]);
  return t;
}

std::vector<te::Tensor> constant(OpContext& ctx) {
  const Node& node = ctx.node();
  for (const char* name : {"sparse_value", "value_string", "value_strings"}) {
    if (node.has_attribute(name)) ctx.unsupported("Constant with attribute '{}' (sparse or string data)", name);
  }
  HostTensor data;
  if (const Attribute* a = node.attr("value", Attribute::Kind::Tensor)) {
    data = a->tensor;
  } else if (node.has_attribute("value_float")) {
    data = scalar_or_list(DType::Float32, {node.attr_float("value_float", 0)}, true);
  } else if (node.has_attribute("value_floats")) {
    data = scalar_or_list(DType::Float32, node.attr_floats("value_floats", {}), false);
  } else if (node.has_attribute("value_int")) {
    HostTensor t(DType::Int64, {});
    t.set_int(0, node.attr_int("value_int", 0));
    data = t;
  } else if (node.has_attribute("value_ints")) {
    std::vector<int64_t> v = node.attr_ints("value_ints", {});
    HostTensor t(DType::Int64, {static_cast<int64_t>(v.size())});
    for (size_t k = 0; k < v.size(); ++k) t.set_int(static_cast<int64_t>(k), v[k]);
    data = t;
  } else {
    ctx.fail("Constant needs one of the attributes value, value_float(s), value_int(s)");
  }
  return {ctx.constant_tensor(0, std::move(data))};
}

std::vector<te::Tensor> constant_of_shape(OpContext& ctx) {
  std::vector<Expr> shape;
  for (const Expr& e : ctx.known_values(0, "shape")) {
    Expr d = cast(kIndexType, e);
    if (auto c = as_const_int(d); c && *c < 0) ctx.fail("shape has the negative dimension {}", *c);
    shape.push_back(d);
  }
  Expr value = make_zero(Type(DType::Float32));
  if (const Attribute* a = ctx.node().attr("value", Attribute::Kind::Tensor)) {
    if (a->tensor.num_elements() != 1) ctx.fail("attribute 'value' must hold one element, got {}", a->tensor.describe());
    const DType dtype = a->tensor.dtype();
    value = is_float(dtype) ? make_const(Type(dtype), a->tensor.get_double(0))
                            : IntImm::make(Type(dtype), a->tensor.get_int(0));
  }
  return {make_output(ctx, shape, [&](const std::vector<Expr>&) { return value; })};
}

std::vector<te::Tensor> eye_like(OpContext& ctx) {
  const te::Tensor& x = ctx.input(0);
  if (x.ndim() != 2) ctx.fail("input must have rank 2, got {}", shape_text(x.shape()));
  DType dtype = x.dtype();
  if (ctx.node().has_attribute("dtype")) {
    const int64_t code = ctx.node().attr_int("dtype", 0);
    auto d = dtype_from_onnx(static_cast<int32_t>(code));
    if (!d) ctx.unsupported("attribute 'dtype' {} ({})", code, onnx_data_type_name(static_cast<int32_t>(code)));
    dtype = *d;
  }
  const int64_t k = ctx.node().attr_int("k", 0);
  return {make_output(ctx, x.shape(), [&](const std::vector<Expr>& i) {
    return select(i[1] - i[0] == Expr(k), make_one(Type(dtype)), make_zero(Type(dtype)));
  })};
}

}  // namespace

void register_generate_ops(OpTable& table) {
  table.add(OpKind::Shape, shape_op);
  table.add(OpKind::Size, size_op);
  table.add(OpKind::Range, range);
  table.add(OpKind::Constant, constant);
  table.add(OpKind::ConstantOfShape, constant_of_shape);
  table.add(OpKind::EyeLike, eye_like);
}

}  // namespace kiln::ops
