#pragma once
// Checks shared by the template lowering tests: random inputs, and a graph lowered for the GPU
// (templates interpreted through their reference loops) against the same graph lowered for the
// CPU (plain loops).
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "kiln/codegen/GraphFunctions.h"
#include "kiln/runtime/Interpreter.h"

namespace kiln::test {

inline HostTensor random_tensor(DType dtype, std::vector<int64_t> shape, uint64_t seed) {
  HostTensor t(dtype, std::move(shape));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.set_double(i, u(rng));
  return t;
}

inline void expect_same_results(const Graph& g, const std::vector<HostTensor>& inputs, double tolerance) {
  const auto gpu = codegen::lower_graph(g, codegen::Target::Cuda, "gpu");
  const auto cpu = codegen::lower_graph(g, codegen::Target::Cpu, "cpu");
  ASSERT_EQ(gpu.size(), 1u);
  ASSERT_EQ(cpu.size(), 1u);
  const std::vector<HostTensor> want = interpret(cpu[0].func, inputs);
  const std::vector<HostTensor> got = interpret(gpu[0].func, inputs);
  ASSERT_EQ(got.size(), want.size());
  for (size_t o = 0; o < want.size(); ++o) {
    ASSERT_EQ(got[o].shape(), want[o].shape());
    for (int64_t i = 0; i < want[o].num_elements(); ++i) {
      ASSERT_NEAR(got[o].get_double(i), want[o].get_double(i), tolerance) << "output " << o << " element " << i;
    }
  }
}

}  // namespace kiln::test
