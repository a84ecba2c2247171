#include "kiln/runtime/Interpreter.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <unordered_map>

#include "kiln/ir/IR.h"
#include "kiln/ir/IRPrinter.h"
#include "kiln/ir/Simplify.h"
#include "kiln/support/Error.h"

namespace kiln {
namespace {

using namespace ir;

// A scalar value: `i` for integral and bool types, `f` for floats.
struct Value {
  int64_t i = 0;
  double f = 0;
};

double to_double(const Value& v, Type t) {
  if (t.is_float()) return v.f;
  if (t.dtype == DType::UInt64) return static_cast<double>(static_cast<uint64_t>(v.i));
  return static_cast<double>(v.i);
}

// Float to integer conversion as C does for in-range values; out-of-range values saturate and NaN
// becomes 0 (C leaves both undefined; saturating keeps the reference deterministic).
int64_t float_to_int(double d, DType t) {
  if (std::isnan(d)) return 0;
  if (t == DType::UInt64) {
    if (d <= 0) return 0;
    if (d >= 18446744073709551615.0) return -1;
    return static_cast<int64_t>(static_cast<uint64_t>(d));
  }
  if (d >= 9223372036854775807.0) return std::numeric_limits<int64_t>::max();
  if (d <= -9223372036854775808.0) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(d);
}

template <typename T>
const T& node(const Expr& e) {
  return *static_cast<const T*>(e.get());
}

class Interpreter {
 public:
  void bind(const Expr& var, Value v) { vars_[var.get()] = v; }
  void bind_buffer(const Buffer& b, HostTensor* t) { buffers_[b.get()] = t; }

