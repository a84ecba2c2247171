// The training domain's optimizer steps on the CPU reference against the spec's formulas, and
// their input-count errors.
#include <gtest/gtest.h>

#include <cmath>

#include "TestGraph.h"

namespace kiln {
namespace {

using test::OpsTestGraph;

HostTensor int64_scalar(int64_t v) {
  HostTensor t(DType::Int64, {});
  t.set_int(0, v);
  return t;
}

TEST(Optimizers, AdagradStep) {
  OpsTestGraph b;
  const int r = b.input("r", DType::Float32, {});
  const int t = b.input("t", DType::Int64, {});
  const int x = b.input("x", DType::Float32, {2});
  const int g = b.input("g", DType::Float32, {2});
  const int h = b.input("h", DType::Float32, {2});
  const int out = b.node("a", OpKind::Adagrad, {r, t, x, g, h},
                         {{"decay_factor", test::float_attr(0.1)},
                          {"epsilon", test::float_attr(1e-5)},
                          {"norm_coefficient", test::float_attr(0.001)}},
                         2);
  b.output(out);
  b.output(out + 1);
  const std::vector<HostTensor> res =
      run_graph_on_cpu(b.graph, {{"r", test::float_tensor({}, {0.1})},
                                 {"t", int64_scalar(3)},
                                 {"x", test::float_tensor({2}, {1.0, 2.0})},
                                 {"g", test::float_tensor({2}, {-1.0, 3.0})},
                                 {"h", test::float_tensor({2}, {2.0, 0.5})}});
  const double rate = 0.1 / (1 + 3 * 0.1);
  const double xs[] = {1.0, 2.0}, gs[] = {-1.0, 3.0}, hs[] = {2.0, 0.5};
  for (int k = 0; k < 2; ++k) {
    const double gr = 0.001 * xs[k] + gs[k];
    const double h_new = hs[k] + gr * gr;
    EXPECT_NEAR(test::values_of(res[0])[k], xs[k] - rate * gr / (std::sqrt(h_new) + 1e-5), 1e-6)
        << k;
    EXPECT_NEAR(test::values_of(res[1])[k], h_new, 1e-6) << k;
  }
}

TEST(Optimizers, AdamNeedsFourGroups) {
  OpsTestGraph b;
  std::vector<int> in = {b.input("r", DType::Float32, {}), b.input("t", DType::Int64, {})};
  for (const char* name : {"x", "g", "v"}) in.push_back(b.input(name, DType::Float32, {2}));
  b.output(b.node("adam", OpKind::Adam, in, {}, 3));
  EXPECT_EQ(b.error(),
            "node 'adam' (Adam): has 5 inputs; expected R, T and 4 groups of n tensors (n >= 1)");
}

}  // namespace
}  // namespace kiln
