#include "kiln/ir/IR.h"

#include <limits>

#include "kiln/ir/IROperator.h"
#include "kiln/ir/IRPrinter.h"
#include "kiln/support/Error.h"
#include "kiln/te/Tensor.h"

namespace kiln::ir {

const char* node_kind_name(NodeKind kind) {
  switch (kind) {
#define KILN_EXPR_NODE(name) \
  case NodeKind::name:       \
    return #name;
#define KILN_STMT_NODE(name) \
  case NodeKind::name:       \
    return #name;
#include "kiln/ir/Nodes.def"
  }
  return "?";
}

const char* memory_scope_name(MemoryScope scope) {
  switch (scope) {
    case MemoryScope::Global: return "global";
    case MemoryScope::Shared: return "shared";
    case MemoryScope::Local: return "local";
  }
  return "?";
}

const char* intrinsic_name(Intrinsic op) {
  switch (op) {
#define KILN_INTRINSIC(name, str, arity) \
  case Intrinsic::name:                  \
    return str;
#include "kiln/ir/Intrinsics.def"
  }
  return "?";
}

int intrinsic_arity(Intrinsic op) {
  switch (op) {
#define KILN_INTRINSIC(name, str, arity) \
  case Intrinsic::name:                  \
    return arity;
#include "kiln/ir/Intrinsics.def"
  }
  return -1;
}

const char* reduce_kind_name(ReduceKind kind) {
  switch (kind) {
    case ReduceKind::Sum: return "sum";
    case ReduceKind::Prod: return "prod";
    case ReduceKind::Min: return "min";
    case ReduceKind::Max: return "max";
  }
  return "?";
}

const char* for_kind_name(ForKind kind) {
  switch (kind) {
    case ForKind::Serial: return "serial";
    case ForKind::Parallel: return "parallel";
    case ForKind::Vectorized: return "vectorized";
    case ForKind::Unrolled: return "unrolled";
    case ForKind::BlockIdxX: return "blockIdx.x";
    case ForKind::BlockIdxY: return "blockIdx.y";
    case ForKind::BlockIdxZ: return "blockIdx.z";
    case ForKind::ThreadIdxX: return "threadIdx.x";
    case ForKind::ThreadIdxY: return "threadIdx.y";
    case ForKind::ThreadIdxZ: return "threadIdx.z";
  }
  return "?";
}

Expr::Expr(int64_t value) : Expr(IntImm::make(kIndexType, value)) {}

// ---- Buffer --------------------------------------------------------------------------------

Buffer Buffer::make(std::string name, DType dtype, std::vector<Expr> shape, MemoryScope scope) {
  for (const Expr& d : shape) KILN_ASSERT(d.defined() && d.type() == kIndexType, "buffer {} dim", name);
  Buffer b;
  b.node_ = std::make_shared<const BufferNode>(BufferNode{std::move(name), dtype, std::move(shape), scope});
  return b;
}

Expr Buffer::num_elements() const {
  Expr n = 1;
  for (const Expr& d : node_->shape) n = n * d;
  return n;
}

Expr Buffer::flat_index(const std::vector<Expr>& indices) const {
  KILN_ASSERT(indices.size() == node_->shape.size(), "buffer {} has rank {}, indexed with {}",
              node_->name, node_->shape.size(), indices.size());
  Expr flat = 0;
  for (size_t i = 0; i < indices.size(); ++i) flat = flat * node_->shape[i] + indices[i];
  return flat;
}

// ---- Expressions ---------------------------------------------------------------------------

template <typename T, typename... Args>
static Expr make_expr(Args&&... args) {
  return Expr(std::make_shared<const T>(std::forward<Args>(args)...));
}

Expr IntImm::make(Type t, int64_t value) {
  KILN_ASSERT(t.is_int() || t.is_uint() || t.is_bool(), "IntImm of type {}", to_string(t));
  KILN_ASSERT(t.is_scalar(), "IntImm must be scalar");
  if (t.is_bool()) value = value != 0;
  return make_expr<IntImm>(t, value);
}

Expr FloatImm::make(Type t, double value) {
  KILN_ASSERT(t.is_float() && t.is_scalar(), "FloatImm of type {}", to_string(t));
  return make_expr<FloatImm>(t, value);
}

Expr Variable::make(Type t, std::string name) { return make_expr<Variable>(t, std::move(name)); }

Expr Cast::make(Type t, Expr value) {
  KILN_ASSERT(value.defined() && value.type().lanes == t.lanes, "Cast to {} of {}", to_string(t),
              value.defined() ? to_string(value.type()) : "undefined");
  return make_expr<Cast>(t, std::move(value));
}

static Type check_binary(const char* what, const Expr& a, const Expr& b) {
  KILN_ASSERT(a.defined() && b.defined(), "{} of an undefined operand", what);
  KILN_ASSERT(a.type() == b.type(), "{} of mismatched types {} and {}", what, to_string(a.type()),
              to_string(b.type()));
  return a.type();
}

#define KILN_ARITH_MAKE(Name)                          \
  Expr Name::make(Expr a, Expr b) {                    \
    Type t = check_binary(#Name, a, b);                \
    return make_expr<Name>(t, std::move(a), std::move(b)); \
  }
KILN_ARITH_MAKE(Add)
KILN_ARITH_MAKE(Sub)
KILN_ARITH_MAKE(Mul)
KILN_ARITH_MAKE(Div)
KILN_ARITH_MAKE(Mod)
KILN_ARITH_MAKE(Min)
KILN_ARITH_MAKE(Max)
#undef KILN_ARITH_MAKE

#define KILN_CMP_MAKE(Name)                                                       \
  Expr Name::make(Expr a, Expr b) {                                               \
    Type t = check_binary(#Name, a, b);                                           \
    return make_expr<Name>(Type(DType::Bool, t.lanes), std::move(a), std::move(b)); \
  }
KILN_CMP_MAKE(EQ)
KILN_CMP_MAKE(NE)
KILN_CMP_MAKE(LT)
KILN_CMP_MAKE(LE)
KILN_CMP_MAKE(GT)
KILN_CMP_MAKE(GE)
#undef KILN_CMP_MAKE

Expr And::make(Expr a, Expr b) {
  Type t = check_binary("And", a, b);
  KILN_ASSERT(t.is_bool(), "And of {}", to_string(t));
  return make_expr<And>(t, std::move(a), std::move(b));
}

Expr Or::make(Expr a, Expr b) {
  Type t = check_binary("Or", a, b);
  KILN_ASSERT(t.is_bool(), "Or of {}", to_string(t));
  return make_expr<Or>(t, std::move(a), std::move(b));
}

Expr Not::make(Expr a) {
  KILN_ASSERT(a.defined() && a.type().is_bool(), "Not of a non-bool");
  Type t = a.type();
  return make_expr<Not>(t, std::move(a));
}

Expr Select::make(Expr condition, Expr true_value, Expr false_value) {
  Type t = check_binary("Select", true_value, false_value);
  KILN_ASSERT(condition.defined() && condition.type().is_bool(), "Select condition must be bool");
  KILN_ASSERT(condition.type().lanes == 1 || condition.type().lanes == t.lanes, "Select lanes");
  return make_expr<Select>(t, std::move(condition), std::move(true_value), std::move(false_value));
}

Expr Call::make(Type t, Intrinsic op, std::vector<Expr> args) {
  const int arity = intrinsic_arity(op);
  KILN_ASSERT(arity < 0 || static_cast<int>(args.size()) == arity, "{} takes {} arguments, got {}",
              intrinsic_name(op), arity, args.size());
  for (const Expr& a : args) KILN_ASSERT(a.defined(), "{} of an undefined argument", intrinsic_name(op));
  return make_expr<Call>(t, op, std::move(args));
}

Expr Load::make(Buffer buffer, Expr index) {
  KILN_ASSERT(buffer.defined() && index.defined(), "Load of undefined buffer or index");
  KILN_ASSERT(index.type().element_of() == kIndexType, "Load index of type {}", to_string(index.type()));
  Type t(buffer->dtype, index.type().lanes);
  return make_expr<Load>(t, std::move(buffer), std::move(index));
}

Expr Ramp::make(Expr base, Expr stride, int lanes) {
  Type t = check_binary("Ramp", base, stride);
  KILN_ASSERT(t.is_scalar() && lanes > 1, "Ramp needs scalar base/stride and lanes > 1");
  return make_expr<Ramp>(t.with_lanes(static_cast<uint16_t>(lanes)), std::move(base), std::move(stride), lanes);
}

Expr Broadcast::make(Expr value, int lanes) {
  KILN_ASSERT(value.defined() && value.type().is_scalar() && lanes > 1, "Broadcast of a vector");
  Type t = value.type().with_lanes(static_cast<uint16_t>(lanes));
  return make_expr<Broadcast>(t, std::move(value), lanes);
}

Expr Let::make(Expr var, Expr value, Expr body) {
  KILN_ASSERT(var.as<Variable>() && value.defined() && body.defined(), "malformed Let");
  KILN_ASSERT(var.type() == value.type(), "Let binds {} to a {}", to_string(var.type()), to_string(value.type()));
  Type t = body.type();
  return make_expr<Let>(t, std::move(var), std::move(value), std::move(body));
}

Expr TensorRead::make(std::shared_ptr<const te::TensorNode> tensor, std::vector<Expr> indices) {
  KILN_ASSERT(tensor != nullptr, "read of an undefined tensor");
  KILN_ASSERT(indices.size() == tensor->shape.size(), "tensor {} has rank {}, read with {} indices",
              tensor->name, tensor->shape.size(), indices.size());
  for (const Expr& i : indices) {
    KILN_ASSERT(i.defined() && i.type() == kIndexType, "tensor {} index of type {}", tensor->name,
                i.defined() ? to_string(i.type()) : "undefined");
  }
  Type t(tensor->dtype);
  return make_expr<TensorRead>(t, std::move(tensor), std::move(indices));
}

Expr Reduce::make(ReduceKind kind, Expr source, std::vector<IterVar> axes, Expr condition) {
  KILN_ASSERT(source.defined() && source.type().is_scalar(), "Reduce of an undefined source");
  if (!condition.defined()) condition = make_bool(true);
  for (const IterVar& a : axes) KILN_ASSERT(a.var.as<Variable>() && a.extent.defined(), "Reduce axis");
  Type t = source.type();
  return make_expr<Reduce>(t, kind, std::move(source), std::move(axes), std::move(condition));
}

Expr reduce_identity(ReduceKind kind, Type t) {
  switch (kind) {
    case ReduceKind::Sum: return make_zero(t);
    case ReduceKind::Prod: return make_one(t);
    case ReduceKind::Min: return highest_value(t);
    case ReduceKind::Max: return lowest_value(t);
  }
  internal_error("unknown reduce kind");
}

Expr reduce_combine(ReduceKind kind, Expr a, Expr b) {
  switch (kind) {
    case ReduceKind::Sum: return Add::make(std::move(a), std::move(b));
    case ReduceKind::Prod: return Mul::make(std::move(a), std::move(b));
    case ReduceKind::Min: return Min::make(std::move(a), std::move(b));
    case ReduceKind::Max: return Max::make(std::move(a), std::move(b));
  }
  internal_error("unknown reduce kind");
}

// ---- Statements ----------------------------------------------------------------------------

Stmt For::make(Expr var, Expr min, Expr extent, ForKind kind, Stmt body) {
  KILN_ASSERT(var.as<Variable>() && min.defined() && extent.defined() && body.defined(), "malformed For");
  auto node = std::make_shared<For>();
  node->var = std::move(var);
  node->min = std::move(min);
  node->extent = std::move(extent);
  node->for_kind = kind;
  node->body = std::move(body);
  return Stmt(std::move(node));
}

Stmt Store::make(Buffer buffer, Expr value, Expr index) {
  KILN_ASSERT(buffer.defined() && value.defined() && index.defined(), "malformed Store");
  KILN_ASSERT(value.type() == Type(buffer->dtype, index.type().lanes), "Store of {} into {} buffer {}",
              to_string(value.type()), dtype_name(buffer->dtype), buffer->name);
  auto node = std::make_shared<Store>();
  node->buffer = std::move(buffer);
  node->value = std::move(value);
  node->index = std::move(index);
  return Stmt(std::move(node));
}

Stmt Seq::make(std::vector<Stmt> stmts) {
  std::vector<Stmt> flat;
  for (Stmt& s : stmts) {
    if (!s.defined()) continue;
    if (const Seq* inner = s.as<Seq>()) {
      flat.insert(flat.end(), inner->stmts.begin(), inner->stmts.end());
    } else {
      flat.push_back(std::move(s));
    }
  }
  if (flat.size() == 1) return flat[0];
  auto node = std::make_shared<Seq>();
  node->stmts = std::move(flat);
  return Stmt(std::move(node));
}

Stmt LetStmt::make(Expr var, Expr value, Stmt body) {
  KILN_ASSERT(var.as<Variable>() && value.defined() && body.defined(), "malformed LetStmt");
  auto node = std::make_shared<LetStmt>();
  node->var = std::move(var);
  node->value = std::move(value);
  node->body = std::move(body);
  return Stmt(std::move(node));
}

Stmt IfThenElse::make(Expr condition, Stmt then_case, Stmt else_case) {
  KILN_ASSERT(condition.defined() && condition.type() == kBoolType && then_case.defined(),
              "malformed IfThenElse");
  auto node = std::make_shared<IfThenElse>();
  node->condition = std::move(condition);
  node->then_case = std::move(then_case);
  node->else_case = std::move(else_case);
  return Stmt(std::move(node));
}

Stmt Allocate::make(Buffer buffer, Stmt body) {
  KILN_ASSERT(buffer.defined() && body.defined(), "malformed Allocate");
  auto node = std::make_shared<Allocate>();
  node->buffer = std::move(buffer);
  node->body = std::move(body);
  return Stmt(std::move(node));
}

Stmt TemplateContraction::make(std::vector<Expr> batch_extents, Expr m, Expr n, Expr k, ContractionOperand a,
                               std::vector<ContractionOperand> b, Expr batch_var, Expr m_var, Expr n_var,
                               std::vector<Expr> acc_vars, Stmt epilogue, Stmt reference, Buffer split_k,
                               GemmTemplate config, std::string description, std::optional<W4Weight> w4) {
  KILN_ASSERT(m.defined() && n.defined() && k.defined() && epilogue.defined() && reference.defined(),
              "malformed TemplateContraction");
  KILN_ASSERT(w4 ? b.empty() && acc_vars.size() == 1 && config.w4 && w4->weight.defined() && w4->scales.defined()
                 : !b.empty() && b.size() <= 2 && acc_vars.size() == b.size() && !config.w4,
              "TemplateContraction with {} B operands", b.size());
  KILN_ASSERT(batch_extents.size() <= 4, "TemplateContraction with {} batch dims (at most 4)", batch_extents.size());
  std::vector<const ContractionOperand*> operands{&a};
  for (const ContractionOperand& op : b) operands.push_back(&op);
  for (const ContractionOperand* op : operands) {
    KILN_ASSERT(op->buffer.defined() && op->offset.defined() && op->stride_mn.defined() && op->stride_k.defined() &&
                    op->batch_strides.size() == batch_extents.size(),
                "malformed TemplateContraction operand");
    KILN_ASSERT(op->buffer->dtype == a.buffer->dtype, "TemplateContraction operands of different dtypes");
  }
  KILN_ASSERT(!a.window && (b.empty() || !b[0].window || (b.size() == 1 && batch_extents.empty())),
              "TemplateContraction: only a single B operand of an unbatched contraction may be a convolution window");
  for (const Expr& v : {batch_var, m_var, n_var}) KILN_ASSERT(v.as<Variable>(), "TemplateContraction index is not a variable");
  for (const Expr& v : acc_vars) {
    KILN_ASSERT(v.as<Variable>() && v.type() == Type(DType::Float32), "TemplateContraction accumulator {}", to_string(v));
  }
  auto node = std::make_shared<TemplateContraction>();
  node->batch_extents = std::move(batch_extents);
  node->m = std::move(m);
  node->n = std::move(n);
  node->k = std::move(k);
  node->a = std::move(a);
  node->b = std::move(b);
  node->batch_var = std::move(batch_var);
  node->m_var = std::move(m_var);
  node->n_var = std::move(n_var);
  node->acc_vars = std::move(acc_vars);
  node->epilogue = std::move(epilogue);
  node->reference = std::move(reference);
  node->split_k = std::move(split_k);
  node->config = std::move(config);
  node->description = std::move(description);
  node->w4 = std::move(w4);
  return Stmt(std::move(node));
}

Stmt TemplateContraction::with(std::vector<Expr> batch_extents_, Expr m_, Expr n_, Expr k_, ContractionOperand a_,
                               std::vector<ContractionOperand> b_, Stmt epilogue_, Stmt reference_) const {
  return make(std::move(batch_extents_), std::move(m_), std::move(n_), std::move(k_), std::move(a_), std::move(b_),
              batch_var, m_var, n_var, acc_vars, std::move(epilogue_), std::move(reference_), split_k, config,
              description, w4);
}

Stmt TemplateAttention::make(std::vector<Expr> batch_extents, Expr seq_q, Expr seq_k, int64_t head_dim,
                             ContractionOperand q, ContractionOperand k, ContractionOperand v,
                             std::optional<ContractionOperand> mask, double scale, Expr scale_expr,
                             Expr batch_var, Expr row_var, Expr d_var, Expr out_var, Stmt epilogue,
                             Stmt reference, std::string description, std::string reason) {
  KILN_ASSERT(seq_q.defined() && seq_k.defined() && head_dim > 0 && epilogue.defined() && reference.defined(),
              "malformed TemplateAttention");
  KILN_ASSERT(batch_extents.size() <= 4, "TemplateAttention with {} batch dims (at most 4)", batch_extents.size());
  std::vector<const ContractionOperand*> operands{&q, &k, &v};
  if (mask) operands.push_back(&*mask);
  for (const ContractionOperand* op : operands) {
    KILN_ASSERT(op->buffer.defined() && op->offset.defined() && op->stride_mn.defined() && op->stride_k.defined() &&
                    op->batch_strides.size() == batch_extents.size() && !op->window,
                "malformed TemplateAttention operand");
    KILN_ASSERT(op->buffer->dtype == q.buffer->dtype, "TemplateAttention operands of different dtypes");
  }
  KILN_ASSERT(q.buffer->dtype == DType::Float16 || q.buffer->dtype == DType::BFloat16,
              "TemplateAttention of {} operands", dtype_name(q.buffer->dtype));
  KILN_ASSERT(!scale_expr.defined() || scale_expr.type() == Type(DType::Float32), "TemplateAttention scale of {}",
              scale_expr.defined() ? to_string(scale_expr) : std::string());
  for (const Expr& x : {batch_var, row_var, d_var}) KILN_ASSERT(x.as<Variable>(), "TemplateAttention index is not a variable");
  KILN_ASSERT(out_var.as<Variable>() && out_var.type() == Type(DType::Float32), "TemplateAttention output variable");
  auto node = std::make_shared<TemplateAttention>();
  node->batch_extents = std::move(batch_extents);
  node->seq_q = std::move(seq_q);
  node->seq_k = std::move(seq_k);
  node->head_dim = head_dim;
  node->q = std::move(q);
  node->k = std::move(k);
  node->v = std::move(v);
  node->mask = std::move(mask);
  node->scale = scale;
  node->scale_expr = std::move(scale_expr);
  node->batch_var = std::move(batch_var);
  node->row_var = std::move(row_var);
  node->d_var = std::move(d_var);
  node->out_var = std::move(out_var);
  node->epilogue = std::move(epilogue);
  node->reference = std::move(reference);
  node->description = std::move(description);
  node->reason = std::move(reason);
  return Stmt(std::move(node));
}

Stmt TemplateAttention::with(std::vector<Expr> batch_extents_, Expr seq_q_, Expr seq_k_, ContractionOperand q_,
                             ContractionOperand k_, ContractionOperand v_, std::optional<ContractionOperand> mask_,
                             Expr scale_expr_, Stmt epilogue_, Stmt reference_) const {
  return make(std::move(batch_extents_), std::move(seq_q_), std::move(seq_k_), head_dim, std::move(q_), std::move(k_),
              std::move(v_), std::move(mask_), scale, std::move(scale_expr_), batch_var, row_var, d_var, out_var,
              std::move(epilogue_), std::move(reference_), description, reason);
}

Stmt Evaluate::make(Expr value) {
  KILN_ASSERT(value.defined(), "Evaluate of undefined");
  auto node = std::make_shared<Evaluate>();
  node->value = std::move(value);
  return Stmt(std::move(node));
}

}  // namespace kiln::ir
