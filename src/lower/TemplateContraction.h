#pragma once
// Lowering of contractions to the hand-written templates of kernels/gemm/ (TemplateContraction
// nodes), with the elementwise stages that consume them folded into the template's epilogue.
//
// Planning (plan_template_contractions) sees the stages after inlining. A contraction stage is
// a template candidate when its schedule has a gemm_template, it is a plain contraction (no
// condition) and each factor is a float16/bfloat16 tensor read, widened to float32, whose flat
// address is affine in the batch, m, n and k axes (one stride per flattened side). Then, walking
// the stages in order, an injective stage E absorbs the contraction (or the stage that absorbed
// it) when E is the only reader, reads it only at E's own index, and has its shape: E's value
// becomes the epilogue. When E reads two such chains whose contractions share their A operand
// (the gate and up projections of a gated MLP), the two become one dual product.
//
// A kiln.QuantLinear accumulator (te::QuantLinearInfo; its schedule's gemm_template has `w4`) is
// a candidate too when x is a whole row-major [M, K] float16/bfloat16 buffer, N and K fit the
// 4-bit kernels' tiles and the weight operands are function inputs: it becomes a call of
// kernels/quant/ with the same folded epilogue (never a dual product).
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "kiln/ir/IR.h"
#include "kiln/schedule/Schedule.h"
#include "kiln/te/Tensor.h"

namespace kiln {

// A stage of the function: the tensor as the graph has it (what other stages read, the key of
// its buffer) and its body with the inlined producers substituted (what it computes).
struct LoweringStage {
  te::Tensor original, inlined;
};

// One template call: its contractions (1, or 2 sharing A) and the stages folded into its
// epilogue, in order. The call is emitted at the last stage of the chain (the contraction
// itself when the chain is empty), which writes its own buffer; the others get no stage.
struct TemplateGroup {
  std::vector<LoweringStage> contractions;
  std::vector<LoweringStage> chain;
  const LoweringStage& written() const { return chain.empty() ? contractions.front() : chain.back(); }
};

// The tensors whose inlining into a template candidate's factors would hide the buffer the
// template must read (anything but a pure re-indexing, such as a Transpose or Reshape): they
// stay stages. `order` is every tensor in topological order (before inlining).
// `folded` (optional) receives the re-indexings that a template reads through (its operand's
// address stays affine with them inlined): inlined whatever their size, since no code computes them.
std::set<const te::TensorNode*> keep_template_operands(const std::vector<te::Tensor>& order, const Schedule& schedule,
                                                       std::set<const te::TensorNode*>* folded = nullptr);

// `factor` (a float16/bfloat16 tensor read widened to float32) as a strided operand whose element
// (b, row, col) is read at (batch_vars = the digits of b, row_var = row, col_var = col; each
// variable ranging over [0, its extent)): stride_mn is the row's stride, stride_k the column's;
// nullopt when its address is not affine in them.
std::optional<ir::ContractionOperand> strided_operand(const ir::Expr& factor, const std::vector<ir::Expr>& batch_vars,
                                                      const std::vector<ir::Expr>& batch_extents, const ir::Expr& row_var,
                                                      const ir::Expr& row_extent, const ir::Expr& col_var,
                                                      const ir::Expr& col_extent,
                                                      const std::map<const te::TensorNode*, ir::Buffer>& buffers);

// Groups over `stages` (in order), given the function's outputs and every tensor's buffer
// (keyed by the original tensor: inputs and stages). Stages in `taken` (another template's, such
// as a fused attention's) are neither candidates nor absorbed, but count as readers.
std::vector<TemplateGroup> plan_template_contractions(const std::vector<LoweringStage>& stages,
                                                      const std::set<const te::TensorNode*>& outputs,
                                                      const std::map<const te::TensorNode*, ir::Buffer>& buffers,
                                                      const Schedule& schedule,
                                                      const std::set<const te::TensorNode*>& taken = {});

// Why `stage`, whose schedule has a gemm_template, is not a template call ("" when it can be).
std::string template_refusal(const LoweringStage& stage, const std::map<const te::TensorNode*, ir::Buffer>& buffers,
                             const Schedule& schedule);

// The workspace, in elements of the weight's dtype, that a convolution's call gives the Hopper
// kernel (kernels/gemm/conv_wgmma.cuh, conv_wgmma_workspace_bytes) for its repacked weight and
// the NHWC copy of the image: m * k + the image buffer's elements (images * C * H * W), or nullopt
// where that kernel never runs (a stride other than 1, channels known not to be a multiple of 8);
// the kernel checks the rest at run time.
std::optional<ir::Expr> conv_wgmma_workspace_elements(const ir::ConvWindow& window, const ir::Expr& m, const ir::Expr& k,
                                                      const ir::Expr& image_elements);

// The TemplateContraction of `group` (its written tensor's buffer is in `buffers`).
ir::Stmt template_contraction(const TemplateGroup& group, const std::map<const te::TensorNode*, ir::Buffer>& buffers,
                              const ir::GemmTemplate& config);

}  // namespace kiln
