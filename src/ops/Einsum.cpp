// Einsum: the equation's output labels index the result, every other label is summed, and the
// body is the product of the inputs read at their labels (a repeated label in one input reads
// its diagonal). "..." stands for the same broadcast dims in every term (right-aligned, numpy
// broadcasting); without "->" the output is the ellipsis dims, then the labels used once, in
// alphabetical order. One reduction stage (float16/bfloat16 accumulate in float32).
#include <map>

#include "Families.h"
#include "IndexMath.h"
#include "ReduceStages.h"
#include "kiln/ops/Helpers.h"

namespace kiln::ops {
namespace {

using namespace ir;

// Labels are chars; ellipsis dims get the labels '0', '1', ... (outermost first).
// `rank` < 0: the output term (its ellipsis holds all `ellipsis_dims`, the most of any input).
std::vector<char> parse_term(const OpContext& ctx, const std::string& term, int rank, int ellipsis_dims) {
  std::vector<char> labels;
  const size_t dots = term.find("...");
  int letters = 0;
  for (char ch : term) letters += std::isalpha(static_cast<unsigned char>(ch)) ? 1 : 0;
  if (dots == std::string::npos) {
    if (rank >= 0 && letters != rank) {
      ctx.fail("equation term '{}' has {} labels but its input has rank {}", term, letters, rank);
    }
    for (char ch : term) labels.push_back(ch);
    return labels;
  }
  const int e = rank >= 0 ? rank - letters : ellipsis_dims;
  if (e < 0) ctx.fail("equation term '{}' has {} labels but its input has rank {}", term, letters, rank);
  for (char ch : term.substr(0, dots)) labels.push_back(ch);
  for (int k = 0; k < e; ++k) labels.push_back(static_cast<char>('0' + (ellipsis_dims - e) + k));
  for (char ch : term.substr(dots + 3)) labels.push_back(ch);
  return labels;
}

std::vector<te::Tensor> einsum(OpContext& ctx) {
  std::string equation;
  for (char ch : ctx.node().attr_string("equation", "")) {
    if (ch != ' ') equation.push_back(ch);
  }
  if (equation.empty()) ctx.fail("attribute 'equation' is required");
  const size_t arrow = equation.find("->");
  const std::string lhs = equation.substr(0, arrow);
  std::vector<std::string> terms;
  for (size_t start = 0;;) {
    const size_t comma = lhs.find(',', start);
    terms.push_back(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (static_cast<int>(terms.size()) != ctx.num_inputs()) {
    ctx.fail("equation '{}' has {} input terms but the node has {} inputs", equation, terms.size(), ctx.num_inputs());
  }
  std::vector<te::Tensor> inputs;
  for (int k = 0; k < ctx.num_inputs(); ++k) inputs.push_back(ctx.input(k));
  check_same_dtype(ctx, inputs);
  int ellipsis_dims = 0;
  for (size_t k = 0; k < terms.size(); ++k) {
    int letters = 0;
    for (char ch : terms[k]) {
      if (!std::isalpha(static_cast<unsigned char>(ch)) && ch != '.') {
        ctx.fail("equation '{}' holds '{}'; labels are letters", equation, ch);
      }
      letters += ch != '.' ? 1 : 0;
    }
    if (terms[k].find("...") != std::string::npos) ellipsis_dims = std::max(ellipsis_dims, inputs[k].ndim() - letters);
  }
  std::vector<std::vector<char>> labels;
  for (size_t k = 0; k < terms.size(); ++k) {
    labels.push_back(parse_term(ctx, terms[k], inputs[k].ndim(), ellipsis_dims));
  }
  // The extent of every label (ellipsis dims broadcast: a dim of 1 gives way).
  std::map<char, Expr> extent;
  std::map<char, int> uses;
  for (size_t k = 0; k < labels.size(); ++k) {
    for (size_t d = 0; d < labels[k].size(); ++d) {
      const char l = labels[k][d];
      ++uses[l];
      const Expr dim = inputs[k].shape(static_cast<int>(d));
      auto it = extent.find(l);
      if (it == extent.end() || is_one(it->second)) {
        extent[l] = dim;
      } else if (!is_one(dim)) {
        auto a = as_const_int(it->second), b = as_const_int(dim);
        if (a && b && *a != *b) ctx.fail("label '{}' has extents {} and {} in equation '{}'", l, *a, *b, equation);
      }
    }
  }
  std::vector<char> out_labels;
  if (arrow != std::string::npos) {
    out_labels = parse_term(ctx, equation.substr(arrow + 2), -1, ellipsis_dims);
    for (char l : out_labels) {
      if (!extent.count(l)) ctx.fail("output label '{}' of equation '{}' is not in any input", l, equation);
    }
  } else {
    for (int k = 0; k < ellipsis_dims; ++k) out_labels.push_back(static_cast<char>('0' + k));
    for (const auto& [l, n] : uses) {
      if (std::isalpha(static_cast<unsigned char>(l)) && n == 1) out_labels.push_back(l);
    }
  }
  std::vector<Expr> shape;
  for (char l : out_labels) shape.push_back(extent[l]);
  std::vector<char> summed;
  for (const auto& [l, n] : extent) {
    if (std::find(out_labels.begin(), out_labels.end(), l) == out_labels.end()) summed.push_back(l);
  }
  const DType dtype = inputs[0].dtype();
  const Type acc = accumulate_type(dtype);
  auto product_at = [&](const std::map<char, Expr>& index) {
    Expr p;
    for (size_t k = 0; k < inputs.size(); ++k) {
      std::vector<Expr> at;
      for (size_t d = 0; d < labels[k].size(); ++d) {
        const Expr dim = inputs[k].shape(static_cast<int>(d));
        at.push_back(is_one(dim) ? Expr(0) : index.at(labels[k][d]));
      }
      const Expr v = cast(acc, inputs[k](at));
      p = p.defined() ? p * v : v;
    }
    return p;
  };
  const te::Tensor result = te::compute(
      summed.empty() ? ctx.output_name(0) : ctx.stage_name("sum"), shape,
      [&](const std::vector<Expr>& i) {
        std::map<char, Expr> index;
        for (size_t d = 0; d < out_labels.size(); ++d) index[out_labels[d]] = i[d];
        if (summed.empty()) return cast(Type(dtype), product_at(index));
        std::vector<IterVar> axes;
        for (char l : summed) {
          axes.push_back(te::reduce_axis(extent[l], ctx.stage_name(std::string("r_") + (std::isalpha(l) ? l : 'e'))));
          index[l] = axes.back().var;
        }
        return te::sum(product_at(index), axes);
      },
      ctx.node().describe());
  if (summed.empty()) return {result};
  return {te::compute(
      ctx.output_name(0), shape, [&](const std::vector<Expr>& i) { return cast(Type(dtype), result(i)); },
      ctx.node().describe())};
}

}  // namespace

void register_einsum(OpTable& table) { table.add(OpKind::Einsum, einsum); }

}  // namespace kiln::ops
