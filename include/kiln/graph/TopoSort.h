#pragma once
// Orders graph.nodes so that every node comes after the producers of its inputs, keeping the
// existing order where it already is one, and renumbers Value::producer to match. A cycle is a
// UserError naming the nodes on it.
#include "kiln/graph/Graph.h"

namespace kiln {

void sort_topologically(Graph& graph);

}  // namespace kiln
