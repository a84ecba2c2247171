#include "kiln/schedule/Defaults.h"

#include <unordered_set>

#include "kiln/ir/Equality.h"
#include "kiln/ir/IROperator.h"
#include "kiln/ir/IRVisitor.h"
#include "kiln/ir/Simplify.h"
#include "kiln/te/Contraction.h"

namespace kiln {
namespace {

using namespace ir;
using Kind = LoopTransform::Kind;

// The knobs below come from DefaultScheduleOptions (Defaults.h); the tuner sets them per kernel.
// Defaults of one call, read by the helpers of this file (default_gpu_schedule sets them).
thread_local DefaultScheduleOptions g_options;

// Reductions over outer axes: a warp of output vectors by 4 threads per lane along the reduced
// rows, at most 32 (16 for float32, 32 for 2-byte inputs: as many threads per input byte either
// way, since a 2-byte vector covers twice the outputs).
int64_t column_row_threads(int64_t lanes) {
  return g_options.column_row_threads > 0 ? g_options.column_row_threads : std::min<int64_t>(32, 4 * lanes);
}

LoopTransform split(const std::string& loop, int64_t factor) { return {Kind::Split, loop, "", factor, {}, ForKind::Serial}; }
LoopTransform fuse(const std::string& a, const std::string& b) { return {Kind::Fuse, a, b, 0, {}, ForKind::Serial}; }
LoopTransform bind_to(const std::string& loop, ForKind k) { return {Kind::Bind, loop, "", 0, {}, k}; }
LoopTransform vectorize(const std::string& loop) { return {Kind::Vectorize, loop, "", 0, {}, ForKind::Serial}; }
LoopTransform reorder(std::vector<std::string> order) { return {Kind::Reorder, "", "", 0, std::move(order), ForKind::Serial}; }

std::string axis(int d) { return "i" + std::to_string(d); }

// Fuses loops `names` (adjacent, in order) into one; returns the fused loop's name.
std::string fuse_all(std::vector<LoopTransform>& t, const std::vector<std::string>& names) {
  std::string fused = names.at(0);
  for (size_t k = 1; k < names.size(); ++k) {
    t.push_back(fuse(fused, names[k]));
    fused += "." + names[k];
  }
  return fused;
}

Expr product(const std::vector<Expr>& dims, size_t begin, size_t end) {
  Expr p = Expr(1);
  for (size_t k = begin; k < end; ++k) p = p * dims[k];
  return simplify(p);
}

int64_t vector_lanes(DType d) { return is_packed(d) ? 1 : std::max<int64_t>(1, g_options.vector_bytes / dtype_bytes(d)); }

// Threads per row for rows of `columns` elements: a warp for short rows, up to 512 for long ones.
int64_t row_threads(const Expr& columns) {
  if (g_options.row_threads > 0) return g_options.row_threads;
  auto c = as_const_int(columns);
  if (!c) return g_options.threads_per_block;
  if (*c <= 256) return 32;
  if (*c <= 1024) return 128;
  if (*c <= 8192) return 256;
  if (*c <= 16384) return 512;
  return 1024;
}

// A row reduction reads some tensor with its innermost reduction variable as the last index.
class ReadsRowwise : public IRVisitor {
 public:
  explicit ReadsRowwise(const Expr& r) : r_(r) {}
  bool found = false;
  DType dtype = DType::Float32;  // of the tensor read row-wise (the widest, when several)
  using IRVisitor::visit;

 protected:
  void visit(const TensorRead* op) override {
    if (!op->indices.empty() && op->indices.back().same_as(r_)) {
      if (!found || dtype_bytes(op->tensor->dtype) > dtype_bytes(dtype)) dtype = op->tensor->dtype;
      found = true;
    }
    IRVisitor::visit(op);
  }

