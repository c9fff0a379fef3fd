#include "core/eval/kernel_kmeans.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <new>
#include <random>
#include <string>
#include <utility>

#include "core/common/parallel.h"
#include "core/model/learned_kernel.h"

namespace kls {

Status KMeansOptions::Validate() const {
  if (num_clusters < 1) {
    return InvalidArgumentError("options.num_clusters = " + std::to_string(num_clusters) +
                                " must be at least 1");
  }
  if (restarts < 1) {
    return InvalidArgumentError("options.restarts = " + std::to_string(restarts) +
                                " must be at least 1");
  }
  if (max_iterations < 1) {
    return InvalidArgumentError("options.max_iterations = " + std::to_string(max_iterations) +
                                " must be at least 1");
  }
  if (!(tolerance >= 0.0) || !std::isfinite(tolerance)) {
    return InvalidArgumentError("options.tolerance = " + std::to_string(tolerance) +
                                " must be finite and >= 0");
  }
  if (num_threads < 0) {
    return InvalidArgumentError("options.num_threads = " + std::to_string(num_threads) +
                                " must be >= 0 (0 = all hardware threads)");
  }
  return OkStatus();
}

namespace {

// Rows per assignment block. Fixed (not derived from the thread count) so the
// GEMM shapes, and therefore the rounding, do not depend on num_threads.
constexpr int kAssignBlockRows = 256;

// SplitMix64 finalizer: decorrelates nearby seeds (seed, seed + 1, restart
// indices) before they reach the Mersenne Twister.
uint64_t SplitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

uint64_t RestartSeed(uint64_t seed, int restart) {
  return SplitMix64(seed ^ SplitMix64(static_cast<uint64_t>(restart)));
}

// std::uniform_*_distribution is implementation-defined; these are not, so a
// seed means the same clustering under every standard library.
double Uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }
int UniformIndex(std::mt19937_64& rng, int n) {
  return static_cast<int>(rng() % static_cast<uint64_t>(n));  // bias ~ n / 2^64, negligible
}

struct RestartOutcome {
  std::vector<int> assignment;
  Eigen::MatrixXd centers;
  double objective = 0.0;
  int iterations = 0;
  Termination termination = Termination::kIterationLimit;
};

class LloydSolver {
 public:
  LloydSolver(const Eigen::MatrixXd& v, const KMeansOptions& options, int threads)
      : v_(v),
        options_(options),
        threads_(threads),
        n_(static_cast<int>(v.rows())),
        k_(options.num_clusters),
        row_sq_(v.rowwise().squaredNorm()) {}

  RestartOutcome Run(uint64_t seed, const SolveControl& control, int* iterations_so_far) {
    std::mt19937_64 rng(seed);
    RestartOutcome out;
    out.centers = SeedPlusPlus(rng);
    out.assignment.assign(n_, 0);
    dist_.assign(n_, 0.0);
    Assign(out.centers, &out.assignment);
    ReseedEmptyClusters(&out.assignment);
    double previous = SumDistances();

    std::vector<int> before;
    while (out.iterations < options_.max_iterations) {
      Termination why;
      if (control.ShouldStop(&why)) {
        out.termination = why;
        break;
      }
      Means(out.assignment, &out.centers);
      before = out.assignment;
      Assign(out.centers, &out.assignment);
      ReseedEmptyClusters(&out.assignment);
      const double current = SumDistances();
      ++out.iterations;
      ++*iterations_so_far;
      IterationRow row;  // no SolveReport here: reported, not kept
      row.iteration = *iterations_so_far;
      row.objective = current;
      ReportIteration(control, row, options_.restarts * options_.max_iterations, nullptr);
      // Lloyd never increases the objective, so `previous - current` is a
      // decrease up to rounding; a stable assignment is an exact fixed point.
      if (out.assignment == before || previous - current <= options_.tolerance * previous) {
        out.termination = Termination::kConverged;
        break;
      }
      previous = current;
    }
    // Report centers that are the means of the returned assignment and the
    // objective measured directly (no ‖v‖² − 2v·c + ‖c‖² cancellation).
    Means(out.assignment, &out.centers);
    out.objective = DirectObjective(out.assignment, out.centers);
    return out;
  }

