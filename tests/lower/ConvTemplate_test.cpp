// Convolutions lowered to the implicit-GEMM template (kernels/gemm/conv_implicit_gemm.cuh): which
// convolutions take it (1-D/2-D, group 1, float16/bfloat16, constant window), the window the node
// carries, that Conv + bias + BatchNormalization + Relu is one call, and that the node's reference
// loops (what the CPU backends run) compute what the plain lowering computes, over strides,
// padding, dilation and edge sizes.
#include <gtest/gtest.h>

#include "../ops/TestGraph.h"
#include "LoweringCheck.h"
#include "../../src/lower/TemplateContraction.h"
#include "kiln/codegen/GraphFunctions.h"
#include "kiln/ir/IRPrinter.h"
#include "kiln/ir/IRVisitor.h"
#include "kiln/ir/Simplify.h"
#include "kiln/runtime/Interpreter.h"
#include "kiln/schedule/Defaults.h"

namespace kiln {
namespace {

using namespace ir;
using test::TestGraph;
using test::random_tensor;

class FindConvTemplates : public IRVisitor {
 public:
  std::vector<const TemplateContraction*> found;
  using IRVisitor::visit;

 protected:
  void visit(const TemplateContraction* op) override {
    if (op->b[0].window) found.push_back(op);
    IRVisitor::visit(op);
  }
};

class FindAllocations : public IRVisitor {
 public:
  std::set<const BufferNode*> found;
  using IRVisitor::visit;

