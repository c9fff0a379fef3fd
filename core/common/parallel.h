// Minimal fork-join helper for data-parallel loops inside one core call.
// Not a pool: threads live only for the duration of the call, so core keeps
// no global state and the server's worker pool stays the owner of concurrency.
#pragma once

#include <functional>

namespace kls {

/// Largest thread count a solver option may ask for: a bound on what a remote
/// job can make the server spawn.
constexpr int kMaxSolverThreads = 256;

/// Number of threads to use for `requested` (<= 0 means hardware concurrency).
int ResolveThreadCount(int requested);

/// Splits [0, count) into contiguous chunks and calls body(begin, end) for
/// each on up to `num_threads` threads (the calling thread included). The
/// chunking is a pure function of (count, threads), so results that are
/// written per index are identical for a fixed thread count.
void ParallelFor(int count, int num_threads, const std::function<void(int, int)>& body);

}  // namespace kls
