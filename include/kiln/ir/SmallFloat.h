#pragma once
// The 8- and 4-bit float formats of ONNX (float8 E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ, E8M0 and
// float4 E2M1) as bit patterns: exact decoding, and encoding with ONNX's rounding and saturation
// (the Cast operator's table; the onnx package's reference implementation agrees bit for bit).
//
// Encoding rounds to nearest even. With `saturate`, values beyond the largest finite value and
// infinities become that value (with their sign); without it they become infinity where the
// format has one (E5M2) and NaN elsewhere. NaN stays NaN (sign kept where the format has a
// signed NaN). FNUZ formats have no negative zero: -0 encodes as +0.
// E8M0 (unsigned powers of two, 0xFF = NaN) follows onnx.numpy_helper.to_float8e8m0: the float32
// exponent field rounded `up` (default), `down` or to `nearest`; with `saturate` a value never
// rounds past the largest exponent.
// float4 E2M1 has neither NaN nor infinity: it always saturates, NaN encodes as 0 with the sign
// bit flipped (what ml_dtypes, the onnx reference's converter, does).
#include <cstdint>

#include "kiln/ir/Type.h"

namespace kiln {

enum class E8M0Rounding : uint8_t { Up, Down, Nearest };

// `dtype` must satisfy is_small_float().
double small_float_decode(DType dtype, uint32_t bits);
uint32_t small_float_encode(DType dtype, double value, bool saturate = true,
                            E8M0Rounding e8m0_rounding = E8M0Rounding::Up);
// The largest finite value of a small float format (448 for E4M3FN).
double small_float_max(DType dtype);

}  // namespace kiln
