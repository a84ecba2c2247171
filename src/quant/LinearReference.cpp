#include "kiln/quant/LinearReference.h"

#include <cmath>

#include "kiln/quant/Quantize.h"
#include "kiln/support/Error.h"

namespace kiln::quant {

std::vector<double> linear_reference(std::span<const float> x, int64_t m, const QuantizedWeight& weight,
                                     std::span<const float> bias) {
  const std::vector<double> w = dequantize(weight);  // checks the weight
  const int64_t n = weight.n, k = weight.k;
  if (m < 0 || x.size() != static_cast<size_t>(m * k)) {
    user_error("linear_reference: x has {} elements, expected m·k = {}·{}", x.size(), m, k);
  }
  if (!bias.empty() && bias.size() != static_cast<size_t>(n)) {
    user_error("linear_reference: bias has {} elements, expected n = {}", bias.size(), n);
  }
  std::vector<double> y(m * n);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double acc = bias.empty() ? 0.0 : double(bias[j]);
      for (int64_t c = 0; c < k; ++c) acc += double(x[i * k + c]) * w[j * k + c];
      y[i * n + j] = acc;
    }
  }
  return y;
}

double gelu_tanh(double v) {
  const double kAlpha = 0.7978845608028654;  // sqrt(2/pi)
  return 0.5 * v * (1.0 + std::tanh(kAlpha * (v + 0.044715 * v * v * v)));
}

double silu(double v) { return v / (1.0 + std::exp(-v)); }

}  // namespace kiln::quant
