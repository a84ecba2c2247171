// Loss definitions: error messages, and the CPU reference's mean over weights with ignore_index.
#include <gtest/gtest.h>

#include "TestGraph.h"
#include "kiln/runtime/GraphRunner.h"

namespace kiln {
namespace {

using test::OpsTestGraph;

TEST(NegativeLogLikelihoodLoss, TargetRank) {
  OpsTestGraph b(13);
  const int x = b.input("x", DType::Float32, {2, 3, 4});
  b.output(b.node("l", OpKind::NegativeLogLikelihoodLoss, {x, b.input("t", DType::Int64, {2})}));
  EXPECT_EQ(b.error(), "node 'l' (NegativeLogLikelihoodLoss): target [2] must have rank 2 ([N, d1, ...]) for input [2, 3, 4]");
}

TEST(NegativeLogLikelihoodLoss, UnknownReduction) {
  OpsTestGraph b(13);
  const int x = b.input("x", DType::Float32, {2, 3});
  b.output(b.node("l", OpKind::NegativeLogLikelihoodLoss, {x, b.input("t", DType::Int64, {2})},
                  {{"reduction", test::string_attr("max")}}));
  EXPECT_EQ(b.error(), "node 'l' (NegativeLogLikelihoodLoss): attribute 'reduction' is 'max', expected none, sum or mean");
}

TEST(NegativeLogLikelihoodLoss, MeanSkipsIgnoredTargets) {
  OpsTestGraph b(13);
  const int x = b.input("x", DType::Float32, {3, 2});
  const int t = b.input("t", DType::Int64, {3});
  b.output(b.node("l", OpKind::NegativeLogLikelihoodLoss, {x, t}, {{"ignore_index", test::int_attr(-1)}}));
  std::vector<HostTensor> out = run_graph_on_cpu(
      b.graph, {{"x", test::float_tensor({3, 2}, {1, 2, 3, 4, 5, 6})}, {"t", test::tensor(DType::Int64, {3}, {1, 0, -1})}});
  EXPECT_EQ(test::values_of(out[0]), (std::vector<double>{-2.5}));  // -(2 + 3) / 2
}

TEST(LRN, SizeIsRequired) {
  OpsTestGraph b(13);
  b.output(b.node("n", OpKind::LRN, {b.input("x", DType::Float32, {1, 3, 2})}));
  EXPECT_EQ(b.error(), "node 'n' (LRN): attribute 'size' is required");
}

TEST(STFT, FrameLengthUnknown) {
  OpsTestGraph b(17);
  const int x = b.input("x", DType::Float32, {1, 16, 1});
  b.output(b.node("s", OpKind::STFT, {x, b.ints("step", {4})}));
  EXPECT_EQ(b.error(), "node 's' (STFT): the frame length is unknown: give a window or frame_length");
}

TEST(DFT, AxisOnTheComplexDim) {
  OpsTestGraph b(17);
  const int x = b.input("x", DType::Float32, {4, 2});
  b.output(b.node("d", OpKind::DFT, {x}, {{"axis", test::int_attr(1)}}));
  EXPECT_EQ(b.error(), "node 'd' (DFT): axis 1 is the real/imaginary dim; it must be a signal dim");
}

}  // namespace
}  // namespace kiln
