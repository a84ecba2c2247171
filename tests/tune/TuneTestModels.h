#pragma once
// Small models for the tuner's tests: softmax (a row kernel) and a column reduction, as Graphs and
// as .onnx files (the worker processes load models from files).
#include <filesystem>
#include <string>

#include "../ops/TestGraph.h"
#include "kiln/codegen/GraphFunctions.h"
#include "kiln/onnx/Export.h"

namespace kiln::test {

inline Graph softmax_graph(int64_t rows, int64_t cols, DType dtype, const std::string& prefix = "") {
  TestGraph g;
  const int x = g.input(prefix + "x", dtype, {ir::Expr(rows), ir::Expr(cols)});
  g.node(prefix + "softmax", OpKind::Softmax, {x}, {{"axis", int_attr(-1)}});
  g.graph.name = "softmax_model";
  return g.graph;
}

inline Graph column_sum_graph(int64_t rows, int64_t cols, DType dtype) {
  TestGraph g;
  const int x = g.input("x", dtype, {ir::Expr(rows), ir::Expr(cols)});
  const int axes = g.ints("axes", {0});
  g.node("sum", OpKind::ReduceSum, {x, axes}, {{"keepdims", int_attr(0)}});
  g.graph.name = "column_sum";
  return g.graph;
}

// Two nodes over one input (a softmax and a column sum): two kernels when tuned per node.
inline Graph two_kernel_graph(int64_t rows, int64_t cols, DType dtype) {
  TestGraph g;
  const int x = g.input("x", dtype, {ir::Expr(rows), ir::Expr(cols)});
  g.node("softmax", OpKind::Softmax, {x}, {{"axis", int_attr(-1)}});
  const int axes = g.ints("axes", {0});
  g.node("sum", OpKind::ReduceSum, {x, axes}, {{"keepdims", int_attr(0)}});
  g.graph.name = "two_kernels";
  return g.graph;
}

inline codegen::KernelDefinition only_kernel(const Graph& graph) {
  return codegen::kernel_definitions(graph, graph.name).at(0);
}

inline std::string temp_dir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("kiln_tune_test_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

}  // namespace kiln::test
