#pragma once
// The IR node structs. Each is immutable and built through its validating `make` factory.
// Expressions are typed; binary operands must have equal types (IROperator.h converts).
#include <optional>
#include <string>
#include <vector>

#include "kiln/ir/Expr.h"
#include "kiln/ir/GemmTemplate.h"

namespace kiln::te {
struct TensorNode;
}

namespace kiln::ir {

template <typename T, NodeKind K>
struct ExprNodeBase : ExprNode {
  static constexpr NodeKind kKind = K;
  explicit ExprNodeBase(Type t) : ExprNode(K, t) {}
};

template <typename T, NodeKind K>
struct StmtNodeBase : StmtNode {
  static constexpr NodeKind kKind = K;
  StmtNodeBase() : StmtNode(K) {}
};

// ---- Buffers: the memory that lowered IR loads from and stores to ------------------------

enum class MemoryScope : uint8_t { Global, Shared, Local };
const char* memory_scope_name(MemoryScope scope);

struct BufferNode {
  std::string name;
  DType dtype;
  std::vector<Expr> shape;  // row-major; Load/Store indices are flat element offsets
  MemoryScope scope;
};

class Buffer {
 public:
  Buffer() = default;
  static Buffer make(std::string name, DType dtype, std::vector<Expr> shape,
                     MemoryScope scope = MemoryScope::Global);
  bool defined() const { return node_ != nullptr; }
  const BufferNode* operator->() const { return node_.get(); }
  const BufferNode* get() const { return node_.get(); }
  bool same_as(const Buffer& other) const { return node_ == other.node_; }
  Expr num_elements() const;  // product of the shape
  Expr flat_index(const std::vector<Expr>& indices) const;  // row-major offset

