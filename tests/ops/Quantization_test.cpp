// Linear quantization ops (src/ops/Quantization.cpp): error messages for mismatched operands and
// values on the CPU reference (blocked quantization to int4, saturation to float8).
#include <gtest/gtest.h>

#include "TestGraph.h"
#include "kiln/ops/GraphTensors.h"
#include "kiln/runtime/GraphRunner.h"
#include "kiln/support/Error.h"

namespace kiln {
namespace {

using test::OpsTestGraph;

TEST(QuantizeLinear, BlockedScaleShapeIsChecked) {
  OpsTestGraph b(21);
  const int x = b.input("x", DType::Float32, {2, 6});
  const int s = b.input("s", DType::Float32, {2, 3});  // ceil(6 / 4) = 2 blocks, not 3
  b.output(b.node("q", OpKind::QuantizeLinear, {x, s}, {{"axis", test::int_attr(1)}, {"block_size", test::int_attr(4)}}));
  EXPECT_EQ(b.error(),
            "node 'q' (QuantizeLinear): input 'y_scale' [2, 3] must have 2 along axis 1 for x [2, 6] with block_size 4 "
            "on axis 1");
}

TEST(QuantizeLinear, ZeroPointAndOutputDtypeMustAgree) {
  OpsTestGraph b(21);
  const int x = b.input("x", DType::Float32, {4});
  const int s = b.input("s", DType::Float32, {});
  const int z = b.input("z", DType::Int8, {});
  b.output(b.node("q", OpKind::QuantizeLinear, {x, s, z}, {{"output_dtype", test::int_attr(2)}}));  // UINT8
  EXPECT_EQ(b.error(),
            "node 'q' (QuantizeLinear): attribute 'output_dtype' is uint8 but input 'y_zero_point' is int8; expected "
            "them to agree");
}

TEST(QuantizeLinear, BlockedInt4RoundsHalfToEvenAndClamps) {
  OpsTestGraph b(21);
  const int x = b.input("x", DType::Float32, {1, 4});
  const int s = b.input("s", DType::Float32, {1, 2});
  const int z = b.input("z", DType::Int4, {1, 2});
  b.output(b.node("q", OpKind::QuantizeLinear, {x, s, z}, {{"axis", test::int_attr(1)}, {"block_size", test::int_attr(2)}}));
  HostTensor zp(DType::Int4, {1, 2});
  zp.set_int(0, 1);
  zp.set_int(1, -2);
  std::vector<HostTensor> out = run_graph_on_cpu(b.graph, {{"x", test::float_tensor({1, 4}, {2.5, 100, -3.5, -100})},
                                                           {"s", test::float_tensor({1, 2}, {1, 0.5})},
                                                           {"z", zp}});
  ASSERT_EQ(out[0].dtype(), DType::Int4);
  // 2.5 -> 2 (+1) = 3; 100 -> clamp 7; -3.5/0.5 = -7 (-2) = -9 -> clamp -8; -200 -> -8.
  EXPECT_EQ(test::values_of(out[0]), (std::vector<double>{3, 7, -8, -8}));
}

TEST(QuantizeLinear, Float8WithoutSaturationOverflowsToNaN) {
  OpsTestGraph b(21);
  const int x = b.input("x", DType::Float32, {3});
  const int s = b.input("s", DType::Float32, {});
  const int z = b.input("z", DType::Float8E4M3, {});
  b.output(b.node("q", OpKind::QuantizeLinear, {x, s, z}, {{"saturate", test::int_attr(0)}}));
  std::vector<HostTensor> out = run_graph_on_cpu(
      b.graph, {{"x", test::float_tensor({3}, {1, 448, 1000})}, {"s", test::float_tensor({}, {1})}, {"z", HostTensor(DType::Float8E4M3, {})}});
  EXPECT_EQ(out[0].data()[0], 0x38);
  EXPECT_EQ(out[0].data()[1], 0x7e);
  EXPECT_EQ(out[0].data()[2], 0x7f) << "1000 is past E4M3FN's 448: NaN without saturation";
}

TEST(MatMulInteger, ZeroPointsPerRowAndColumn) {
  OpsTestGraph b(10);
  const int a = b.input("a", DType::UInt8, {2, 2});
  const int c = b.input("b", DType::Int8, {2, 1});
  const int az = b.input("az", DType::UInt8, {2});
  const int bz = b.input("bz", DType::Int8, {1});
  b.output(b.node("mm", OpKind::MatMulInteger, {a, c, az, bz}));
  HostTensor av(DType::UInt8, {2, 2}), bv(DType::Int8, {2, 1}), azv(DType::UInt8, {2}), bzv(DType::Int8, {1});
  const int64_t a_data[] = {10, 20, 30, 40};
  for (int k = 0; k < 4; ++k) av.set_int(k, a_data[k]);
  bv.set_int(0, 3);
  bv.set_int(1, -1);
  azv.set_int(0, 10);
  azv.set_int(1, 30);
  bzv.set_int(0, 1);
  std::vector<HostTensor> out = run_graph_on_cpu(b.graph, {{"a", av}, {"b", bv}, {"az", azv}, {"bz", bzv}});
  // row 0: (0, 10) . (2, -2) = -20; row 1: (0, 10) . (2, -2) = -20
  ASSERT_EQ(out[0].dtype(), DType::Int32);
  EXPECT_EQ(test::values_of(out[0]), (std::vector<double>{-20, -20}));
}

}  // namespace
}  // namespace kiln
