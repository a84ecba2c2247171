#include "Windows.h"

#include "IndexMath.h"
#include "kiln/ir/IRPrinter.h"
#include "kiln/ir/Simplify.h"

namespace kiln::ops {

using namespace ir;

WindowGeometry window_geometry(const OpContext& ctx, const std::vector<Expr>& in, std::vector<int64_t> kernel,
                               bool ceil_mode) {
  const size_t n = in.size();
  const Node& node = ctx.node();
  WindowGeometry g;
  g.kernel = std::move(kernel);
  g.strides = node.attr_ints("strides", std::vector<int64_t>(n, 1));
  g.dilations = node.attr_ints("dilations", std::vector<int64_t>(n, 1));
  if (g.kernel.size() != n || g.strides.size() != n || g.dilations.size() != n) {
    ctx.fail("kernel_shape, strides and dilations must have one entry per spatial dimension ({}), got {}, {}, {}", n,
             g.kernel.size(), g.strides.size(), g.dilations.size());
  }
  for (size_t d = 0; d < n; ++d) {
    if (g.strides[d] <= 0 || g.dilations[d] <= 0 || g.kernel[d] <= 0) {
      ctx.fail("kernel, strides and dilations must be positive (spatial dimension {}: {}, {}, {})", d, g.kernel[d],
               g.strides[d], g.dilations[d]);
    }
  }
  const std::string auto_pad = node.attr_string("auto_pad", "NOTSET");
  for (size_t d = 0; d < n; ++d) {
    const Expr span = Expr((g.kernel[d] - 1) * g.dilations[d] + 1);
    const Expr s = Expr(g.strides[d]);
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      Expr out = ceil_div(in[d], s);
      Expr total = max((out - 1) * s + span - in[d], Expr(0));
      Expr small = floor_div(total, Expr(2));
      Expr begin = auto_pad == "SAME_UPPER" ? small : total - small;
      g.pad_begin.push_back(simplify(begin));
      g.pad_end.push_back(simplify(total - begin));
      g.out.push_back(simplify(out));
      continue;
    }
    if (auto_pad == "VALID") {
      g.pad_begin.push_back(Expr(0));
      g.pad_end.push_back(Expr(0));
    } else if (auto_pad == "NOTSET") {
      std::vector<int64_t> pads = node.attr_ints("pads", std::vector<int64_t>(2 * n, 0));
      if (pads.size() != 2 * n) ctx.fail("attribute 'pads' has {} values, expected {}", pads.size(), 2 * n);
      g.pad_begin.push_back(Expr(pads[d]));
      g.pad_end.push_back(Expr(pads[d + n]));
    } else {
      ctx.fail("attribute 'auto_pad' is '{}', expected NOTSET, SAME_UPPER, SAME_LOWER or VALID", auto_pad);
    }
    Expr room = in[d] + g.pad_begin[d] + g.pad_end[d] - span;
    Expr out = (ceil_mode ? ceil_div(room, s) : floor_div(room, s)) + 1;
    if (ceil_mode) out = select((out - 1) * s >= in[d] + g.pad_begin[d], out - 1, out);
    out = simplify(out);
    if (auto c = as_const_int(out); c && *c <= 0) {
      ctx.fail("the window (kernel {}, dilation {}) does not fit spatial dimension {} of size {} with pads {} / {}",
               g.kernel[d], g.dilations[d], d, to_string(in[d]), to_string(g.pad_begin[d]), to_string(g.pad_end[d]));
    }
    g.out.push_back(out);
  }
  return g;
}

Expr window_position(const WindowGeometry& g, int d, const Expr& o, const Expr& k) {
  return o * Expr(g.strides[d]) - g.pad_begin[d] + k * Expr(g.dilations[d]);
}

Expr inside(const Expr& position, const Expr& extent) { return position >= 0 && position < extent; }

}  // namespace kiln::ops
