// What the benchmarks report of a run and of a process: latency
// percentiles, a process's CPU time and resident memory.
#ifndef TOPOLOGY_TESTS_BENCHMARKS_PROCESS_STATS_H_
#define TOPOLOGY_TESTS_BENCHMARKS_PROCESS_STATS_H_

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <sys/types.h>

#include <benchmark/benchmark.h>

namespace topology::benchmarks {

// p50, p99 and max of `micros` as counters (sorts it).
inline void ReportPercentiles(benchmark::State& state,
                              std::vector<double>& micros) {
  std::sort(micros.begin(), micros.end());
  auto at = [&](double q) {
    return micros[std::min(
        micros.size() - 1,
        static_cast<size_t>(q * static_cast<double>(micros.size())))];
  };
  state.counters["p50_us"] = at(0.50);
  state.counters["p99_us"] = at(0.99);
  state.counters["max_us"] = micros.back();
}

// CPU time of every thread of `pid` so far (nanoseconds on a CPU, from
// /proc/<pid>/task/*/schedstat: precise where utime counts 10 ms ticks).
inline double ThreadCpuNanoseconds(pid_t pid) {
  double total = 0;
  std::error_code error;
  for (const auto& task : std::filesystem::directory_iterator(
           "/proc/" + std::to_string(pid) + "/task", error)) {
    std::ifstream schedstat(task.path() / "schedstat");
    double on_cpu = 0;
    if (schedstat >> on_cpu) total += on_cpu;
  }
  return total;
}

// A /proc/<pid>/status field in kB ("VmRSS:").
inline double ResidentKilobytes(pid_t pid, std::string_view field) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.starts_with(field)) return std::stod(line.substr(field.size()));
  }
  return 0;
}

// Leaves the process `pid` alone for `idle`, then reports its CPU over that
// time (cpu_percent of one core, cpu_ms) and its resident memory at the end
// (rss_mb, anon_mb, file_mb).
inline void MeasureIdleProcess(benchmark::State& state, pid_t pid,
                               std::chrono::seconds idle) {
  const double cpu_before = ThreadCpuNanoseconds(pid);
  const auto start = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(idle);
  const double cpu_after = ThreadCpuNanoseconds(pid);
  const double wall = std::chrono::duration<double, std::nano>(
                          std::chrono::steady_clock::now() - start)
                          .count();
  state.counters["rss_mb"] = ResidentKilobytes(pid, "VmRSS:") / 1024.0;
  state.counters["anon_mb"] = ResidentKilobytes(pid, "RssAnon:") / 1024.0;
  state.counters["file_mb"] = ResidentKilobytes(pid, "RssFile:") / 1024.0;
  state.counters["cpu_percent"] = 100.0 * (cpu_after - cpu_before) / wall;
  state.counters["cpu_ms"] = (cpu_after - cpu_before) / 1e6;
}

}  // namespace topology::benchmarks

#endif  // TOPOLOGY_TESTS_BENCHMARKS_PROCESS_STATS_H_
