#include "kiln/quant/Prepack.h"

#include <cstring>

#include "kiln/support/Error.h"

namespace kiln::quant {
namespace {

constexpr int kKernelOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};  // element held by nibble position p

uint32_t load_word(const uint8_t* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}
void store_word(uint8_t* p, uint32_t w) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(w >> (8 * i));
}

std::vector<uint8_t> permute_words(std::span<const uint8_t> data, int64_t n, int64_t k, bool to_kernel) {
  if (k % 8 != 0) user_error("nibble reorder: k = {} is not a multiple of 8", k);
  if (data.size() != static_cast<size_t>(n * (k / 2))) {
    user_error("nibble reorder: data has {} bytes, expected n·k/2 = {}", data.size(), n * (k / 2));
  }
  std::vector<uint8_t> out(data.size());
  for (size_t off = 0; off < data.size(); off += 4) {
    const uint32_t in = load_word(data.data() + off);
    uint32_t res = 0;
    for (int p = 0; p < 8; ++p) {
      const int e = kKernelOrder[p];
      // export order: element e at nibble e. kernel order: element kKernelOrder[p] at nibble p.
      const int src = to_kernel ? e : p;
      const int dst = to_kernel ? p : e;
      res |= ((in >> (4 * src)) & 0xfu) << (4 * dst);
    }
    store_word(out.data() + off, res);
  }
  return out;
}

void check_kernel_shape(const QuantizedWeight& w, std::string_view what) {
  check_quantized_weight(w, what);
  if (w.n % 16 != 0) user_error("{}: n = {} is not a multiple of 16 (kernel row tile)", what, w.n);
  if (w.k % 128 != 0) user_error("{}: k = {} is not a multiple of 128 (kernel k step)", what, w.k);
  if (w.format == QuantFormat::MxFp4) {
    for (size_t i = 0; i < w.scales.size(); ++i) {
      if (w.scales[i] > 128) {
        user_error("{}: mxfp4 block scale 2^{} at row {}, block {} is above 2^1, which the kernels "
                   "do not take (block amax must be below 16)",
                   what, int(w.scales[i]) - 127, int64_t(i) / w.groups_per_row(), int64_t(i) % w.groups_per_row());
      }
    }
  }
}

void copy_rows(const std::vector<uint8_t>& src, int64_t src_row, std::vector<uint8_t>& dst, int64_t dst_row,
               int64_t rows, int64_t row_bytes) {
  if (row_bytes == 0) return;
  std::memcpy(dst.data() + dst_row * row_bytes, src.data() + src_row * row_bytes, rows * row_bytes);
}

}  // namespace

std::vector<uint8_t> to_kernel_nibble_order(std::span<const uint8_t> data, int64_t n, int64_t k) {
  return permute_words(data, n, k, true);
}
std::vector<uint8_t> from_kernel_nibble_order(std::span<const uint8_t> data, int64_t n, int64_t k) {
  return permute_words(data, n, k, false);
}

KernelWeight prepack(const QuantizedWeight& weight) {
  check_kernel_shape(weight, "prepack");
  KernelWeight out{weight, {weight.tensor_scale}};
  out.weight.data = to_kernel_nibble_order(weight.data, weight.n, weight.k);
  return out;
}

QuantizedWeight unpack(const KernelWeight& packed) {
  QuantizedWeight w = packed.weight;
  w.data = from_kernel_nibble_order(packed.weight.data, w.n, w.k);
  return w;
}

KernelWeight prepack_gate_up(const QuantizedWeight& gate, const QuantizedWeight& up) {
  check_kernel_shape(gate, "prepack_gate_up (gate)");
  check_kernel_shape(up, "prepack_gate_up (up)");
  if (gate.format != up.format || gate.n != up.n || gate.k != up.k || gate.group != up.group ||
      gate.scale_dtype != up.scale_dtype) {
    user_error("prepack_gate_up: gate is {} [{}, {}] group {} and up is {} [{}, {}] group {}; expected the "
               "same format, shape, group and scale dtype",
               format_name(gate.format), gate.n, gate.k, gate.group, format_name(up.format), up.n, up.k, up.group);
  }
  KernelWeight out;
  QuantizedWeight& w = out.weight;
  w = gate;
  w.n = 2 * gate.n;
  w.data.assign(gate.data.size() * 2, 0);
  w.scales.assign(gate.scales.size() * 2, 0);
  w.zeros.assign(gate.zeros.size() * 2, 0);
  const int64_t data_row = gate.k / 2;
  const int64_t scale_row = gate.groups_per_row() * gate.scale_bytes_per_element();
  const int64_t zero_row = gate.zeros.empty() ? 0 : scale_row;
  for (int64_t j = 0; j < gate.n / 8; ++j) {
    for (int half = 0; half < 2; ++half) {
      const QuantizedWeight& src = half == 0 ? gate : up;
      const int64_t dst_row = 16 * j + 8 * half;
      copy_rows(src.data, 8 * j, w.data, dst_row, 8, data_row);
      copy_rows(src.scales, 8 * j, w.scales, dst_row, 8, scale_row);
      copy_rows(src.zeros, 8 * j, w.zeros, dst_row, 8, zero_row);
    }
  }
  w.data = to_kernel_nibble_order(w.data, w.n, w.k);
  w.tensor_scale = 1.0f;
  out.tensor_scales = {gate.tensor_scale, up.tensor_scale};
  return out;
}

std::vector<QuantizedWeight> unpack_gate_up(const KernelWeight& packed) {
  const QuantizedWeight w = unpack(packed);
  if (w.n % 16 != 0 || packed.tensor_scales.size() != 2) {
    user_error("unpack_gate_up: expected a fused gate/up weight (n a multiple of 16, 2 tensor scales), got n = "
               "{} and {} tensor scales",
               w.n, packed.tensor_scales.size());
  }
  std::vector<QuantizedWeight> out(2, w);
  const int64_t data_row = w.k / 2;
  const int64_t scale_row = w.groups_per_row() * w.scale_bytes_per_element();
  const int64_t zero_row = w.zeros.empty() ? 0 : scale_row;
  for (int half = 0; half < 2; ++half) {
    QuantizedWeight& q = out[half];
    q.n = w.n / 2;
    q.data.assign(w.data.size() / 2, 0);
    q.scales.assign(w.scales.size() / 2, 0);
    q.zeros.assign(w.zeros.size() / 2, 0);
    q.tensor_scale = packed.tensor_scales[half];
    for (int64_t j = 0; j < q.n / 8; ++j) {
      const int64_t src_row = 16 * j + 8 * half;
      copy_rows(w.data, src_row, q.data, 8 * j, 8, data_row);
      copy_rows(w.scales, src_row, q.scales, 8 * j, 8, scale_row);
      copy_rows(w.zeros, src_row, q.zeros, 8 * j, 8, zero_row);
    }
  }
  return out;
}

}  // namespace kiln::quant
