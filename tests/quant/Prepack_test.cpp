#include "kiln/quant/Prepack.h"

#include <gtest/gtest.h>

#include <random>

#include "kiln/quant/Quantize.h"
#include "kiln/support/Error.h"

namespace kiln::quant {
namespace {

std::vector<float> random_weights(int64_t n, int64_t k, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  std::vector<float> w(n * k);
  for (float& v : w) v = normal(rng);
  return w;
}

TEST(QuantPrepack, NibbleOrderOfOneWord) {
  // Export order: element i at nibble i (bytes 0x10 0x32 0x54 0x76). Kernel: [0,2,4,6,1,3,5,7].
  const std::vector<uint8_t> in = {0x10, 0x32, 0x54, 0x76};
  const std::vector<uint8_t> out = to_kernel_nibble_order(in, 1, 8);
  EXPECT_EQ(out, (std::vector<uint8_t>{0x20, 0x64, 0x31, 0x75}));
  EXPECT_EQ(from_kernel_nibble_order(out, 1, 8), in);
}

TEST(QuantPrepack, UnpackOfPrepackIsIdentity) {
  for (QuantFormat f : {QuantFormat::NvFp4, QuantFormat::MxFp4, QuantFormat::Int4}) {
    const auto w = random_weights(32, 256, 11);
    const QuantizedWeight q = quantize(w, 32, 256, {f});
    const KernelWeight p = prepack(q);
    EXPECT_NE(p.weight.data, q.data);
    const QuantizedWeight back = unpack(p);
    EXPECT_EQ(back.data, q.data) << format_name(f);
    EXPECT_EQ(back.scales, q.scales);
    EXPECT_EQ(back.zeros, q.zeros);
  }
}

TEST(QuantPrepack, GateUpInterleaveRoundTrips) {
  const QuantizedWeight gate = quantize(random_weights(32, 128, 1), 32, 128, {QuantFormat::NvFp4});
  const QuantizedWeight up = quantize(random_weights(32, 128, 2), 32, 128, {QuantFormat::NvFp4});
  const KernelWeight fused = prepack_gate_up(gate, up);
  EXPECT_EQ(fused.weight.n, 64);
  ASSERT_EQ(fused.tensor_scales.size(), 2u);
  EXPECT_EQ(fused.tensor_scales[1], up.tensor_scale);
  // Row 8 of the fused weight is up row 0; its scales come first in row 8.
  EXPECT_EQ(fused.weight.scales[8 * 8], up.scales[0]);
  EXPECT_EQ(fused.weight.scales[16 * 8], gate.scales[8 * 8]);
  const std::vector<QuantizedWeight> back = unpack_gate_up(fused);
  EXPECT_EQ(back[0].data, gate.data);
  EXPECT_EQ(back[1].data, up.data);
  EXPECT_EQ(back[0].scales, gate.scales);
  EXPECT_EQ(back[1].tensor_scale, up.tensor_scale);
}

TEST(QuantPrepack, RejectsWhatKernelsCannotTake) {
  const QuantizedWeight small = quantize(random_weights(8, 128, 3), 8, 128, {QuantFormat::NvFp4});
  try {
    prepack(small);
    FAIL() << "expected UserError";
  } catch (const UserError& e) {
    EXPECT_STREQ(e.what(), "prepack: n = 8 is not a multiple of 16 (kernel row tile)");
  }
  std::vector<float> w(16 * 128, 0.01f);
  w[5 * 128 + 40] = 20.0f;  // block amax 20: E8M0 exponent floor(log2 20) - 2 = 2
  try {
    prepack(quantize(w, 16, 128, {QuantFormat::MxFp4}));
    FAIL() << "expected UserError";
  } catch (const UserError& e) {
    EXPECT_STREQ(e.what(),
                 "prepack: mxfp4 block scale 2^2 at row 5, block 1 is above 2^1, which the kernels do not "
                 "take (block amax must be below 16)");
  }
}

}  // namespace
}  // namespace kiln::quant
