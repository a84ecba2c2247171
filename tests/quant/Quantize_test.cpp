#include "kiln/quant/Quantize.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "kiln/quant/Minifloat.h"
#include "kiln/support/Error.h"

namespace kiln::quant {
namespace {

uint8_t nibble(const QuantizedWeight& q, int64_t r, int64_t c) {
  const uint8_t b = q.data[r * (q.k / 2) + c / 2];
  return c % 2 == 0 ? (b & 0xf) : (b >> 4);
}

template <typename F>
std::string user_error_message(F&& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  return "(no UserError thrown)";
}

// One row of four NVFP4 blocks, each exercising one rule; s2 = 2^-8 exactly (amax 10.5 = 6·448·2^-8).
TEST(QuantNvfp4, HandComputedBlocks) {
  std::vector<float> w(64, 0.0f);
  // Block 1 holds the tensor amax: block scale 448, divisor 448·2^-8 = 1.75.
  const float b1[] = {10.5f, 5.25f, 0.4375f, 1.3125f, 2.1875f, 8.75f, -4.375f};
  for (int i = 0; i < 7; ++i) w[16 + i] = b1[i];
  // Block 2: amax 6·2^-16 gives block scale 2^-8, the E4M3 subnormal 0x02; divisor 2^-16.
  w[32] = std::ldexp(6.0f, -16);
  w[33] = std::ldexp(1.0f, -16);
  w[34] = std::ldexp(-3.0f, -16);
  // Block 3: amax/(6·s2) = 9.25 rounds to the E4M3 9, so the amax element saturates at 6.
  w[48] = 0.216796875f;
  w[49] = -0.216796875f;
  const QuantizedWeight q = quantize(w, 1, 64, {QuantFormat::NvFp4});
  EXPECT_EQ(q.tensor_scale, std::ldexp(1.0f, -8));
  ASSERT_EQ(q.scales.size(), 4u);
  EXPECT_EQ(q.scales[0], 0x38) << "all-zero block gets scale 1.0";
  EXPECT_EQ(q.scales[1], 0x7e) << "448";
  EXPECT_EQ(q.scales[2], 0x02) << "subnormal 2^-8";
  EXPECT_EQ(q.scales[3], 0x51) << "9 = 1.125·2^3";
  for (int i = 0; i < 16; ++i) EXPECT_EQ(nibble(q, 0, i), 0) << i;
  // 6, 3, tie 0.25->0, tie 0.75->1, tie 1.25->1, tie 5->4, tie -2.5->-2
  const uint8_t want1[] = {0x7, 0x5, 0x0, 0x2, 0x2, 0x6, 0xc};
  for (int i = 0; i < 7; ++i) EXPECT_EQ(nibble(q, 0, 16 + i), want1[i]) << "block 1 element " << i;
  EXPECT_EQ(nibble(q, 0, 32), 0x7);
  EXPECT_EQ(nibble(q, 0, 33), 0x2);
  EXPECT_EQ(nibble(q, 0, 34), 0xd);
  EXPECT_EQ(nibble(q, 0, 48), 0x7) << "6.17 saturates to 6";
  EXPECT_EQ(nibble(q, 0, 49), 0xf);
  const std::vector<double> d = dequantize(q);
  EXPECT_EQ(d[16], 10.5);
  EXPECT_EQ(d[18], 0.0);
  EXPECT_EQ(d[32], std::ldexp(6.0, -16));
  EXPECT_EQ(d[48], 6.0 * 9.0 / 256.0);
  // Low nibble holds the even element: byte 8 = elements 16 (0x7) and 17 (0x5).
  EXPECT_EQ(q.data[8], 0x57);
}

TEST(QuantNvfp4, RepresentableWeightsRoundTripExactly) {
  std::mt19937 rng(7);
  const int64_t n = 8, k = 64;
  const float s2 = std::ldexp(1.0f, -10);
  std::vector<float> w(n * k);
  std::uniform_int_distribution<int> code(0, 15), scale_code(0x08, 0x7e);
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t b = 0; b < k / 16; ++b) {
      // Block (0, 0) carries scale 448 so that the tensor amax is 6·448·s2 exactly.
      const float s = (r == 0 && b == 0) ? 448.0f : e4m3_to_float(static_cast<uint8_t>(scale_code(rng)));
      for (int i = 0; i < 16; ++i) {
        const float e = i == 0 ? 6.0f : e2m1_to_float(static_cast<uint8_t>(code(rng)));
        w[r * k + b * 16 + i] = e * s * s2;
      }
    }
  }
  const QuantizedWeight q = quantize(w, n, k, {QuantFormat::NvFp4});
  const std::vector<double> d = dequantize(q);
  for (size_t i = 0; i < w.size(); ++i) ASSERT_EQ(d[i], double(w[i])) << "element " << i;
  EXPECT_EQ(quantization_error(w, q).max_abs, 0.0);
}

