#pragma once
// Work spread over threads of this process: builds (codegen/Build.h), the tuner's compilers
// (tune/Builder.cpp).
#include <sched.h>

#include <algorithm>
#include <cstddef>
#include <mutex>
#include <thread>
#include <vector>

namespace kiln {

// The cores this process may run on (its affinity mask: taskset and cgroup cpusets count), at
// least 1.
inline int available_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  const int cores = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : static_cast<int>(std::thread::hardware_concurrency());
  return std::max(1, cores);
}

// Runs `work(i)` for i in [0, n) on `jobs` threads (at least one), each taking the next i.
template <typename Work>
void parallel_for(size_t n, int jobs, Work work) {
  std::mutex mutex;
  size_t next = 0;
  std::vector<std::thread> threads;
  for (int j = 0; j < std::max(1, jobs); ++j) {
    threads.emplace_back([&] {
      for (;;) {
        size_t i;
        {
          std::lock_guard<std::mutex> lock(mutex);
          if (next >= n) return;
          i = next++;
        }
        work(i);
      }
    });
  }
  for (std::thread& t : threads) t.join();
}

}  // namespace kiln