 private:
  // k-means++ (D² sampling). Points at distance 0 from the chosen centers
  // have probability 0; if every point is at distance 0 (fewer distinct rows
  // than clusters) the smallest unchosen index is taken instead, and the
  // duplicate center is resolved by the empty-cluster rule.
  Eigen::MatrixXd SeedPlusPlus(std::mt19937_64& rng) {
    Eigen::MatrixXd centers(k_, v_.cols());
    std::vector<char> chosen(n_, 0);
    std::vector<double> d2(n_);
    int pick = UniformIndex(rng, n_);
    for (int c = 0; c < k_; ++c) {
      if (c > 0) {
        double total = 0.0;
        for (double d : d2) total += d;
        pick = -1;
        if (total > 0.0) {
          const double target = Uniform01(rng) * total;
          double cumulative = 0.0;
          int last_positive = -1;
          for (int i = 0; i < n_; ++i) {
            if (d2[i] <= 0.0) continue;
            last_positive = i;
            cumulative += d2[i];
            if (cumulative > target) {
              pick = i;
              break;
            }
          }
          if (pick < 0) pick = last_positive;  // target rounded past the end
        } else {
          for (int i = 0; i < n_ && pick < 0; ++i)
            if (!chosen[i]) pick = i;
        }
      }
      chosen[pick] = 1;
      centers.row(c) = v_.row(pick);
      const Eigen::RowVectorXd center = v_.row(pick);
      ParallelFor(n_, threads_, [&](int begin, int end) {
        for (int i = begin; i < end; ++i) {
          const double d = (v_.row(i) - center).squaredNorm();
          d2[i] = (c == 0) ? d : std::min(d2[i], d);
        }
      });
    }
    return centers;
  }

  // Nearest center for every row; writes assignment and dist_. Each block is
  // one GEMM  C · V_blockᵀ (k × block), so a point's k dot products are one
  // contiguous column.
  void Assign(const Eigen::MatrixXd& centers, std::vector<int>* assignment) {
    const Eigen::VectorXd center_sq = centers.rowwise().squaredNorm();
    const int num_blocks = (n_ + kAssignBlockRows - 1) / kAssignBlockRows;
    ParallelFor(num_blocks, threads_, [&](int b0, int b1) {
      Eigen::MatrixXd dots;
      for (int b = b0; b < b1; ++b) {
        const int r0 = b * kAssignBlockRows;
        const int rows = std::min(kAssignBlockRows, n_ - r0);
        dots.noalias() = centers * v_.middleRows(r0, rows).transpose();
        for (int s = 0; s < rows; ++s) {
          const int i = r0 + s;
          const double* col = dots.col(s).data();
          int best = 0;
          double best_d = center_sq[0] - 2.0 * col[0];
          for (int c = 1; c < k_; ++c) {
            const double d = center_sq[c] - 2.0 * col[c];
            if (d < best_d) {
              best_d = d;
              best = c;
            }
          }
          (*assignment)[i] = best;
          dist_[i] = std::max(0.0, row_sq_[i] + best_d);
        }
      }
    });
  }

  // Gives every empty cluster the point farthest from its center, taken only
  // from clusters that keep another point (one always exists while some
  // cluster is empty, since k <= n), so no cluster is emptied in turn.
  void ReseedEmptyClusters(std::vector<int>* assignment) {
    std::vector<int> count(k_, 0);
    for (int a : *assignment) ++count[a];
    for (int c = 0; c < k_; ++c) {
      if (count[c] > 0) continue;
      int far = -1;
      for (int i = 0; i < n_; ++i) {
        if (count[(*assignment)[i]] > 1 && (far < 0 || dist_[i] > dist_[far])) far = i;
      }
      --count[(*assignment)[far]];
      (*assignment)[far] = c;
      count[c] = 1;
      dist_[far] = 0.0;  // it is its new cluster's only member, hence its mean
    }
  }

  // Cluster means; clusters are non-empty here (ReseedEmptyClusters ran).
  // Column-wise so V is read contiguously; serial so sums are reproducible.
  void Means(const std::vector<int>& assignment, Eigen::MatrixXd* centers) const {
    centers->setZero(k_, v_.cols());
    std::vector<int> count(k_, 0);
    for (int a : assignment) ++count[a];
    for (Eigen::Index j = 0; j < v_.cols(); ++j) {
      const double* column = v_.col(j).data();
      for (int i = 0; i < n_; ++i) (*centers)(assignment[i], j) += column[i];
    }
    for (int c = 0; c < k_; ++c) centers->row(c) /= static_cast<double>(std::max(1, count[c]));
  }

