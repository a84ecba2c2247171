#include "kiln/tune/KernelKey.h"

#include <gtest/gtest.h>

#include "TuneTestModels.h"

namespace kiln::tune {
namespace {

TEST(KernelKey, SameComputationUnderOtherNamesSharesTheKey) {
  const KernelKey a = kernel_key(test::only_kernel(test::softmax_graph(8, 64, DType::Float16)));
  const KernelKey b = kernel_key(test::only_kernel(test::softmax_graph(8, 64, DType::Float16, "layer7_")));
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.hash.size(), 16u);
  EXPECT_EQ(a.shape, "8x64->8x64");
  EXPECT_EQ(a.dtypes, "float16->float16");
}

TEST(KernelKey, ShapeDtypeAndComputationChangeIt) {
  const KernelKey a = kernel_key(test::only_kernel(test::softmax_graph(8, 64, DType::Float16)));
  const KernelKey wider = kernel_key(test::only_kernel(test::softmax_graph(8, 128, DType::Float16)));
  const KernelKey f32 = kernel_key(test::only_kernel(test::softmax_graph(8, 64, DType::Float32)));
  const KernelKey sum = kernel_key(test::only_kernel(test::column_sum_graph(8, 64, DType::Float16)));
  EXPECT_NE(a.hash, wider.hash);
  EXPECT_EQ(wider.shape, "8x128->8x128");
  EXPECT_NE(a.hash, f32.hash);
  EXPECT_NE(a.hash, sum.hash);
}

}  // namespace
}  // namespace kiln::tune
