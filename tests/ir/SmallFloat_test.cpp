// Bit-exact float8/float4/E8M0 conversions. The expected patterns are what ml_dtypes (the
// converter behind the onnx package's reference implementation) produces for the same inputs:
// `astype` for saturate=0, `clip(x, finfo.min, finfo.max).astype` for saturate=1.
#include "kiln/ir/SmallFloat.h"

#include <cmath>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

namespace kiln {
namespace {

const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();
const std::vector<double> kInputs = {0.0,   -0.0, 1.0,  -1.5,    0.1,  448.0,       464.0,       470.0, 1e6, kInf,
                                     -kInf, kNaN, 0x1p-9, 0x1p-10, 240.0, 248.0, 57344.0, 61440.0, 3.0e-5};

struct Case {
  DType dtype;
  std::vector<uint32_t> no_saturate;
  std::vector<uint32_t> saturate;
};

const std::vector<Case> kCases = {
    {DType::Float8E4M3,
     {0x0, 0x80, 0x38, 0xbc, 0x1d, 0x7e, 0x7e, 0x7f, 0x7f, 0x7f, 0xff, 0x7f, 0x1, 0x0, 0x77, 0x78, 0x7f, 0x7f, 0x0},
     {0x0, 0x80, 0x38, 0xbc, 0x1d, 0x7e, 0x7e, 0x7e, 0x7e, 0x7e, 0xfe, 0x7f, 0x1, 0x0, 0x77, 0x78, 0x7e, 0x7e, 0x0}},
    {DType::Float8E4M3FNUZ,
     {0x0, 0x0, 0x40, 0xc4, 0x25, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x2, 0x1, 0x7f, 0x80, 0x80, 0x80, 0x0},
     {0x0, 0x0, 0x40, 0xc4, 0x25, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0xff, 0x80, 0x2, 0x1, 0x7f, 0x7f, 0x7f, 0x7f, 0x0}},
    {DType::Float8E5M2,
     {0x0, 0x80, 0x3c, 0xbe, 0x2e, 0x5f, 0x5f, 0x5f, 0x7c, 0x7c, 0xfc, 0x7e, 0x18, 0x14, 0x5c, 0x5c, 0x7b, 0x7c, 0x2},
     {0x0, 0x80, 0x3c, 0xbe, 0x2e, 0x5f, 0x5f, 0x5f, 0x7b, 0x7b, 0xfb, 0x7e, 0x18, 0x14, 0x5c, 0x5c, 0x7b, 0x7b, 0x2}},
    {DType::Float8E5M2FNUZ,
     {0x0, 0x0, 0x40, 0xc2, 0x32, 0x63, 0x63, 0x63, 0x80, 0x80, 0x80, 0x80, 0x1c, 0x18, 0x60, 0x60, 0x7f, 0x80, 0x4},
     {0x0, 0x0, 0x40, 0xc2, 0x32, 0x63, 0x63, 0x63, 0x7f, 0x7f, 0xff, 0x80, 0x1c, 0x18, 0x60, 0x60, 0x7f, 0x7f, 0x4}},
    {DType::Float4E2M1,
     {0x0, 0x8, 0x2, 0xb, 0x0, 0x7, 0x7, 0x7, 0x7, 0x7, 0xf, 0x8, 0x0, 0x0, 0x7, 0x7, 0x7, 0x7, 0x0},
     {0x0, 0x8, 0x2, 0xb, 0x0, 0x7, 0x7, 0x7, 0x7, 0x7, 0xf, 0x8, 0x0, 0x0, 0x7, 0x7, 0x7, 0x7, 0x0}},
};

TEST(SmallFloat, EncodeMatchesReferenceBitPatterns) {
  for (const Case& c : kCases) {
    for (size_t i = 0; i < kInputs.size(); ++i) {
      // E5M2 saturates infinities to its largest finite value (0x7b); clip() in the reference does it.
      EXPECT_EQ(small_float_encode(c.dtype, kInputs[i], false), c.no_saturate[i])
          << dtype_name(c.dtype) << " saturate=0 of " << kInputs[i];
      EXPECT_EQ(small_float_encode(c.dtype, kInputs[i], true), c.saturate[i])
          << dtype_name(c.dtype) << " saturate=1 of " << kInputs[i];
    }
  }
}

TEST(SmallFloat, EveryPatternRoundTrips) {
  for (DType d : {DType::Float8E4M3, DType::Float8E4M3FNUZ, DType::Float8E5M2, DType::Float8E5M2FNUZ,
                  DType::Float4E2M1, DType::Float8E8M0}) {
    const uint32_t count = d == DType::Float4E2M1 ? 16 : 256;
    for (uint32_t bits = 0; bits < count; ++bits) {
      const double v = small_float_decode(d, bits);
      if (std::isnan(v)) continue;  // several NaN patterns in some formats
      const bool fnuz = d == DType::Float8E4M3FNUZ || d == DType::Float8E5M2FNUZ;
      if (fnuz && bits == 0x80) continue;
      // 2^-127 is a float32 subnormal: the reference's E8M0 encoder reads the float32 exponent
      // field (0) and rounds the nonzero fraction up, to 2^-126.
      if (d == DType::Float8E8M0 && bits == 0) continue;
      EXPECT_EQ(small_float_encode(d, v, false), bits) << dtype_name(d) << " pattern " << bits << " value " << v;
    }
  }
}

TEST(SmallFloat, DecodesKnownValues) {
  EXPECT_EQ(small_float_decode(DType::Float8E4M3, 0x7e), 448.0);
  EXPECT_EQ(small_float_decode(DType::Float8E4M3, 0x01), 0x1p-9);
  EXPECT_TRUE(std::isnan(small_float_decode(DType::Float8E4M3, 0xff)));
  EXPECT_EQ(small_float_decode(DType::Float8E4M3FNUZ, 0x7f), 240.0);
  EXPECT_TRUE(std::isnan(small_float_decode(DType::Float8E4M3FNUZ, 0x80)));
  EXPECT_EQ(small_float_decode(DType::Float8E5M2, 0x7c), kInf);
  EXPECT_EQ(small_float_decode(DType::Float8E5M2FNUZ, 0x7f), 57344.0);
  EXPECT_EQ(small_float_decode(DType::Float4E2M1, 0x7), 6.0);
  EXPECT_EQ(small_float_decode(DType::Float4E2M1, 0xd), -3.0);
  EXPECT_EQ(small_float_decode(DType::Float8E8M0, 127), 1.0);
  EXPECT_EQ(small_float_decode(DType::Float8E8M0, 0), 0x1p-127);
  EXPECT_TRUE(std::isnan(small_float_decode(DType::Float8E8M0, 0xff)));
  EXPECT_EQ(small_float_max(DType::Float8E5M2), 57344.0);
}

// onnx.numpy_helper.to_float8e8m0 on the same inputs.
TEST(SmallFloat, E8M0RoundingModes) {
  EXPECT_EQ(small_float_encode(DType::Float8E8M0, 1.0, true, E8M0Rounding::Up), 127u);
  EXPECT_EQ(small_float_encode(DType::Float8E8M0, 1.5, true, E8M0Rounding::Up), 128u);
  EXPECT_EQ(small_float_encode(DType::Float8E8M0, 1.5, true, E8M0Rounding::Down), 127u);
  EXPECT_EQ(small_float_encode(DType::Float8E8M0, 1.5, true, E8M0Rounding::Nearest), 128u);
  EXPECT_EQ(small_float_encode(DType::Float8E8M0, 1.25, true, E8M0Rounding::Nearest), 127u);
  EXPECT_EQ(small_float_encode(DType::Float8E8M0, 0x1.8p127, true, E8M0Rounding::Up), 254u);  // saturates
  EXPECT_EQ(small_float_encode(DType::Float8E8M0, 0x1.8p127, false, E8M0Rounding::Up), 255u);
  EXPECT_EQ(small_float_encode(DType::Float8E8M0, kInf, true, E8M0Rounding::Up), 255u);
  EXPECT_EQ(small_float_encode(DType::Float8E8M0, kNaN, true, E8M0Rounding::Up), 255u);
}

}  // namespace
}  // namespace kiln
