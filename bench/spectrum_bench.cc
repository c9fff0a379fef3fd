// kls-bench spectrum: DensePositiveSpectrum (Householder tridiagonalization +
// LAPACK MRRR on the positive part) against its peer, Eigen's full
// SelfAdjointEigenSolver with eigenvectors, on the same random symmetric
// matrices with r positive eigenvalues, side by side in one run.
#include <Eigen/Eigenvalues>
#include <random>

#include "bench/bench_util.h"
#include "core/common/solve_control.h"
#include "core/npkl/positive_spectrum.h"

namespace kls::bench {

Runner RegisterSpectrum(CLI::App& app, bool* json) {
  struct Args {
    std::vector<int> n = {100, 300};
    std::vector<int> positive = {2, 10, 25};
    int reps = 200;
    uint64_t seed = 1;
  };
  auto args = std::make_shared<Args>();
  app.add_option("--n", args->n, "matrix sizes (comma separated)")->delimiter(',');
  app.add_option("--positive", args->positive, "numbers of positive eigenvalues r (comma separated)")
      ->delimiter(',');
  app.add_option("--reps", args->reps, "solves per (n, r) and solver");
  app.add_option("--seed", args->seed, "random seed");
  return [args, json]() -> int {
    if (args->reps < 1) return Fail(InvalidArgumentError("--reps = " + std::to_string(args->reps) + " must be >= 1"));
    std::mt19937_64 rng(args->seed);
    std::normal_distribution<double> g;
    nlohmann::json runs = nlohmann::json::array();
    for (int n : args->n) {
      for (int r : args->positive) {
        if (n < 1 || r < 0 || r > n) {
          return Fail(InvalidArgumentError("--positive = " + std::to_string(r) + " must be in [0, n = " +
                                           std::to_string(n) + "]"));
        }
        // A = Q diag(λ) Qᵀ, Q Haar-random, λ: r in [1, 2], the rest in [-2, -1].
        Eigen::MatrixXd gauss(n, n);
        for (Eigen::Index i = 0; i < gauss.size(); ++i) gauss.data()[i] = g(rng);
        const Eigen::MatrixXd q = Eigen::HouseholderQR<Eigen::MatrixXd>(gauss).householderQ();
        std::uniform_real_distribution<double> u(1.0, 2.0);
        Eigen::VectorXd lambda(n);
        for (int i = 0; i < n; ++i) lambda[i] = i < r ? u(rng) : -u(rng);
        const Eigen::MatrixXd a = q * lambda.asDiagonal() * q.transpose();

        Stopwatch ours_watch;
        double residual = 0.0;
        int rank = 0;
        for (int t = 0; t < args->reps; ++t) {
          auto s = DensePositiveSpectrum(a);
          if (!s.ok()) return Fail(s.status());
          if (t == 0) {
            rank = s->rank();
            residual = (a * s->eigenvectors - s->eigenvectors * s->eigenvalues.asDiagonal()).norm();
          }
        }
        const double ours = ours_watch.Seconds() / args->reps;
        Stopwatch peer_watch;
        double sink = 0.0;
        for (int t = 0; t < args->reps; ++t) {
          Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(a);
          sink += eig.eigenvalues()[n - 1];
        }
        const double peer = peer_watch.Seconds() / args->reps;
        runs.push_back({{"n", n},
                        {"positive", r},
                        {"rank_found", rank},
                        {"residual_fro", residual},
                        {"kls_ms", 1e3 * ours},
                        {"eigen_full_ms", 1e3 * peer},
                        {"speedup", ours > 0 ? peer / ours : 0.0},
                        {"checksum", sink}});
      }
    }
    Emit({{"benchmark", "spectrum"}, {"reps", args->reps}, {"runs", runs}, {"machine", MachineInfo()}}, *json);
    return 0;
  };
}

KLS_BENCH_SUBCOMMAND("spectrum", "dense A+ (tridiagonal + LAPACK MRRR) vs Eigen's full eigensolver, side by side",
                     RegisterSpectrum);

}  // namespace kls::bench
