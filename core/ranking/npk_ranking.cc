#include "core/ranking/npk_ranking.h"

#include <Eigen/Eigenvalues>
#include <algorithm>
#include <cmath>
#include <set>
#include <string>

#include "core/graph/knn.h"
#include "core/graph/laplacian.h"
#include "core/npkl/positive_spectrum.h"

namespace kls {

Status NpkRankingOptions::Validate(std::string_view path) const {
  if (!(c > 0.0) || !std::isfinite(c))
    return InvalidArgumentError(std::string(path) + ".c = " + FormatNumber(c) + " must be finite and > 0");
  if (!(b > 0.0) || !std::isfinite(b))
    return InvalidArgumentError(std::string(path) + ".b = " + FormatNumber(b) + " must be finite and > 0");
  if (constraint_neighbors < 1)
    return InvalidArgumentError(std::string(path) + ".constraint_neighbors = " + std::to_string(constraint_neighbors) +
                                " must be >= 1");
  if (laplacian_neighbors < 1)
    return InvalidArgumentError(std::string(path) + ".laplacian_neighbors = " + std::to_string(laplacian_neighbors) +
                                " must be >= 1");
  if (low_rank < 0) return InvalidArgumentError(std::string(path) + ".low_rank = " + std::to_string(low_rank) + " must be >= 0");
  if (!(distance_ratio >= 0.0) || !std::isfinite(distance_ratio))
    return InvalidArgumentError(std::string(path) + ".distance_ratio = " + FormatNumber(distance_ratio) +
                                " must be finite and >= 0");
  if (max_iterations < 1)
    return InvalidArgumentError(std::string(path) + ".max_iterations = " + std::to_string(max_iterations) + " must be >= 1");
  if (!(tolerance >= 0.0) || !std::isfinite(tolerance))
    return InvalidArgumentError(std::string(path) + ".tolerance = " + FormatNumber(tolerance) + " must be finite and >= 0");
  if (!(initial_step >= 0.0) || !std::isfinite(initial_step))
    return InvalidArgumentError(std::string(path) + ".initial_step = " + FormatNumber(initial_step) + " must be finite and >= 0");
  return OkStatus();
}

StatusOr<Eigen::MatrixXd> SmoothLaplacianBasis(const Eigen::MatrixXd& points, int neighbors, int m) {
  return GuardExceptions("SmoothLaplacianBasis", [&]() -> StatusOr<Eigen::MatrixXd> {
    const int n = static_cast<int>(points.rows());
    if (m < 1 || m > n)
      return InvalidArgumentError("m = " + std::to_string(m) + " must be in [1, n = " + std::to_string(n) + "]");
    GraphOptions g;
    g.k = neighbors;
    g.sigma_neighbors = std::min(neighbors, n - 1);
    g.weight = EdgeWeight::kBinary;
    g.num_threads = 1;
    KLS_ASSIGN_OR_RETURN(Graph graph, BuildGraph(points, g));
    // Smallest eigenvectors of Δ = largest of −Δ: the SimpleNPKL dual operator with no terms.
    const DualMatrix minus_laplacian(graph.laplacian, {}, {});
    SpectrumOptions so;
    so.dense_threshold = 1000;
    return TopEigenvectors(minus_laplacian, m, so);
  });
}

namespace {

// The problem in the coordinates of the basis: K = V P Vᵀ (V = I in full mode).
struct Reduced {
  bool full = false;
  Eigen::MatrixXd t;                 // Vᵀ H K_t H V / ‖H K_t H‖_F   (m × m)
  Eigen::MatrixXd e;                 // low-rank: m × |N|, column p = V_i − V_j
  std::vector<std::pair<int, int>> pairs;
  int dim() const { return static_cast<int>(t.rows()); }