 private:
  Expr r_;
};

struct Row {
  Expr rows, columns;
  int64_t threads;
  int64_t lanes;  // elements per 16-byte load of the tensor read row-wise
};

std::optional<Row> row_of_reduction(const te::Tensor& t) {
  const Reduce* red = t->body.as<Reduce>();
  if (!red || red->axes.empty()) return std::nullopt;
  ReadsRowwise reads(red->axes.back().var);
  reads.visit(red->source);
  if (!reads.found) return std::nullopt;
  const Expr columns = simplify(red->axes.back().extent);
  return Row{product(t.shape(), 0, t.shape().size()), columns, row_threads(columns), vector_lanes(reads.dtype)};
}

StageSchedule row_reduction(const te::Tensor& t, const Row& row) {
  StageSchedule s;
  if (t.ndim() > 0) {
    std::vector<std::string> names;
    for (int d = 0; d < t.ndim(); ++d) names.push_back(axis(d));
    s.transforms.push_back(bind_to(fuse_all(s.transforms, names), ForKind::BlockIdxX));
  }
  s.reduce_threads = row.threads;
  s.reduce_vector = row.lanes;
  s.description = "row reduction: a block per row, " + std::to_string(row.threads) + " threads across the row (" +
                  std::to_string(row.lanes) + " elements per load where the row allows), block all-reduce (warp shuffles)";
  return s;
}

// The narrowest dtype of the tensors an expression reads (its 16-byte loads carry the most lanes).
class NarrowestRead : public IRVisitor {
 public:
  int64_t bytes = 0;
  using IRVisitor::visit;