 protected:
  void visit(const Allocate* op) override {
    found.insert(op->buffer.get());
    IRVisitor::visit(op);
  }
};

struct ConvCase {
  std::vector<int64_t> x, w;  // shapes
  std::vector<int64_t> strides, pads, dilations;
  int64_t group = 1;
  bool bias = false;
};

Graph conv_graph(const ConvCase& c, DType dtype) {
  TestGraph t(17, false);
  std::vector<Expr> xs, ws;
  for (int64_t d : c.x) xs.push_back(Expr(d));
  for (int64_t d : c.w) ws.push_back(Expr(d));
  std::vector<int> in = {t.input("x", dtype, xs), t.input("w", dtype, ws)};
  if (c.bias) in.push_back(t.input("bias", dtype, {Expr(c.w[0])}));
  std::map<std::string, Attribute> attrs;
  if (!c.strides.empty()) attrs["strides"] = test::ints_attr(c.strides);
  if (!c.pads.empty()) attrs["pads"] = test::ints_attr(c.pads);
  if (!c.dilations.empty()) attrs["dilations"] = test::ints_attr(c.dilations);
  if (c.group != 1) attrs["group"] = test::int_attr(c.group);
  t.output(t.node("conv", OpKind::Relu, {t.node("conv_raw", OpKind::Conv, in, attrs)}));
  return t.graph;
}

// The GPU lowering's conv templates, after checking that its results (the templates' reference
// loops, interpreted) equal the CPU lowering's (plain loops) on random inputs. (Only a template's
// reference loops are interpretable; the GPU lowering of anything else is thread-bound code.)
std::vector<const TemplateContraction*> check_against_plain(const Graph& g, const ConvCase& c, DType dtype,
                                                             std::vector<codegen::GraphFunction>& keep) {
  keep = codegen::lower_graph(g, codegen::Target::Cuda, "gpu");
  FindConvTemplates v;
  v.visit(keep[0].func.body);
  if (v.found.empty()) return {};
  const auto cpu = codegen::lower_graph(g, codegen::Target::Cpu, "cpu");
  std::vector<HostTensor> inputs = {random_tensor(dtype, c.x, 1), random_tensor(dtype, c.w, 2)};
  if (c.bias) inputs.push_back(random_tensor(dtype, {c.w[0]}, 3));
  const std::vector<HostTensor> want = interpret(cpu[0].func, inputs);
  const std::vector<HostTensor> got = interpret(keep[0].func, inputs);
  EXPECT_EQ(got.size(), want.size());
  for (size_t o = 0; o < want.size() && o < got.size(); ++o) {
    EXPECT_EQ(got[o].shape(), want[o].shape());
    for (int64_t i = 0; i < want[o].num_elements(); ++i) {
      if (std::abs(got[o].get_double(i) - want[o].get_double(i)) > 2e-2) {
        ADD_FAILURE() << "output " << o << " element " << i << ": got " << got[o].get_double(i) << ", want "
                      << want[o].get_double(i);
        break;
      }
    }
  }
  return v.found;
}

TEST(ConvTemplate, Conv2dWithBiasAndReluIsOneImplicitGemmCall) {
  const ConvCase c{{2, 8, 9, 7}, {16, 8, 3, 3}, {}, {1, 1, 1, 1}, {}, 1, true};
  std::vector<codegen::GraphFunction> gpu;
  const auto found = check_against_plain(conv_graph(c, DType::Float16), c, DType::Float16, gpu);
  ASSERT_EQ(found.size(), 1u) << to_string(gpu[0].func.body);
  const TemplateContraction* t = found[0];
  EXPECT_EQ(to_string(t->m), "16");
  EXPECT_EQ(to_string(t->n), "126");  // 2 images x 9 x 7 pixels
  EXPECT_EQ(to_string(t->k), "72");   // 8 channels x 3 x 3
  const ConvWindow& w = *t->b[0].window;
  EXPECT_EQ(t->b[0].buffer->name, "x");
  EXPECT_EQ(to_string(w.channels), "8");
  EXPECT_EQ(to_string(w.out_height), "9");
  EXPECT_EQ(to_string(w.out_width), "7");
  EXPECT_EQ(w.kernel_h, 3);
  EXPECT_EQ(w.pad_h, 1);
  EXPECT_EQ(w.pad_w, 1);
  EXPECT_EQ(w.stride_h, 1);
  EXPECT_NE(t->description.find("epilogue"), std::string::npos) << t->description;  // bias and Relu folded
  EXPECT_NE(t->config.reason.find("implicit GEMM"), std::string::npos) << t->config.reason;
  // Which kernel runs is decided at run time (C = 8 here: the gather kernel); the reason names both.
  EXPECT_NE(t->config.reason.find("conv_patch.cuh"), std::string::npos) << t->config.reason;
  EXPECT_NE(t->config.reason.find("C a multiple of 16"), std::string::npos) << t->config.reason;
  EXPECT_NE(t->config.reason.find("C*KH*KW <= 32 and at most 256 output channels a direct convolution (conv_direct.cuh"),
            std::string::npos)
      << t->config.reason;
  // The Hopper kernel is on by default: the reason names it and the call has its workspace
  // (the repacked weight and the NHWC image: 16 * 72 + 2 * 8 * 9 * 7 elements).
  EXPECT_NE(t->config.reason.find("conv_wgmma.cuh"), std::string::npos) << t->config.reason;
  EXPECT_TRUE(t->config.conv_wgmma);
  ASSERT_TRUE(t->split_k.defined());
  EXPECT_EQ(to_string(simplify(t->split_k.num_elements())), std::to_string(16 * 72 + 2 * 8 * 9 * 7));
}

// With DefaultScheduleOptions::conv_wgmma, where the Hopper kernel (conv_wgmma.cuh) may run the
// call reserves a workspace of M * K + images * C * H * W elements of the weight's dtype (the
// repacked weight and the NHWC image), and the reason names the kernel; where it does not run
// (stride 2, C not a multiple of 8), none.
TEST(ConvTemplate, HopperKernelGetsAWorkspaceWhenEnabled) {
  struct Expect {
    ConvCase c;
    DType dtype;
    int64_t elements;  // 0: no workspace
  };
  const std::vector<Expect> cases = {
      {{{2, 16, 9, 24}, {40, 16, 3, 3}, {}, {1, 1, 1, 1}, {}, 1, true}, DType::Float16, 40 * 16 * 9 + 2 * 16 * 9 * 24},
      {{{1, 24, 6, 15}, {8, 24, 5, 5}, {}, {2, 2, 2, 2}, {2, 2}, 1, false}, DType::BFloat16, 8 * 24 * 25 + 24 * 6 * 15},  // dilation 2, odd W
      {{{3, 16, 40}, {24, 16, 3}, {}, {1, 1}, {}, 1, false}, DType::Float16, 24 * 16 * 3 + 3 * 16 * 40},                // 1-D
      {{{2, 16, 9, 24}, {40, 16, 3, 3}, {2, 2}, {1, 1, 1, 1}, {}, 1, false}, DType::Float16, 0},                       // stride 2
      {{{2, 12, 9, 24}, {40, 12, 3, 3}, {}, {1, 1, 1, 1}, {}, 1, false}, DType::Float16, 0},                           // C = 12
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE("case " + std::to_string(i));
    const Expect& e = cases[i];
    const auto kernels = codegen::kernel_definitions(conv_graph(e.c, e.dtype), "hopper");
    ASSERT_EQ(kernels.size(), 1u);
    DefaultScheduleOptions options;
    options.conv_wgmma = true;
    const Schedule schedule = default_gpu_schedule(kernels[0].inputs, kernels[0].outputs, options);
    const codegen::GraphFunction f = codegen::lower_kernel(kernels[0], codegen::Target::Cuda, &schedule);
    FindConvTemplates v;
    v.visit(f.func.body);
    ASSERT_EQ(v.found.size(), 1u) << to_string(f.func.body);
    const TemplateContraction* t = v.found[0];
    EXPECT_TRUE(t->config.conv_wgmma);
    EXPECT_NE(t->config.reason.find("wgmma + TMA (conv_wgmma.cuh"), std::string::npos) << t->config.reason;
    if (e.elements == 0) {
      EXPECT_FALSE(t->split_k.defined()) << t->split_k->name;
      continue;
    }
    ASSERT_TRUE(t->split_k.defined());
    EXPECT_EQ(t->split_k->name, "conv_raw_acc_conv_wgmma");
    EXPECT_EQ(t->split_k->dtype, e.dtype);
    EXPECT_EQ(to_string(simplify(t->split_k.num_elements())), std::to_string(e.elements));
    // A temporary of the function (allocated around the stages): the generated signature's
    // workspace covers it.
    FindAllocations allocations;
    allocations.visit(f.func.body);
    EXPECT_TRUE(allocations.found.count(t->split_k.get())) << to_string(f.func.body);
  }
}

// The rule itself, with symbolic extents: unknown channels keep the workspace (the kernel checks
// them at run time), a symbolic batch scales the image part; a stride other than 1 or channels
// known off 8 drop it.
TEST(ConvTemplate, ConvWgmmaWorkspaceRule) {
  ConvWindow w;
  w.channels = var("c");
  w.height = Expr(5), w.width = Expr(7), w.out_height = Expr(5), w.out_width = Expr(7);
  const Expr m = Expr(64), k = var("c") * Expr(9), image = var("batch") * var("c") * Expr(35);
  const auto symbolic = conv_wgmma_workspace_elements(w, m, k, image);
  ASSERT_TRUE(symbolic.has_value());
  EXPECT_EQ(to_string(*symbolic), to_string(simplify(m * k + image)));
  w.channels = Expr(64), w.width = Expr(56), w.height = Expr(56), w.out_height = Expr(56), w.out_width = Expr(56);
  const auto known = conv_wgmma_workspace_elements(w, m, Expr(576), Expr(32 * 64 * 56 * 56));
  ASSERT_TRUE(known.has_value());
  EXPECT_EQ(to_string(*known), std::to_string(64 * 576 + 32 * 64 * 56 * 56));
  w.stride_w = 2;
  EXPECT_FALSE(conv_wgmma_workspace_elements(w, m, Expr(576), Expr(32 * 64 * 56 * 56)).has_value());
  w.stride_w = 1, w.stride_h = 2;
  EXPECT_FALSE(conv_wgmma_workspace_elements(w, m, Expr(576), Expr(32 * 64 * 56 * 56)).has_value());
  w.stride_h = 1, w.channels = Expr(3);
  EXPECT_FALSE(conv_wgmma_workspace_elements(w, m, Expr(27), Expr(32 * 3 * 56 * 56)).has_value());
}

// Strides, asymmetric padding, dilation, 1x1 and rectangular kernels, sizes off every tile,
// float16 and bfloat16, 1-D: the template's view of the window matches the plain loops.
TEST(ConvTemplate, WindowsMatchThePlainLowering) {
  const std::vector<ConvCase> cases = {
      {{1, 3, 11, 13}, {5, 3, 3, 3}, {2, 2}, {1, 1, 1, 1}, {}, 1, false},       // first layer: C = 3, stride 2
      {{2, 4, 10, 9}, {6, 4, 3, 2}, {1, 2}, {0, 1, 2, 0}, {}, 1, true},        // asymmetric pads, rectangular
      {{1, 5, 12, 12}, {7, 5, 3, 3}, {}, {2, 2, 2, 2}, {2, 2}, 1, false},      // dilation 2
      {{3, 16, 5, 5}, {33, 16, 1, 1}, {}, {}, {}, 1, true},                    // 1x1
      {{1, 2, 6, 6}, {3, 2, 5, 5}, {3, 1}, {4, 4, 4, 4}, {1, 2}, 1, false},    // pad past the kernel, mixed
      {{2, 6, 17}, {5, 6, 3}, {2}, {1, 0}, {}, 1, true},                       // 1-D
  };
  for (DType dtype : {DType::Float16, DType::BFloat16}) {
    for (size_t i = 0; i < cases.size(); ++i) {
      SCOPED_TRACE("case " + std::to_string(i) + " " + std::string(dtype_name(dtype)));
      std::vector<codegen::GraphFunction> gpu;
      const auto found = check_against_plain(conv_graph(cases[i], dtype), cases[i], dtype, gpu);
      ASSERT_EQ(found.size(), 1u) << to_string(gpu[0].func.body);
      const ConvWindow& w = *found[0]->b[0].window;
      const ConvCase& c = cases[i];
      const bool one_d = c.x.size() == 3;
      EXPECT_EQ(w.kernel_w, c.w.back());
      EXPECT_EQ(w.kernel_h, one_d ? 1 : c.w[2]);
      EXPECT_EQ(w.stride_w, c.strides.empty() ? 1 : c.strides.back());
      EXPECT_EQ(w.dilation_w, c.dilations.empty() ? 1 : c.dilations.back());
      EXPECT_EQ(w.pad_w, c.pads.empty() ? 0 : c.pads[one_d ? 0 : 1]);
      if (!one_d) {
        EXPECT_EQ(w.pad_h, c.pads.empty() ? 0 : c.pads[0]);
      }
    }
  }
}

// What the template does not take keeps the plain path (and its answers): grouped and depthwise
// convolutions, 3-D, float32.
TEST(ConvTemplate, OtherConvolutionsKeepThePlainPath) {
  const std::vector<std::pair<ConvCase, DType>> cases = {
      {{{1, 8, 6, 6}, {8, 4, 3, 3}, {}, {1, 1, 1, 1}, {}, 2, false}, DType::Float16},  // group 2
      {{{1, 8, 6, 6}, {8, 1, 3, 3}, {}, {1, 1, 1, 1}, {}, 8, false}, DType::Float16},  // depthwise
      {{{1, 2, 4, 4, 4}, {3, 2, 2, 2, 2}, {}, {}, {}, 1, false}, DType::Float16},     // 3-D
      {{{1, 3, 6, 6}, {4, 3, 3, 3}, {}, {1, 1, 1, 1}, {}, 1, false}, DType::Float32},  // exact FP32
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE("case " + std::to_string(i));
    std::vector<codegen::GraphFunction> gpu;
    EXPECT_TRUE(check_against_plain(conv_graph(cases[i].first, cases[i].second), cases[i].first, cases[i].second, gpu).empty());
  }
}

}  // namespace
}  // namespace kiln
