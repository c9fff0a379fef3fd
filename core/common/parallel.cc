#include "core/common/parallel.h"

#include <algorithm>
#include <thread>
#include <vector>

namespace kls {

int ResolveThreadCount(int requested) {
  if (requested > 0) return requested;
  const unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(hw);
}

void ParallelFor(int count, int num_threads, const std::function<void(int, int)>& body) {
  if (count <= 0) return;
  const int threads = std::max(1, std::min(ResolveThreadCount(num_threads), count));
  if (threads == 1) {
    body(0, count);
    return;
  }
  const int chunk = (count + threads - 1) / threads;
  std::vector<std::thread> workers;
  workers.reserve(threads - 1);
  for (int t = 1; t < threads; ++t) {
    const int begin = t * chunk;
    const int end = std::min(count, begin + chunk);
    if (begin >= end) break;
    workers.emplace_back([&body, begin, end] { body(begin, end); });
  }
  body(0, std::min(count, chunk));
  for (auto& w : workers) w.join();
}

}  // namespace kls
