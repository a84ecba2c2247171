#include "kiln/onnx/TensorFile.h"

#include <gtest/gtest.h>

#include <fstream>

#include "ModelBuilder.h"
#include "kiln/onnx/Proto.h"
#include "kiln/support/Error.h"

namespace kiln {
namespace {

TEST(TensorProto, EveryDtypeRoundTripsThroughRawData) {
  for (DType d : {DType::Bool, DType::Int8, DType::Int16, DType::Int32, DType::Int64, DType::UInt8, DType::UInt16,
                  DType::UInt32, DType::UInt64, DType::Float16, DType::BFloat16, DType::Float32, DType::Float64}) {
    SCOPED_TRACE(std::string(dtype_name(d)));
    const HostTensor t = testing::iota_tensor(d, {2, 3});
    const onnx::TensorProto p = tensor_to_proto(t, "t");
    EXPECT_EQ(dtype_from_onnx(p.data_type()), d);
    const HostTensor back = tensor_from_proto(p, {}, "t");
    EXPECT_EQ(back.describe(), t.describe());
    for (int64_t i = 0; i < t.num_elements(); ++i) EXPECT_EQ(back.get_double(i), t.get_double(i)) << i;
  }
}

TEST(TensorProto, TypedFields) {
  onnx::TensorProto p;
  p.set_data_type(onnx::TensorProto::FLOAT16);
  p.add_dims(2);
  p.add_int32_data(float_to_half_bits(1.5f));
  p.add_int32_data(float_to_half_bits(-2.0f));
  HostTensor h = tensor_from_proto(p, {}, "h");
  EXPECT_EQ(h.get_double(0), 1.5);
  EXPECT_EQ(h.get_double(1), -2.0);

  onnx::TensorProto u;
  u.set_data_type(onnx::TensorProto::UINT32);
  u.add_uint64_data(4000000000u);
  HostTensor ut = tensor_from_proto(u, {}, "u");  // no dims: a scalar
  EXPECT_EQ(ut.describe(), "uint32[]");
  EXPECT_EQ(ut.get_int(0), 4000000000);

  onnx::TensorProto b;
  b.set_data_type(onnx::TensorProto::BOOL);
  b.add_dims(3);
  for (int v : {0, 1, 5}) b.add_int32_data(v);
  HostTensor bt = tensor_from_proto(b, {}, "b");
  EXPECT_EQ(bt.data()[2], 1);

  onnx::TensorProto l;
  l.set_data_type(onnx::TensorProto::INT64);
  l.add_dims(3);
  l.add_int64_data(-9);
  try {
    tensor_from_proto(l, {}, "initializer 'l'");
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_STREQ(e.what(), "initializer 'l': int64_data holds 1 values, expected 3 (the product of its dims)");
  }
}

TEST(TensorFile, SaveAndLoadWithName) {
  testing::TempDir dir("pb");
  save_tensor_pb({"input_x", testing::iota_tensor(DType::BFloat16, {4})}, dir.file("input_0.pb"));
  const NamedTensor t = load_tensor_pb(dir.file("input_0.pb"));
  EXPECT_EQ(t.name, "input_x");
  EXPECT_EQ(t.tensor.describe(), "bfloat16[4]");
  EXPECT_EQ(t.tensor.get_double(3), 3.0);
  std::ofstream(dir.file("bad.pb"), std::ios::binary) << "\x0a\xff\xff";
  EXPECT_THROW(load_tensor_pb(dir.file("bad.pb")), UserError);
}

}  // namespace
}  // namespace kiln
