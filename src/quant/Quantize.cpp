#include "kiln/quant/Quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kiln/quant/Minifloat.h"
#include "kiln/runtime/HostTensor.h"
#include "kiln/support/Error.h"

namespace kiln::quant {
namespace {

int64_t default_group(QuantFormat format) {
  switch (format) {
    case QuantFormat::NvFp4: return 16;
    case QuantFormat::MxFp4: return 32;
    case QuantFormat::Int4: return 128;
  }
  internal_error("unknown QuantFormat");
}

DType scale_dtype_of(const QuantSpec& spec) {
  switch (spec.format) {
    case QuantFormat::NvFp4: return DType::Float8E4M3;
    case QuantFormat::MxFp4: return DType::Float8E8M0;
    case QuantFormat::Int4: return spec.scale_dtype;
  }
  internal_error("unknown QuantFormat");
}

void set_nibble(std::vector<uint8_t>& data, int64_t row_bytes, int64_t r, int64_t c, uint8_t code) {
  uint8_t& byte = data[r * row_bytes + c / 2];
  byte = (c % 2 == 0) ? static_cast<uint8_t>((byte & 0xf0u) | (code & 0xfu))
                      : static_cast<uint8_t>((byte & 0x0fu) | ((code & 0xfu) << 4));
}

uint8_t get_nibble(const std::vector<uint8_t>& data, int64_t row_bytes, int64_t r, int64_t c) {
  const uint8_t byte = data[r * row_bytes + c / 2];
  return (c % 2 == 0) ? (byte & 0xfu) : (byte >> 4);
}

void store_half(std::vector<uint8_t>& out, int64_t index, DType dtype, float value) {
  const uint16_t bits = dtype == DType::Float16 ? float_to_half_bits(value) : float_to_bfloat16_bits(value);
  std::memcpy(out.data() + 2 * index, &bits, 2);
}

float load_half(const std::vector<uint8_t>& in, int64_t index, DType dtype) {
  uint16_t bits;
  std::memcpy(&bits, in.data() + 2 * index, 2);
  return dtype == DType::Float16 ? half_bits_to_float(bits) : bfloat16_bits_to_float(bits);
}

float block_amax(std::span<const float> w, int64_t begin, int64_t count) {
  float amax = 0.0f;
  for (int64_t i = 0; i < count; ++i) amax = std::max(amax, std::fabs(w[begin + i]));
  return amax;
}

void quantize_nvfp4(std::span<const float> w, QuantizedWeight& q) {
  const float amax = block_amax(w, 0, static_cast<int64_t>(w.size()));
  // fp32 arithmetic throughout, as Model Optimizer computes it.
  q.tensor_scale = amax == 0.0f ? 1.0f : amax / (6.0f * 448.0f);
  const int64_t row_bytes = q.k / 2;
  for (int64_t r = 0; r < q.n; ++r) {
    for (int64_t b = 0; b < q.groups_per_row(); ++b) {
      const int64_t begin = r * q.k + b * 16;
      const float bmax = block_amax(w, begin, 16);
      const float raw = bmax == 0.0f ? 1.0f : bmax / (6.0f * q.tensor_scale);
      const uint8_t scale = e4m3_from_float(raw);
      q.scales[r * q.groups_per_row() + b] = scale;
      const float divisor = e4m3_to_float(scale) * q.tensor_scale;
      for (int64_t i = 0; i < 16; ++i) {
        const uint8_t code = divisor == 0.0f ? 0 : e2m1_from_float(w[begin + i] / divisor);
        set_nibble(q.data, row_bytes, r, b * 16 + i, code);
      }
    }
  }
}

void quantize_mxfp4(std::span<const float> w, QuantizedWeight& q) {
  const int64_t row_bytes = q.k / 2;
  for (int64_t r = 0; r < q.n; ++r) {
    for (int64_t b = 0; b < q.groups_per_row(); ++b) {
      const int64_t begin = r * q.k + b * 32;
      const float bmax = block_amax(w, begin, 32);
      // emax of E2M1 is 2: the largest element 6 = 1.5 · 2^2.
      const int exponent = bmax == 0.0f ? -127 : std::ilogb(bmax) - 2;
      const uint8_t scale = e8m0_from_exponent(exponent);
      q.scales[r * q.groups_per_row() + b] = scale;
      const double x = std::ldexp(1.0, static_cast<int>(scale) - 127);
      for (int64_t i = 0; i < 32; ++i) {
        const uint8_t code = e2m1_from_float(static_cast<float>(w[begin + i] / x));
        set_nibble(q.data, row_bytes, r, b * 32 + i, code);
      }
    }
  }
}

void quantize_int4(std::span<const float> w, QuantizedWeight& q) {
  const int64_t row_bytes = q.k / 2;
  for (int64_t r = 0; r < q.n; ++r) {
    for (int64_t g = 0; g < q.groups_per_row(); ++g) {
      const int64_t begin = r * q.k + g * q.group;
      float lo = 0.0f, hi = 0.0f;
      for (int64_t i = 0; i < q.group; ++i) {
        lo = std::min(lo, w[begin + i]);
        hi = std::max(hi, w[begin + i]);
      }
      const int64_t index = r * q.groups_per_row() + g;
      store_half(q.scales, index, q.scale_dtype, hi > lo ? (hi - lo) / 15.0f : 1.0f);
      const float s = load_half(q.scales, index, q.scale_dtype);
      const float z = std::clamp(std::nearbyint(-lo / s), 0.0f, 15.0f);
      store_half(q.zeros, index, q.scale_dtype, z);
      for (int64_t i = 0; i < q.group; ++i) {
        const float v = std::clamp(std::nearbyint(w[begin + i] / s + z), 0.0f, 15.0f);
        set_nibble(q.data, row_bytes, r, g * q.group + i, static_cast<uint8_t>(v));
      }
    }
  }
}

}  // namespace

QuantizedWeight quantize(std::span<const float> weights, int64_t n, int64_t k, const QuantSpec& spec) {
  QuantizedWeight q;
  q.format = spec.format;
  q.n = n;
  q.k = k;
  q.group = spec.group == 0 ? default_group(spec.format) : spec.group;
  q.scale_dtype = scale_dtype_of(spec);
  if (n <= 0 || k <= 0) user_error("quantize ({}): shape [{}, {}] must be positive", format_name(q.format), n, k);
  if (weights.size() != static_cast<size_t>(n * k)) {
    user_error("quantize ({}): weights have {} elements, expected n·k = {}·{} = {}", format_name(q.format),
               weights.size(), n, k, n * k);
  }
  for (size_t i = 0; i < weights.size(); ++i) {
    if (!std::isfinite(weights[i])) {
      user_error("quantize ({}): weight [{}, {}] is {}, expected a finite value", format_name(q.format),
                 static_cast<int64_t>(i) / k, static_cast<int64_t>(i) % k, weights[i]);
    }
  }
  // Sizes are derived from the shape below; check_quantized_weight reports a bad group or k.
  q.data.assign(k % 2 == 0 ? n * (k / 2) : 0, 0);
  const bool shape_ok = q.group > 0 && k % q.group == 0;
  q.scales.assign(shape_ok ? n * (k / q.group) * dtype_bytes(q.scale_dtype) : 0, 0);
  q.zeros.assign(shape_ok && q.format == QuantFormat::Int4 ? q.scales.size() : 0, 0);
  check_quantized_weight(q, "quantize");
  switch (q.format) {
    case QuantFormat::NvFp4: quantize_nvfp4(weights, q); break;
    case QuantFormat::MxFp4: quantize_mxfp4(weights, q); break;
    case QuantFormat::Int4: quantize_int4(weights, q); break;
  }
  return q;
}

std::vector<double> dequantize(const QuantizedWeight& q) {
  check_quantized_weight(q, "dequantize");
  std::vector<double> w(q.n * q.k);
  const int64_t row_bytes = q.k / 2;
  for (int64_t r = 0; r < q.n; ++r) {
    for (int64_t c = 0; c < q.k; ++c) {
      const uint8_t code = get_nibble(q.data, row_bytes, r, c);
      const int64_t index = r * q.groups_per_row() + c / q.group;
      double value = 0.0;
      switch (q.format) {
        case QuantFormat::NvFp4:
          value = double(e2m1_to_float(code)) * double(e4m3_to_float(q.scales[index])) * double(q.tensor_scale);
          break;
        case QuantFormat::MxFp4:
          value = double(e2m1_to_float(code)) * std::ldexp(1.0, static_cast<int>(q.scales[index]) - 127);
          break;
        case QuantFormat::Int4:
          value = (double(code) - double(load_half(q.zeros, index, q.scale_dtype))) *
                  double(load_half(q.scales, index, q.scale_dtype));
          break;
      }
      w[r * q.k + c] = value;
    }
  }
  return w;
}

QuantError quantization_error(std::span<const float> weights, const QuantizedWeight& weight) {
  const std::vector<double> deq = dequantize(weight);
  if (deq.size() != weights.size()) {
    user_error("quantization_error: {} weights for a quantized [{}, {}]", weights.size(), weight.n, weight.k);
  }
  double diff2 = 0.0, ref2 = 0.0, max_abs = 0.0;
  for (size_t i = 0; i < deq.size(); ++i) {
    const double d = double(weights[i]) - deq[i];
    diff2 += d * d;
    ref2 += double(weights[i]) * double(weights[i]);
    max_abs = std::max(max_abs, std::fabs(d));
  }
  return {ref2 > 0.0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2), max_abs};
}

}  // namespace kiln::quant
