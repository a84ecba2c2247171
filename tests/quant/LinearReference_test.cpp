#include "kiln/quant/LinearReference.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "kiln/quant/Quantize.h"
#include "kiln/support/Error.h"

namespace kiln::quant {
namespace {

TEST(QuantReference, HandComputedNvfp4Linear) {
  // s2 = 2^-12 exactly (amax 6·448·2^-12); row 1 has block scale 448, row 0 (half of it) 224.
  std::vector<float> w(2 * 16, 0.0f);
  for (int i = 0; i < 16; ++i) {
    w[i] = (i % 2 ? -1.5f : 3.0f) * 448.0f / 4096.0f;
    w[16 + i] = 2.0f * w[i];
  }
  const QuantizedWeight q = quantize(w, 2, 16, {QuantFormat::NvFp4});
  const std::vector<double> d = dequantize(q);
  for (int i = 0; i < 32; ++i) ASSERT_EQ(d[i], double(w[i])) << "exactly representable, element " << i;
  std::vector<float> x(3 * 16);
  for (int i = 0; i < 48; ++i) x[i] = float(i % 7) - 3.0f;
  const std::vector<float> bias = {0.5f, -0.25f};
  const std::vector<double> y = linear_reference(x, 3, q, bias);
  ASSERT_EQ(y.size(), 6u);
  for (int m = 0; m < 3; ++m) {
    for (int n = 0; n < 2; ++n) {
      double want = bias[n];
      for (int c = 0; c < 16; ++c) want += double(x[m * 16 + c]) * double(w[n * 16 + c]);
      EXPECT_EQ(y[m * 2 + n], want) << "y[" << m << ", " << n << "]";
    }
  }
}

TEST(QuantReference, RandomSmallShapesAgreeWithFloatWeights) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t m = 3, n = 16, k = 128;
  std::vector<float> w(n * k), x(m * k);
  for (float& v : w) v = 0.05f * normal(rng);
  for (float& v : x) v = normal(rng);
  for (QuantFormat f : {QuantFormat::NvFp4, QuantFormat::MxFp4, QuantFormat::Int4}) {
    const QuantizedWeight q = quantize(w, n, k, {f, f == QuantFormat::Int4 ? 32 : 0});
    const std::vector<double> y = linear_reference(x, m, q);
    double diff2 = 0, ref2 = 0;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double exact = 0;
        for (int64_t c = 0; c < k; ++c) exact += double(x[i * k + c]) * double(w[j * k + c]);
        diff2 += (y[i * n + j] - exact) * (y[i * n + j] - exact);
        ref2 += exact * exact;
      }
    }
    EXPECT_LT(std::sqrt(diff2 / ref2), 0.15) << format_name(f);
  }
}

TEST(QuantReference, ShapeErrorsAndActivations) {
  const QuantizedWeight q = quantize(std::vector<float>(16 * 32, 0.1f), 16, 32, {QuantFormat::MxFp4});
  try {
    linear_reference(std::vector<float>(31, 1.0f), 1, q);
    FAIL() << "expected UserError";
  } catch (const UserError& e) {
    EXPECT_STREQ(e.what(), "linear_reference: x has 31 elements, expected m·k = 1·32");
  }
  EXPECT_NEAR(gelu_tanh(1.0), 0.8411919906082768, 1e-15);
  EXPECT_NEAR(silu(1.0), 0.7310585786300049, 1e-15);
  EXPECT_EQ(gelu_tanh(0.0), 0.0);
}

}  // namespace
}  // namespace kiln::quant
