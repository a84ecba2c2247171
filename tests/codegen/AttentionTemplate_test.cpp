// The fused attention template (kernels/gemm/attention.cuh) as generated code calls it: an exported
// attention lowered to a TemplateAttention (src/lower/TemplateAttention.h), printed as an
// AttentionProblem, an epilogue functor storing the transposed layout (with the scale's device
// factor) and the path comment, compiled without warnings for sm_80, sm_90 and sm_110 from the
// embedded support files: fp16 with head dim 64, bf16 with head dim 128 (the tensor-core paths) and
// fp16 with head dim 80 (the fallback), in one nvcc run (CI has 2 cores). Running it needs a GPU:
// bench/attention/device_check.sh and bench/contraction/edge_check.py check it against fp32.
#include <gtest/gtest.h>

#include "../ops/TestGraph.h"
#include "CompileCuda.h"
#include "kiln/codegen/Build.h"
#include "kiln/codegen/Codegen.h"
#include "kiln/codegen/GraphFunctions.h"

namespace kiln {
namespace {

using namespace ir;
using test::TestGraph;

TEST(AttentionTemplate, EmbeddedAsSupportFile) {
  bool found = false;
  for (const auto& [name, text] : codegen::support_files()) {
    if (name.find("gemm/attention.cuh") != std::string::npos)
      found = text.find("attention_tc_kernel") != std::string::npos;
  }
  EXPECT_TRUE(found)
      << "kernels/gemm/attention.cuh is not among the support files generated code includes";
}

// softmax(q k^T * scale) v transposed, as PyTorch exports it, with head dim d.
Graph exported_attention(DType dtype, int64_t d) {
  TestGraph t(17, false);
  const int q = t.input("q", dtype, {Expr(2), Expr(3), Expr(7), Expr(d)});
  const int k = t.input("k", dtype, {Expr(2), Expr(3), Expr(9), Expr(d)});
  const int v = t.input("v", dtype, {Expr(2), Expr(3), Expr(9), Expr(d)});
  const int kt = t.node("kt", OpKind::Transpose, {k}, {{"perm", test::ints_attr({0, 1, 3, 2})}});
  const int scores = t.node("scores", OpKind::MatMul, {q, kt});
  const int scaled = t.node("scaled", OpKind::Mul, {scores, t.input("scale", dtype, {})});
  const int probs = t.node("softmax", OpKind::Softmax, {scaled}, {{"axis", test::int_attr(-1)}});
  const int context = t.node("context", OpKind::MatMul, {probs, v});
  t.output(
      t.node("moved", OpKind::Transpose, {context}, {{"perm", test::ints_attr({0, 2, 1, 3})}}));
  return t.graph;
}

TEST(AttentionTemplate, GeneratedCallsCompileForEveryArchitecture) {
  std::vector<LoweredFunc> funcs;
  for (const auto& [dtype, d] : {std::pair{DType::Float16, int64_t(64)},
                                 {DType::BFloat16, int64_t(128)},
                                 {DType::Float16, int64_t(80)}}) {
    for (auto& f : codegen::lower_graph(
             exported_attention(dtype, d), codegen::Target::Cuda,
             "attention_" + std::string(dtype_name(dtype)) + "_" + std::to_string(d))) {
      funcs.push_back(std::move(f.func));
    }
  }
  const std::string source_text = codegen::generate_module(funcs, codegen::Target::Cuda);
  for (const char* call :
       {"kiln::gemm::attention<__half, 64>(problem, epilogue",
        "kiln::gemm::attention<__nv_bfloat16, 128>", "kiln::gemm::attention<__half, 80>",
        "problem.k.stride_row = 64L;", "__device__ __forceinline__ float kiln_device_scale() const",
        "// path: tensor cores", "// path: fp32 fallback kernel"}) {
    EXPECT_NE(source_text.find(call), std::string::npos) << "expected " << call << " in\n"
                                                         << source_text;
  }
  test::expect_cuda_compiles_for_every_architecture("attention_template", source_text);
}

// With template units (kiln compile, kiln tune): the attention call is a unit of its own, which
// compiles on its own (sm_90, as kiln tune builds it); the module calls its launcher.
TEST(AttentionTemplate, CallIsAUnitOfItsOwn) {
  std::vector<LoweredFunc> funcs;
  for (auto& f : codegen::lower_graph(exported_attention(DType::Float16, 64), codegen::Target::Cuda, "attention")) {
    funcs.push_back(std::move(f.func));
  }
  std::vector<std::string> units;
  codegen::ModuleOptions options;
  options.template_units = &units;
  const std::string module = codegen::generate_module(funcs, codegen::Target::Cuda, options);
  ASSERT_EQ(units.size(), 1u) << module;
  EXPECT_EQ(module.find("kiln::gemm::attention<"), std::string::npos) << module;
  const std::string& u = units[0];
  EXPECT_NE(u.find("kiln::gemm::attention<__half, 64>(problem, epilogue, stream)"), std::string::npos) << u;
  EXPECT_NE(u.find("const kiln::gemm::AttentionProblem& problem = *problem_in;"), std::string::npos) << u;
  const size_t at = u.find("extern \"C\" cudaError_t kiln_gemm_unit_");
  ASSERT_NE(at, std::string::npos) << u;
  const std::string launcher = u.substr(at + 23, u.find('(', at) - at - 23);
  EXPECT_NE(module.find(launcher + "(&problem, &epilogue, static_cast<cudaStream_t>(stream));"), std::string::npos) << module;
  test::expect_cuda_compiles("attention_unit", u, {"sm_90"});
}

}  // namespace
}  // namespace kiln
