// A test fixture holding the dual-socket 8-GPU synthetic machine, its
// topology and cost model, built once per test suite.
#ifndef TOPOLOGY_TESTS_TESTING_MACHINE_FIXTURE_H_
#define TOPOLOGY_TESTS_TESTING_MACHINE_FIXTURE_H_

#include <memory>

#include <gtest/gtest.h>

#include "topology/cost_model.h"

#include "synthetic_machines.h"
#include "temp_dir.h"

namespace topology::testing {

class DualSocketMachineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = std::make_unique<TempDir>();
    topology_ =
        std::make_unique<Topology>(DiscoverDualSocketGpuMachine(dir_->path()));
    model_ = std::make_unique<CostModel>(*topology_);
  }
  static void TearDownTestSuite() {
    model_.reset();
    topology_.reset();
    dir_.reset();
  }

  inline static std::unique_ptr<TempDir> dir_;
  inline static std::unique_ptr<Topology> topology_;
  inline static std::unique_ptr<CostModel> model_;
};

}  // namespace topology::testing

#endif  // TOPOLOGY_TESTS_TESTING_MACHINE_FIXTURE_H_
