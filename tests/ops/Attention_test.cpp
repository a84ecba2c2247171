// Attention and RotaryEmbedding definitions: error messages, and a masked row on the CPU
// reference (all keys masked gives 0, as the spec says).
#include <gtest/gtest.h>

#include "TestGraph.h"
#include "kiln/runtime/GraphRunner.h"

namespace kiln {
namespace {

using test::OpsTestGraph;

TEST(Attention, ThreeDimensionalNeedsHeads) {
  OpsTestGraph b(23);
  const int q = b.input("q", DType::Float32, {1, 2, 4});
  b.output(b.node("a", OpKind::Attention, {q, b.input("k", DType::Float32, {1, 2, 4}), b.input("v", DType::Float32, {1, 2, 4})}));
  EXPECT_EQ(b.error(), "node 'a' (Attention): 3-D Q/K/V need attributes 'q_num_heads' and 'kv_num_heads'");
}

TEST(Attention, GroupedHeadsMustDivide) {
  OpsTestGraph b(23);
  const int q = b.input("q", DType::Float32, {1, 3, 2, 4});
  b.output(b.node("a", OpKind::Attention,
                  {q, b.input("k", DType::Float32, {1, 2, 2, 4}), b.input("v", DType::Float32, {1, 2, 2, 4})}));
  EXPECT_EQ(b.error(), "node 'a' (Attention): q heads (3) must be a multiple of kv heads (2)");
}

TEST(Attention, FullyMaskedRowIsZero) {
  OpsTestGraph b(23);
  const int q = b.input("q", DType::Float32, {1, 1, 2, 1});
  const int k = b.input("k", DType::Float32, {1, 1, 2, 1});
  const int v = b.input("v", DType::Float32, {1, 1, 2, 1});
  const int m = b.input("m", DType::Bool, {2, 2});
  b.output(b.node("a", OpKind::Attention, {q, k, v, m}));
  HostTensor mask(DType::Bool, {2, 2});
  for (int64_t e = 0; e < 4; ++e) mask.set_int(e, e >= 2 ? 1 : 0);  // row 0 masked, row 1 open
  std::vector<HostTensor> out = run_graph_on_cpu(
      b.graph, {{"q", test::float_tensor({1, 1, 2, 1}, {1, 0})}, {"k", test::float_tensor({1, 1, 2, 1}, {0, 0})},
                {"v", test::float_tensor({1, 1, 2, 1}, {2, 4})}, {"m", mask}});
  EXPECT_EQ(test::values_of(out[0]), (std::vector<double>{0, 3}));
}

TEST(RotaryEmbedding, CacheWidth) {
  OpsTestGraph b(23);
  const int x = b.input("x", DType::Float32, {1, 1, 2, 4});
  b.output(b.node("r", OpKind::RotaryEmbedding,
                  {x, b.input("c", DType::Float32, {1, 2, 4}), b.input("s", DType::Float32, {1, 2, 4})}));
  EXPECT_EQ(b.error(),
            "node 'r' (RotaryEmbedding): cos_cache [1, 2, 4] and sin_cache [1, 2, 4] must have rank 3 and a last dim "
            "of 2 (rotary_embedding_dim / 2)");
}

}  // namespace
}  // namespace kiln
