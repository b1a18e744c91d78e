// Locking rules said to the compiler: clang's thread-safety analysis
// (-Wthread-safety, the "thread-safety" preset) checks them at build time;
// other compilers see plain code.
//
//   class Registry {
//     ...
//    private:
//     void AddLocked(Entry e) TOPOLOGY_REQUIRES(mu_);
//     topology::Mutex mu_;
//     std::vector<Entry> entries_ TOPOLOGY_GUARDED_BY(mu_);
//   };
//   void Registry::Add(Entry e) {
//     topology::MutexLock lock(mu_);
//     AddLocked(std::move(e));
//   }
//
// Wait on a condition with std::condition_variable_any and the MutexLock
// itself, in a loop that tests the condition where the analysis sees the
// lock held (not in a predicate lambda, which it checks on its own).
#ifndef TOPOLOGY_THREAD_ANNOTATIONS_H_
#define TOPOLOGY_THREAD_ANNOTATIONS_H_

#include <mutex>

#if defined(__clang__)
#define TOPOLOGY_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define TOPOLOGY_THREAD_ANNOTATION(x)
#endif

#define TOPOLOGY_CAPABILITY(x) TOPOLOGY_THREAD_ANNOTATION(capability(x))
#define TOPOLOGY_SCOPED_CAPABILITY TOPOLOGY_THREAD_ANNOTATION(scoped_lockable)
#define TOPOLOGY_GUARDED_BY(x) TOPOLOGY_THREAD_ANNOTATION(guarded_by(x))
#define TOPOLOGY_PT_GUARDED_BY(x) TOPOLOGY_THREAD_ANNOTATION(pt_guarded_by(x))
#define TOPOLOGY_ACQUIRED_BEFORE(...) \
  TOPOLOGY_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
#define TOPOLOGY_REQUIRES(...) \
  TOPOLOGY_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define TOPOLOGY_ACQUIRE(...) \
  TOPOLOGY_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define TOPOLOGY_RELEASE(...) \
  TOPOLOGY_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define TOPOLOGY_TRY_ACQUIRE(...) \
  TOPOLOGY_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#define TOPOLOGY_EXCLUDES(...) \
  TOPOLOGY_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define TOPOLOGY_NO_THREAD_SAFETY_ANALYSIS \
  TOPOLOGY_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace topology {

// std::mutex, as a capability the analysis knows.
class TOPOLOGY_CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock() TOPOLOGY_ACQUIRE() { mu_.lock(); }
  void unlock() TOPOLOGY_RELEASE() { mu_.unlock(); }
  bool try_lock() TOPOLOGY_TRY_ACQUIRE(true) { return mu_.try_lock(); }

 private:
  std::mutex mu_;
};

// Holds a Mutex for its scope; unlock() and lock() in between (and
// std::condition_variable_any's waits, which call them) are followed.
class TOPOLOGY_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) TOPOLOGY_ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
  ~MutexLock() TOPOLOGY_RELEASE() {
    if (held_) mu_.unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void lock() TOPOLOGY_ACQUIRE() {
    mu_.lock();
    held_ = true;
  }
  void unlock() TOPOLOGY_RELEASE() {
    held_ = false;
    mu_.unlock();
  }

 private:
  Mutex& mu_;
  bool held_ = true;
};

}  // namespace topology

#endif  // TOPOLOGY_THREAD_ANNOTATIONS_H_
