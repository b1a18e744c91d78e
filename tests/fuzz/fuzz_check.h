// FUZZ_CHECK: an invariant that must hold for every input; aborts so that
// both libFuzzer and the replay test report the input.
#ifndef TOPOLOGY_TESTS_FUZZ_FUZZ_CHECK_H_
#define TOPOLOGY_TESTS_FUZZ_FUZZ_CHECK_H_

#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(condition)                                         \
  do {                                                                \
    if (!(condition)) {                                               \
      std::fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, \
                   __LINE__, #condition);                             \
      std::abort();                                                   \
    }                                                                 \
  } while (false)

#endif  // TOPOLOGY_TESTS_FUZZ_FUZZ_CHECK_H_
