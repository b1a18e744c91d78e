// EffectiveRequest: the pod-level request every resource manager sizes a
// pod-scope hint by. Cases from KEP-753's "resources calculation for
// scheduling and pod admission" and the kubelet's podGuaranteedCPUs tests
// (cpumanager policy_static_test.go, "TestPodGuaranteedCPUs").
#include <cstdint>
#include <string>

#include "topology/manager/pod.h"

#include "gtest/gtest.h"

namespace topology::manager {
namespace {

Container C(const std::string& name, int64_t units, bool restartable = false) {
  return {.name = name, .limits = {{"x", units}}, .restartable = restartable};
}

int64_t Request(const Pod& pod) {
  return EffectiveRequest(pod, [](const Container& c) -> int64_t {
    const auto it = c.limits.find("x");
    return it == c.limits.end() ? 0 : it->second;
  });
}

TEST(EffectiveRequestTest, AppContainersAreSummed) {
  Pod pod;
  pod.containers = {C("a", 2), C("b", 3)};
  EXPECT_EQ(Request(pod), 5);
}

TEST(EffectiveRequestTest, ALargerInitContainerWins) {
  Pod pod;
  pod.init_containers = {C("init1", 4), C("init2", 7)};
  pod.containers = {C("a", 2), C("b", 3)};
  EXPECT_EQ(Request(pod), 7);
}

TEST(EffectiveRequestTest, SidecarsCountForInitContainersStartedAfterThem) {
  // KEP-753's example: sidecar 1 (2), init 1 (4), sidecar 2 (3), init 2 (1);
  // app containers 2. Init 1 runs beside sidecar 1 (6); init 2 beside both
  // (6); the long-running set is 2 + 3 + 2 = 7.
  Pod pod;
  pod.init_containers = {C("sidecar1", 2, true), C("init1", 4),
                         C("sidecar2", 3, true), C("init2", 1)};
  pod.containers = {C("app", 2)};
  EXPECT_EQ(Request(pod), 7);
  // A larger init container after both sidecars: 5 + 6 = 11.
  pod.init_containers.push_back(C("init3", 6));
  EXPECT_EQ(Request(pod), 11);
}

TEST(EffectiveRequestTest, AnInitContainerBeforeASidecarDoesNotCountIt) {
  Pod pod;
  pod.init_containers = {C("init", 5), C("sidecar", 4, true)};
  pod.containers = {C("app", 1)};
  // Init alone 5; long-running 4 + 1 = 5: never 9.
  EXPECT_EQ(Request(pod), 5);
}

TEST(EffectiveRequestTest, NegativeRequestsCountAsZeroAndSumsSaturate) {
  Pod pod;
  pod.containers = {C("a", -3), C("b", 2)};
  EXPECT_EQ(Request(pod), 2);
  pod.containers = {C("a", INT64_MAX), C("b", INT64_MAX)};
  pod.init_containers = {C("sidecar", INT64_MAX, true)};
  EXPECT_EQ(Request(pod), INT64_MAX);
}

}  // namespace
}  // namespace topology::manager
