#include "kiln/graph/TopoSort.h"

#include <algorithm>
#include <queue>

#include "kiln/support/Error.h"

namespace kiln {
namespace {

// The producers of node n's inputs, as node indices.
std::vector<int> producers_of(const Graph& graph, const Node& node) {
  std::vector<int> result;
  for (const std::vector<int>* values : {&node.inputs, &node.implicit_inputs}) {
    for (int v : *values) {
      if (v >= 0 && graph.values[v].producer >= 0) result.push_back(graph.values[v].producer);
    }
  }
  return result;
}

// Some cycle among the nodes that Kahn's algorithm could not place, as "'a' -> 'b' -> 'a'".
std::string describe_cycle(const Graph& graph, const std::vector<int>& in_degree) {
  int start = -1;
  for (size_t n = 0; n < in_degree.size() && start < 0; ++n) {
    if (in_degree[n] > 0) start = static_cast<int>(n);
  }
  // Walking back along unplaced producers from an unplaced node must revisit a node.
  std::vector<int> position(graph.nodes.size(), -1);
  std::vector<int> path;
  int n = start;
  while (position[n] < 0) {
    position[n] = static_cast<int>(path.size());
    path.push_back(n);
    int next = -1;
    for (int p : producers_of(graph, graph.nodes[n])) {
      if (in_degree[p] > 0) {
        next = p;
        break;
      }
    }
    KILN_ASSERT(next >= 0, "unplaced node without an unplaced producer");
    n = next;
  }
  // The cycle in data-flow order, starting at the node that comes first in the graph.
  std::vector<int> cycle(path.rbegin(), path.rend() - position[n]);
  std::rotate(cycle.begin(), std::min_element(cycle.begin(), cycle.end()), cycle.end());
  std::string s;
  for (int c : cycle) s += "'" + graph.nodes[c].name + "' -> ";
  return s + "'" + graph.nodes[cycle.front()].name + "'";
}

}  // namespace

void sort_topologically(Graph& graph) {
  const size_t num_nodes = graph.nodes.size();
  std::vector<int> in_degree(num_nodes, 0);
  std::vector<std::vector<int>> consumers(num_nodes);
  for (size_t n = 0; n < num_nodes; ++n) {
    for (int p : producers_of(graph, graph.nodes[n])) {
      KILN_ASSERT(p < static_cast<int>(num_nodes), "producer {} out of range", p);
      consumers[p].push_back(static_cast<int>(n));
      ++in_degree[n];
    }
  }
  // A min-heap on the original index keeps the model's order wherever it is already valid.
  std::priority_queue<int, std::vector<int>, std::greater<>> ready;
  for (size_t n = 0; n < num_nodes; ++n) {
    if (in_degree[n] == 0) ready.push(static_cast<int>(n));
  }
  std::vector<int> order;
  order.reserve(num_nodes);
  while (!ready.empty()) {
    const int n = ready.top();
    ready.pop();
    order.push_back(n);
    for (int c : consumers[n]) {
      if (--in_degree[c] == 0) ready.push(c);
    }
  }
  if (order.size() != num_nodes) {
    user_error("the graph has a cycle: {}; expected an acyclic graph", describe_cycle(graph, in_degree));
  }
  std::vector<Node> sorted;
  sorted.reserve(num_nodes);
  std::vector<int> new_index(num_nodes);
  for (size_t i = 0; i < num_nodes; ++i) {
    new_index[order[i]] = static_cast<int>(i);
    sorted.push_back(std::move(graph.nodes[order[i]]));
  }
  graph.nodes = std::move(sorted);
  for (Value& v : graph.values) {
    if (v.producer >= 0) v.producer = new_index[v.producer];
  }
}

}  // namespace kiln
