// Context switches of the whole process, for benchmarks that explain a
// latency by the threads put to sleep and woken on its way.
#ifndef TOPOLOGY_TESTS_TESTING_CONTEXT_SWITCHES_H_
#define TOPOLOGY_TESTS_TESTING_CONTEXT_SWITCHES_H_

#include <cstdint>

#include <sys/resource.h>

namespace topology::testing {

// Voluntary and involuntary context switches of every thread of this
// process so far.
inline int64_t ProcessContextSwitches() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_nvcsw + usage.ru_nivcsw;
}

}  // namespace topology::testing

#endif  // TOPOLOGY_TESTS_TESTING_CONTEXT_SWITCHES_H_
