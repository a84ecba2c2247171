// kiln.QuantLinear lowered to the 4-bit kernels of kernels/quant/ (a TemplateContraction with
// `w4`): which nodes take that path, which stages fold into the epilogue, why a node keeps the
// generated path, and that the node's reference loops (what the CPU backends run) compute what
// the plain lowering computes. Also: the kernels' in-register nibble reordering is Prepack.h's.
#include <gtest/gtest.h>

#include <random>

#include "../../kernels/quant/w4_nibbles.h"
#include "../ops/TestGraph.h"
#include "kiln/codegen/GraphFunctions.h"
#include "kiln/ir/IRPrinter.h"
#include "FindTemplates.h"
#include "kiln/ir/IRVisitor.h"
#include "kiln/quant/Prepack.h"
#include "kiln/runtime/Interpreter.h"

namespace kiln {
namespace {

using namespace ir;
using test::TestGraph;

using test::templates_in;

// The inputs of one QuantLinear layer [n, k]: weight, scales, tensor scale / zeros (graph inputs).
struct Layer {
  int weight, scales, extra;
};

Layer add_layer(TestGraph& t, const std::string& name, const std::string& format, int64_t n, int64_t k, DType act) {
  const int64_t group = format == "nvfp4" ? 16 : format == "mxfp4" ? 32 : 128;
  Layer l;
  l.weight = t.input(name + "_w", DType::UInt8, {Expr(n), Expr(k / 2)});
  l.scales = t.input(name + "_s", format == "int4" ? act : DType::UInt8, {Expr(n), Expr(k / group)});
  l.extra = format == "nvfp4" ? t.input(name + "_ts", DType::Float32, {Expr(1)})
            : format == "int4" ? t.input(name + "_z", act, {Expr(n), Expr(k / group)})
                               : -1;
  return l;
}

int quant_linear(TestGraph& t, const std::string& name, const std::string& format, int x, const Layer& l, int64_t n,
                 int64_t k, int bias = -1) {
  const int64_t group = format == "nvfp4" ? 16 : format == "mxfp4" ? 32 : 128;
  std::vector<int> inputs = {x, l.weight, l.scales};
  if (l.extra >= 0) inputs.push_back(l.extra);
  if (bias >= 0) {
    if (l.extra < 0) inputs.push_back(-1);
    inputs.push_back(bias);
  }
  return t.node(name, OpKind::QuantLinear, inputs,
                {{"in_features", test::int_attr(k)},
                 {"out_features", test::int_attr(n)},
                 {"block_size", test::int_attr(group)},
                 {"format", test::string_attr(format)}});
}

// Random data for every graph input of `g`: activations in [-1, 1]; 4-bit codes and E4M3/E8M0
// scales as random bytes in ranges that decode to finite values; INT4 zeros 0..15.
std::vector<HostTensor> random_inputs(const Graph& g, const std::map<std::string, int64_t>& symbols, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<HostTensor> out;
  for (int v : g.inputs) {
    const Value& value = g.values[v];
    std::vector<int64_t> shape;
    for (const Expr& d : value.type->shape) {
      if (auto c = as_const_int(d)) shape.push_back(*c);
      else shape.push_back(symbols.at(d.as<Variable>()->name));
    }
    HostTensor t(value.type->dtype, shape);
    const std::string& name = value.name;
    for (int64_t i = 0; i < t.num_elements(); ++i) {
      if (name.ends_with("_w")) t.set_int(i, int64_t(rng() & 0xff));
      else if (name.ends_with("_s") && value.type->dtype == DType::UInt8) t.set_int(i, int64_t(0x28 + rng() % 24));
      else if (name.ends_with("_z")) t.set_double(i, double(rng() % 16));
      else if (name.ends_with("_s")) t.set_double(i, 0.01 + 0.02 * double(rng() % 8));
      else if (name.ends_with("_ts")) t.set_double(i, 0.0625);
      else t.set_double(i, std::uniform_real_distribution<double>(-1.0, 1.0)(rng));
    }
    out.push_back(std::move(t));
  }
  return out;
}

// The graph lowered for the GPU (4-bit calls interpreted through their reference loops) against
// the plain CPU lowering, on random inputs.
void expect_same_results(const Graph& g, const std::map<std::string, int64_t>& symbols, double tolerance) {
  const auto gpu = codegen::lower_graph(g, codegen::Target::Cuda, "gpu");
  const auto cpu = codegen::lower_graph(g, codegen::Target::Cpu, "cpu");
  ASSERT_EQ(gpu.size(), 1u);
  ASSERT_EQ(cpu.size(), 1u);
  const std::vector<HostTensor> inputs = random_inputs(g, symbols, 7);
  const std::vector<HostTensor> want = interpret(cpu[0].func, inputs);
  const std::vector<HostTensor> got = interpret(gpu[0].func, inputs);
  ASSERT_EQ(got.size(), want.size());
  for (size_t o = 0; o < want.size(); ++o) {
    ASSERT_EQ(got[o].shape(), want[o].shape());
    double max_abs = 0.0;
    for (int64_t i = 0; i < want[o].num_elements(); ++i) {
      ASSERT_NEAR(got[o].get_double(i), want[o].get_double(i), tolerance) << "output " << o << " element " << i;
      max_abs = std::max(max_abs, std::abs(want[o].get_double(i)));
    }
    EXPECT_GT(max_abs, 0.0) << "output " << o << " is all zeros: the test data does not exercise the layer";
  }
}

TEST(W4Contraction, NibbleReorderingIsPrepacksKernelOrder) {
  std::mt19937_64 rng(3);
  std::vector<uint8_t> bytes(4 * 64);
  for (uint8_t& b : bytes) b = uint8_t(rng());
  const std::vector<uint8_t> kernel = quant::to_kernel_nibble_order(bytes, 4, 128);
  for (size_t w = 0; w < bytes.size() / 4; ++w) {
    uint32_t in = 0, want = 0;
    for (int b = 0; b < 4; ++b) {
      in |= uint32_t(bytes[4 * w + b]) << (8 * b);
      want |= uint32_t(kernel[4 * w + b]) << (8 * b);
    }
    EXPECT_EQ(quant::gpu::export_to_kernel_nibbles(in), want) << "word " << w << " = 0x" << std::hex << in;
  }
}

// GEMM variant 4 decodes one pair of each word: in exported order it moves the pair in place with
// two rotations instead of reordering the whole word first. Same bits where the decoders look.
TEST(W4Contraction, ExportedOrderPairIsTheReorderedWordsPair) {
  std::mt19937_64 rng(5);
  for (int w = 0; w < 256; ++w) {
    const uint32_t word = uint32_t(rng());
    const uint32_t kernel = quant::gpu::export_to_kernel_nibbles(word);
    for (int p = 0; p < 4; ++p) {
      EXPECT_EQ(quant::gpu::exported_order_pair<false>(word, p) & 0xf000f000u,
                quant::gpu::kernel_order_pair<false>(kernel, p) & 0xf000f000u)
          << "E2M1 pair " << p << " of 0x" << std::hex << word;
      EXPECT_EQ(quant::gpu::exported_order_pair<true>(word, p) & 0x000f000fu,
                quant::gpu::kernel_order_pair<true>(kernel, p) & 0x000f000fu)
          << "INT4 pair " << p << " of 0x" << std::hex << word;
    }
  }
}

// The GEMVs (w4_gemv_half2.cuh's half2 math, w4_gemv.cuh's mma steps) decode pair q of a word from
// nibbles q and q + 4 and multiply it with x pair q. Reading exported words as stored, with x paired by exported_order_x_pairs, must
// sum the same products as reading the reordered word with x in element order: each element times
// its own activation. (Nibbles and activations as integers, so the sums are exact.)
TEST(W4Contraction, ExportedOrderXPairsMeetTheirElements) {
  std::mt19937_64 rng(7);
  auto nibble = [](uint32_t word, int i) { return int64_t((word >> (4 * i)) & 0xfu); };
  auto dot = [&](uint32_t word, const uint32_t (&xp)[4]) {  // as the decoders pair them
    int64_t sum = 0;
    for (int q = 0; q < 4; ++q) sum += nibble(word, q) * int64_t(xp[q] & 0xffffu) + nibble(word, q + 4) * int64_t(xp[q] >> 16);
    return sum;
  };
  for (int w = 0; w < 256; ++w) {
    const uint32_t word = uint32_t(rng());  // exported order: nibble j holds element j
    uint16_t x[8];
    for (uint16_t& v : x) v = uint16_t(rng());
    int64_t want = 0;
    for (int j = 0; j < 8; ++j) want += nibble(word, j) * int64_t(x[j]);
    uint32_t xp[4];
    for (int q = 0; q < 4; ++q) xp[q] = uint32_t(x[2 * q]) | uint32_t(x[2 * q + 1]) << 16;
    EXPECT_EQ(dot(quant::gpu::export_to_kernel_nibbles(word), xp), want) << "kernel order, word 0x" << std::hex << word;
    quant::gpu::exported_order_x_pairs(xp);
    EXPECT_EQ(dot(word, xp), want) << "exported order, word 0x" << std::hex << word;
  }
}

// x [batch, seq, 256] -> NVFP4 QuantLinear 256 -> 64 with bias: one call of the 4-bit kernels, the
// bias and the cast in its epilogue.
TEST(W4Contraction, QuantLinearWithBiasIsOneW4Call) {
  TestGraph t(17, false);
  const int x = t.input("x", DType::Float16, {var("batch"), var("seq"), Expr(256)});
  const Layer l = add_layer(t, "fc", "nvfp4", 64, 256, DType::Float16);
  const int bias = t.input("bias", DType::Float16, {Expr(64)});
  t.output(quant_linear(t, "fc", "nvfp4", x, l, 64, 256, bias));
  const auto gpu = codegen::lower_graph(t.graph, codegen::Target::Cuda, "fc");
  const auto found = templates_in(gpu[0].func);
  ASSERT_EQ(found.size(), 1u) << to_string(gpu[0].func.body);
  const TemplateContraction* c = found[0];
  ASSERT_TRUE(c->w4.has_value());
  EXPECT_TRUE(c->b.empty());
  EXPECT_EQ(c->w4->format, W4Format::NvFp4);
  EXPECT_EQ(c->w4->group, 16);
  EXPECT_EQ(c->w4->weight->name, "fc_w");
  EXPECT_EQ(c->w4->extra->name, "fc_ts");
  EXPECT_EQ(to_string(c->m), "(batch * seq)");
  EXPECT_EQ(to_string(c->n), "64");
  EXPECT_EQ(to_string(c->k), "256");
  EXPECT_NE(to_string(c->epilogue).find("bias"), std::string::npos) << to_string(c->epilogue);
  // The kernels get no tensor scale (plugins pass it in the activation dtype): the epilogue
  // multiplies by it, the reference's sum already has it.
  EXPECT_NE(to_string(c->epilogue).find("fc_ts"), std::string::npos) << to_string(c->epilogue);
  ASSERT_TRUE(c->split_k.defined());
  EXPECT_NE(to_string(c->split_k.num_elements()).find("select"), std::string::npos);
  expect_same_results(t.graph, {{"batch", 2}, {"seq", 3}}, 2e-2);
}

// Gemma's MLP on 4-bit weights: gate and up share x (kernels/quant/'s fused gate/up kernel needs
// interleaved weights, so they stay two calls), tanh-GELU(gate) * up folds into one of them, the
// residual add into down's.
TEST(W4Contraction, GatedMlpFoldsActivationProductAndResidual) {
  for (const std::string format : {"nvfp4", "int4"}) {
    TestGraph t(20, false);  // Gelu
    const DType act = DType::BFloat16;
    const int x = t.input("x", act, {var("m"), Expr(128)});
    const Layer g = add_layer(t, "gate", format, 256, 128, act), u = add_layer(t, "up", format, 256, 128, act);
    const Layer d = add_layer(t, "down", format, 128, 256, act);
    const int gate = quant_linear(t, "gate", format, x, g, 256, 128);
    const int up = quant_linear(t, "up", format, x, u, 256, 128);
    const int gelu = t.node("gelu", OpKind::Gelu, {gate}, {{"approximate", test::string_attr("tanh")}});
    const int h = t.node("h", OpKind::Mul, {gelu, up});
    const int down = quant_linear(t, "down", format, h, d, 128, 256);
    t.output(t.node("residual", OpKind::Add, {down, x}));
    const auto gpu = codegen::lower_graph(t.graph, codegen::Target::Cuda, "mlp");
    const auto found = templates_in(gpu[0].func);
    ASSERT_EQ(found.size(), 3u) << format << "\n" << to_string(gpu[0].func.body);
    for (const TemplateContraction* c : found) {
      ASSERT_TRUE(c->w4.has_value());
      EXPECT_EQ(c->w4->format, format == "nvfp4" ? W4Format::NvFp4 : W4Format::Int4);
    }
    const std::string mul_epilogue = to_string(found[0]->epilogue) + to_string(found[1]->epilogue);
    EXPECT_NE(mul_epilogue.find("tanh"), std::string::npos) << mul_epilogue;
    EXPECT_NE(to_string(found[2]->epilogue).find("x["), std::string::npos) << to_string(found[2]->epilogue);
    // Stages: gate, up (with the product), down (with the residual): nothing else.
    EXPECT_EQ(gpu[0].func.stage_notes.size(), 3u);
    expect_same_results(t.graph, {{"m", 3}}, format == "nvfp4" ? 5e-2 : 5e-2);
  }
}

std::string notes_of(const LoweredFunc& f) {
  std::string all;
  for (const std::string& n : f.stage_notes) all += n + "\n";
  return all;
}

// Shapes and operands the kernels cannot take keep the generated path, and the note says why.
TEST(W4Contraction, UnsupportedLayersKeepTheGeneratedPathAndSayWhy) {
  {  // N = 40 is not a multiple of 16
    TestGraph t(17, false);
    const int x = t.input("x", DType::Float16, {var("m"), Expr(128)});
    t.output(quant_linear(t, "fc", "nvfp4", x, add_layer(t, "fc", "nvfp4", 40, 128, DType::Float16), 40, 128));
    const auto gpu = codegen::lower_graph(t.graph, codegen::Target::Cuda, "fc");
    EXPECT_TRUE(templates_in(gpu[0].func).empty());
    EXPECT_NE(notes_of(gpu[0].func).find("N a multiple of 16"), std::string::npos) << notes_of(gpu[0].func);
  }
  {  // MXFP4: block scales above 2^1 would not fit the kernels, and run-time weights are unchecked
    TestGraph t(17, false);
    const int x = t.input("x", DType::Float16, {var("m"), Expr(128)});
    t.output(quant_linear(t, "fc", "mxfp4", x, add_layer(t, "fc", "mxfp4", 32, 128, DType::Float16), 32, 128));
    const auto gpu = codegen::lower_graph(t.graph, codegen::Target::Cuda, "fc");
    EXPECT_TRUE(templates_in(gpu[0].func).empty());
    EXPECT_NE(notes_of(gpu[0].func).find("MXFP4"), std::string::npos) << notes_of(gpu[0].func);
  }
  {  // INT4 scales in float16 with bfloat16 activations
    TestGraph t(17, false);
    const int x = t.input("x", DType::BFloat16, {var("m"), Expr(128)});
    t.output(quant_linear(t, "fc", "int4", x, add_layer(t, "fc", "int4", 32, 128, DType::Float16), 32, 128));
    const auto gpu = codegen::lower_graph(t.graph, codegen::Target::Cuda, "fc");
    EXPECT_TRUE(templates_in(gpu[0].func).empty());
    EXPECT_NE(notes_of(gpu[0].func).find("INT4 scales and zeros of float16 with bfloat16"), std::string::npos)
        << notes_of(gpu[0].func);
  }
  {  // float32 activations: no 4-bit kernel at all (the schedule does not offer one)
    TestGraph t(17, false);
    const int x = t.input("x", DType::Float32, {var("m"), Expr(128)});
    t.output(quant_linear(t, "fc", "nvfp4", x, add_layer(t, "fc", "nvfp4", 32, 128, DType::Float32), 32, 128));
    const auto gpu = codegen::lower_graph(t.graph, codegen::Target::Cuda, "fc");
    EXPECT_TRUE(templates_in(gpu[0].func).empty());
  }
}

}  // namespace
}  // namespace kiln
