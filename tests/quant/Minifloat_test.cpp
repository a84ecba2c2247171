#include "kiln/quant/Minifloat.h"
#include "kiln/runtime/HostTensor.h"

#include <gtest/gtest.h>

#include <cmath>

namespace kiln::quant {
namespace {

TEST(QuantMinifloat, E2M1RoundTripsEveryCode) {
  for (int code = 0; code < 16; ++code) {
    const float v = e2m1_to_float(static_cast<uint8_t>(code));
    EXPECT_EQ(e2m1_from_float(v), code) << "value " << v;
  }
  EXPECT_EQ(e2m1_to_float(0x7), 6.0f);
  EXPECT_EQ(e2m1_to_float(0x1), 0.5f);
  EXPECT_EQ(e2m1_to_float(0xb), -1.5f);
}

TEST(QuantMinifloat, E2M1TiesRoundToEven) {
  // Midpoints between neighbours: the code with mantissa bit 0 wins.
  EXPECT_EQ(e2m1_from_float(0.25f), 0x0);  // 0 vs 0.5
  EXPECT_EQ(e2m1_from_float(0.75f), 0x2);  // 0.5 vs 1
  EXPECT_EQ(e2m1_from_float(1.25f), 0x2);  // 1 vs 1.5
  EXPECT_EQ(e2m1_from_float(1.75f), 0x4);  // 1.5 vs 2
  EXPECT_EQ(e2m1_from_float(2.5f), 0x4);   // 2 vs 3
  EXPECT_EQ(e2m1_from_float(3.5f), 0x6);   // 3 vs 4
  EXPECT_EQ(e2m1_from_float(5.0f), 0x6);   // 4 vs 6
  EXPECT_EQ(e2m1_from_float(-5.0f), 0xe);
  EXPECT_EQ(e2m1_from_float(0.26f), 0x1);
  EXPECT_EQ(e2m1_from_float(5.01f), 0x7);
}

TEST(QuantMinifloat, E2M1Saturates) {
  EXPECT_EQ(e2m1_from_float(6.9f), 0x7);
  EXPECT_EQ(e2m1_from_float(1e30f), 0x7);
  EXPECT_EQ(e2m1_from_float(-100.0f), 0xf);
  EXPECT_EQ(e2m1_from_float(-0.0f), 0x8);
}

TEST(QuantMinifloat, E4M3RoundTripsEveryFiniteCode) {
  for (int bits = 0; bits < 256; ++bits) {
    if ((bits & 0x7f) == 0x7f) {
      EXPECT_TRUE(std::isnan(e4m3_to_float(static_cast<uint8_t>(bits))));
      continue;
    }
    const float v = e4m3_to_float(static_cast<uint8_t>(bits));
    EXPECT_EQ(e4m3_from_float(v), bits) << "value " << v;
  }
  EXPECT_EQ(e4m3_to_float(0x7e), 448.0f);
  EXPECT_EQ(e4m3_to_float(0x38), 1.0f);
}

TEST(QuantMinifloat, E4M3SubnormalsTiesAndSaturation) {
  EXPECT_EQ(e4m3_from_float(std::ldexp(1.0f, -9)), 0x01);        // smallest subnormal
  EXPECT_EQ(e4m3_from_float(std::ldexp(1.0f, -10)), 0x00);       // tie 0 vs 2^-9: even is 0
  EXPECT_EQ(e4m3_from_float(std::ldexp(3.0f, -10)), 0x02);       // tie 2^-9 vs 2^-8: even is 2^-8
  EXPECT_EQ(e4m3_from_float(std::ldexp(7.0f, -9)), 0x07);        // largest subnormal
  EXPECT_EQ(e4m3_from_float(std::ldexp(1.0f, -6)), 0x08);        // smallest normal
  EXPECT_EQ(e4m3_from_float(1.0625f), 0x38);                     // tie 1 vs 1.125
  EXPECT_EQ(e4m3_from_float(1.1875f), 0x3a);                     // tie 1.125 vs 1.25
  EXPECT_EQ(e4m3_from_float(464.0f), 0x7e);                      // above 448: saturate
  EXPECT_EQ(e4m3_from_float(1e9f), 0x7e);
  EXPECT_EQ(e4m3_from_float(-1e9f), 0xfe);
}

TEST(QuantMinifloat, E8M0AndHalfFormats) {
  EXPECT_EQ(e8m0_from_exponent(0), 127);
  EXPECT_EQ(e8m0_from_exponent(-127), 0);
  EXPECT_EQ(e8m0_from_exponent(-300), 0);
  EXPECT_EQ(e8m0_from_exponent(300), 254);
  EXPECT_EQ(e8m0_to_float(130), 8.0f);
  EXPECT_TRUE(std::isnan(e8m0_to_float(255)));
  EXPECT_EQ(float_to_half_bits(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half_bits(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_half_bits(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(half_bits_to_float(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(float_to_bfloat16_bits(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bfloat16_bits(1.0f + std::ldexp(1.0f, -8)), 0x3f80);       // tie: even
  EXPECT_EQ(float_to_bfloat16_bits(1.0f + std::ldexp(3.0f, -8)), 0x3f82);       // tie: even
  EXPECT_EQ(bfloat16_bits_to_float(0x4040), 3.0f);
}

}  // namespace
}  // namespace kiln::quant
