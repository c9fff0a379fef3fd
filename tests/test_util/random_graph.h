// Random k-NN graph Laplacians for the tests of the sparse NPKL kernels
// (reduced Laplacian, blocked product, block eigensolver). No gtest dependency.
#pragma once

#include <Eigen/SparseCore>
#include <cstdint>

#include "core/graph/laplacian.h"

namespace kls::test_util {

/// The Laplacian BuildGraph gives for n standard-normal points in `dim`
/// dimensions (seeded), one thread, `options` otherwise as given (its k,
/// weight, delta). Aborts (CHECK-style) if the graph cannot be built.
Eigen::SparseMatrix<double> RandomKnnLaplacian(int n, int dim, uint64_t seed, GraphOptions options);

}  // namespace kls::test_util
