// Searching a sorted range for a sorted run of keys: each search starts
// where the last one ended and gallops (steps of 1, 2, 4... then halving),
// so n keys cost O(n log(gap)) instead of n full binary searches. The
// framework checks a request's ids this way, and the selector finds the
// offered devices in the topology.
#ifndef TOPOLOGY_SORTED_SEARCH_H_
#define TOPOLOGY_SORTED_SEARCH_H_

#include <algorithm>
#include <iterator>

namespace topology {

// The first element of the sorted range [first, last) that is not
// `before` `value` (std::lower_bound's answer), found by galloping from
// `first`: O(log d) comparisons where d is the distance to the answer.
template <std::random_access_iterator It, typename T, typename Before>
It GallopLowerBound(It first, It last, const T& value, Before before) {
  It bound = first;
  for (std::iter_difference_t<It> step = 1;
       bound != last && before(*bound, value); step *= 2) {
    first = bound + 1;
    bound = last - bound > step ? bound + step : last;
  }
  return std::lower_bound(first, bound, value, before);
}

}  // namespace topology

#endif  // TOPOLOGY_SORTED_SEARCH_H_
