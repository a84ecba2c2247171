// RNN, GRU and LSTM as a chain unrolled over time: the tensor-expression IR has no sequential
// construct, so each step is its own stages (a hidden-state matrix product, then the gate math)
// reading the previous step's state tensors. The input projections of all steps are one stage.
// The sequence length must be a compile-time constant (at most kMaxSteps steps; symbolic or
// longer sequences are unsupported). Y stacks the steps' hidden states (a select over the step
// per time index). sequence_lens is supported for forward-only layers: past a sequence's length
// the state is carried and Y is 0. Math in float32 (float64 for float64 input).
#include "Families.h"
#include "IndexMath.h"
#include "kiln/ops/Helpers.h"

namespace kiln::ops {
namespace {

using namespace ir;

constexpr int64_t kMaxSteps = 512;

enum class Cell { Rnn, Gru, Lstm };

struct Activation {
  std::string name;
  double alpha = 0, beta = 0;
};

Expr apply(const OpContext& ctx, const Activation& a, const Expr& x) {
  const Type t = x.type();
  auto c = [&](double v) { return make_const(t, v); };
  if (a.name == "Tanh") return call(Intrinsic::Tanh, x);
  if (a.name == "Sigmoid") return c(1) / (c(1) + call(Intrinsic::Exp, -x));
  if (a.name == "Relu") return max(x, c(0));
  if (a.name == "Affine") return c(a.alpha) * x + c(a.beta);
  if (a.name == "LeakyRelu") return select(x < c(0), c(a.alpha) * x, x);
  if (a.name == "ThresholdedRelu") return select(x > c(a.alpha), x, c(0));
  if (a.name == "ScaledTanh") return c(a.alpha) * call(Intrinsic::Tanh, c(a.beta) * x);
  if (a.name == "HardSigmoid") return max(c(0), min(c(1), c(a.alpha) * x + c(a.beta)));
  if (a.name == "Elu") return select(x < c(0), c(a.alpha) * (call(Intrinsic::Exp, x) - c(1)), x);
  if (a.name == "Softsign") return x / (c(1) + call(Intrinsic::Abs, x));
  if (a.name == "Softplus") return call(Intrinsic::Log, c(1) + call(Intrinsic::Exp, x));
  ctx.fail("activation '{}' is not an ONNX recurrent activation (Relu, Tanh, Sigmoid, Affine, LeakyRelu, "
           "ThresholdedRelu, ScaledTanh, HardSigmoid, Elu, Softsign, Softplus)", a.name);
}

// Per activation, the default alpha/beta of the ONNX spec when the attribute lists none.
Activation make_activation(const std::string& name, std::optional<double> alpha, std::optional<double> beta) {
  Activation a{name};
  if (name == "LeakyRelu") a.alpha = 0.01;
  if (name == "ThresholdedRelu" || name == "Elu") a.alpha = 1.0;
  if (name == "HardSigmoid") {
    a.alpha = 0.2;
    a.beta = 0.5;
  }
  if (name == "ScaledTanh" || name == "Affine") a.alpha = a.beta = 1.0;
  if (alpha) a.alpha = *alpha;
  if (beta) a.beta = *beta;
  return a;
}

struct Layer {
  Cell cell;
  int gates = 1;       // 1, 3 (z r h), 4 (i o f c)
  int activations = 1; // per direction
  int64_t hidden = 0, batch = 0, steps = 0, input = 0;
  int dirs = 1;
  bool reverse = false;  // the only direction runs backward
  int layout = 0;
  std::optional<double> clip;
  bool linear_before_reset = false;
  std::vector<Activation> acts;  // activations * dirs
  Type acc;
};

int64_t const_dim(const OpContext& ctx, const te::Tensor& t, int d, const char* what) {
  auto n = as_const_int(t.shape(d));
  if (!n) ctx.unsupported("{} (dim {} of {}) is symbolic; kiln unrolls recurrences over known lengths", what, d, shape_text(t.shape()));
  return *n;
}

std::vector<te::Tensor> build_recurrent(OpContext& ctx, Cell cell) {
  const Node& node = ctx.node();
  const te::Tensor& x = ctx.input(0);
  const te::Tensor& w = ctx.input(1);
  const te::Tensor& r = ctx.input(2);
  check_dtype(ctx, x, "input 0 (X)", kFloatTypes);
  check_same_dtype(ctx, {x, w, r});
  Layer L;
  L.cell = cell;
  L.gates = cell == Cell::Rnn ? 1 : cell == Cell::Gru ? 3 : 4;
  L.activations = cell == Cell::Rnn ? 1 : cell == Cell::Gru ? 2 : 3;
  L.layout = static_cast<int>(node.attr_int("layout", 0));
  if (x.ndim() != 3) ctx.fail("X {} must have rank 3", shape_text(x.shape()));
  const int seq_axis = L.layout == 0 ? 0 : 1;
  L.steps = const_dim(ctx, x, seq_axis, "the sequence length");
  L.batch = const_dim(ctx, x, 1 - seq_axis, "the batch size");
  L.input = const_dim(ctx, x, 2, "the input size");
  if (L.steps > kMaxSteps) ctx.unsupported("a sequence of {} steps (kiln unrolls at most {})", L.steps, kMaxSteps);
  if (!node.has_attribute("hidden_size")) ctx.fail("attribute 'hidden_size' is required");
  L.hidden = node.attr_int("hidden_size", 0);
  const std::string direction = node.attr_string("direction", "forward");
  if (direction == "bidirectional") L.dirs = 2;
  else if (direction == "reverse") L.reverse = true;
  else if (direction != "forward") ctx.fail("attribute 'direction' is '{}', expected forward, reverse or bidirectional", direction);
  if (node.has_attribute("clip")) L.clip = node.attr_float("clip", 0);
  L.linear_before_reset = node.attr_int("linear_before_reset", 0) != 0;
  L.acc = x.dtype() == DType::Float64 ? Type(DType::Float64) : Type(DType::Float32);
  const int64_t H = L.hidden, G = L.gates;
  if (w.ndim() != 3 || const_dim(ctx, w, 0, "W's directions") != L.dirs || const_dim(ctx, w, 1, "W's rows") != G * H ||
      const_dim(ctx, w, 2, "W's columns") != L.input) {
    ctx.fail("W {} must have shape [{}, {}, {}]", shape_text(w.shape()), L.dirs, G * H, L.input);
  }
  if (r.ndim() != 3 || const_dim(ctx, r, 0, "R's directions") != L.dirs || const_dim(ctx, r, 1, "R's rows") != G * H ||
      const_dim(ctx, r, 2, "R's columns") != H) {
    ctx.fail("R {} must have shape [{}, {}, {}]", shape_text(r.shape()), L.dirs, G * H, H);
  }
  // Activations: the attribute lists activations * dirs names, else the cell's defaults.
  std::vector<std::string> names;
  if (auto it = node.attributes.find("activations"); it != node.attributes.end()) names = it->second.strings;
  if (names.empty()) {
    const std::vector<std::string> defaults = cell == Cell::Rnn   ? std::vector<std::string>{"Tanh"}
                                              : cell == Cell::Gru ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                                                  : std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"};
    for (int d = 0; d < L.dirs; ++d) names.insert(names.end(), defaults.begin(), defaults.end());
  }
  if (static_cast<int>(names.size()) != L.activations * L.dirs) {
    ctx.fail("attribute 'activations' lists {} names, expected {}", names.size(), L.activations * L.dirs);
  }
  const std::vector<double> alphas = node.attr_floats("activation_alpha", {});
  const std::vector<double> betas = node.attr_floats("activation_beta", {});
  for (size_t k = 0; k < names.size(); ++k) {
    L.acts.push_back(make_activation(names[k], k < alphas.size() ? std::optional(alphas[k]) : std::nullopt,
                                     k < betas.size() ? std::optional(betas[k]) : std::nullopt));
  }
  const te::Tensor b = ctx.has_input(3) ? ctx.input(3) : te::Tensor();
  const te::Tensor lens = ctx.has_input(4) ? ctx.input(4) : te::Tensor();
  const te::Tensor h0 = ctx.has_input(5) ? ctx.input(5) : te::Tensor();
  const te::Tensor c0 = cell == Cell::Lstm && ctx.has_input(6) ? ctx.input(6) : te::Tensor();
  const te::Tensor p = cell == Cell::Lstm && ctx.has_input(7) ? ctx.input(7) : te::Tensor();
  if (lens.defined() && (L.dirs == 2 || L.reverse)) {
    ctx.unsupported("sequence_lens with a reverse or bidirectional layer");
  }
  const Type acc = L.acc;
  auto c = [&](double v) { return make_const(acc, v); };
  auto clipped = [&](const Expr& v) { return L.clip ? max(min(v, c(*L.clip)), c(-*L.clip)) : v; };
  auto bias = [&](int d, const Expr& index) { return b.defined() ? cast(acc, b({Expr(d), index})) : c(0); };
  // The state tensors read as [batch, hidden] for direction d (layout 1: [batch, dirs, hidden]).
  auto initial = [&](const te::Tensor& t, int d, const std::string& name) {
    return te::compute(ctx.stage_name(name + std::to_string(d)), {Expr(L.batch), Expr(H)}, [&](const std::vector<Expr>& i) {
      if (!t.defined()) return c(0);
      return cast(acc, L.layout == 0 ? t({Expr(d), i[0], i[1]}) : t({i[0], Expr(d), i[1]}));
    });
  };

  std::vector<std::vector<te::Tensor>> hs(L.dirs);  // hidden state after each step, per direction
  std::vector<te::Tensor> last_h(L.dirs), last_c(L.dirs);
  for (int d = 0; d < L.dirs; ++d) {
    const bool backward = L.reverse || d == 1;
    const std::string tag = "d" + std::to_string(d);
    const Activation* act = &L.acts[static_cast<size_t>(d * L.activations)];
    // All steps' input projections: xw[t, b, g] = X[t, b, :] . W[d, g, :] + Wb[g].
    const IterVar k = te::reduce_axis(Expr(L.input), ctx.stage_name("k" + tag));
    const te::Tensor xw = te::compute(
        ctx.stage_name("xw" + tag), {Expr(L.steps), Expr(L.batch), Expr(G * H)},
        [&](const std::vector<Expr>& i) {
          const Expr xv = L.layout == 0 ? x({i[0], i[1], k.var}) : x({i[1], i[0], k.var});
          return te::sum(cast(acc, xv) * cast(acc, w({Expr(d), i[2], k.var})), {k});
        },
        node.describe());
    te::Tensor h = initial(h0, d, "h0_"), cs = initial(c0, d, "c0_");
    for (int64_t s = 0; s < L.steps; ++s) {
      const int64_t t = backward ? L.steps - 1 - s : s;
      const std::string st = tag + "_t" + std::to_string(t);
      // hr[b, g] = H[b, :] . R[d, g, :] (+ Rb[g]) for the gates that read the plain state.
      const int64_t hr_rows = cell == Cell::Gru && !L.linear_before_reset ? 2 * H : G * H;
      const IterVar j = te::reduce_axis(Expr(H), ctx.stage_name("j" + st));
      const te::Tensor hprev = h;
      const te::Tensor hr = te::compute(
          ctx.stage_name("hr" + st), {Expr(L.batch), Expr(hr_rows)},
          [&](const std::vector<Expr>& i) {
            return te::sum(hprev({i[0], j.var}) * cast(acc, r({Expr(d), i[1], j.var})), {j});
          },
          node.describe());
      auto gate = [&](const std::vector<Expr>& i, int g) {  // pre-activation of gate g at [b, h]
        const Expr row = Expr(g * H) + i[1];
        return xw({Expr(t), i[0], row}) + bias(d, row) + hr({i[0], row}) + bias(d, Expr(G * H) + row);
      };
      te::Tensor next_h, next_c;
      if (cell == Cell::Rnn) {
        next_h = te::compute(ctx.stage_name("h" + st), {Expr(L.batch), Expr(H)}, [&](const std::vector<Expr>& i) {
          return apply(ctx, act[0], clipped(gate(i, 0)));
        });
      } else if (cell == Cell::Gru) {
        // Gates z, r, h. With linear_before_reset = 0 the candidate reads (r * H) . Rh.
        const te::Tensor reset = te::compute(ctx.stage_name("r" + st), {Expr(L.batch), Expr(H)}, [&](const std::vector<Expr>& i) {
          return apply(ctx, act[0], clipped(gate(i, 1)));
        });
        te::Tensor rh;
        if (!L.linear_before_reset) {
          const IterVar m = te::reduce_axis(Expr(H), ctx.stage_name("m" + st));
          rh = te::compute(ctx.stage_name("rh" + st), {Expr(L.batch), Expr(H)}, [&](const std::vector<Expr>& i) {
            return te::sum(reset({i[0], m.var}) * hprev({i[0], m.var}) * cast(acc, r({Expr(d), Expr(2 * H) + i[1], m.var})),
                           {m});
          });
        }
        next_h = te::compute(ctx.stage_name("h" + st), {Expr(L.batch), Expr(H)}, [&](const std::vector<Expr>& i) {
          const Expr z = apply(ctx, act[0], clipped(gate(i, 0)));
          const Expr row = Expr(2 * H) + i[1];
          const Expr recurrent = L.linear_before_reset
                                     ? reset(i) * (hr({i[0], row}) + bias(d, Expr(G * H) + row))
                                     : rh(i) + bias(d, Expr(G * H) + row);
          const Expr candidate = apply(ctx, act[1], clipped(xw({Expr(t), i[0], row}) + bias(d, row) + recurrent));
          return (c(1) - z) * candidate + z * hprev(i);
        });
      } else {
        // Gates i, o, f, c; peepholes P = [Pi, Po, Pf].
        const te::Tensor cprev = cs;
        auto peep = [&](int k2, const Expr& hidx, const Expr& state) {
          return p.defined() ? cast(acc, p({Expr(d), Expr(k2 * H) + hidx})) * state : c(0);
        };
        next_c = te::compute(ctx.stage_name("c" + st), {Expr(L.batch), Expr(H)}, [&](const std::vector<Expr>& i) {
          const Expr in = apply(ctx, act[0], clipped(gate(i, 0) + peep(0, i[1], cprev(i))));
          const Expr forget = apply(ctx, act[0], clipped(gate(i, 2) + peep(2, i[1], cprev(i))));
          const Expr candidate = apply(ctx, act[1], clipped(gate(i, 3)));
          return forget * cprev(i) + in * candidate;
        });
        const te::Tensor cnew = next_c;
        next_h = te::compute(ctx.stage_name("h" + st), {Expr(L.batch), Expr(H)}, [&](const std::vector<Expr>& i) {
          const Expr out = apply(ctx, act[0], clipped(gate(i, 1) + peep(1, i[1], cnew(i))));
          return out * apply(ctx, act[2], cnew(i));
        });
      }
      if (lens.defined()) {  // past the sequence's length the state is carried
        auto carry = [&](const te::Tensor& fresh, const te::Tensor& old, const std::string& name) {
          return te::compute(ctx.stage_name(name + st), {Expr(L.batch), Expr(H)}, [&](const std::vector<Expr>& i) {
            return select(Expr(t) < cast(kIndexType, lens({i[0]})), fresh(i), old(i));
          });
        };
        next_h = carry(next_h, hprev, "hk");
        if (next_c.defined()) next_c = carry(next_c, cs, "ck");
      }
      h = next_h;
      if (next_c.defined()) cs = next_c;
      hs[d].push_back(h);
    }
    last_h[d] = h;
    last_c[d] = cs;
  }
  const DType dtype = x.dtype();
  // Y: [steps, dirs, batch, hidden] (layout 1: [batch, steps, dirs, hidden]).
  std::vector<te::Tensor> out;
  std::vector<Expr> y_shape = L.layout == 0 ? std::vector<Expr>{Expr(L.steps), Expr(L.dirs), Expr(L.batch), Expr(H)}
                                            : std::vector<Expr>{Expr(L.batch), Expr(L.steps), Expr(L.dirs), Expr(H)};
  out.push_back(te::compute(
      ctx.output_name(0), y_shape,
      [&](const std::vector<Expr>& i) {
        const Expr t = L.layout == 0 ? i[0] : i[1], d = L.layout == 0 ? i[1] : i[2], bb = L.layout == 0 ? i[2] : i[0];
        const std::vector<Expr> at = {bb, i[3]};
        Expr v;
        for (int dd = 0; dd < L.dirs; ++dd) {
          const bool backward = L.reverse || dd == 1;
          for (int64_t s = 0; s < L.steps; ++s) {
            const int64_t tt = backward ? L.steps - 1 - s : s;
            Expr value = hs[dd][s](at);
            if (lens.defined()) value = select(Expr(tt) < cast(kIndexType, lens({bb})), value, c(0));
            v = v.defined() ? select(t == Expr(tt) && d == Expr(dd), value, v) : value;
          }
        }
        return cast(Type(dtype), v);
      },
      node.describe()));
  auto state_output = [&](int index, const std::vector<te::Tensor>& last) {
    std::vector<Expr> shape = L.layout == 0 ? std::vector<Expr>{Expr(L.dirs), Expr(L.batch), Expr(H)}
                                            : std::vector<Expr>{Expr(L.batch), Expr(L.dirs), Expr(H)};
    return te::compute(
        ctx.output_name(index), shape,
        [&](const std::vector<Expr>& i) {
          const Expr d = L.layout == 0 ? i[0] : i[1], bb = L.layout == 0 ? i[1] : i[0];
          Expr v = last[0]({bb, i[2]});
          if (L.dirs == 2) v = select(d == 1, last[1]({bb, i[2]}), v);
          return cast(Type(dtype), v);
        },
        node.describe());
  };
  out.push_back(state_output(1, last_h));
  if (cell == Cell::Lstm) out.push_back(state_output(2, last_c));
  return out;
}

std::vector<te::Tensor> build_rnn(OpContext& ctx) { return build_recurrent(ctx, Cell::Rnn); }
std::vector<te::Tensor> build_gru(OpContext& ctx) { return build_recurrent(ctx, Cell::Gru); }
std::vector<te::Tensor> build_lstm(OpContext& ctx) { return build_recurrent(ctx, Cell::Lstm); }

}  // namespace

void register_recurrent(OpTable& table) {
  table.add(OpKind::RNN, build_rnn);
  table.add(OpKind::GRU, build_gru);
  table.add(OpKind::LSTM, build_lstm);
}

}  // namespace kiln::ops
