// The float8/float4/E8M0 conversions of generated code (include/kiln/codegen/runtime/
// kiln_common.h) agree bit for bit with the CPU reference's (include/kiln/ir/SmallFloat.h):
// every pattern decodes to the same value, and a sweep of float32 inputs (normal, subnormal,
// halfway, out of range, infinities, NaN) encodes to the same pattern.
#include "kiln/codegen/runtime/kiln_cpu.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "kiln/ir/SmallFloat.h"

namespace {

template <typename T>
void check_format(kiln::DType dtype, uint32_t patterns) {
  for (uint32_t bits = 0; bits < patterns; ++bits) {
    const float generated = kiln::to_float(T{static_cast<uint8_t>(bits)});
    const double reference = kiln::small_float_decode(dtype, bits);
    if (std::isnan(reference)) {
      EXPECT_TRUE(std::isnan(generated)) << kiln::dtype_name(dtype) << " pattern " << bits;
    } else {
      EXPECT_EQ(generated, static_cast<float>(reference)) << kiln::dtype_name(dtype) << " pattern " << bits;
    }
  }
  std::vector<float> inputs = {0.0f, -0.0f, std::numeric_limits<float>::infinity(),
                               -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(),
                               1e30f, -1e30f, 0x1p-140f};
  for (int e = -30; e <= 20; ++e) {
    for (int m = 0; m < 64; ++m) {
      const float v = std::ldexp(1.0f + m / 64.0f, e);
      inputs.push_back(v);
      inputs.push_back(-v);
    }
  }
  for (float v : inputs) {
    const uint32_t generated = kiln::from_float<T>(v).bits;
    const uint32_t reference = kiln::small_float_encode(dtype, v, /*saturate=*/true);
    EXPECT_EQ(generated, reference) << kiln::dtype_name(dtype) << " of " << v;
  }
}

TEST(SmallFloatRuntime, GeneratedConversionsMatchTheReference) {
  check_format<kiln::float8_e4m3fn_t>(kiln::DType::Float8E4M3, 256);
  check_format<kiln::float8_e4m3fnuz_t>(kiln::DType::Float8E4M3FNUZ, 256);
  check_format<kiln::float8_e5m2_t>(kiln::DType::Float8E5M2, 256);
  check_format<kiln::float8_e5m2fnuz_t>(kiln::DType::Float8E5M2FNUZ, 256);
  check_format<kiln::float4_e2m1_t>(kiln::DType::Float4E2M1, 16);
  check_format<kiln::float8_e8m0_t>(kiln::DType::Float8E8M0, 256);
}

}  // namespace

#include "../ops/TestGraph.h"
#include "kiln/codegen/Codegen.h"
#include "kiln/codegen/GraphFunctions.h"

namespace {

// A non-saturating Cast to float8 E5M2 overflows to infinity. Generated code must print that
// constant as its bit pattern (0x7c, 0xfc): through from_float, a saturating conversion, it became
// the largest finite value (57344), which the CUDA run of the onnx wheel's cast_no_saturate cases
// showed (bench/results/cuda_conformance_wheel_H100_2026-11-23_final.txt).
TEST(SmallFloatRuntime, NonSaturatingCastPrintsInfinityAsItsBitPattern) {
  kiln::test::TestGraph t(21, false);
  const int x = t.input("x", kiln::DType::Float32, {kiln::ir::Expr(4)});
  t.output(t.node("cast", kiln::OpKind::Cast, {x},
                  {{"to", kiln::test::int_attr(19)}, {"saturate", kiln::test::int_attr(0)}}));  // FLOAT8E5M2
  for (kiln::codegen::Target target : {kiln::codegen::Target::Cpu, kiln::codegen::Target::Cuda}) {
    const auto functions = kiln::codegen::lower_graph(t.graph, target, "cast");
    const std::string text = kiln::codegen::generate_module({functions.at(0).func}, target);
    EXPECT_NE(text.find("float8_e5m2_t{124}"), std::string::npos) << text;  // +inf
    EXPECT_NE(text.find("float8_e5m2_t{252}"), std::string::npos) << text;  // -inf
    EXPECT_EQ(text.find("kiln::infinity<float>()"), std::string::npos) << text;
  }
}

}  // namespace
