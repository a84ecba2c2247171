// The generated calls of the fused attention kernel (kernels/gemm/attention.cuh): the problem, the
// epilogue functor (with the scale's device factor) and the path comment, compiled with nvcc for
// every architecture CI checks. One nvcc run for both graphs (CI has 2 cores).
#include <gtest/gtest.h>

#include "../ops/TestGraph.h"
#include "CompileCuda.h"
#include "kiln/codegen/Codegen.h"
#include "kiln/codegen/GraphFunctions.h"

namespace kiln {
namespace {

using namespace ir;
using test::TestGraph;

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
  for (const auto& [dtype, d] :
       {std::pair{DType::Float16, int64_t(64)}, {DType::BFloat16, int64_t(40)}}) {
    for (auto& f : codegen::lower_graph(exported_attention(dtype, d), codegen::Target::Cuda,
                                        "attention_" + std::string(dtype_name(dtype)))) {
      funcs.push_back(std::move(f.func));
    }
  }
  const std::string source_text = codegen::generate_module(funcs, codegen::Target::Cuda);
  for (const char* call :
       {"kiln::gemm::attention<__half, 64>(problem, epilogue",
        "kiln::gemm::attention<__nv_bfloat16, 40>", "problem.k.stride_row = 64L;",
        "__device__ __forceinline__ float kiln_device_scale() const", "// path: tensor cores",
        "// path: fp32 fallback kernel"}) {
    EXPECT_NE(source_text.find(call), std::string::npos) << "expected " << call << " in\n"
                                                         << source_text;
  }
  test::expect_cuda_compiles_for_every_architecture("attention_template", source_text);
}

}  // namespace
}  // namespace kiln