 private:
  std::shared_ptr<const BufferNode> node_;
};

// ---- Expressions ---------------------------------------------------------------------------

struct IntImm : ExprNodeBase<IntImm, NodeKind::IntImm> {
  int64_t value;  // for UInt64 the bit pattern; for Bool 0 or 1
  IntImm(Type t, int64_t v) : ExprNodeBase(t), value(v) {}
  static Expr make(Type t, int64_t value);
};

struct FloatImm : ExprNodeBase<FloatImm, NodeKind::FloatImm> {
  double value;
  FloatImm(Type t, double v) : ExprNodeBase(t), value(v) {}
  static Expr make(Type t, double value);
};

// A variable, compared by identity (the node's address), never by name.
struct Variable : ExprNodeBase<Variable, NodeKind::Variable> {
  std::string name;
  Variable(Type t, std::string n) : ExprNodeBase(t), name(std::move(n)) {}
  static Expr make(Type t, std::string name);
};
inline Expr var(std::string name, Type t = kIndexType) { return Variable::make(t, std::move(name)); }

struct Cast : ExprNodeBase<Cast, NodeKind::Cast> {
  Expr value;
  Cast(Type t, Expr v) : ExprNodeBase(t), value(std::move(v)) {}
  static Expr make(Type t, Expr value);
};

template <typename T, NodeKind K>
struct BinaryNode : ExprNodeBase<T, K> {
  Expr a, b;
  BinaryNode(Type t, Expr x, Expr y) : ExprNodeBase<T, K>(t), a(std::move(x)), b(std::move(y)) {}
};

#define KILN_BINARY_NODE(Name)                                               \
  struct Name : BinaryNode<Name, NodeKind::Name> {                           \
    using BinaryNode::BinaryNode;                                            \
    static Expr make(Expr a, Expr b);                                        \
  };
KILN_BINARY_NODE(Add)
KILN_BINARY_NODE(Sub)
KILN_BINARY_NODE(Mul)
KILN_BINARY_NODE(Div)  // integers: truncation toward zero (as C); floats: IEEE division
KILN_BINARY_NODE(Mod)  // integers: C remainder (sign of a); floats: fmod
KILN_BINARY_NODE(Min)
KILN_BINARY_NODE(Max)
KILN_BINARY_NODE(EQ)
KILN_BINARY_NODE(NE)
KILN_BINARY_NODE(LT)
KILN_BINARY_NODE(LE)
KILN_BINARY_NODE(GT)
KILN_BINARY_NODE(GE)
KILN_BINARY_NODE(And)
KILN_BINARY_NODE(Or)
#undef KILN_BINARY_NODE

struct Not : ExprNodeBase<Not, NodeKind::Not> {
  Expr a;
  Not(Type t, Expr x) : ExprNodeBase(t), a(std::move(x)) {}
  static Expr make(Expr a);
};

struct Select : ExprNodeBase<Select, NodeKind::Select> {
  Expr condition, true_value, false_value;
  Select(Type t, Expr c, Expr x, Expr y)
      : ExprNodeBase(t), condition(std::move(c)), true_value(std::move(x)), false_value(std::move(y)) {}
  static Expr make(Expr condition, Expr true_value, Expr false_value);
};

enum class Intrinsic : uint8_t {
#define KILN_INTRINSIC(name, str, arity) name,
#include "kiln/ir/Intrinsics.def"
};
const char* intrinsic_name(Intrinsic op);
int intrinsic_arity(Intrinsic op);

struct Call : ExprNodeBase<Call, NodeKind::Call> {
  Intrinsic op;
  std::vector<Expr> args;
  Call(Type t, Intrinsic o, std::vector<Expr> a) : ExprNodeBase(t), op(o), args(std::move(a)) {}
  static Expr make(Type t, Intrinsic op, std::vector<Expr> args);
};

struct Load : ExprNodeBase<Load, NodeKind::Load> {
  Buffer buffer;
  Expr index;  // flat element offset; a Ramp for a vector load
  Load(Type t, Buffer buf, Expr i) : ExprNodeBase(t), buffer(std::move(buf)), index(std::move(i)) {}
  static Expr make(Buffer buffer, Expr index);
};

// base, base + stride, ..., base + (lanes - 1) * stride
struct Ramp : ExprNodeBase<Ramp, NodeKind::Ramp> {
  Expr base, stride;
  int lanes;
  Ramp(Type t, Expr b, Expr s, int n) : ExprNodeBase(t), base(std::move(b)), stride(std::move(s)), lanes(n) {}
  static Expr make(Expr base, Expr stride, int lanes);
};

struct Broadcast : ExprNodeBase<Broadcast, NodeKind::Broadcast> {
  Expr value;
  int lanes;
  Broadcast(Type t, Expr v, int n) : ExprNodeBase(t), value(std::move(v)), lanes(n) {}
  static Expr make(Expr value, int lanes);
};

struct Let : ExprNodeBase<Let, NodeKind::Let> {
  Expr var, value, body;  // var is a Variable
  Let(Type t, Expr x, Expr v, Expr b) : ExprNodeBase(t), var(std::move(x)), value(std::move(v)), body(std::move(b)) {}
  static Expr make(Expr var, Expr value, Expr body);
};

// An iteration variable of a compute definition: var ranges over [0, extent).
struct IterVar {
  Expr var;     // a Variable of kIndexType
  Expr extent;  // kIndexType
};

// Reads element `indices` of a tensor-expression tensor (te/Tensor.h).
struct TensorRead : ExprNodeBase<TensorRead, NodeKind::TensorRead> {
  std::shared_ptr<const te::TensorNode> tensor;
  std::vector<Expr> indices;
  TensorRead(Type t, std::shared_ptr<const te::TensorNode> x, std::vector<Expr> i)
      : ExprNodeBase(t), tensor(std::move(x)), indices(std::move(i)) {}
  static Expr make(std::shared_ptr<const te::TensorNode> tensor, std::vector<Expr> indices);
};

enum class ReduceKind : uint8_t { Sum, Prod, Min, Max };
const char* reduce_kind_name(ReduceKind kind);

// Combines `source` over every point of `axes` where `condition` holds, starting from the
// kind's identity. Only allowed as the whole body of a compute definition.
struct Reduce : ExprNodeBase<Reduce, NodeKind::Reduce> {
  ReduceKind reduce_kind;
  Expr source;
  std::vector<IterVar> axes;
  Expr condition;  // Bool; IntImm true when unconditional
  Reduce(Type t, ReduceKind k, Expr s, std::vector<IterVar> a, Expr c)
      : ExprNodeBase(t), reduce_kind(k), source(std::move(s)), axes(std::move(a)), condition(std::move(c)) {}
  static Expr make(ReduceKind kind, Expr source, std::vector<IterVar> axes, Expr condition = Expr());
};

// The identity of a reduction of type t: 0, 1, +inf/max, -inf/lowest.
Expr reduce_identity(ReduceKind kind, Type t);
// a (op) b for the reduction's combiner.
Expr reduce_combine(ReduceKind kind, Expr a, Expr b);

// ---- Statements ----------------------------------------------------------------------------

enum class ForKind : uint8_t {
  Serial,
  Parallel,
  Vectorized,
  Unrolled,
  BlockIdxX,
  BlockIdxY,
  BlockIdxZ,
  ThreadIdxX,
  ThreadIdxY,
  ThreadIdxZ,
};
const char* for_kind_name(ForKind kind);
inline bool is_gpu_block(ForKind k) { return k >= ForKind::BlockIdxX && k <= ForKind::BlockIdxZ; }
inline bool is_gpu_thread(ForKind k) { return k >= ForKind::ThreadIdxX && k <= ForKind::ThreadIdxZ; }

struct For : StmtNodeBase<For, NodeKind::For> {
  Expr var, min, extent;
  ForKind for_kind;
  Stmt body;
  static Stmt make(Expr var, Expr min, Expr extent, ForKind kind, Stmt body);
};

struct Store : StmtNodeBase<Store, NodeKind::Store> {
  Buffer buffer;
  Expr value, index;
  static Stmt make(Buffer buffer, Expr value, Expr index);
};

struct Seq : StmtNodeBase<Seq, NodeKind::Seq> {
  std::vector<Stmt> stmts;
  static Stmt make(std::vector<Stmt> stmts);  // flattens nested Seqs; one statement stays itself
};

struct LetStmt : StmtNodeBase<LetStmt, NodeKind::LetStmt> {
  Expr var, value;
  Stmt body;
  static Stmt make(Expr var, Expr value, Stmt body);
};

struct IfThenElse : StmtNodeBase<IfThenElse, NodeKind::IfThenElse> {
  Expr condition;
  Stmt then_case, else_case;  // else_case may be undefined
  static Stmt make(Expr condition, Stmt then_case, Stmt else_case = Stmt());
};

// Allocates `buffer` (Local or Shared scope, or a Global temporary) for the body's duration.
struct Allocate : StmtNodeBase<Allocate, NodeKind::Allocate> {
  Buffer buffer;
  Stmt body;
  static Stmt make(Buffer buffer, Stmt body);
};

struct Evaluate : StmtNodeBase<Evaluate, NodeKind::Evaluate> {
  Expr value;
  static Stmt make(Expr value);
};

// One factor of a TemplateContraction: its element (b, i, k), i being m for A and n for B, is
//   buffer[offset + i * stride_mn + k * stride_k + sum_d digit_d(b) * batch_strides[d]]
// with digit_d(b) the digits of the flat batch index over the node's batch_extents (row-major).
// Offsets and strides are index expressions of the size symbols only (kernels/gemm/
// gemm_problem.cuh gives them the same meaning).
// A B operand read as the implicit im2col of a convolution over an NCHW (NCW: height 1) image
// (kernels/gemm/conv_implicit_gemm.cuh: ConvShape): with n = (image, oh, ow) and k = (c, kh, kw)
// flattened row-major, B[k, n] = image[image, c, oh * stride_h - pad_h + kh * dilation_h,
// ow * stride_w - pad_w + kw * dilation_w], 0 outside the image. The extents are index
// expressions of the size symbols; the window is constant.
struct ConvWindow {
  Expr channels, height, width, out_height, out_width;
  int64_t kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1, pad_h = 0, pad_w = 0;
};

struct ContractionOperand {
  Buffer buffer;
  Expr offset, stride_mn, stride_k;
  std::vector<Expr> batch_strides;  // one per batch extent; 0 broadcasts
  std::optional<ConvWindow> window;  // set: B is a convolution's im2col (offset and strides unused)
};

// The 4-bit weight of a kiln.QuantLinear computed by kernels/quant/ (a TemplateContraction with
// `w4`): B[b, k, n] = dequant(weight)[n, k] in the node's stored layout (include/kiln/quant/
// QuantizedWeight.h): weight uint8 [N, K/2], scales [N, K/group], extra = NVFP4's tensor scale
// (any float dtype; the epilogue applies it) or INT4's zeros (undefined for MXFP4).
enum class W4Format : uint8_t { NvFp4, MxFp4, Int4 };
struct W4Weight {
  W4Format format = W4Format::NvFp4;
  int64_t group = 16;
  Buffer weight, scales, extra;
};

// A contraction computed by a hand-written template of kernels/gemm/, the elementwise stages
// that consumed it folded into its epilogue:
//   acc_j[b, m, n] = sum_k A[b, m, k] * B_j[b, k, n]     (j < b.size(): 1, or 2 for a dual product)
// `epilogue` stores the results for one (batch_var, m_var, n_var), reading acc_vars (float32),
// and is printed as the template's epilogue functor. `reference` is the same computation as plain
// loops: the CPU backends run it, and every pass sees it like any other loop nest. `split_k` is
// a Global temporary the template may use: float32 partial sums, or for a convolution (b[0] has a
// window) the Hopper kernel's repacked weight and NHWC image, in the weight's dtype (undefined: none). With `w4` (a
// QuantLinear's 4-bit weight, config.w4), B is that weight and `b` is empty: A is x [M, K]
// row-major and the kernels of kernels/quant/ run instead (one accumulator).
struct TemplateContraction : StmtNodeBase<TemplateContraction, NodeKind::TemplateContraction> {
  std::vector<Expr> batch_extents;
  Expr m, n, k;
  ContractionOperand a;
  std::vector<ContractionOperand> b;
  Expr batch_var, m_var, n_var;
  std::vector<Expr> acc_vars;
  Stmt epilogue, reference;
  Buffer split_k;
  GemmTemplate config;
  std::string description;  // the contraction in words, for the generated comment
  std::optional<W4Weight> w4;
  static Stmt make(std::vector<Expr> batch_extents, Expr m, Expr n, Expr k, ContractionOperand a,
                   std::vector<ContractionOperand> b, Expr batch_var, Expr m_var, Expr n_var,
                   std::vector<Expr> acc_vars, Stmt epilogue, Stmt reference, Buffer split_k, GemmTemplate config,
                   std::string description, std::optional<W4Weight> w4 = std::nullopt);
  // The same node with new expressions and statements (the fields a mutator rebuilds).
  Stmt with(std::vector<Expr> batch_extents, Expr m, Expr n, Expr k, ContractionOperand a,
            std::vector<ContractionOperand> b, Stmt epilogue, Stmt reference) const;
};

// Fused attention computed by kernels/gemm/attention.cuh (attention<T, D>), the stages of an
// unfused attention (src/lower/TemplateAttention.h) replaced by one call:
//   out[b, i, d] = sum_j softmax_j(scale * sum_e Q[b, i, e] K[b, j, e] + mask[b, i, j]) V[b, j, d]
// for b < prod(batch_extents) (flat, row-major over them), i < seq_q, j < seq_k, d, e < head_dim.
// q, k and v are ContractionOperands read as element (b, row, e) at buffer[offset + row *
// stride_mn + e * stride_k + batch digits . batch_strides] (row = i for q, j for k and v); the
// mask's row is i and its column (stride_k) j. `epilogue` stores the result for one (batch_var,
// row_var, d_var) from out_var (float32) and is printed as the template's epilogue functor.
// `reference` is the unfused stages' loops: the CPU backends run it, and every pass sees it.
struct TemplateAttention : StmtNodeBase<TemplateAttention, NodeKind::TemplateAttention> {
  std::vector<Expr> batch_extents;
  Expr seq_q, seq_k;
  int64_t head_dim = 0;
  ContractionOperand q, k, v;
  std::optional<ContractionOperand> mask;
  double scale = 1.0;
  Expr scale_expr;  // float32, free of the axes; defined: the scale is also multiplied by it (on the device)
  Expr batch_var, row_var, d_var, out_var;
  Stmt epilogue, reference;
  std::string description;  // the matched stages in words, for the generated comment
  std::string reason;       // which kernel path and why; printed above the call
  static Stmt make(std::vector<Expr> batch_extents, Expr seq_q, Expr seq_k, int64_t head_dim, ContractionOperand q,
                   ContractionOperand k, ContractionOperand v, std::optional<ContractionOperand> mask, double scale,
                   Expr scale_expr, Expr batch_var, Expr row_var, Expr d_var, Expr out_var,
                   Stmt epilogue, Stmt reference, std::string description, std::string reason);
  // The same node with new expressions and statements (the fields a mutator rebuilds).
  Stmt with(std::vector<Expr> batch_extents, Expr seq_q, Expr seq_k, ContractionOperand q, ContractionOperand k,
            ContractionOperand v, std::optional<ContractionOperand> mask, Expr scale_expr, Stmt epilogue,
            Stmt reference) const;
};

}  // namespace kiln::ir
