// If, Loop and Scan, resolved at compile time: the tensor-expression IR has no branches and no
// sequential construct, so an If takes the branch its known condition names, and a Loop or Scan
// is unrolled like RNN/LSTM, building its body once per iteration with that iteration's inputs
// bound (OpContext::build_subgraph). A Loop needs its trip count, or a condition known in every
// iteration; a Scan its sequence length (at most kMaxIterations iterations in all). Anything
// else is an UnsupportedError naming the node and what was computed at run time.
#include "Families.h"
#include "IndexMath.h"
#include "kiln/ir/IRPrinter.h"
#include "kiln/ops/Helpers.h"

namespace kiln::ops {
namespace {

using namespace ir;

constexpr int64_t kMaxIterations = 512;

// A scalar the body reads as an input (a Loop's iteration number and condition), with its value
// known so that shapes and nested control flow may depend on it.
BoundValue known_scalar(const OpContext& ctx, DType dtype, int64_t value, const std::string& name) {
  const Expr v = make_const(Type(dtype), static_cast<double>(value));
  te::Tensor t = te::compute(
      ctx.stage_name(name), {}, [v](const std::vector<Expr>&) { return v; }, ctx.node().name);
  return BoundValue{t, std::vector<Expr>{v}};
}

// The single boolean value of a known condition, or nullopt when it is not a constant.
std::optional<bool> known_condition(const OpContext& ctx,
                                    const std::optional<std::vector<Expr>>& known,
                                    const char* what) {
  if (!known) return std::nullopt;
  if (known->size() != 1)
    ctx.fail("{} has {} elements; expected a single boolean", what, known->size());
  if (auto i = as_const_int((*known)[0])) return *i != 0;
  if (auto f = as_const_float((*known)[0])) return *f != 0;
  return std::nullopt;
}

// x with `axis` fixed at `index`: one step's slice of a scanned input.
te::Tensor step_slice(const OpContext& ctx, const te::Tensor& x, int axis, int64_t index,
                      const std::string& name) {
  std::vector<Expr> shape = x.shape();
  shape.erase(shape.begin() + axis);
  return te::compute(
      ctx.stage_name(name), shape,
      [&x, axis, index](const std::vector<Expr>& i) {
        std::vector<Expr> at = i;
        at.insert(at.begin() + axis, Expr(index));
        return x(at);
      },
      ctx.node().name);
}

// The steps' tensors (one shape) stacked along a new axis `axis`; reversed, step t lands at
// index T-1-t. A select over the step per element: O(T) per element, as RNN's Y.
te::Tensor stack_steps(const OpContext& ctx, const std::vector<te::Tensor>& steps, int axis,
                       bool reverse, const std::string& name, const char* what) {
  const int64_t count = static_cast<int64_t>(steps.size());
  const std::vector<Expr> step_shape = simplified(steps[0].shape());
  for (int64_t t = 1; t < count; ++t) {
    const std::vector<Expr> shape = simplified(steps[t].shape());
    bool same = shape.size() == step_shape.size();
    for (size_t d = 0; same && d < shape.size(); ++d) {
      auto a = as_const_int(shape[d]), b = as_const_int(step_shape[d]);
      same = a && b ? *a == *b : ir::to_string(shape[d]) == ir::to_string(step_shape[d]);
    }
    if (!same) {
      ctx.fail(
          "{} has shape {} in iteration 0 but {} in iteration {}; expected one shape for all "
          "iterations",
          what, shape_text(step_shape), shape_text(shape), t);
    }
  }
  std::vector<Expr> shape = step_shape;
  shape.insert(shape.begin() + axis, Expr(count));
  return te::compute(
      ctx.stage_name(name), shape,
      [&steps, axis, reverse, count](const std::vector<Expr>& i) {
        std::vector<Expr> rest = i;
        rest.erase(rest.begin() + axis);
        Expr v;
        for (int64_t t = count - 1; t >= 0; --t) {
          const Expr read = steps[static_cast<size_t>(t)](rest);
          const int64_t at = reverse ? count - 1 - t : t;
          v = v.defined() ? select(i[axis] == Expr(at), read, v) : read;
        }
        return v;
      },
      ctx.node().name);
}

std::vector<te::Tensor> tensors_of(const std::vector<BoundValue>& values) {
  std::vector<te::Tensor> out;
  for (const BoundValue& v : values) out.push_back(v.tensor);
  return out;
}

void check_output_count(const OpContext& ctx, const Graph& body, size_t expected,
                        const char* what) {
  if (body.outputs.size() != expected) {
    ctx.fail("{} has {} outputs; expected {}", what, body.outputs.size(), expected);
  }
}

std::vector<te::Tensor> build_if(OpContext& ctx) {
  const std::optional<bool> cond = known_condition(
      ctx, ctx.is_known(0) ? std::optional(ctx.known_values(0, "cond")) : std::nullopt,
      "the condition (input 0)");
  if (!cond) {
    ctx.unsupported(
        "the condition (input 0) is computed at run time; kiln compiles an If only when its "
        "condition "
        "is known when compiling (the IR has no branches)");
  }
  const char* branch_name = *cond ? "then_branch" : "else_branch";
  const Graph& branch = ctx.node().attr_graph(branch_name);
  if (!branch.inputs.empty())
    ctx.fail("attribute '{}' has {} inputs; expected none", branch_name, branch.inputs.size());
  check_output_count(ctx, branch, ctx.node().outputs.size(), branch_name);
  std::vector<BoundValue> out = ctx.build_subgraph(branch, {});
  for (size_t k = 0; k < out.size(); ++k) ctx.set_known_output(static_cast<int>(k), out[k].known);
  return tensors_of(out);
}

std::vector<te::Tensor> build_loop(OpContext& ctx) {
  const Node& node = ctx.node();
  const Graph& body = node.attr_graph("body");
  if (ctx.num_inputs() < 2)
    ctx.fail("has {} inputs; expected at least 2 (M, cond)", ctx.num_inputs());
  const int carried_count = ctx.num_inputs() - 2;
  if (static_cast<int>(body.inputs.size()) != carried_count + 2) {
    ctx.fail(
        "the body has {} inputs; expected {} (iteration number, condition and {} loop-carried "
        "values)",
        body.inputs.size(), carried_count + 2, carried_count);
  }
  const int scan_count = static_cast<int>(body.outputs.size()) - 1 - carried_count;
  if (scan_count < 0 || static_cast<int>(node.outputs.size()) != carried_count + scan_count) {
    ctx.fail(
        "the body has {} outputs and the node {}; expected the body to have 1 + N + K (condition, "
        "{} "
        "loop-carried values, K scan outputs) and the node N + K",
        body.outputs.size(), node.outputs.size(), carried_count);
  }
  std::optional<int64_t> trip_count;
  if (ctx.has_input(0)) {
    if (!ctx.is_known(0)) {
      ctx.unsupported(
          "the trip count M (input 0) is computed at run time; kiln unrolls a Loop only when its "
          "trip "
          "count or condition is known when compiling (the IR has no sequential construct)");
    }
    const std::vector<int64_t> m = ctx.constant_ints(0, "M");
    if (m.size() != 1)
      ctx.fail("the trip count M (input 0) has {} elements; expected a scalar", m.size());
    trip_count = m[0];
  }
  const bool has_condition = ctx.has_input(1);
  bool running = true;
  if (has_condition) {
    auto c = known_condition(
        ctx, ctx.is_known(1) ? std::optional(ctx.known_values(1, "cond")) : std::nullopt,
        "the condition (input 1)");
    if (!c) {
      ctx.unsupported(
          "the condition (input 1) is computed at run time; kiln unrolls a Loop only when its "
          "condition is known when compiling");
    }
    running = *c;
  }
  if (!trip_count && !has_condition)
    ctx.fail("has neither a trip count (input 0) nor a condition (input 1): it never ends");

  std::vector<BoundValue> carried;
  for (int i = 0; i < carried_count; ++i) carried.push_back(ctx.bound_input(2 + i));
  std::vector<std::vector<te::Tensor>> scans(static_cast<size_t>(scan_count));
  std::vector<std::vector<std::optional<std::vector<Expr>>>> scans_known(
      static_cast<size_t>(scan_count));
  for (int64_t t = 0; running && (!trip_count || t < *trip_count); ++t) {
    if (t >= kMaxIterations) {
      ctx.unsupported("the loop runs more than {} iterations; kiln unrolls loops up to {}",
                      kMaxIterations, kMaxIterations);
    }
    std::vector<BoundValue> in = {
        known_scalar(ctx, DType::Int64, t, "iteration" + std::to_string(t)),
        known_scalar(ctx, DType::Bool, 1, "condition" + std::to_string(t))};
    in.insert(in.end(), carried.begin(), carried.end());
    std::vector<BoundValue> out = ctx.build_subgraph(body, in);
    if (has_condition) {
      auto c = known_condition(ctx, out[0].known, "the body's condition (output 0)");
      if (!c) {
        ctx.unsupported(
            "the body's condition (output 0) is computed at run time in iteration {}; kiln unrolls "
            "a "
            "Loop only when its condition is known when compiling",
            t);
      }
      running = *c;
    }
    carried.assign(out.begin() + 1, out.begin() + 1 + carried_count);
    for (int k = 0; k < scan_count; ++k) {
      scans[k].push_back(out[1 + carried_count + k].tensor);
      scans_known[k].push_back(out[1 + carried_count + k].known);
    }
  }
  std::vector<te::Tensor> results;
  for (int i = 0; i < carried_count; ++i) {
    ctx.set_known_output(i, carried[i].known);
    results.push_back(carried[i].tensor);
  }
  for (int k = 0; k < scan_count; ++k) {
    if (scans[k].empty()) {
      ctx.unsupported(
          "scan output {} of a loop that runs no iteration (its shape comes from the body's types, "
          "which kiln does not read)",
          k);
    }
    results.push_back(
        stack_steps(ctx, scans[k], 0, false, "scan" + std::to_string(k), "the body's scan output"));
    std::vector<Expr> known;  // the steps' known values, concatenated
    for (const auto& step : scans_known[k]) {
      if (!step) {
        known.clear();
        break;
      }
      known.insert(known.end(), step->begin(), step->end());
    }
    if (!known.empty()) ctx.set_known_output(carried_count + k, known);
  }
  return results;
}

// Scan's attribute `name`: `count` integers, all 0 when absent.
std::vector<int64_t> scan_attribute(const OpContext& ctx, const char* name, size_t count) {
  std::vector<int64_t> values = ctx.node().attr_ints(name, std::vector<int64_t>(count, 0));
  if (values.size() != count)
    ctx.fail("attribute '{}' has {} values; expected {}", name, values.size(), count);
  return values;
}

// One sequence of Scan (opset 9+: the whole inputs; opset 8: one batch entry): runs the body over
// `steps` steps and returns the final states followed by the stacked scan outputs.
std::vector<te::Tensor> scan_sequence(
    OpContext& ctx, const Graph& body, std::vector<BoundValue> states,
    const std::vector<te::Tensor>& scanned, const std::vector<int64_t>& in_axes,
    const std::vector<int64_t>& in_reverse, const std::vector<int64_t>& out_axes,
    const std::vector<int64_t>& out_reverse, int64_t steps, const std::string& prefix) {
  const size_t state_count = states.size();
  const size_t output_count = body.outputs.size() - state_count;
  std::vector<std::vector<te::Tensor>> outputs(output_count);
  for (int64_t t = 0; t < steps; ++t) {
    std::vector<BoundValue> in = states;
    for (size_t j = 0; j < scanned.size(); ++j) {
      const int64_t at = in_reverse[j] ? steps - 1 - t : t;
      in.push_back(
          BoundValue{step_slice(ctx, scanned[j], static_cast<int>(in_axes[j]), at,
                                prefix + "in" + std::to_string(j) + "_" + std::to_string(t)),
                     std::nullopt});
    }
    std::vector<BoundValue> out = ctx.build_subgraph(body, in);
    states.assign(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(state_count));
    for (size_t k = 0; k < output_count; ++k) outputs[k].push_back(out[state_count + k].tensor);
  }
  std::vector<te::Tensor> results = tensors_of(states);
  for (size_t k = 0; k < output_count; ++k) {
    if (outputs[k].empty()) ctx.unsupported("scan output {} of a scan over 0 steps", k);
    const int rank = outputs[k][0].ndim() + 1;
    const int axis = normalize_axis(ctx, out_axes[k], rank, "scan_output_axes");
    results.push_back(stack_steps(ctx, outputs[k], axis, out_reverse[k] != 0,
                                  prefix + "out" + std::to_string(k), "the body's scan output"));
  }
  return results;
}

int64_t sequence_length(const OpContext& ctx, const std::vector<te::Tensor>& scanned,
                        const std::vector<int64_t>& axes) {
  std::optional<int64_t> steps;
  for (size_t j = 0; j < scanned.size(); ++j) {
    auto n = as_const_int(scanned[j].shape(static_cast<int>(axes[j])));
    if (!n) {
      ctx.unsupported(
          "the sequence length of scan input {} ({}) is symbolic; kiln unrolls a Scan over a known "
          "length",
          j, shape_text(scanned[j].shape()));
    }
    if (steps && *steps != *n)
      ctx.fail("scan inputs have sequence lengths {} and {}; expected one length", *steps, *n);
    steps = *n;
  }
  if (!steps) ctx.fail("has no scan input (attribute 'num_scan_inputs' must be at least 1)");
  if (*steps > kMaxIterations) {
    ctx.unsupported("a scan over {} steps; kiln unrolls at most {}", *steps, kMaxIterations);
  }
  return *steps;
}

std::vector<te::Tensor> build_scan(OpContext& ctx) {
  const Node& node = ctx.node();
  const Graph& body = node.attr_graph("body");
  if (!node.has_attribute("num_scan_inputs")) ctx.fail("attribute 'num_scan_inputs' is required");
  const int scan_inputs = static_cast<int>(node.attr_int("num_scan_inputs", 0));
  const bool batched = ctx.opset() < 9;  // Scan-8: a batch axis 0 and optional sequence_lens first
  const int first = batched ? 1 : 0;
  const int state_count = ctx.num_inputs() - first - scan_inputs;
  if (scan_inputs < 1 || state_count < 0) {
    ctx.fail("has {} inputs and num_scan_inputs = {}; expected 1 <= num_scan_inputs <= {}",
             ctx.num_inputs(), scan_inputs, ctx.num_inputs() - first);
  }
  if (static_cast<int>(body.inputs.size()) != state_count + scan_inputs) {
    ctx.fail("the body has {} inputs; expected {} ({} states and {} scan inputs)",
             body.inputs.size(), state_count + scan_inputs, state_count, scan_inputs);
  }
  const int output_count = static_cast<int>(body.outputs.size()) - state_count;
  if (output_count < 0 || node.outputs.size() != body.outputs.size()) {
    ctx.fail(
        "the body has {} outputs and the node {}; expected both to have the {} states and then the "
        "scan outputs",
        body.outputs.size(), node.outputs.size(), state_count);
  }
  std::vector<te::Tensor> scanned;
  for (int j = 0; j < scan_inputs; ++j) scanned.push_back(ctx.input(first + state_count + j));
  const std::vector<int64_t> in_reverse = scan_attribute(
      ctx, batched ? "directions" : "scan_input_directions", static_cast<size_t>(scan_inputs));
  std::vector<int64_t> in_axes(static_cast<size_t>(scan_inputs), batched ? 1 : 0);
  std::vector<int64_t> out_axes(static_cast<size_t>(output_count), 0);
  std::vector<int64_t> out_reverse(static_cast<size_t>(output_count), 0);
  if (!batched) {
    in_axes = scan_attribute(ctx, "scan_input_axes", static_cast<size_t>(scan_inputs));
    for (int j = 0; j < scan_inputs; ++j) {
      in_axes[j] = normalize_axis(ctx, in_axes[j], scanned[j].ndim(), "scan_input_axes");
    }
    out_axes = scan_attribute(ctx, "scan_output_axes", static_cast<size_t>(output_count));
    out_reverse = scan_attribute(ctx, "scan_output_directions", static_cast<size_t>(output_count));
  }
  for (int j = 0; j < scan_inputs; ++j) {
    if (in_axes[j] >= scanned[j].ndim())
      ctx.fail("scan input {} {} has no axis {}", j, shape_text(scanned[j].shape()), in_axes[j]);
  }
  const int64_t steps = sequence_length(ctx, scanned, in_axes);
  if (!batched) {
    std::vector<BoundValue> states;
    for (int i = 0; i < state_count; ++i) states.push_back(ctx.bound_input(i));
    return scan_sequence(ctx, body, states, scanned, in_axes, in_reverse, out_axes, out_reverse,
                         steps, "");
  }
  // Scan-8: every input has the batch axis 0; each batch entry is its own sequence.
  auto batch = as_const_int(scanned[0].shape(0));
  if (!batch)
    ctx.unsupported("the batch size of scan input 0 ({}) is symbolic",
                    shape_text(scanned[0].shape()));
  if (*batch * steps > kMaxIterations) {
    ctx.unsupported("a scan over {} x {} steps; kiln unrolls at most {}", *batch, steps,
                    kMaxIterations);
  }
  if (ctx.has_input(0)) {
    const std::vector<int64_t> lens = ctx.constant_ints(0, "sequence_lens");
    for (int64_t n : lens) {
      if (n != steps)
        ctx.unsupported(
            "sequence_lens with a sequence of {} of {} steps; kiln scans whole sequences", n,
            steps);
    }
  }
  std::vector<std::vector<te::Tensor>> per_batch(static_cast<size_t>(state_count + output_count));
  for (int64_t b = 0; b < *batch; ++b) {
    const std::string prefix = "b" + std::to_string(b) + "_";
    std::vector<BoundValue> states;
    for (int i = 0; i < state_count; ++i) {
      states.push_back(BoundValue{
          step_slice(ctx, ctx.input(first + i), 0, b, prefix + "state" + std::to_string(i)),
          std::nullopt});
    }
    std::vector<te::Tensor> entry_inputs;
    for (int j = 0; j < scan_inputs; ++j) {
      entry_inputs.push_back(
          step_slice(ctx, scanned[j], 0, b, prefix + "input" + std::to_string(j)));
    }
    const std::vector<int64_t> entry_axes(static_cast<size_t>(scan_inputs), 0);
    std::vector<te::Tensor> out = scan_sequence(ctx, body, states, entry_inputs, entry_axes,
                                                in_reverse, out_axes, out_reverse, steps, prefix);
    for (size_t k = 0; k < out.size(); ++k) per_batch[k].push_back(out[k]);
  }
  std::vector<te::Tensor> results;
  for (size_t k = 0; k < per_batch.size(); ++k) {
    results.push_back(
        stack_steps(ctx, per_batch[k], 0, false, "batch" + std::to_string(k), "a scan result"));
  }
  return results;
}

}  // namespace

void register_control_flow(OpTable& table) {
  table.add(OpKind::If, build_if);
  table.add(OpKind::Loop, build_loop);
  table.add(OpKind::Scan, build_scan);
}

}  // namespace kiln::ops
