// Seeded randomness for property and differential tests, with the case
// count and seed overridable from the environment.
#ifndef TOPOLOGY_TESTS_TESTING_SEEDED_RANDOM_H_
#define TOPOLOGY_TESTS_TESTING_SEEDED_RANDOM_H_

#include <cstdint>
#include <cstdlib>
#include <random>

namespace topology::testing {

// The integer value of environment variable `name`, or `fallback`.
inline int64_t EnvOr(const char* name, int64_t fallback) {
  const char* value = std::getenv(name);
  return value ? std::strtol(value, nullptr, 10) : fallback;
}

class SeededRandom {
 public:
  explicit SeededRandom(uint64_t seed) : rng_(seed) {}
  // Uniform in [lo, hi].
  int Uniform(int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(rng_);
  }
  bool Chance(int percent) { return Uniform(1, 100) <= percent; }
  std::mt19937_64& engine() { return rng_; }

 private:
  std::mt19937_64 rng_;
};

}  // namespace topology::testing

#endif  // TOPOLOGY_TESTS_TESTING_SEEDED_RANDOM_H_
