#include "core/qsdp/reg_problems.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <string>
#include <utility>

#include <Eigen/Eigenvalues>

#include "core/common/solve_control.h"
#include "core/graph/knn.h"
#include "core/graph/laplacian.h"

namespace kls {

namespace {

// "<path>.<field> = v must be in [1, n<upper>) for n = N", or with n unknown
// (num_points <= 0) "... must be >= 1".
Status InRange(std::string_view path, const char* field, int v, int num_points, int upper, const char* interval) {
  const bool known = num_points > 0;
  if (v >= 1 && (!known || v <= upper)) return OkStatus();
  const std::string at = std::string(path) + "." + field + " = " + std::to_string(v);
  if (!known) return InvalidArgumentError(at + " must be >= 1");
  return InvalidArgumentError(at + " must be in " + interval + " for n = " + std::to_string(num_points));
}

Status Threads(std::string_view path, int num_threads) {
  if (num_threads >= 0) return OkStatus();
  return InvalidArgumentError(std::string(path) + ".num_threads = " + std::to_string(num_threads) + " must be >= 0");
}

}  // namespace

Status RegMvuOptions::Validate(int num_points, std::string_view path) const {
  KLS_RETURN_IF_ERROR(InRange(path, "m", m, num_points, num_points - 1, "[1, n - 1]"));
  KLS_RETURN_IF_ERROR(InRange(path, "neighbors", neighbors, num_points, num_points - 1, "[1, n)"));
  KLS_RETURN_IF_ERROR(CheckPositiveOption("nu", nu, path));
  KLS_RETURN_IF_ERROR(Threads(path, num_threads));
  return basis.Validate().WithContext(std::string(path) + ".basis");
}

Status RegPcpOptions::Validate(int num_points, std::string_view path) const {
  KLS_RETURN_IF_ERROR(InRange(path, "m", m, num_points, num_points, "[1, n]"));
  KLS_RETURN_IF_ERROR(InRange(path, "neighbors", neighbors, num_points, num_points - 1, "[1, n)"));
  KLS_RETURN_IF_ERROR(InRange(path, "sigma_neighbor", sigma_neighbor, num_points, num_points - 1, "[1, n)"));
  KLS_RETURN_IF_ERROR(Threads(path, num_threads));
  return basis.Validate().WithContext(std::string(path) + ".basis");
}

QsdpProblem MakeRegMvuProblem(const Eigen::MatrixXd& q, const std::vector<int>& edge_i, const std::vector<int>& edge_j,
                              const Eigen::VectorXd& squared_distance, double nu) {
  const int k = static_cast<int>(edge_i.size());
  QsdpProblem p;
  p.left.resize(k, q.cols());
  for (int e = 0; e < k; ++e) p.left.row(e) = q.row(edge_i[e]) - q.row(edge_j[e]);
  p.right = p.left;
  p.target = squared_distance;
  p.weight = Eigen::VectorXd::Constant(k, nu);
  p.trace_weight = 1.0;
  return p;
}

QsdpProblem MakeRegPcpProblem(const Eigen::MatrixXd& q, const PairwiseConstraints& constraints) {
  const int n = static_cast<int>(q.rows());
  const int k = n + constraints.size();
  QsdpProblem p;
  p.left.resize(k, q.cols());
  p.right.resize(k, q.cols());
  p.target.resize(k);
  p.left.topRows(n) = q;
  p.right.topRows(n) = q;
  p.target.head(n).setOnes();
  for (int c = 0; c < constraints.size(); ++c) {
    const Pair& pr = constraints.pairs[static_cast<size_t>(c)];
    p.left.row(n + c) = q.row(pr.i);
    p.right.row(n + c) = q.row(pr.j);
    p.target[n + c] = pr.kind == PairKind::kMustLink ? 1.0 : 0.0;
  }
  p.weight = Eigen::VectorXd::Ones(k);
  p.trace_weight = 0.0;
  return p;
}


StatusOr<RegularizedKernelProblem> BuildRegMvu(const Eigen::MatrixXd& points, const RegMvuOptions& options) {
  return GuardExceptions("BuildRegMvu", [&]() -> StatusOr<RegularizedKernelProblem> {
    const int n = static_cast<int>(points.rows());
    KLS_RETURN_IF_ERROR(options.Validate(n));
    RegularizedKernelProblem out;
    out.sign = -1.0;
    Stopwatch watch;
    ConnectedKnnOptions knn;
    knn.k = options.neighbors;
    knn.mode = options.connect;
    knn.weight = EdgeWeight::kBinary;
    knn.num_threads = options.num_threads;
    KLS_ASSIGN_OR_RETURN(const Eigen::SparseMatrix<double> w,
                         MakeConnectedKnnGraph(points, knn, "RegMVU (11) is unbounded unless it is connected",
                                               &out.connect));
    out.laplacian = CombinatorialLaplacian(w);
    std::vector<int> ei, ej;
    std::vector<double> d2;
    for (int c = 0; c < w.outerSize(); ++c) {
      for (Eigen::SparseMatrix<double>::InnerIterator it(w, c); it; ++it) {
        const int i = static_cast<int>(it.row()), j = static_cast<int>(it.col());
        if (i >= j) continue;
        ei.push_back(i);
        ej.push_back(j);
        d2.push_back((points.row(i) - points.row(j)).squaredNorm());
      }
    }
    out.num_edges = static_cast<int>(ei.size());
    out.graph_seconds = watch.Seconds();
    watch.Reset();
    KLS_ASSIGN_OR_RETURN(out.basis, SmoothestEigenvectors(out.laplacian, options.m, 1, options.basis));
    out.basis_seconds = watch.Seconds();
    out.problem = MakeRegMvuProblem(out.basis.vectors, ei, ej,
                                    Eigen::Map<const Eigen::VectorXd>(d2.data(), static_cast<Eigen::Index>(d2.size())),
                                    options.nu);
    return out;
  });
}

StatusOr<RegularizedKernelProblem> BuildRegPcp(const Eigen::MatrixXd& points, const PairwiseConstraints& constraints,
                                               const RegPcpOptions& options) {
  return GuardExceptions("BuildRegPcp", [&]() -> StatusOr<RegularizedKernelProblem> {
    const int n = static_cast<int>(points.rows());
    KLS_RETURN_IF_ERROR(options.Validate(n));
    KLS_RETURN_IF_ERROR(constraints.Validate(n).WithContext("constraints"));
    RegularizedKernelProblem out;
    out.sign = 1.0;
    Stopwatch watch;
    KnnOptions knn;
    knn.k = std::max(options.neighbors, options.sigma_neighbor);
    knn.num_threads = options.num_threads;
    KLS_ASSIGN_OR_RETURN(KnnGraph g, ExactKnn(points, knn));
    double sum = 0.0;
    for (int i = 0; i < n; ++i) sum += g.distance(i, options.sigma_neighbor - 1);
    out.sigma = sum / n;
    if (!(out.sigma > 0.0)) {
      return FailedPreconditionError("sigma = " + FormatNumber(out.sigma) +
                                     ": every point coincides with its nearest neighbours");
    }
    const Eigen::SparseMatrix<double> w = SymmetricAdjacency(g, options.neighbors, EdgeWeight::kGaussian, out.sigma);
    out.num_edges = static_cast<int>(w.nonZeros() / 2);
    out.laplacian = NormalizedLaplacian(w, 0.0);
    out.graph_seconds = watch.Seconds();
    watch.Reset();
    KLS_ASSIGN_OR_RETURN(out.basis, SmoothestEigenvectors(out.laplacian, options.m, 0, options.basis));
    out.basis_seconds = watch.Seconds();
    out.problem = MakeRegPcpProblem(out.basis.vectors, constraints);
    return out;
  });
}

StatusOr<PairwiseConstraints> GeneratePerClassConstraints(const std::vector<int>& labels, int must_per_class,
                                                          int cannot_per_pair, uint64_t seed) {
  const int n = static_cast<int>(labels.size());
  if (n < 2) return InvalidArgumentError("labels: has " + std::to_string(n) + " entries; need at least 2");
  if (must_per_class < 0) return InvalidArgumentError("must_per_class = " + std::to_string(must_per_class) + " must be >= 0");
  if (cannot_per_pair < 0) return InvalidArgumentError("cannot_per_pair = " + std::to_string(cannot_per_pair) + " must be >= 0");
  int classes = 0;
  for (int i = 0; i < n; ++i) {
    if (labels[static_cast<size_t>(i)] < 0) {
      return InvalidArgumentError("labels[" + std::to_string(i) + "] = " + std::to_string(labels[static_cast<size_t>(i)]) +
                                  " is negative");
    }
    classes = std::max(classes, labels[static_cast<size_t>(i)] + 1);
  }
  std::vector<std::vector<int>> members(static_cast<size_t>(classes));
  for (int i = 0; i < n; ++i) members[static_cast<size_t>(labels[static_cast<size_t>(i)])].push_back(i);
  std::mt19937_64 rng(seed);
  auto uniform = [&](uint64_t bound) {  // unbiased integer in [0, bound)
    const uint64_t limit = ~uint64_t{0} - (~uint64_t{0} % bound);
    uint64_t x;
    do x = rng(); while (x >= limit);
    return static_cast<int>(x % bound);
  };
  PairwiseConstraints out;
  std::set<std::pair<int, int>> used;
  auto draw = [&](const std::vector<int>& a, const std::vector<int>& b, bool same, int count, PairKind kind) {
    const long long available =
        same ? static_cast<long long>(a.size()) * (static_cast<long long>(a.size()) - 1) / 2
             : static_cast<long long>(a.size()) * static_cast<long long>(b.size());
    const long long want = std::min<long long>(count, available);
    long long got = 0;
    while (got < want) {
      const int i = a[static_cast<size_t>(uniform(a.size()))];
      const int j = b[static_cast<size_t>(uniform(b.size()))];
      if (i == j) continue;
      const std::pair<int, int> key(std::min(i, j), std::max(i, j));
      if (!used.insert(key).second) continue;
      out.pairs.push_back({key.first, key.second, kind});
      ++got;
    }
  };
  for (int c = 0; c < classes; ++c) {
    const auto& mc = members[static_cast<size_t>(c)];
    if (mc.size() >= 2) draw(mc, mc, true, must_per_class, PairKind::kMustLink);
  }
  for (int a = 0; a < classes; ++a) {
    for (int b = a + 1; b < classes; ++b) {
      const auto& ma = members[static_cast<size_t>(a)];
      const auto& mb = members[static_cast<size_t>(b)];
      if (!ma.empty() && !mb.empty()) draw(ma, mb, false, cannot_per_pair, PairKind::kCannotLink);
    }
  }
  return out;
}

StatusOr<LearnedKernel> KernelFromBasis(const Eigen::MatrixXd& q, const Eigen::MatrixXd& y) {
  if (y.rows() != y.cols() || y.rows() != q.cols()) {
    return InvalidArgumentError("Y is " + std::to_string(y.rows()) + " x " + std::to_string(y.cols()) +
                                " but the basis has " + std::to_string(q.cols()) + " columns");
  }
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(0.5 * (y + y.transpose()));
  if (eig.info() != Eigen::Success) return InternalError("eigendecomposition of Y failed");
  const Eigen::VectorXd& lambda = eig.eigenvalues();
  const double top = lambda.size() ? lambda.maxCoeff() : 0.0;
  std::vector<int> keep;
  for (int i = static_cast<int>(lambda.size()) - 1; i >= 0; --i)
    if (lambda[i] > 1e-12 * std::max(top, 1e-300)) keep.push_back(i);
  if (keep.empty()) keep.push_back(static_cast<int>(lambda.size()) - 1);  // Y = 0: a zero kernel of rank 1
  LearnedKernel::Embedding v(q.rows(), static_cast<Eigen::Index>(keep.size()));
  for (size_t c = 0; c < keep.size(); ++c) {
    v.col(c) = q * eig.eigenvectors().col(keep[c]) * std::sqrt(std::max(0.0, lambda[keep[c]]));
  }
  return LearnedKernel::FromEmbedding(std::move(v));
}

}  // namespace kls