  Value eval(const Expr& e) {
    const Type t = e.type();
    KILN_ASSERT(t.is_scalar(), "the interpreter runs scalar code only, got {}", to_string(e));
    switch (e.kind()) {
      case NodeKind::IntImm: return Value{node<IntImm>(e).value, 0};
      case NodeKind::FloatImm: return Value{0, node<FloatImm>(e).value};
      case NodeKind::Variable: {
        auto it = vars_.find(e.get());
        KILN_ASSERT(it != vars_.end(), "unbound variable {}", node<Variable>(e).name);
        return it->second;
      }
      case NodeKind::Cast: return eval_cast(node<Cast>(e).value, t);
      case NodeKind::Add: return arith(e, [](double a, double b) { return a + b; }, [](int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b)); });
      case NodeKind::Sub: return arith(e, [](double a, double b) { return a - b; }, [](int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b)); });
      case NodeKind::Mul: return arith(e, [](double a, double b) { return a * b; }, [](int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b)); });
      case NodeKind::Div: return eval_div_mod<Div>(e, true);
      case NodeKind::Mod: return eval_div_mod<Mod>(e, false);
      case NodeKind::Min: return min_max<Min>(e, true);
      case NodeKind::Max: return min_max<Max>(e, false);
      case NodeKind::EQ: return compare<EQ>(e, [](auto a, auto b) { return a == b; });
      case NodeKind::NE: return compare<NE>(e, [](auto a, auto b) { return a != b; });
      case NodeKind::LT: return compare<LT>(e, [](auto a, auto b) { return a < b; });
      case NodeKind::LE: return compare<LE>(e, [](auto a, auto b) { return a <= b; });
      case NodeKind::GT: return compare<GT>(e, [](auto a, auto b) { return a > b; });
      case NodeKind::GE: return compare<GE>(e, [](auto a, auto b) { return a >= b; });
      case NodeKind::And: return Value{eval(node<And>(e).a).i && eval(node<And>(e).b).i, 0};
      case NodeKind::Or: return Value{eval(node<Or>(e).a).i || eval(node<Or>(e).b).i, 0};
      case NodeKind::Not: return Value{!eval(node<Not>(e).a).i, 0};
      case NodeKind::Select: {
        const Select& s = node<Select>(e);
        return eval(s.condition).i ? eval(s.true_value) : eval(s.false_value);
      }
      case NodeKind::Call: return eval_call(node<Call>(e));
      case NodeKind::Load: {
        const Load& l = node<Load>(e);
        HostTensor* buf = buffer(l.buffer);
        const int64_t i = checked_index(l.buffer, buf, eval(l.index).i);
        return t.is_float() ? Value{0, buf->get_double(i)} : Value{buf->get_int(i), 0};
      }
      case NodeKind::Let: {
        const Let& l = node<Let>(e);
        bind(l.var, eval(l.value));
        return eval(l.body);
      }
      default: internal_error(std::string("the interpreter cannot evaluate ") + node_kind_name(e.kind()));
    }
  }

  void exec(const Stmt& s) {
    switch (s.kind()) {
      case NodeKind::For: {
        const For& f = *s.as<For>();
        const int64_t lo = eval(f.min).i, n = eval(f.extent).i;
        for (int64_t i = lo; i < lo + n; ++i) {
          bind(f.var, Value{i, 0});
          exec(f.body);
        }
        return;
      }
      case NodeKind::Store: {
        const Store& st = *s.as<Store>();
        HostTensor* buf = buffer(st.buffer);
        const Value v = eval(st.value);
        const int64_t i = checked_index(st.buffer, buf, eval(st.index).i);
        if (st.value.type().is_float()) buf->set_double(i, v.f);
        else buf->set_int(i, v.i);
        return;
      }
      case NodeKind::Seq:
        for (const Stmt& x : s.as<Seq>()->stmts) exec(x);
        return;
      case NodeKind::LetStmt: {
        const LetStmt& l = *s.as<LetStmt>();
        bind(l.var, eval(l.value));
        exec(l.body);
        return;
      }
      case NodeKind::IfThenElse: {
        const IfThenElse& c = *s.as<IfThenElse>();
        if (eval(c.condition).i) exec(c.then_case);
        else if (c.else_case.defined()) exec(c.else_case);
        return;
      }
      case NodeKind::Allocate: {
        const Allocate& a = *s.as<Allocate>();
        std::vector<int64_t> shape;
        for (const Expr& d : a.buffer->shape) shape.push_back(eval(d).i);
        HostTensor storage(a.buffer->dtype, shape);
        bind_buffer(a.buffer, &storage);
        exec(a.body);
        buffers_.erase(a.buffer.get());
        return;
      }
      case NodeKind::Evaluate: eval(s.as<Evaluate>()->value); return;
      case NodeKind::TemplateContraction: exec(s.as<TemplateContraction>()->reference); return;
      case NodeKind::TemplateAttention: exec(s.as<TemplateAttention>()->reference); return;
      default: internal_error(std::string("the interpreter cannot run ") + node_kind_name(s.kind()));
    }
  }

 private:
  HostTensor* buffer(const Buffer& b) {
    auto it = buffers_.find(b.get());
    KILN_ASSERT(it != buffers_.end(), "buffer {} is not bound", b->name);
    return it->second;
  }

  static int64_t checked_index(const Buffer& b, const HostTensor* t, int64_t i) {
    KILN_ASSERT(i >= 0 && i < t->num_elements(), "index {} out of bounds of buffer {} ({} elements)", i, b->name,
                t->num_elements());
    return i;
  }

  Value eval_cast(const Expr& v, Type to) {
    const Type from = v.type();
    const Value x = eval(v);
    if (to.is_float()) return Value{0, cast_to_type(to.dtype, to_double(x, from))};
    if (to.is_bool()) return Value{from.is_float() ? x.f != 0 : x.i != 0, 0};
    if (from.is_float()) return Value{wrap_to_type(to.dtype, float_to_int(x.f, to.dtype)), 0};
    return Value{wrap_to_type(to.dtype, x.i), 0};
  }

  template <typename F, typename I>
  Value arith(const Expr& e, F float_op, I int_op) {
    const Expr& a = static_cast<const BinaryNode<Add, NodeKind::Add>*>(e.get())->a;
    const Expr& b = static_cast<const BinaryNode<Add, NodeKind::Add>*>(e.get())->b;
    const Value x = eval(a), y = eval(b);
    const Type t = e.type();
    if (t.is_float()) return Value{0, round_to_type(t.dtype, float_op(x.f, y.f))};
    return Value{wrap_to_type(t.dtype, int_op(x.i, y.i)), 0};
  }

  template <typename T>
  Value eval_div_mod(const Expr& e, bool is_div) {
    const T& op = node<T>(e);
    const Value x = eval(op.a), y = eval(op.b);
    const Type t = e.type();
    if (t.is_float()) return Value{0, round_to_type(t.dtype, is_div ? x.f / y.f : std::fmod(x.f, y.f))};
    if (y.i == 0) return Value{0, 0};  // undefined in C; kept deterministic
    if (t.dtype == DType::UInt64) {
      const uint64_t a = static_cast<uint64_t>(x.i), b = static_cast<uint64_t>(y.i);
      return Value{static_cast<int64_t>(is_div ? a / b : a % b), 0};
    }
    if (y.i == -1) return Value{is_div ? wrap_to_type(t.dtype, static_cast<int64_t>(0 - static_cast<uint64_t>(x.i))) : 0, 0};
    return Value{wrap_to_type(t.dtype, is_div ? x.i / y.i : x.i % y.i), 0};
  }

  template <typename T>
  Value min_max(const Expr& e, bool is_min) {
    const T& op = node<T>(e);
    const Value x = eval(op.a), y = eval(op.b);
    const Type t = e.type();
    if (t.is_float()) return Value{0, is_min ? std::fmin(x.f, y.f) : std::fmax(x.f, y.f)};
    if (t.dtype == DType::UInt64) {
      const uint64_t a = static_cast<uint64_t>(x.i), b = static_cast<uint64_t>(y.i);
      return Value{static_cast<int64_t>(is_min ? std::min(a, b) : std::max(a, b)), 0};
    }
    return Value{is_min ? std::min(x.i, y.i) : std::max(x.i, y.i), 0};
  }

  template <typename T, typename Cmp>
  Value compare(const Expr& e, Cmp cmp) {
    const T& op = node<T>(e);
    const Value x = eval(op.a), y = eval(op.b);
    const Type t = op.a.type();
    if (t.is_float()) return Value{cmp(x.f, y.f), 0};
    if (t.dtype == DType::UInt64) return Value{cmp(static_cast<uint64_t>(x.i), static_cast<uint64_t>(y.i)), 0};
    return Value{cmp(x.i, y.i), 0};
  }

  // The bits of `x` (of type `from`) read as type `to`, through a one-element tensor of each,
  // which stores every dtype in its own bytes.
  static Value bit_cast(const Value& x, Type from, Type to) {
    HostTensor in(from.dtype, {}), out(to.dtype, {});
    KILN_ASSERT(in.num_bytes() == out.num_bytes(), "bit_cast from {} to {}", dtype_name(from.dtype),
                dtype_name(to.dtype));
    if (from.is_float())
      in.set_double(0, x.f);
    else
      in.set_int(0, x.i);
    std::memcpy(out.data(), in.data(), in.num_bytes());
    if (to.is_float()) return Value{0, out.get_double(0)};
    return Value{out.get_int(0), 0};
  }

  Value eval_call(const Call& c) {
    const Type t = c.type;
    auto arg = [&](size_t k) { return eval(c.args[k]); };
    auto fl = [&](double v) { return Value{0, round_to_type(t.dtype, v)}; };
    auto in = [&](size_t k) { return to_double(arg(k), c.args[k].type()); };
    switch (c.op) {
      case Intrinsic::Exp: return fl(std::exp(in(0)));
      case Intrinsic::Exp2: return fl(std::exp2(in(0)));
      case Intrinsic::Rcp: return fl(1.0 / in(0));
      case Intrinsic::Log: return fl(std::log(in(0)));
      case Intrinsic::Sqrt: return fl(std::sqrt(in(0)));
      case Intrinsic::Rsqrt: return fl(1.0 / std::sqrt(in(0)));
      case Intrinsic::Sin: return fl(std::sin(in(0)));
      case Intrinsic::Cos: return fl(std::cos(in(0)));
      case Intrinsic::Tan: return fl(std::tan(in(0)));
      case Intrinsic::Asin: return fl(std::asin(in(0)));
      case Intrinsic::Acos: return fl(std::acos(in(0)));
      case Intrinsic::Atan: return fl(std::atan(in(0)));
      case Intrinsic::Sinh: return fl(std::sinh(in(0)));
      case Intrinsic::Cosh: return fl(std::cosh(in(0)));
      case Intrinsic::Tanh: return fl(std::tanh(in(0)));
      case Intrinsic::Asinh: return fl(std::asinh(in(0)));
      case Intrinsic::Acosh: return fl(std::acosh(in(0)));
      case Intrinsic::Atanh: return fl(std::atanh(in(0)));
      case Intrinsic::Erf: return fl(std::erf(in(0)));
      case Intrinsic::Floor: return fl(std::floor(in(0)));
      case Intrinsic::Ceil: return fl(std::ceil(in(0)));
      case Intrinsic::RoundEven: return fl(std::nearbyint(in(0)));
      case Intrinsic::Trunc: return fl(std::trunc(in(0)));
      case Intrinsic::Pow: return fl(std::pow(in(0), in(1)));
      case Intrinsic::Fmod: return fl(std::fmod(in(0), in(1)));
      case Intrinsic::IsNan: return Value{std::isnan(in(0)), 0};
      case Intrinsic::IsInf: return Value{std::isinf(in(0)), 0};
      case Intrinsic::Infinity: return Value{0, std::numeric_limits<double>::infinity()};
      case Intrinsic::NaN: return Value{0, std::numeric_limits<double>::quiet_NaN()};
      case Intrinsic::Abs: {
        if (t.is_float()) return fl(std::fabs(in(0)));
        const Value v = arg(0);
        return Value{wrap_to_type(t.dtype, v.i < 0 && !t.is_uint() ? -v.i : v.i), 0};
      }
      case Intrinsic::BitAnd: return Value{wrap_to_type(t.dtype, arg(0).i & arg(1).i), 0};
      case Intrinsic::BitOr: return Value{wrap_to_type(t.dtype, arg(0).i | arg(1).i), 0};
      case Intrinsic::BitXor: return Value{wrap_to_type(t.dtype, arg(0).i ^ arg(1).i), 0};
      case Intrinsic::BitNot: return Value{wrap_to_type(t.dtype, ~arg(0).i), 0};
      case Intrinsic::ShiftLeft: {
        const int64_t n = arg(1).i;
        return Value{n >= t.bits() || n < 0 ? 0 : wrap_to_type(t.dtype, static_cast<int64_t>(static_cast<uint64_t>(arg(0).i) << n)), 0};
      }
      case Intrinsic::ShiftRight: {
        const int64_t n = arg(1).i;
        const uint64_t mask = t.bits() == 64 ? ~uint64_t{0} : ((uint64_t{1} << t.bits()) - 1);
        const uint64_t v = static_cast<uint64_t>(arg(0).i) & mask;
        if (t.is_uint()) return Value{n >= t.bits() || n < 0 ? 0 : static_cast<int64_t>(v >> n), 0};
        return Value{arg(0).i >> std::min<int64_t>(std::max<int64_t>(n, 0), 63), 0};
      }
      case Intrinsic::BitCast:
        return bit_cast(arg(0), c.args[0].type(), t);
      case Intrinsic::SyncThreads: return Value{};
      case Intrinsic::BlockAllReduce: return arg(0);  // one thread: the value itself
    }
    internal_error(std::string("the interpreter has no rule for ") + intrinsic_name(c.op));
  }

  std::unordered_map<const ExprNode*, Value> vars_;
  std::unordered_map<const BufferNode*, HostTensor*> buffers_;
};

