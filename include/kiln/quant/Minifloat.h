#pragma once
// Encoders and decoders for the small floating-point formats of 4-bit weight quantization.
//
// Every encoder rounds to nearest, ties to even (IEEE roundTiesToEven) and saturates to the
// largest finite value of the format; none of these formats is given an infinity here. NaN
// inputs are a caller bug (the quantizer rejects non-finite weights before encoding).
//
//   E2M1 (OCP FP4):      s|ee|m, bias 1, values 0, 0.5, 1, 1.5, 2, 3, 4, 6; a 4-bit code.
//   E4M3 ("e4m3fn"):     s|eeee|mmm, bias 7, max 448, subnormals down to 2^-9; 0x7f/0xff NaN.
//   E8M0 (OCP scale):    eeeeeeee, the power of two 2^(code - 127); code 255 is NaN.
//   fp16 / bf16:         IEEE binary16 and bfloat16 bit patterns (INT4 scale and zero storage).
#include <cstdint>

namespace kiln::quant {

uint8_t e2m1_from_float(float value);
float e2m1_to_float(uint8_t code);  // low 4 bits used

uint8_t e4m3_from_float(float value);
float e4m3_to_float(uint8_t bits);

// The E8M0 code of 2^exponent, exponent clamped to [-127, 127].
uint8_t e8m0_from_exponent(int exponent);
float e8m0_to_float(uint8_t bits);

// float16 and bfloat16 (the INT4 scales and zeros) use HostTensor's conversions
// (include/kiln/runtime/HostTensor.h), shared with the CPU backend.

}  // namespace kiln::quant