TEST(QuantMxfp4, HandComputedBlocks) {
  std::vector<float> w(128, 0.0f);
  const float b0[] = {6.0f, -0.5f, 1.25f, 5.0f, 3.0f};  // amax 6: X = 2^0
  for (int i = 0; i < 5; ++i) w[i] = b0[i];
  w[32] = 7.9f;                                         // amax 7.9: X = 2^0, saturates to 6
  w[33] = -1.0f;
  w[96] = 0.75f;                                        // amax 0.75: X = 2^-3, 0.75 = 6·X
  w[97] = 0.0625f;                                      // 0.5·X
  const QuantizedWeight q = quantize(w, 1, 128, {QuantFormat::MxFp4});
  ASSERT_EQ(q.scales.size(), 4u);
  EXPECT_EQ(q.scales[0], 127);
  EXPECT_EQ(q.scales[1], 127);
  EXPECT_EQ(q.scales[2], 0) << "all-zero block: 2^-127";
  EXPECT_EQ(q.scales[3], 124);
  const uint8_t want0[] = {0x7, 0x9, 0x2, 0x6, 0x5};
  for (int i = 0; i < 5; ++i) EXPECT_EQ(nibble(q, 0, i), want0[i]) << i;
  EXPECT_EQ(nibble(q, 0, 32), 0x7);
  EXPECT_EQ(nibble(q, 0, 33), 0xa);
  EXPECT_EQ(nibble(q, 0, 96), 0x7);
  EXPECT_EQ(nibble(q, 0, 97), 0x1);
  const std::vector<double> d = dequantize(q);
  EXPECT_EQ(d[32], 6.0);
  EXPECT_EQ(d[97], 0.0625);
}

TEST(QuantInt4, HandComputedGroupRoundTrips) {
  for (DType dt : {DType::BFloat16, DType::Float16}) {
    std::vector<float> w(64);
    for (int i = 0; i < 64; ++i) w[i] = float(i % 16) * 0.5f - 2.0f;  // min -2, max 5.5: s 0.5, z 4
    const QuantizedWeight q = quantize(w, 1, 64, {QuantFormat::Int4, 32, dt});
    EXPECT_EQ(q.scale_dtype, dt);
    ASSERT_EQ(q.scales.size(), 4u);
    ASSERT_EQ(q.zeros.size(), 4u);
    const uint16_t s = uint16_t(q.scales[0] | q.scales[1] << 8);
    const uint16_t z = uint16_t(q.zeros[0] | q.zeros[1] << 8);
    EXPECT_EQ(s, dt == DType::BFloat16 ? 0x3f00 : 0x3800) << "scale 0.5";
    EXPECT_EQ(z, dt == DType::BFloat16 ? 0x4080 : 0x4400) << "zero 4";
    EXPECT_EQ(q.data[0], 0x10);
    EXPECT_EQ(q.data[1], 0x32);
    const std::vector<double> d = dequantize(q);
    for (int i = 0; i < 64; ++i) ASSERT_EQ(d[i], double(w[i])) << i;
  }
}

TEST(QuantInt4, ZeroGroupAndRandomError) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> w(4 * 256);
  for (float& v : w) v = normal(rng);
  for (int i = 0; i < 64; ++i) w[i] = 0.0f;  // group 0 of row 0 all zero
  const QuantizedWeight q = quantize(w, 4, 256, {QuantFormat::Int4, 64, DType::Float16});
  const std::vector<double> d = dequantize(q);
  for (int i = 0; i < 64; ++i) ASSERT_EQ(d[i], 0.0);
  EXPECT_LT(quantization_error(w, q).relative_l2, 0.1);
  const QuantError nv = quantization_error(w, quantize(w, 4, 256, {QuantFormat::NvFp4}));
  const QuantError mx = quantization_error(w, quantize(w, 4, 256, {QuantFormat::MxFp4}));
  EXPECT_LT(nv.relative_l2, 0.12);
  EXPECT_LT(mx.relative_l2, 0.16);
}

TEST(QuantErrors, BadShapesAndSizes) {
  std::vector<float> w(24, 1.0f);
  EXPECT_EQ(user_error_message([&] { quantize(w, 1, 24, {QuantFormat::NvFp4}); }),
            "quantize (nvfp4): k = 24 is not a multiple of the block size 16");
  EXPECT_EQ(user_error_message([&] { quantize(w, 1, 24, {QuantFormat::MxFp4}); }),
            "quantize (mxfp4): k = 24 is not a multiple of the block size 32");
  EXPECT_EQ(user_error_message([&] { quantize(w, 2, 16, {QuantFormat::NvFp4}); }),
            "quantize (nvfp4): weights have 24 elements, expected n·k = 2·16 = 32");
  std::vector<float> w96(96, 1.0f);
  EXPECT_EQ(user_error_message([&] { quantize(w96, 1, 96, {QuantFormat::Int4, 48}); }),
            "quantize (int4): group is 48, expected 32, 64 or 128");
  EXPECT_EQ(user_error_message([&] { quantize(w96, 1, 96, {QuantFormat::Int4, 32, DType::Float32}); }),
            "quantize (int4): scale dtype is float32, expected float16 or bfloat16");
  w96[5] = NAN;
  EXPECT_EQ(user_error_message([&] { quantize(w96, 1, 96, {QuantFormat::MxFp4}); }),
            "quantize (mxfp4): weight [0, 5] is nan, expected a finite value");
  std::vector<float> ok(32, 1.0f);
  QuantizedWeight q = quantize(ok, 1, 32, {QuantFormat::NvFp4});
  q.scales.pop_back();
  EXPECT_EQ(user_error_message([&] { check_quantized_weight(q, "node 'fc1' weight"); }),
            "node 'fc1' weight (nvfp4): scales have 1 bytes, expected 2 ([n, k/16] of float8_e4m3fn with n = 1, k = 32)");
  q = quantize(ok, 1, 32, {QuantFormat::NvFp4});
  q.data.push_back(0);
  EXPECT_EQ(user_error_message([&] { dequantize(q); }),
            "dequantize (nvfp4): data has 17 bytes, expected 16 ([n, k/2] with n = 1, k = 32)");
}

}  // namespace
}  // namespace kiln::quant