 protected:
  void visit(const TensorRead* op) override {
    const int64_t b = std::max(1, dtype_bytes(op->tensor->dtype));
    if (bytes == 0 || b < bytes) bytes = b;
    IRVisitor::visit(op);
  }
};

// A reduction over outer axes: threads along the contiguous output axis. Where the outputs come
// in whole vectors of 16 bytes of input (lanes) and whole warps of them, each thread owns one
// vector of outputs (an accumulator per lane, 16-byte loads) and column_row_threads threads in
// threadIdx.y split the reduced rows between them (SplitColumnReduction); otherwise a thread per
// output, serial over the reduction.
StageSchedule column_reduction(const te::Tensor& t) {
  StageSchedule s;
  if (t.ndim() == 0) {
    s.description = "reduction to a scalar: one thread";
    return s;
  }
  const int n = t.ndim();
  std::vector<std::string> names;
  for (int d = 0; d < n; ++d) names.push_back(axis(d));
  NarrowestRead read;
  read.visit(t->body);
  const int64_t lanes = read.bytes > 0 ? std::max<int64_t>(1, g_options.vector_bytes / read.bytes) : 1;
  auto last = as_const_int(t.shape(n - 1));
  auto outputs = as_const_int(product(t.shape(), 0, t.shape().size()));
  if (lanes > 1 && last && outputs && *last % lanes == 0 &&
      (*outputs / lanes) % g_options.column_threads == 0) {
    s.transforms.push_back(split(axis(n - 1), lanes));
    names.back() = axis(n - 1) + ".o";
    const std::string all = fuse_all(s.transforms, names);
    s.transforms.push_back(split(all, g_options.column_threads));
    s.transforms.push_back(bind_to(all + ".o", ForKind::BlockIdxX));
    s.transforms.push_back(bind_to(all + ".i", ForKind::ThreadIdxX));
    s.transforms.push_back(vectorize(axis(n - 1) + ".i"));
    s.reduce_row_threads = column_row_threads(lanes);
    s.description = "reduction over outer axes: blocks of " + std::to_string(g_options.column_threads) +
                    " x " + std::to_string(s.reduce_row_threads) + " threads, " +
                    std::to_string(lanes) +
                    " outputs per thread along the contiguous axis (16-byte loads, an accumulator "
                    "per lane), the reduced "
                    "rows split over threadIdx.y and combined through shared memory";
    return s;
  }
  const std::string all = fuse_all(s.transforms, names);
  s.transforms.push_back(split(all, g_options.threads_per_block));
  s.transforms.push_back(bind_to(all + ".o", ForKind::BlockIdxX));
  s.transforms.push_back(bind_to(all + ".i", ForKind::ThreadIdxX));
  s.description =
      "reduction over outer axes: a thread per output, " + std::to_string(g_options.threads_per_block) +
      " threads along the contiguous output axis (coalesced), serial over the reduction";
  return s;
}

// Big tiles (8 x 8 outputs per thread, 128 x 128 per block) where both sides fill them; small
// ones (2 x 2, 32 x 32) for small products and convolutions over few channels.
ContractionTile contraction_tile(const te::Tensor& t, const te::Contraction& c) {
  auto side = [&](const std::vector<int>& axes) {
    Expr e = Expr(1);
    for (int d : axes) e = e * t.shape(d);
    return as_const_int(simplify(e));
  };
  const auto m = side(c.m_axes), n = side(c.n_axes);
  const bool big = (!m || *m >= 128) && (!n || *n >= 128);
  return big ? ContractionTile{128, 128, 8, 8, 8} : ContractionTile{32, 32, 16, 2, 2};
}

// The contraction template for a contraction whose factors are float16/bfloat16 reads widened to
// float32 (MatMul, Gemm, attention's products): the small-M kernel up to 16 rows of A (unless M
// is known to be larger), the tensor-core kernel above, its tile from the output's sides.
std::optional<GemmTemplate> gemm_template(const te::Tensor& t, const te::Contraction& c,
                                         const DefaultScheduleOptions& options) {
  const bool allow_tf32 = options.allow_tf32;
  // The dtype the factor reads: float16/bfloat16 widened to float32, or float32 itself.
  auto factor_dtype = [](const Expr& e) -> std::optional<DType> {
    const Cast* cast = e.as<Cast>();
    const TensorRead* r = cast ? cast->value.as<TensorRead>() : e.as<TensorRead>();
    if (!r) return std::nullopt;
    const DType d = r->tensor->dtype;
    if (cast && (d == DType::Float16 || d == DType::BFloat16)) return d;
    if (!cast && d == DType::Float32) return d;
    return std::nullopt;
  };
  const auto fa = factor_dtype(c.a), fb = factor_dtype(c.b);
  if (!fa || !fb || *fa != *fb || t.dtype() != DType::Float32) return std::nullopt;
  const DType da = *fa;
  if (da == DType::Float32 && !allow_tf32) return std::nullopt;
  auto side = [&](const std::vector<int>& axes) {
    Expr e = Expr(1);
    for (int d : axes) e = e * t.shape(d);
    return as_const_int(simplify(e));
  };
  const auto m = side(c.m_axes), n = side(c.n_axes);
  // Measured on H200 (bench/gemm/NOTES.md, gemv run 2, both B layouts): GemvConfig<16, 4> where
  // N > 4096 (many 32-column strips: small blocks, 5 per SM), <16, 16> up to 4096 (few strips:
  // K split across 2-block clusters of 16 warps), <16, 8> when N is unknown; 64x128 tiles with
  // split-K up to M = 256 (H100); 256x128x64 over 8 warps above (128x128x32 over 8 warps for a
  // dual product, whose accumulators double).
  GemmTemplate g;
  g.tf32 = da == DType::Float32;
  if (options.gemv_warps > 0) {
    g.gemv_warps = options.gemv_warps;
  } else if (n) {
    g.gemv_warps = *n > 4096 ? 4 : 16;
  }
  g.wgmma_wide_min_k = options.wgmma_wide_min_k;
  if (options.wgmma_dual_tile == 1) {
    g.wgmma_dual_tile = GemmWgmmaTile{128, 128, 4, false, false};
  } else if (options.wgmma_dual_tile == 2) {
    g.wgmma_dual_tile = GemmWgmmaTile{128, 128, 6, false, true};
  }
  g.wgmma_swap = options.wgmma_swap;
  if (m && *m > g.gemv_max_m) g.gemv_max_m = 0;
  if (m && *m > g.mid_max_m) g.mid_max_m = 0;
  auto s = [](int64_t v) { return std::to_string(v); };
  auto tile = [&](const GemmTile& g_tile) {
    return s(g_tile.bm) + "x" + s(g_tile.bn) + "x" + s(g_tile.bk) + " tiles (" + s(g_tile.warps_m * g_tile.warps_n) +
           " warps, " + s(g_tile.stages) + " stages)";
  };
  // Above M = 256 on Hopper (H200, bench/gemm/NOTES.md): wgmma + TMA, 0.56-0.91x cuBLAS where
  // mma.sync reaches 0.25-0.52x: 128x256 cooperative tiles when K >= 2048 and their whole waves
  // are no more work than the narrow tiles' (kiln::gemm::wgmma_prefers_wide; 4096 x 16384 x 2048
  // 402-412 us against 417-433 on 128x128, harness runs s14a and s20a), else 128x128
  // cooperative (session 6's probe: faster than ping-pong on every ViT and M = 816 shape, e.g.
  // 1576 x 768 x 768 12.9 vs 16.5 us); dual products 64x128 ping-pong (in the Gemma
  // block at M = 816, 210.4 us vs 230.9 for 128x128 cooperative, two runs). float32 (TF32) keeps simt.
  g.wgmma = !g.tf32;
  auto wtile = [&](const GemmWgmmaTile& w) {
    return s(w.bm) + "x" + s(w.bn) + "x64 tiles (" + (w.swap_ab ? "weight rows x tokens, " : "") + s(w.stages) +
           " TMA stages, " + (w.pingpong ? "ping-pong" : "cooperative") + " consumer warpgroups" +
           (w.dual_halves ? ", half the columns from each B" : "") + ")";
  };
  // SWAP_AB (the tokens on wgmma's N), per call where its whole waves are less work than the tile
  // the rule picked (kiln::gemm::wgmma_swap_choice).
  const std::string swap =
      g.wgmma_swap ? std::string("; the transposed problem on ") + wtile(g.wgmma_swap_narrow_tile) + " or " + wtile(g.wgmma_swap_tile) +
                         " (dual products " + wtile(g.wgmma_dual_swap_tile) +
                         ") where A is K-major and their whole waves are under 0.95x that tile's work"
                   : std::string();
  std::string rule;
  if (g.gemv_max_m) {
    rule += "M <= " + s(g.gemv_max_m) + ": the small-M kernel (streams B once, " + s(g.gemv_warps) + " warps per block)" +
            (g.wgmma && !g.tf32 ? std::string(", on sm_90 the Hopper GEMM's 16-token SWAP_AB tile where its 128-row weight tiles "
                                              "fill 3/4 of the SMs or, from M = 9, for single products with N <= 2048 "
                                              "(kiln::gemm::small_m_takes_swap16), and from M = 9 for other dual products its "
                                              "64x128 ping-pong tiles (kiln::gemm::small_m_takes_wgmma)")
                                : std::string()) +
            "; ";
  }
  if (g.mid_max_m) rule += "M <= " + s(g.mid_max_m) + ": tensor-core GEMM (mma.sync), " + tile(g.mid_tile) + ", split-K; ";
  if (g.wgmma) {
    rule += (rule.empty() ? "" : "above: ") + std::string("on sm_90 Hopper GEMM (wgmma + TMA), ") + wtile(g.wgmma_tile) +
            " when K >= " + s(g.wgmma_wide_min_k) + " and their waves are no more work than the narrow tile's, else " + wtile(g.wgmma_narrow_tile) + " (dual products " +
            wtile(g.wgmma_dual_tile) + ")" + swap + ", elsewhere or for operands TMA cannot read tensor-core GEMM (mma.sync), " + tile(g.tile) +
            " (dual products " + tile(g.dual_tile) + ")";
  } else {
    rule += (rule.empty() ? "" : "above: ") + std::string("tensor-core GEMM (mma.sync), ") + tile(g.tile) +
            " (dual products " + tile(g.dual_tile) + ")";
  }
  g.reason = std::string(dtype_name(da)) + (g.tf32 ? " factors in TF32 (allowed by the user)" : " factors") + ": " + rule;
  // A convolution (lowering decides: a 1-D/2-D NCHW read with a constant window) runs one
  // implicit-GEMM kernel, m = output channels, chosen per call (kiln_gemm.cuh's conv): with
  // options.conv_wgmma, on sm_90 the Hopper kernel where its run-time checks pass; else the patch
  // kernel where its checks pass, else the gather kernel with 64-row tiles when m is at most 64.
  if (!g.tf32 && t->body.as<Reduce>()->axes.size() >= 2) {
    g.conv_tile = m && *m <= 64 ? GemmTile{64, 128, 32, 2, 2, 2} : GemmTile{128, 128, 32, 2, 4, 2};
    g.conv_wgmma = options.conv_wgmma;
    const std::string hopper =
        g.conv_wgmma ? "on sm_90 (sm_90a build) with stride 1 and C a multiple of 8, wgmma + TMA (conv_wgmma.cuh: the "
                       "weight and an NHWC copy of the image in the workspace, per k-step one tap and "
                       "64 channels, image boxes zero-filled past the edges as padding; where the output row rounded up "
                       "to 8 divides 224, tiles of whole rows, 64x224 ping-pong for at most 64 output channels, else "
                       "128x224 cooperative; other widths 64x256 or 128x128 ping-pong); otherwise mma.sync: "
                     : "mma.sync; ";
    g.conv_reason = std::string(dtype_name(da)) +
                    " convolution: implicit GEMM on tensor cores (m = output channels, n = output pixels, "
                    "k = C*KH*KW); " + hopper +
                    "where the shapes allow at run time (C a multiple of 16, even input width, "
                    "KH*KW <= 16, the patch fits in shared memory) the input patch kernel (conv_patch.cuh: each "
                    "CTA's input rows with their halo copied once per 16 channels, every tap read from shared "
                    "memory), else where C*KH*KW <= 32 and at most 256 output channels a direct convolution (conv_direct.cuh: "
                    "fp32 FMAs, each thread's input taps in registers, the weight in shared memory), else the im2col "
                    "gathered in the loader (padding taps zero), " +
                    s(g.conv_tile.bm) + "x" + s(g.conv_tile.bn) + "x" + s(g.conv_tile.bk) + " tiles (" +
                    s(g.conv_tile.warps_m * g.conv_tile.warps_n) + " warps, double-buffered)";
  }
  return g;
}

// A kiln.QuantLinear accumulator with float16/bfloat16 activations: the 4-bit weight kernels of
// kernels/quant/ (lowering checks the operands and keeps the tiled path where they do not fit).
std::optional<GemmTemplate> quant_template(const te::Tensor& t) {
  const te::QuantLinearInfo& q = *t->quant_linear;
  const DType dx = q.x.dtype();
  if (t.dtype() != DType::Float32 || (dx != DType::Float16 && dx != DType::BFloat16)) return std::nullopt;
  GemmTemplate g;
  g.w4 = true;
  g.gemv_max_m = 16;
  g.reason = std::string(dtype_name(dx)) +
             " activations, 4-bit weights: kernels/quant/ (M <= 16: GEMV, variant 8 at M = 1, 5 above; "
             "tensor-core GEMM above: wgmma in sm_90a builds on Hopper, else mma.sync; split-K through the "
             "workspace), the consumers in its epilogue";
  return g;
}

std::string describe(const ContractionTile& tile) {
  auto s = [](int64_t v) { return std::to_string(v); };
  return "contraction tiled through shared memory: a block per " + s(tile.m) + " x " + s(tile.n) + " output tile (" +
         s(tile.threads()) + " threads, " + s(tile.thread_m) + " x " + s(tile.thread_n) +
         " accumulators each in registers), steps of " + s(tile.k) + " along the reduction";
}

StageSchedule flat_injective(const te::Tensor& t) {
  StageSchedule s;
  const int n = t.ndim();
  if (n == 0) {
    s.description = "scalar: one thread";
    return s;
  }
  std::vector<std::string> names;
  for (int d = 0; d < n; ++d) names.push_back(axis(d));
  const int64_t lanes = vector_lanes(t.dtype());
  auto last = as_const_int(t.shape(n - 1));
  std::string vector_loop;
  if (lanes > 1 && last && *last % lanes == 0) {
    s.transforms.push_back(split(axis(n - 1), lanes));
    names.back() = axis(n - 1) + ".o";
    vector_loop = axis(n - 1) + ".i";
  }
  const std::string all = fuse_all(s.transforms, names);
  s.transforms.push_back(split(all, g_options.threads_per_block));
  s.transforms.push_back(bind_to(all + ".o", ForKind::BlockIdxX));
  s.transforms.push_back(bind_to(all + ".i", ForKind::ThreadIdxX));
  if (!vector_loop.empty()) s.transforms.push_back(vectorize(vector_loop));
  s.description = "elementwise: grid-stride over blocks of " + std::to_string(g_options.threads_per_block) + " threads" +
                  (vector_loop.empty() ? std::string(", scalar accesses (last axis not a multiple of the vector)")
                                       : ", " + std::to_string(lanes) + " elements (16 bytes) per access");
  return s;
}

StageSchedule row_injective(const te::Tensor& t, const Row& row) {
  StageSchedule s;
  const int n = t.ndim();
  const std::string last = axis(n - 1);
  std::vector<std::string> outer;
  for (int d = 0; d < n - 1; ++d) outer.push_back(axis(d));
  const int64_t lanes = vector_lanes(t.dtype());
  auto columns = as_const_int(t.shape(n - 1));
  std::string thread, serial, vector_loop;
  if (lanes > 1 && columns && *columns % lanes == 0) {
    s.transforms.push_back(split(last, lanes));
    s.transforms.push_back(split(last + ".o", row.threads));
    thread = last + ".o.i", serial = last + ".o.o", vector_loop = last + ".i";
  } else {
    s.transforms.push_back(split(last, row.threads));
    thread = last + ".i", serial = last + ".o";
  }
  const std::string rows = fuse_all(s.transforms, outer);
  std::vector<std::string> order = {rows, thread, serial};
  if (!vector_loop.empty()) order.push_back(vector_loop);
  s.transforms.push_back(reorder(order));
  s.transforms.push_back(bind_to(rows, ForKind::BlockIdxX));
  s.transforms.push_back(bind_to(thread, ForKind::ThreadIdxX));
  if (!vector_loop.empty()) s.transforms.push_back(vectorize(vector_loop));
  s.description = "row elementwise: a block per row, " + std::to_string(row.threads) + " threads across the row" +
                  (vector_loop.empty() ? std::string("") : ", 16 bytes per access");
  return s;
}

StageSchedule per_row_scalar(const te::Tensor& t) {
  StageSchedule s;
  std::vector<std::string> names;
  for (int d = 0; d < t.ndim(); ++d) names.push_back(axis(d));
  s.transforms.push_back(bind_to(fuse_all(s.transforms, names), ForKind::BlockIdxX));
  s.description = "one value per row: a block per row (every thread computes it)";
  return s;
}

}  // namespace

Schedule default_gpu_schedule(const std::vector<te::Tensor>& inputs, const std::vector<te::Tensor>& outputs,
                              const DefaultScheduleOptions& options) {
  g_options = options;
  Schedule schedule;
  schedule.fuse_row_stages = true;
  schedule.reciprocal_divisors = true;
  schedule.float_intermediates = options.float_intermediates;
  schedule.cache_row_bytes = options.row_cache_bytes;
  std::unordered_set<const te::TensorNode*> is_input;
  for (const te::Tensor& t : inputs) is_input.insert(t.node().get());
  std::vector<te::Tensor> stages;
  for (const te::Tensor& t : te::topological_order(outputs)) {
    if (!t.is_placeholder() && !is_input.count(t.node().get())) stages.push_back(t);
  }
  std::vector<Row> rows;
  for (const te::Tensor& t : stages) {
    if (auto row = row_of_reduction(t)) rows.push_back(*row);
  }
  auto matching_row = [&](const Expr& r, const Expr& c) -> const Row* {
    for (const Row& row : rows) {
      if (structurally_equal(row.rows, r) && structurally_equal(row.columns, c)) return &row;
    }
    return nullptr;
  };
  for (const te::Tensor& t : stages) {
    StageSchedule s;
    if (t->pattern == te::Pattern::Reduction) {
      auto row = row_of_reduction(t);
      s = row ? row_reduction(t, *row) : column_reduction(t);
      if (auto c = te::as_contraction(t)) {
        s.contraction_tile = contraction_tile(t, *c);
        s.contraction_description = describe(*s.contraction_tile);
        s.gemm_template = gemm_template(t, *c, options);
      }
      if (t->quant_linear) s.gemm_template = quant_template(t);
    } else if (t.ndim() >= 2) {
      const Expr r = product(t.shape(), 0, t.shape().size() - 1), c = simplify(t.shape().back());
      const Row* row = matching_row(r, c);
      bool per_row = false;
      if (!row && is_one(c)) {
        for (const Row& candidate : rows) per_row = per_row || structurally_equal(candidate.rows, r);
      }
      s = row ? row_injective(t, *row) : per_row ? per_row_scalar(t) : flat_injective(t);
    } else {
      s = flat_injective(t);
    }
    schedule.stage(t.name()) = s;
  }
  return schedule;
}

}  // namespace kiln