  // Σ_p w_p e_p e_pᵀ added to `a` with a minus sign (A = T − Σ α A^{ij}).
  void SubtractPairs(const Eigen::VectorXd& w, Eigen::MatrixXd& a) const {
    if (full) {
      for (size_t p = 0; p < pairs.size(); ++p) {
        const auto [i, j] = pairs[p];
        a(i, i) -= w[p];
        a(j, j) -= w[p];
        a(i, j) += w[p];
        a(j, i) += w[p];
      }
    } else {
      a.noalias() -= e * w.asDiagonal() * e.transpose();
    }
  }
  // tr(K A^{ij}) for every pair.
  Eigen::VectorXd Distances(const Eigen::MatrixXd& k) const {
    Eigen::VectorXd dist(pairs.size());
    if (full) {
      for (size_t p = 0; p < pairs.size(); ++p) {
        const auto [i, j] = pairs[p];
        dist[p] = k(i, i) + k(j, j) - 2.0 * k(i, j);
      }
    } else {
      dist = (e.cwiseProduct(k * e)).colwise().sum().transpose();
    }
    return dist;
  }
};

struct Point {
  Eigen::VectorXd alpha;
  Eigen::VectorXd eigenvalues;   // positive part, scaled: K = U diag(eigenvalues) Uᵀ
  Eigen::MatrixXd eigenvectors;
  Eigen::MatrixXd k;             // P (dim × dim)
  Eigen::VectorXd dist;          // tr(K A^{ij})
  Eigen::VectorXd grad;          // ∇g
  double dual = 0.0;             // g(α)
  double primal = 0.0;           // P(K*(α))
  bool finite = true;
};

Point Evaluate(const Reduced& r, const Eigen::VectorXd& alpha, const Eigen::VectorXd& d2, double c, double b) {
  Point pt;
  pt.alpha = alpha;
  Eigen::MatrixXd a = r.t;
  r.SubtractPairs(alpha, a);  // Protocol 5 step 3: A = H K_t H − Σ α A^{ij}
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> es(a);
  const Eigen::VectorXd& lam = es.eigenvalues();
  int first = 0;
  while (first < lam.size() && !(lam[first] > 0.0)) ++first;
  const int rank = static_cast<int>(lam.size()) - first;
  const double norm = std::sqrt(lam.tail(rank).squaredNorm());
  // eq. (6.8): K* = A₊ √(B / tr(A₊A₊))
  const double scale = norm > 0.0 ? std::sqrt(b) / norm : 0.0;
  pt.eigenvalues = lam.tail(rank) * scale;
  pt.eigenvectors = es.eigenvectors().rightCols(rank);
  pt.k = pt.eigenvectors * pt.eigenvalues.asDiagonal() * pt.eigenvectors.transpose();
  pt.dist = r.Distances(pt.k);
  pt.grad = pt.dist - d2 - alpha / c;  // Protocol 5 step 6
  pt.dual = -std::sqrt(b) * norm - alpha.dot(d2) - alpha.squaredNorm() / (2.0 * c);
  const Eigen::VectorXd slack = (pt.dist - d2).cwiseMax(0.0);
  pt.primal = -(pt.k.cwiseProduct(r.t)).sum() + 0.5 * c * slack.squaredNorm();  // (6.2)
  pt.finite = std::isfinite(pt.primal) && std::isfinite(pt.dual) && pt.grad.allFinite();
  return pt;
}

double RelativeGap(const Point& p) { return (p.primal - p.dual) / std::max(1.0, std::abs(p.primal)); }

}  // namespace

namespace {

// The problem's checks beyond options.Validate(): shapes, finiteness, symmetry.
Status CheckRankingProblem(const Eigen::MatrixXd& visual, const Eigen::MatrixXd& text_kernel,
                           const NpkRankingOptions& options) {
  const int n = static_cast<int>(visual.rows());
  if (n < 2) return InvalidArgumentError("visual has " + std::to_string(n) + " rows; at least 2 items are needed");
  if (!visual.allFinite()) return InvalidArgumentError("visual has a non-finite entry");
  if (text_kernel.rows() != n || text_kernel.cols() != n)
    return InvalidArgumentError("text_kernel is " + std::to_string(text_kernel.rows()) + " x " +
                                std::to_string(text_kernel.cols()) + " but there are " + std::to_string(n) +
                                " items");
  if (!text_kernel.allFinite()) return InvalidArgumentError("text_kernel has a non-finite entry");
  const double kt_scale = std::max(1.0, text_kernel.cwiseAbs().maxCoeff());
  if ((text_kernel - text_kernel.transpose()).cwiseAbs().maxCoeff() > 1e-9 * kt_scale)
    return InvalidArgumentError("text_kernel is not symmetric");
  if (options.constraint_neighbors >= n)
    return InvalidArgumentError("options.constraint_neighbors = " + std::to_string(options.constraint_neighbors) +
                                " must be < n = " + std::to_string(n));
  if (options.low_rank > 0 && options.laplacian_neighbors >= n)
    return InvalidArgumentError("options.laplacian_neighbors = " + std::to_string(options.laplacian_neighbors) +
                                " must be < n = " + std::to_string(n));
  if (options.low_rank > n)
    return InvalidArgumentError("options.low_rank = " + std::to_string(options.low_rank) + " must be <= n = " +
                                std::to_string(n));
  return OkStatus();
}

// *kc = H K_t H scaled to unit Frobenius norm; returns the scale (1 for a zero matrix).
double NormalizedCenteredKernel(const Eigen::MatrixXd& text_kernel, Eigen::MatrixXd* out) {
  Eigen::MatrixXd& kc = *out;
  kc = text_kernel;
  const Eigen::VectorXd col_mean = kc.colwise().mean().transpose();
  const double total_mean = col_mean.mean();
  kc.rowwise() -= col_mean.transpose();
  kc.colwise() -= col_mean;
  kc.array() += total_mean;
  const double kc_norm = kc.norm();
  const double t_scale = kc_norm > 0.0 ? 1.0 / kc_norm : 1.0;
  kc *= t_scale;
  return t_scale;
}

}  // namespace

StatusOr<NpkRankingResult> SolveNpkRanking(const Eigen::MatrixXd& visual, const Eigen::MatrixXd& text_kernel,
                                           const NpkRankingOptions& options, const SolveControl& control) {
  return GuardExceptions("SolveNpkRanking", [&]() -> StatusOr<NpkRankingResult> {
    KLS_RETURN_IF_ERROR(options.Validate());
    Stopwatch setup_watch;
    const int n = static_cast<int>(visual.rows());
    KLS_RETURN_IF_ERROR(CheckRankingProblem(visual, text_kernel, options));

    // N: symmetric visual k-NN pairs and their distances.
    KnnOptions ko;
    ko.k = options.constraint_neighbors;
    ko.num_threads = 1;
    KLS_ASSIGN_OR_RETURN(KnnGraph knn, ExactKnn(visual, ko));
    std::set<std::pair<int, int>> seen;
    Reduced r;
    std::vector<double> raw_d2;
    for (int i = 0; i < n; ++i)
      for (int t = 0; t < knn.k; ++t) {
        const int j = knn.neighbor(i, t);
        const std::pair<int, int> key(std::min(i, j), std::max(i, j));
        if (seen.insert(key).second) {
          r.pairs.push_back(key);
          raw_d2.push_back(knn.distance(i, t) * knn.distance(i, t));
        }
      }
    const int np = static_cast<int>(r.pairs.size());

    // H K_t H, normalized to unit Frobenius norm.
    Eigen::MatrixXd kc;
    const double t_scale = NormalizedCenteredKernel(text_kernel, &kc);

    NpkRankingResult result;
    if (options.low_rank == 0) {
      r.full = true;
      r.t = std::move(kc);
    } else {
      KLS_ASSIGN_OR_RETURN(result.basis,
                           SmoothLaplacianBasis(visual, options.laplacian_neighbors, options.low_rank));
      const Eigen::MatrixXd& v = result.basis;
      r.t = v.transpose() * kc * v;
      r.t = 0.5 * (r.t + r.t.transpose());
      r.e.resize(v.cols(), np);
      for (int p = 0; p < np; ++p) r.e.col(p) = (v.row(r.pairs[p].first) - v.row(r.pairs[p].second)).transpose();
    }

    const double c = options.c, b = options.b;
    Eigen::VectorXd d2 = Eigen::Map<const Eigen::VectorXd>(raw_d2.data(), np);
    Point cur = Evaluate(r, Eigen::VectorXd::Zero(np), d2, c, b);
    if (options.distance_ratio > 0.0 && d2.sum() > 0.0) {
      // Scale d² against the pure-HSIC kernel K₀ = K*(0) (see header).
      d2 *= options.distance_ratio * cur.dist.mean() / d2.mean();
      cur = Evaluate(r, Eigen::VectorXd::Zero(np), d2, c, b);
    }
    result.stats.setup_seconds = setup_watch.Seconds();

    Stopwatch watch;
    double step = options.initial_step > 0.0 ? options.initial_step : c;
    result.stats.objective_history.push_back(cur.primal);
    result.stats.termination = Termination::kIterationLimit;
    if (!cur.finite) result.stats.termination = Termination::kNumericalIssue;
    for (int it = 1; it <= options.max_iterations && cur.finite; ++it) {
      if (RelativeGap(cur) <= options.tolerance) {
        result.stats.termination = Termination::kConverged;
        break;
      }
      Point next;
      bool accepted = false;
      for (int tries = 0; tries < 60; ++tries) {
        const Eigen::VectorXd alpha = (cur.alpha + step * cur.grad).cwiseMax(0.0);
        const Eigen::VectorXd move = alpha - cur.alpha;
        next = Evaluate(r, alpha, d2, c, b);
        const double bound = cur.dual + cur.grad.dot(move) - move.squaredNorm() / (2.0 * step);
        if (next.finite && next.dual >= bound - 1e-12 * std::max(1.0, std::abs(cur.dual))) {
          accepted = true;
          break;
        }
        step *= 0.5;
      }
      if (!accepted) {
        result.stats.termination = Termination::kNumericalIssue;
        break;
      }
      const double change = (next.alpha - cur.alpha).lpNorm<Eigen::Infinity>();
      cur = std::move(next);
      step *= 2.0;
      result.stats.iterations = it;
      result.stats.objective_history.push_back(cur.primal);
      IterationRow row = IterationRow::GapAndStep(it, cur.primal, RelativeGap(cur), change);
      row.seconds = watch.Seconds();
      ReportIteration(control, row, options.max_iterations, &result.stats);
      if (RelativeGap(cur) <= options.tolerance) {
        result.stats.termination = Termination::kConverged;
        break;
      }
      Termination why;
      if (control.ShouldStop(&why)) {
        result.stats.termination = why;
        break;
      }
    }
    result.stats.solve_seconds = watch.Seconds();
    result.stats.final_objective = cur.primal;
    result.stats.certificate = Certificate::FromGap(RelativeGap(cur), options.tolerance);
    result.stats.certificate.lower_bound = cur.dual;
    result.alpha = cur.alpha;
    result.squared_distances = d2;
    result.pairs = r.pairs;
    result.core = cur.k;
    result.hsic = (cur.k.cwiseProduct(r.t)).sum() / t_scale / ((n - 1.0) * (n - 1.0));

    LearnedKernel::Embedding emb;
    const Eigen::MatrixXd factor = cur.eigenvectors * cur.eigenvalues.cwiseSqrt().asDiagonal();
    if (factor.cols() == 0) {
      emb = LearnedKernel::Embedding::Zero(n, 1);
    } else if (r.full) {
      emb = factor;
    } else {
      emb = result.basis * factor;
    }
    KLS_ASSIGN_OR_RETURN(result.kernel, LearnedKernel::FromEmbedding(std::move(emb)));
    return result;
  });
}

}  // namespace kls
