// Random NUMA layouts for property tests: nodes 0..n-1 (one CPU each) and a
// symmetric SLIT with 10 on the diagonal.
#ifndef TOPOLOGY_TESTS_TESTING_RANDOM_NUMA_H_
#define TOPOLOGY_TESTS_TESTING_RANDOM_NUMA_H_

#include "topology/topology.h"

#include "seeded_random.h"

namespace topology::testing {

// Adds between `min_nodes` and `max_nodes` nodes to `parts`, with remote
// distances drawn from 11..max_distance. Returns the number of nodes.
inline int AddRandomNumaNodes(SeededRandom& rng, int min_nodes, int max_nodes,
                              int max_distance, Topology::Parts* parts) {
  const int nodes = rng.Uniform(min_nodes, max_nodes);
  for (int n = 0; n < nodes; ++n) {
    NumaNode node;
    node.id = n;
    node.cpus.Add(n);
    parts->numa_nodes.push_back(node);
  }
  const auto size = static_cast<size_t>(nodes);
  parts->distances.assign(size, std::vector<int>(size, 10));
  for (size_t a = 0; a < size; ++a) {
    for (size_t b = a + 1; b < size; ++b) {
      const int d = rng.Uniform(11, max_distance);
      parts->distances[a][b] = d;
      parts->distances[b][a] = d;
    }
  }
  return nodes;
}

}  // namespace topology::testing

#endif  // TOPOLOGY_TESTS_TESTING_RANDOM_NUMA_H_
