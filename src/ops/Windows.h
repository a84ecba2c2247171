#pragma once
// The geometry of sliding windows (Conv, ConvTranspose's input side, MaxPool, AveragePool):
// kernel, strides, dilations and pads from the node's attributes, and the output extents.
#include <vector>

#include "kiln/ir/IROperator.h"
#include "kiln/ops/Op.h"

namespace kiln::ops {

struct WindowGeometry {
  std::vector<int64_t> kernel, strides, dilations;
  std::vector<ir::Expr> pad_begin, pad_end;  // symbolic when auto_pad depends on symbolic dims
  std::vector<ir::Expr> out;                 // output extent per spatial dim
};

// `in` are the spatial input dims, `kernel` the window size. Reads auto_pad, pads, strides,
// dilations; ceil_mode rounds the output extent up (a window must still start inside the input
// or its begin padding).
WindowGeometry window_geometry(const OpContext& ctx, const std::vector<ir::Expr>& in, std::vector<int64_t> kernel,
                               bool ceil_mode);

// The input position that window element `k` of output position `o` reads in spatial dim d,
// and whether it lies inside the input (not in padding).
ir::Expr window_position(const WindowGeometry& g, int d, const ir::Expr& o, const ir::Expr& k);
ir::Expr inside(const ir::Expr& position, const ir::Expr& extent);

}  // namespace kiln::ops
