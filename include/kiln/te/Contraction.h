#pragma once
// Contractions: sum reductions whose source is the product of two factors that each read only
// part of the output axes (MatMul, Gemm, Conv, ConvTranspose). Seen this way a stage is a batch
// of matrix products C[m, n] = sum_k a(m, k) * b(k, n), which the default GPU schedule tiles
// through shared memory (schedule/Defaults.h, lower/TileContraction).
#include <optional>
#include <vector>

#include "kiln/te/Tensor.h"

namespace kiln::te {

struct Contraction {
  std::vector<int> batch_axes;  // output axes that both factors read, or neither
  std::vector<int> m_axes;      // output axes only `a` reads
  std::vector<int> n_axes;      // output axes only `b` reads; holds the last output axis
  ir::Expr a, b;                // source = a * b (in that order or the other)
  bool condition_on_a = true;   // the reduction's condition reads no n axis (else it reads no m axis)
};

// The split of `t` into a contraction, or nullopt when its body is not a sum of a product whose
// factors each read an output axis the other does not (with the last output axis on one side
// only), or when its condition reads both m and n axes.
std::optional<Contraction> as_contraction(const Tensor& t);

}  // namespace kiln::te
