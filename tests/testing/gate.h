// Where a fake peer's call waits until the test lets it through: a hung
// plugin, a held Allocate, a stuck client, without polling. Closed gates
// hold every Wait(); Open() releases them all and lets later ones pass.
//
//   Gate hang;
//   plugin.SetAllocate([&](...) { hang.Wait(); ... });
//   ...
//   hang.Open();  // the plugin answers now
#ifndef TOPOLOGY_TESTS_TESTING_GATE_H_
#define TOPOLOGY_TESTS_TESTING_GATE_H_

#include <condition_variable>
#include <cstddef>
#include <mutex>

namespace topology::testing {

class Gate {
 public:
  explicit Gate(bool open = false) : open_(open) {}

  void Open() {
    {
      std::lock_guard lock(mu_);
      open_ = true;
    }
    changed_.notify_all();
  }
  void Close() {
    std::lock_guard lock(mu_);
    open_ = false;
  }
  bool is_open() const {
    std::lock_guard lock(mu_);
    return open_;
  }
  // Returns once the gate is open.
  void Wait() const {
    std::unique_lock lock(mu_);
    ++waiting_;
    changed_.notify_all();
    changed_.wait(lock, [this] { return open_; });
    --waiting_;
  }
  // Calls waiting at the gate now (a test waits for the first to arrive).
  size_t waiting() const {
    std::lock_guard lock(mu_);
    return waiting_;
  }

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable changed_;
  bool open_;
  mutable size_t waiting_ = 0;
};

}  // namespace topology::testing

#endif  // TOPOLOGY_TESTS_TESTING_GATE_H_
