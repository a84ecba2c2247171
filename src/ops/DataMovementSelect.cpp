// Selections and copies of parts of tensors: Concat, Slice, Split, Gather, GatherElements,
// Expand, Tile, Pad, CenterCropPad, Trilu, ReverseSequence. Reads that a select may not take are
// clamped into bounds, so that evaluating known values (which visits every branch) and generated
// code never read outside.
#include <algorithm>
#include <limits>

#include "DataMovement.h"
#include "IndexMath.h"
#include "kiln/ir/Equality.h"
#include "kiln/ir/Simplify.h"
#include "kiln/ops/Helpers.h"

namespace kiln::ops {
namespace {

using namespace ir;

te::Tensor make_output(OpContext& ctx, int output, std::vector<Expr> shape, const te::ComputeFn& fn) {
  return te::compute(ctx.output_name(output), simplified(std::move(shape)), fn, ctx.node().describe());
}

// `index` with dimension `axis` replaced by `value`.
std::vector<Expr> with_index(std::vector<Expr> index, int axis, Expr value) {
  index[axis] = std::move(value);
  return index;
}

std::vector<te::Tensor> concat(OpContext& ctx) {
  std::vector<te::Tensor> inputs;
  for (int k = 0; k < ctx.num_inputs(); ++k) inputs.push_back(ctx.input(k));
  if (inputs.empty()) ctx.fail("Concat needs at least one input");
  check_same_dtype(ctx, inputs);
  const int rank = inputs[0].ndim();
  if (!ctx.node().has_attribute("axis") && ctx.opset() >= 4) ctx.fail("attribute 'axis' is required");
  const int axis = normalize_axis(ctx, ctx.node().attr_int("axis", 1), rank, "attribute 'axis'");
  std::vector<Expr> offsets;  // start of each input along the axis
  Expr total = Expr(0);
  for (size_t k = 0; k < inputs.size(); ++k) {
    const te::Tensor& t = inputs[k];
    if (t.ndim() != rank) {
      ctx.fail("input {} has rank {} ({}) but input 0 has rank {} ({}); Concat inputs must have equal rank", k,
               t.ndim(), shape_text(t.shape()), rank, shape_text(inputs[0].shape()));
    }
    for (int d = 0; d < rank; ++d) {
      if (d == axis) continue;
      auto a = as_const_int(t.shape(d)), b = as_const_int(inputs[0].shape(d));
      if (a && b && *a != *b) {
        ctx.fail("input {} has shape {} but input 0 has shape {}: dimension {} differs ({} vs {}) off the "
                 "concatenation axis {}", k, shape_text(t.shape()), shape_text(inputs[0].shape()), d, *a, *b, axis);
      }
    }
    offsets.push_back(total);
    total = simplify(total + t.shape(axis));
  }
  std::vector<Expr> shape = inputs[0].shape();
  shape[axis] = total;
  return {make_output(ctx, 0, shape, [&](const std::vector<Expr>& i) {
    Expr value;
    for (size_t k = inputs.size(); k-- > 0;) {
      const te::Tensor& t = inputs[k];
      if (is_zero(t.shape(axis))) continue;
      Expr local = clamp(i[axis] - offsets[k], Expr(0), t.shape(axis) - 1);
      Expr read = t(with_index(i, axis, local));
      value = value.defined() ? select(i[axis] < offsets[k] + t.shape(axis), read, value) : read;
    }
    if (!value.defined()) value = make_zero(Type(inputs[0].dtype()));
    return value;
  })};
}

// A slice of one axis: output index i reads start + i * step; `length` outputs.
struct AxisSlice {
  Expr start, length;
  int64_t step = 1;
};

// Slice bounds as ONNX clamps them: negative values count from the end, then clamp to
// [0, dim] (step > 0) or [-1, dim - 1] (step < 0).
AxisSlice slice_axis(const Expr& dim, Expr start, Expr end, int64_t step) {
  constexpr int64_t kHuge = int64_t{1} << 40;  // INT_MAX-style "to the end" markers
  auto normalize = [&](Expr v, int64_t lo_off, int64_t hi_off) {
    auto c = as_const_int(v);
    if (c && *c >= kHuge) return simplify(dim + hi_off);
    if (c && *c <= -kHuge) return Expr(lo_off);
    if (c && *c < 0) v = dim + v;
    else if (!c) v = select(v < 0, dim + v, v);
    return simplify(clamp(v, Expr(lo_off), dim + hi_off));
  };
  AxisSlice s;
  s.step = step;
  if (step > 0) {
    s.start = normalize(start, 0, 0);
    Expr e = normalize(end, 0, 0);
    s.length = simplify(max(ceil_div(e - s.start, Expr(step)), Expr(0)));
  } else {
    s.start = normalize(start, -1, -1);
    s.start = simplify(max(s.start, Expr(0)));
    Expr e = normalize(end, -1, -1);
    s.length = simplify(max(ceil_div(s.start - e, Expr(-step)), Expr(0)));
  }
  return s;
}

std::vector<Expr> index_values(OpContext& ctx, int input, const char* what) {
  std::vector<Expr> out;
  for (const Expr& e : ctx.known_values(input, what)) out.push_back(cast(kIndexType, e));
  return out;
}

std::vector<te::Tensor> slice(OpContext& ctx) {
  const te::Tensor& x = ctx.input(0);
  const int rank = x.ndim();
  std::vector<Expr> starts, ends;
  std::vector<int64_t> axes, steps;
  if (ctx.opset() < 10) {
    for (int64_t v : ctx.node().attr_ints("starts", {})) starts.push_back(Expr(v));
    for (int64_t v : ctx.node().attr_ints("ends", {})) ends.push_back(Expr(v));
    axes = ctx.node().attr_ints("axes", {});
  } else {
    starts = index_values(ctx, 1, "starts");
    ends = index_values(ctx, 2, "ends");
    if (ctx.has_input(3)) axes = ctx.constant_ints(3, "axes");
    if (ctx.has_input(4)) steps = ctx.constant_ints(4, "steps");
  }
  if (starts.size() != ends.size()) ctx.fail("starts has {} values but ends has {}", starts.size(), ends.size());
  if (axes.empty()) {
    for (size_t k = 0; k < starts.size(); ++k) axes.push_back(static_cast<int64_t>(k));
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (axes.size() != starts.size() || steps.size() != starts.size()) {
    ctx.fail("starts, ends, axes and steps must have equal lengths, got {}, {}, {}, {}", starts.size(), ends.size(),
             axes.size(), steps.size());
  }
  std::vector<AxisSlice> per_axis(rank);
  for (int d = 0; d < rank; ++d) per_axis[d] = AxisSlice{Expr(0), x.shape(d), 1};
  std::vector<bool> seen(rank, false);
  for (size_t k = 0; k < axes.size(); ++k) {
    const int d = normalize_axis(ctx, axes[k], rank, "axis");
    if (seen[d]) ctx.fail("axis {} is sliced twice", d);
    seen[d] = true;
    if (steps[k] == 0) ctx.fail("step {} is 0; steps must be non-zero", k);
    per_axis[d] = slice_axis(x.shape(d), starts[k], ends[k], steps[k]);
  }
  std::vector<Expr> shape;
  for (const AxisSlice& s : per_axis) shape.push_back(s.length);
  return {make_output(ctx, 0, shape, [&](const std::vector<Expr>& i) {
    std::vector<Expr> in;
    for (int d = 0; d < rank; ++d) in.push_back(per_axis[d].start + i[d] * Expr(per_axis[d].step));
    return x(in);
  })};
}

std::vector<te::Tensor> split(OpContext& ctx) {
  const te::Tensor& x = ctx.input(0);
  const int axis = normalize_axis(ctx, ctx.node().attr_int("axis", 0), x.ndim(), "attribute 'axis'");
  const int outputs = static_cast<int>(ctx.node().outputs.size());
  const Expr dim = x.shape(axis);
  std::vector<Expr> sizes;
  if (ctx.opset() < 13 && ctx.node().has_attribute("split")) {
    for (int64_t v : ctx.node().attr_ints("split", {})) sizes.push_back(Expr(v));
  } else if (ctx.opset() >= 13 && ctx.has_input(1)) {
    sizes = index_values(ctx, 1, "split");
  } else {
    const int64_t parts = ctx.node().attr_int("num_outputs", outputs);
    if (parts != outputs) ctx.fail("attribute 'num_outputs' is {} but the node has {} outputs", parts, outputs);
    auto n = as_const_int(dim);
    if (n && *n % parts != 0 && ctx.opset() < 18) {
      ctx.fail("dimension {} ({}) does not split into {} equal parts", axis, *n, parts);
    }
    const Expr chunk = simplify(ceil_div(dim, Expr(parts)));
    for (int k = 0; k < parts; ++k) {
      sizes.push_back(simplify(max(min(chunk, dim - Expr(k) * chunk), Expr(0))));
    }
  }
  if (static_cast<int>(sizes.size()) != outputs) {
    ctx.fail("split has {} sizes but the node has {} outputs", sizes.size(), outputs);
  }
  auto n = as_const_int(dim);
  Expr sum = Expr(0);
  for (const Expr& s : sizes) sum = simplify(sum + s);
  if (auto t = as_const_int(sum); t && n && *t != *n) {
    ctx.fail("split sizes sum to {} but dimension {} of {} is {}", *t, axis, shape_text(x.shape()), *n);
  }
  std::vector<te::Tensor> results;
  Expr offset = Expr(0);
  for (int k = 0; k < outputs; ++k) {
    std::vector<Expr> shape = x.shape();
    shape[axis] = sizes[k];
    const Expr start = offset;
    results.push_back(make_output(ctx, k, shape, [&](const std::vector<Expr>& i) {
      return x(with_index(i, axis, i[axis] + start));
    }));
    offset = simplify(offset + sizes[k]);
  }
  return results;
}

// A data-dependent index made non-negative (negative counts from the end) and clamped in range.
Expr normalize_index(const Expr& raw, const Expr& dim) {
  Expr v = cast(kIndexType, raw);
  return clamp(select(v < 0, v + dim, v), Expr(0), dim - 1);
}

std::vector<te::Tensor> gather(OpContext& ctx) {
  const te::Tensor& data = ctx.input(0);
  const te::Tensor& indices = ctx.input(1);
  check_dtype(ctx, indices, "input 1 (indices)", {DType::Int32, DType::Int64});
  const int axis = normalize_axis(ctx, ctx.node().attr_int("axis", 0), data.ndim(), "attribute 'axis'");
  std::vector<Expr> shape(data.shape().begin(), data.shape().begin() + axis);
  shape.insert(shape.end(), indices.shape().begin(), indices.shape().end());
  shape.insert(shape.end(), data.shape().begin() + axis + 1, data.shape().end());
  const int q = indices.ndim();
  // A single known index (an exported qkv[0]) is a literal: the Gather is then a pure re-indexing
  // that the contraction templates can read through.
  const std::optional<Expr> literal = q == 0 ? ctx.known_scalar(indices) : std::nullopt;
  return {make_output(ctx, 0, shape, [&](const std::vector<Expr>& i) {
    std::vector<Expr> idx(i.begin() + axis, i.begin() + axis + q);
    std::vector<Expr> in(i.begin(), i.begin() + axis);
    const std::optional<int64_t> extent = as_const_int(data.shape(axis));
    if (literal && as_const_int(*literal) && extent) {
      const int64_t k = *as_const_int(*literal), at = k < 0 ? k + *extent : k;
      if (at < 0 || at >= *extent) ctx.fail("index {} is out of range for axis {} of extent {}", k, axis, *extent);
      in.push_back(Expr(at));
    } else {
      in.push_back(normalize_index(indices(idx), data.shape(axis)));
    }
    in.insert(in.end(), i.begin() + axis + q, i.end());
    return data(in);
  })};
}

std::vector<te::Tensor> gather_elements(OpContext& ctx) {
  const te::Tensor& data = ctx.input(0);
  const te::Tensor& indices = ctx.input(1);
  check_dtype(ctx, indices, "input 1 (indices)", {DType::Int32, DType::Int64});
  if (indices.ndim() != data.ndim()) {
    ctx.fail("indices {} must have the rank of data {}", shape_text(indices.shape()), shape_text(data.shape()));
  }
  const int axis = normalize_axis(ctx, ctx.node().attr_int("axis", 0), data.ndim(), "attribute 'axis'");
  return {make_output(ctx, 0, indices.shape(), [&](const std::vector<Expr>& i) {
    return data(with_index(i, axis, normalize_index(indices(i), data.shape(axis))));
  })};
}

std::vector<te::Tensor> expand(OpContext& ctx) {
  const te::Tensor& x = ctx.input(0);
  std::vector<Expr> target = index_values(ctx, 1, "shape");
  te::Tensor target_like = te::placeholder("shape", x.dtype(), target);
  std::vector<Expr> shape = broadcast_shape(ctx, {x, target_like});
  return {make_output(ctx, 0, shape, [&](const std::vector<Expr>& i) { return broadcast_read(x, i); })};
}

std::vector<te::Tensor> tile(OpContext& ctx) {
  const te::Tensor& x = ctx.input(0);
  std::vector<Expr> repeats = index_values(ctx, 1, "repeats");
  if (static_cast<int>(repeats.size()) != x.ndim()) {
    ctx.fail("repeats has {} values but the input {} has rank {}", repeats.size(), shape_text(x.shape()), x.ndim());
  }
  std::vector<Expr> shape;
  for (int d = 0; d < x.ndim(); ++d) {
    if (auto r = as_const_int(repeats[d]); r && *r < 0) ctx.fail("repeats[{}] is negative ({})", d, *r);
    shape.push_back(x.shape(d) * repeats[d]);
  }
  return {make_output(ctx, 0, shape, [&](const std::vector<Expr>& i) {
    std::vector<Expr> in;
    for (int d = 0; d < x.ndim(); ++d) in.push_back(is_one(x.shape(d)) ? Expr(0) : i[d] % x.shape(d));
    return x(in);
  })};
}

enum class PadMode { Constant, Reflect, Edge, Wrap };

std::vector<te::Tensor> pad(OpContext& ctx) {
  const te::Tensor& x = ctx.input(0);
  const int rank = x.ndim();
  std::vector<int64_t> pads;
  std::string mode_name = ctx.node().attr_string("mode", "constant");
  Expr value = make_zero(Type(x.dtype()));
  if (ctx.opset() < 11) {
    pads = ctx.node().attr_ints(ctx.node().has_attribute("pads") ? "pads" : "paddings", {});
    value = make_const(Type(x.dtype()), ctx.node().attr_float("value", 0.0));
  } else {
    pads = ctx.constant_ints(1, "pads");
    if (ctx.has_input(2)) {
      const te::Tensor& v = ctx.input(2);
      if (v.dtype() != x.dtype()) {
        ctx.fail("constant_value has dtype {} but the input has dtype {}", dtype_name(v.dtype()), dtype_name(x.dtype()));
      }
      value = v(std::vector<Expr>(v.ndim(), Expr(0)));
    }
  }
  std::vector<int64_t> axes;
  if (ctx.has_input(3)) {
    for (int64_t a : ctx.constant_ints(3, "axes")) axes.push_back(normalize_axis(ctx, a, rank, "axis"));
  } else {
    for (int d = 0; d < rank; ++d) axes.push_back(d);
  }
  if (pads.size() != 2 * axes.size()) {
    ctx.fail("pads has {} values, expected 2 * {} (begin and end of each padded axis)", pads.size(), axes.size());
  }
  PadMode mode;
  if (mode_name == "constant") mode = PadMode::Constant;
  else if (mode_name == "reflect") mode = PadMode::Reflect;
  else if (mode_name == "edge") mode = PadMode::Edge;
  else if (mode_name == "wrap") mode = PadMode::Wrap;
  else ctx.fail("attribute 'mode' is '{}', expected constant, reflect, edge or wrap", mode_name);
  std::vector<int64_t> begin(rank, 0), end(rank, 0);
  for (size_t k = 0; k < axes.size(); ++k) {
    begin[axes[k]] = pads[k];
    end[axes[k]] = pads[k + axes.size()];
  }
  std::vector<Expr> shape;
  for (int d = 0; d < rank; ++d) {
    shape.push_back(simplify(x.shape(d) + Expr(begin[d] + end[d])));
    if (mode == PadMode::Reflect && (begin[d] > 0 || end[d] > 0)) {
      auto n = as_const_int(x.shape(d));
      if (n && (begin[d] >= *n || end[d] >= *n)) {
        ctx.unsupported("reflect padding of {} / {} on a dimension of size {} (more than one reflection)", begin[d],
                        end[d], *n);
      }
    }
  }
  return {make_output(ctx, 0, shape, [&](const std::vector<Expr>& i) {
    std::vector<Expr> in;
    Expr inside = make_bool(true);
    for (int d = 0; d < rank; ++d) {
      const Expr n = x.shape(d);
      Expr j = i[d] - Expr(begin[d]);
      if (begin[d] == 0 && end[d] <= 0) {
        in.push_back(j);
        continue;
      }
      switch (mode) {
        case PadMode::Constant:
          inside = inside && j >= 0 && j < n;
          j = clamp(j, Expr(0), n - 1);
          break;
        case PadMode::Edge: j = clamp(j, Expr(0), n - 1); break;
        case PadMode::Reflect:
          j = select(j < 0, -j, select(j >= n, (n - 1) * 2 - j, j));
          j = clamp(j, Expr(0), n - 1);
          break;
        case PadMode::Wrap: j = floor_mod(j, n); break;
      }
      in.push_back(j);
    }
    Expr read = x(in);
    return mode == PadMode::Constant ? select(simplify(inside), read, value) : read;
  })};
}

std::vector<te::Tensor> trilu(OpContext& ctx) {
  const te::Tensor& x = ctx.input(0);
  if (x.ndim() < 2) ctx.fail("input {} must have rank 2 or more", shape_text(x.shape()));
  const bool upper = ctx.node().attr_int("upper", 1) != 0;
  int64_t k = 0;
  if (ctx.has_input(1)) {
    std::vector<int64_t> ks = ctx.constant_ints(1, "k");
    if (ks.size() != 1) ctx.fail("k must hold one value, got {}", ks.size());
    k = ks[0];
  }
  const int r = x.ndim();
  return {make_output(ctx, 0, x.shape(), [&](const std::vector<Expr>& i) {
    Expr diag = i[r - 1] - i[r - 2];
    Expr keep = upper ? diag >= Expr(k) : diag <= Expr(k);
    return select(keep, x(i), make_zero(Type(x.dtype())));
  })};
}

// ReverseSequence: along time_axis, the first sequence_lens[b] entries of batch b reversed.
std::vector<te::Tensor> reverse_sequence(OpContext& ctx) {
  const te::Tensor& x = ctx.input(0);
  const te::Tensor& lens = ctx.input(1);
  check_dtype(ctx, lens, "input 1 (sequence_lens)", {DType::Int32, DType::Int64});
  if (x.ndim() < 2) ctx.fail("input {} must have rank 2 or more", shape_text(x.shape()));
  const int batch_axis = normalize_axis(ctx, ctx.node().attr_int("batch_axis", 1), x.ndim(), "attribute 'batch_axis'");
  const int time_axis = normalize_axis(ctx, ctx.node().attr_int("time_axis", 0), x.ndim(), "attribute 'time_axis'");
  if (batch_axis == time_axis) ctx.fail("batch_axis and time_axis are both {}", batch_axis);
  if (lens.ndim() != 1) ctx.fail("sequence_lens {} must have rank 1", shape_text(lens.shape()));
  return {make_output(ctx, 0, x.shape(), [&](const std::vector<Expr>& i) {
    const Expr len = clamp(cast(kIndexType, lens({i[batch_axis]})), Expr(0), x.shape(time_axis));
    const Expr t = i[time_axis];
    return x(with_index(i, time_axis, select(t < len, clamp(len - 1 - t, Expr(0), x.shape(time_axis) - 1), t)));
  })};
}

// CenterCropPad: along each of `axes` (all by default), a centered window of the target size:
// cropped (the window starts at floor((in - out) / 2)) or zero-padded (floor((out - in) / 2)
// before, the odd one after).
std::vector<te::Tensor> center_crop_pad(OpContext& ctx) {
  const te::Tensor& x = ctx.input(0);
  const std::vector<int64_t> target = ctx.constant_ints(1, "shape");
  const int rank = x.ndim();
  std::vector<int64_t> raw_axes = ctx.node().attr_ints("axes", {});
  if (raw_axes.empty()) {
    for (int d = 0; d < rank; ++d) raw_axes.push_back(d);
  }
  if (target.size() != raw_axes.size()) {
    ctx.fail("input 1 ('shape') has {} values for {} axes; expected one per axis", target.size(),
             raw_axes.size());
  }
  std::vector<Expr> shape = x.shape();
  std::vector<Expr> offset(static_cast<size_t>(rank),
                           Expr(0));  // input index = output index + offset
  std::vector<bool> padded(static_cast<size_t>(rank), false);
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (size_t k = 0; k < raw_axes.size(); ++k) {
    const int axis = normalize_axis(ctx, raw_axes[k], rank, "attribute 'axes'");
    if (seen[axis]) ctx.fail("axis {} is listed twice in 'axes'", raw_axes[k]);
    seen[axis] = true;
    auto in = as_const_int(x.shape(axis));
    if (!in)
      ctx.unsupported("dim {} of {} is symbolic; kiln crops and pads known dims", axis,
                      shape_text(x.shape()));
    if (target[k] < 0) ctx.fail("input 1 ('shape') value {} is negative", target[k]);
    shape[axis] = Expr(target[k]);
    offset[axis] = Expr((*in - target[k]) >= 0 ? (*in - target[k]) / 2 : -((target[k] - *in) / 2));
    padded[axis] = target[k] > *in;
  }
  return {make_output(ctx, 0, shape, [&](const std::vector<Expr>& i) {
    std::vector<Expr> at(i.size());
    Expr inside = make_bool(true);
    for (int d = 0; d < rank; ++d) {
      at[d] = i[d] + offset[d];
      if (padded[d]) {
        inside = inside && at[d] >= 0 && at[d] < x.shape(d);
        at[d] = clamp(at[d], Expr(0), x.shape(d) - 1);
      }
    }
    return select(simplify(inside), x(at), make_zero(Type(x.dtype())));
  })};
}

}  // namespace

void register_select_ops(OpTable& table) {
  table.add(OpKind::Concat, concat);
  table.add(OpKind::Slice, slice);
  table.add(OpKind::Split, split);
  table.add(OpKind::Gather, gather);
  table.add(OpKind::GatherElements, gather_elements);
  table.add(OpKind::Expand, expand);
  table.add(OpKind::Tile, tile);
  table.add(OpKind::Pad, pad);
  table.add(OpKind::CenterCropPad, center_crop_pad);
  table.add(OpKind::Trilu, trilu);
  table.add(OpKind::ReverseSequence, reverse_sequence);
}

}  // namespace kiln::ops