  double SumDistances() const {
    double total = 0.0;
    for (double d : dist_) total += d;
    return total;
  }

  double DirectObjective(const std::vector<int>& assignment, const Eigen::MatrixXd& centers) const {
    double total = 0.0;
    for (int i = 0; i < n_; ++i) total += (v_.row(i) - centers.row(assignment[i])).squaredNorm();
    return total;
  }

  const Eigen::MatrixXd& v_;
  const KMeansOptions& options_;
  const int threads_;
  const int n_;
  const int k_;
  const Eigen::VectorXd row_sq_;  ///< ‖v_i‖²
  std::vector<double> dist_;      ///< squared distance of each point to its assigned center
};

}  // namespace

StatusOr<KMeansResult> KernelKMeans(const Eigen::MatrixXd& V, const KMeansOptions& options,
                                    const SolveControl& control) {
  KLS_RETURN_IF_ERROR(options.Validate());
  const Eigen::Index n = V.rows(), r = V.cols();
  if (n == 0 || r == 0) {
    return InvalidArgumentError("V: the embedding is empty (" + std::to_string(n) + " x " +
                                std::to_string(r) + ")");
  }
  if (options.num_clusters > n) {
    return InvalidArgumentError("options.num_clusters = " + std::to_string(options.num_clusters) +
                                " but the embedding has " + std::to_string(n) + " rows");
  }
  for (Eigen::Index j = 0; j < r; ++j) {
    for (Eigen::Index i = 0; i < n; ++i) {
      if (!std::isfinite(V(i, j))) {
        return InvalidArgumentError("V[" + std::to_string(i) + "][" + std::to_string(j) + "] = " +
                                    std::to_string(V(i, j)) + " is not finite");
      }
    }
  }
  try {
    LloydSolver solver(V, options, ResolveThreadCount(options.num_threads));
    KMeansResult best;
    bool have_best = false;
    bool stopped = false;
    Termination stop_reason = Termination::kConverged;
    int iterations_so_far = 0;
    for (int restart = 0; restart < options.restarts; ++restart) {
      if (have_best && control.ShouldStop(&stop_reason)) {
        stopped = true;
        break;
      }
      RestartOutcome run = solver.Run(RestartSeed(options.seed, restart), control, &iterations_so_far);
      if (!have_best || run.objective < best.objective) {
        have_best = true;
        best.assignment = std::move(run.assignment);
        best.centers = std::move(run.centers);
        best.objective = run.objective;
        best.iterations = run.iterations;
        best.best_restart = restart;
        best.termination = run.termination;
      }
      if (run.termination == Termination::kCancelled ||
          run.termination == Termination::kTimeLimit) {
        stopped = true;
        stop_reason = run.termination;
        break;
      }
    }
    if (stopped) best.termination = stop_reason;
    return best;
  } catch (const std::bad_alloc&) {
    return ResourceExhaustedError("kernel k-means: out of memory for n = " + std::to_string(n) +
                                  ", r = " + std::to_string(r) +
                                  ", num_clusters = " + std::to_string(options.num_clusters));
  } catch (const std::exception& e) {
    return InternalError(std::string("kernel k-means: ") + e.what());
  }
}

StatusOr<KMeansResult> KernelKMeansDense(const Eigen::MatrixXd& K, const KMeansOptions& options,
                                         const SolveControl& control) {
  // Cheap checks before the O(n³) factorization.
  KLS_RETURN_IF_ERROR(options.Validate());
  if (K.rows() > 0 && K.rows() == K.cols() && options.num_clusters > K.rows()) {
    return InvalidArgumentError("options.num_clusters = " + std::to_string(options.num_clusters) +
                                " but the kernel has " + std::to_string(K.rows()) + " rows");
  }
  try {
    KLS_ASSIGN_OR_RETURN(const LearnedKernel factored, LearnedKernel::FromDenseKernel(K));
    const Eigen::MatrixXd v = factored.embedding();  // row-major → column-major copy
    return KernelKMeans(v, options, control);
  } catch (const std::bad_alloc&) {
    return ResourceExhaustedError("kernel k-means: out of memory factoring a " +
                                  std::to_string(K.rows()) + " x " + std::to_string(K.cols()) +
                                  " kernel");
  } catch (const std::exception& e) {
    return InternalError(std::string("kernel k-means: ") + e.what());
  }
}

}  // namespace kls