std::string shape_text(const std::vector<Expr>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + to_string(shape[i]);
  return s + "]";
}

}  // namespace

std::vector<HostTensor> interpret(const LoweredFunc& func, const std::vector<HostTensor>& inputs) {
  if (inputs.size() != func.inputs.size()) {
    user_error("{}: takes {} inputs, got {}", func.name, func.inputs.size(), inputs.size());
  }
  Interpreter interp;
  // Bind symbols from dims that are a bare symbol, then check every dim.
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Buffer& b = func.inputs[k];
    if (inputs[k].dtype() != b->dtype) {
      user_error("{}: input '{}' has dtype {}, expected {}", func.name, b->name, dtype_name(inputs[k].dtype()),
                 dtype_name(b->dtype));
    }
    if (inputs[k].ndim() != static_cast<int>(b->shape.size())) {
      user_error("{}: input '{}' has shape {}, expected rank {} {}", func.name, b->name, inputs[k].describe(),
                 b->shape.size(), shape_text(b->shape));
    }
    for (size_t d = 0; d < b->shape.size(); ++d) {
      if (b->shape[d].as<Variable>()) interp.bind(b->shape[d], Value{inputs[k].shape()[d], 0});
    }
  }
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Buffer& b = func.inputs[k];
    for (size_t d = 0; d < b->shape.size(); ++d) {
      const int64_t want = interp.eval(b->shape[d]).i;
      if (want != inputs[k].shape()[d]) {
        user_error("{}: input '{}' has shape {}, but dimension {} must be {} ({})", func.name, b->name,
                   inputs[k].describe(), d, want, to_string(b->shape[d]));
      }
    }
    // The interpreter only reads inputs; the const_cast lets them share the buffer table.
    interp.bind_buffer(b, const_cast<HostTensor*>(&inputs[k]));
  }
  std::vector<HostTensor> outputs;
  outputs.reserve(func.outputs.size());
  for (const Buffer& b : func.outputs) {
    std::vector<int64_t> shape;
    for (const Expr& d : b->shape) shape.push_back(interp.eval(d).i);
    outputs.emplace_back(b->dtype, shape);
  }
  for (size_t k = 0; k < outputs.size(); ++k) {
    // An output that is also an input (Identity) keeps the input's buffer binding and is copied.
    bool aliased = false;
    for (const Buffer& in : func.inputs) aliased = aliased || in.same_as(func.outputs[k]);
    if (!aliased) interp.bind_buffer(func.outputs[k], &outputs[k]);
  }
  interp.exec(func.body);
  for (size_t k = 0; k < outputs.size(); ++k) {
    for (size_t i = 0; i < func.inputs.size(); ++i) {
      if (func.inputs[i].same_as(func.outputs[k])) {
        std::copy(inputs[i].data(), inputs[i].data() + inputs[i].num_bytes(), outputs[k].data());
      }
    }
  }
  return outputs;
}

}  // namespace kiln
