// 4-bit tensors (int4, uint4, float4e2m1) load from ONNX's packed layout: two elements per byte,
// element 2k in the low nibble, in raw_data and (one byte per int32) in int32_data.
#include <onnx/onnx-ml.pb.h>

#include <gtest/gtest.h>

#include "kiln/onnx/Proto.h"
#include "kiln/support/Error.h"

namespace kiln {
namespace {

onnx::TensorProto packed(int32_t data_type, std::vector<int64_t> dims) {
  onnx::TensorProto p;
  p.set_name("t");
  p.set_data_type(data_type);
  for (int64_t d : dims) p.add_dims(d);
  return p;
}

TEST(PackedTensor, Int4RawDataOddCount) {
  onnx::TensorProto p = packed(onnx::TensorProto::INT4, {3});
  const char raw[] = {static_cast<char>(0x8f), static_cast<char>(0xf7)};  // -1, -8 | 7, (pad)
  p.set_raw_data(raw, 2);
  const HostTensor t = tensor_from_proto(p, {}, "initializer 't'");
  EXPECT_EQ(t.dtype(), DType::Int4);
  EXPECT_EQ(t.num_bytes(), 2u);
  EXPECT_EQ(t.get_int(0), -1);
  EXPECT_EQ(t.get_int(1), -8);
  EXPECT_EQ(t.get_int(2), 7);
  EXPECT_EQ(t.data()[1], 0x07) << "the padding nibble of an odd count is cleared";
}

TEST(PackedTensor, UInt4AndFloat4FromInt32Data) {
  onnx::TensorProto u = packed(onnx::TensorProto::UINT4, {2, 2});
  u.add_int32_data(0xf1);  // 1, 15
  u.add_int32_data(0x2a);  // 10, 2
  const HostTensor t = tensor_from_proto(u, {}, "initializer 'u'");
  EXPECT_EQ(t.get_int(0), 1);
  EXPECT_EQ(t.get_int(1), 15);
  EXPECT_EQ(t.get_int(2), 10);
  EXPECT_EQ(t.get_int(3), 2);

  onnx::TensorProto f = packed(onnx::TensorProto::FLOAT4E2M1, {2});
  f.add_int32_data(0xd7);  // 6.0, -3.0
  const HostTensor g = tensor_from_proto(f, {}, "initializer 'f'");
  EXPECT_EQ(g.get_double(0), 6.0);
  EXPECT_EQ(g.get_double(1), -3.0);
}

TEST(PackedTensor, Int2FourPerByte) {
  onnx::TensorProto p = packed(onnx::TensorProto::INT2, {5});
  const char raw[] = {static_cast<char>(0b10'01'11'00), static_cast<char>(0b111111'01)};  // 0 -1 1 -2 | 1
  p.set_raw_data(raw, 2);
  const HostTensor t = tensor_from_proto(p, {}, "initializer 't'");
  EXPECT_EQ(t.dtype(), DType::Int2);
  const int64_t expected[] = {0, -1, 1, -2, 1};
  for (int i = 0; i < 5; ++i) EXPECT_EQ(t.get_int(i), expected[i]) << "element " << i;
  EXPECT_EQ(t.data()[1], 0x01) << "the padding bits of the last byte are cleared";

  onnx::TensorProto u = packed(onnx::TensorProto::UINT2, {4});
  u.add_int32_data(0b11'10'01'00);
  const HostTensor v = tensor_from_proto(u, {}, "initializer 'u'");
  for (int i = 0; i < 4; ++i) EXPECT_EQ(v.get_int(i), i);
}

TEST(PackedTensor, StoresKeepTheOtherNibble) {
  HostTensor t(DType::Int4, {3});
  t.set_int(0, -3);
  t.set_int(1, 5);
  t.set_int(2, 9);  // wraps to -7, as a cast to int4 does
  EXPECT_EQ(t.get_int(0), -3);
  EXPECT_EQ(t.get_int(1), 5);
  EXPECT_EQ(t.get_int(2), -7);
  EXPECT_EQ(t.data()[0], 0x5d);
  const onnx::TensorProto back = tensor_to_proto(t, "t");
  EXPECT_EQ(back.raw_data().size(), 2u);
  EXPECT_EQ(tensor_from_proto(back, {}, "t").get_int(2), -7);
}

TEST(PackedTensor, WrongByteCountNamesTheTensor) {
  onnx::TensorProto p = packed(onnx::TensorProto::INT4, {5});
  p.set_raw_data(std::string(2, '\0'));
  try {
    tensor_from_proto(p, {}, "initializer 'w'");
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("initializer 'w': raw_data holds 2 bytes, expected 3 (5 elements of int4)"),
              std::string::npos)
        << e.what();
  }
}

TEST(PackedTensor, Float8TypesAreKnown) {
  EXPECT_EQ(dtype_from_onnx(onnx::TensorProto::FLOAT8E5M2FNUZ), DType::Float8E5M2FNUZ);
  EXPECT_EQ(dtype_to_onnx(DType::Float8E4M3FNUZ), onnx::TensorProto::FLOAT8E4M3FNUZ);
  EXPECT_EQ(onnx_data_type_name(onnx::TensorProto::FLOAT6E2M3), "FLOAT6E2M3");
  EXPECT_FALSE(dtype_from_onnx(onnx::TensorProto::FLOAT6E2M3).has_value());
}

}  // namespace
}  // namespace kiln
