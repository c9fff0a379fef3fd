#include "core/npkl/cross_validation.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <utility>

#include "core/common/parallel.h"
#include "core/eval/kernel_kmeans.h"

namespace kls {
namespace {

constexpr int kMaxFolds = 20;
constexpr size_t kMaxGrid = 32;
constexpr int kMaxClusters = 1000;

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.15g", v);  // 0.1, not 0.10000000000000001
  return buf;
}

// The learned similarity K_ij: the quantity every NPKL loss acts on (its
// margins z_ij = T_ij K_ij), so "must-link iff K_ij > t" is the rule the
// solvers fit. (Cosine K_ij / √(K_ii K_jj) measured slightly worse: iris,
// wine, ionosphere and breast cancer, docs/reproduction/npkl.md.)

// The threshold maximizing the training accuracy of "must iff s > t".
double FitThreshold(const PairSimilarityFn& similarity, const PairwiseConstraints& train) {
  std::vector<std::pair<double, bool>> s;  // (similarity, is must-link)
  for (const Pair& p : train.pairs) {
    if (p.i != p.j) s.emplace_back(similarity(p.i, p.j), p.kind == PairKind::kMustLink);
  }
  if (s.empty()) return 0.0;
  std::sort(s.begin(), s.end());
  // t below everything: every pair predicted must-link.
  int correct = 0;
  for (const auto& e : s) correct += e.second ? 1 : 0;
  int best = correct;
  double best_t = s.front().first - 1.0;
  for (size_t k = 0; k < s.size(); ++k) {
    correct += s[k].second ? -1 : 1;  // pair k now predicted cannot-link
    if (k + 1 < s.size() && s[k + 1].first == s[k].first) continue;  // t must separate distinct values
    if (correct > best) {
      best = correct;
      best_t = k + 1 < s.size() ? 0.5 * (s[k].first + s[k + 1].first) : s[k].first + 1.0;
    }
  }
  return best_t;
}

}  // namespace

Status CrossValidationOptions::Validate() const {
  if (folds < 2 || folds > kMaxFolds) {
    return InvalidArgumentError("cross_validation.folds = " + std::to_string(folds) + " must be in [2, " +
                                std::to_string(kMaxFolds) + "]");
  }
  if (grid.empty() || grid.size() > kMaxGrid) {
    return InvalidArgumentError("cross_validation.grid has " + std::to_string(grid.size()) +
                                " values; it needs 1 to " + std::to_string(kMaxGrid));
  }
  for (size_t i = 0; i < grid.size(); ++i) {
    if (!(std::isfinite(grid[i]) && grid[i] > 0.0)) {
      return InvalidArgumentError("cross_validation.grid[" + std::to_string(i) + "] = " + Num(grid[i]) +
                                  " must be finite and > 0");
    }
  }
  if (clusters != 0 && (clusters < 2 || clusters > kMaxClusters)) {
    return InvalidArgumentError("cross_validation.clusters = " + std::to_string(clusters) +
                                " must be 0 (threshold score) or in [2, " + std::to_string(kMaxClusters) + "]");
  }
  if (num_threads < 0 || num_threads > kMaxSolverThreads) {
    return InvalidArgumentError("cross_validation.num_threads = " + std::to_string(num_threads) + " must be in [0, " +
                                std::to_string(kMaxSolverThreads) + "]");
  }
  std::vector<bool> seen(folds, false);
  for (size_t i = 0; i < only_folds.size(); ++i) {
    const int f = only_folds[i];
    if (f < 0 || f >= folds || seen[f]) {
      return InvalidArgumentError("cross_validation.only_folds[" + std::to_string(i) + "] = " + std::to_string(f) +
                                  " must be a fold in [0, " + std::to_string(folds) + ") listed once");
    }
    seen[f] = true;
  }
  return OkStatus();
}

int FirstLargest(const std::vector<double>& values) {
  size_t best = 0;
  for (size_t v = 1; v < values.size(); ++v) best = values[v] > values[best] ? v : best;
  return static_cast<int>(best);
}

void CrossValidationResult::Score() {
  std::vector<double> means;
  for (CrossValidationCandidate& c : candidates) {
    double sum = 0.0;
    for (double s : c.fold_scores) sum += s;
    c.mean_score = c.fold_scores.empty() ? 0.0 : sum / static_cast<double>(c.fold_scores.size());
    means.push_back(c.mean_score);
  }
  best_index = FirstLargest(means);
  best_value = candidates.empty() ? 0.0 : candidates[best_index].value;
}

std::string CrossValidationResult::Json() const {
  std::string j = "{\"folds\":" + std::to_string(folds) + ",\"score\":" +
                  (clusters > 0 ? "\"kmeans\",\"clusters\":" + std::to_string(clusters) : std::string("\"threshold\"")) +
                  ",\"best\":" + Num(best_value) + ",\"candidates\":[";
  for (size_t c = 0; c < candidates.size(); ++c) {
    if (c) j += ",";
    j += "{\"value\":" + Num(candidates[c].value) + ",\"fold_scores\":[";
    for (size_t f = 0; f < candidates[c].fold_scores.size(); ++f) {
      if (f) j += ",";
      char buf[32];
      std::snprintf(buf, sizeof(buf), "%.6g", candidates[c].fold_scores[f]);
      j += buf;
    }
    char buf[64];
    std::snprintf(buf, sizeof(buf), "],\"mean\":%.6g}", candidates[c].mean_score);
    j += buf;
  }
  char buf[64];
  std::snprintf(buf, sizeof(buf), "],\"seconds\":%.3f}", seconds);
  return j + buf;
}

StatusOr<std::vector<int>> AssignPairFolds(const PairwiseConstraints& constraints, int folds, uint64_t seed) {
  std::vector<int> fold(constraints.pairs.size(), -1);
  std::vector<int> must, cannot;
  for (int t = 0; t < constraints.size(); ++t) {
    const Pair& p = constraints.pairs[t];
    if (p.i == p.j) continue;
    (p.kind == PairKind::kMustLink ? must : cannot).push_back(t);
  }
  if (static_cast<int>(must.size() + cannot.size()) < folds) {
    return InvalidArgumentError("cross_validation.folds = " + std::to_string(folds) + " exceeds the data set's " +
                                std::to_string(must.size() + cannot.size()) + " pairs i != j");
  }
  std::mt19937_64 rng(seed);
  // Cannot-links continue the round-robin where the must-links stopped, so
  // the fold sizes differ by at most one overall as well as per kind.
  int next = 0;
  for (std::vector<int>* kind : {&must, &cannot}) {
    for (size_t k = kind->size(); k > 1; --k) {  // Fisher–Yates with an explicit draw (portable)
      const size_t r = static_cast<size_t>(rng() % k);
      std::swap((*kind)[k - 1], (*kind)[r]);
    }
    for (int t : *kind) {
      fold[t] = next;
      next = (next + 1) % folds;
    }
  }
  return fold;
}

double HeldOutPairAccuracy(const PairSimilarityFn& similarity, const PairwiseConstraints& train,
                           const PairwiseConstraints& test) {
  const double t = FitThreshold(similarity, train);
  int total = 0, correct = 0;
  for (const Pair& p : test.pairs) {
    if (p.i == p.j) continue;
    ++total;
    correct += ((similarity(p.i, p.j) > t) == (p.kind == PairKind::kMustLink)) ? 1 : 0;
  }
  return total ? static_cast<double>(correct) / total : 1.0;
}

double HeldOutPairAccuracy(const LearnedKernel& kernel, const PairwiseConstraints& train,
                           const PairwiseConstraints& test) {
  return HeldOutPairAccuracy([&kernel](int i, int j) { return kernel.value(i, j); }, train, test);
}

StatusOr<double> HeldOutClusterPairAccuracy(const LearnedKernel& kernel, const PairwiseConstraints& test, int clusters,
                                            const SolveControl& control) {
  if (clusters > kernel.num_points()) {
    return InvalidArgumentError("cross_validation.clusters = " + std::to_string(clusters) + " exceeds the data set's " +
                                std::to_string(kernel.num_points()) + " points");
  }
  KMeansOptions km;
  km.num_clusters = clusters;
  km.restarts = 10;
  km.seed = 1;
  KLS_ASSIGN_OR_RETURN(KMeansResult cl, KernelKMeans(Eigen::MatrixXd(kernel.embedding()), km, control));
  int total = 0, correct = 0;
  for (const Pair& p : test.pairs) {
    if (p.i == p.j) continue;
    ++total;
    correct += ((cl.assignment[p.i] == cl.assignment[p.j]) == (p.kind == PairKind::kMustLink)) ? 1 : 0;
  }
  return total ? static_cast<double>(correct) / total : 1.0;
}

StatusOr<CrossValidationResult> CrossValidate(const PairwiseConstraints& constraints, const LearnKernelFn& learn,
                                              const CrossValidationOptions& options, const SolveControl& control) {
  KLS_RETURN_IF_ERROR(options.Validate());
  Stopwatch watch;
  std::vector<double> grid = options.grid;
  std::sort(grid.begin(), grid.end());
  grid.erase(std::unique(grid.begin(), grid.end()), grid.end());
  KLS_ASSIGN_OR_RETURN(std::vector<int> fold, AssignPairFolds(constraints, options.folds, options.seed));
  const int folds = options.folds;
  std::vector<PairwiseConstraints> train(folds), test(folds);
  for (size_t t = 0; t < fold.size(); ++t) {
    for (int f = 0; f < folds; ++f) (fold[t] == f ? test[f] : train[f]).pairs.push_back(constraints.pairs[t]);
  }
  // The stop conditions only: the learns run concurrently.
  const SolveControl inner = control.StopConditions();

  std::vector<int> run = options.only_folds;  // the folds evaluated
  if (run.empty()) {
    for (int f = 0; f < folds; ++f) run.push_back(f);
  }
  const int nrun = static_cast<int>(run.size());
  const int tasks = static_cast<int>(grid.size()) * nrun;
  std::vector<double> score(tasks, 0.0);
  std::vector<Status> error(tasks);
  ParallelFor(tasks, ResolveThreadCount(options.num_threads), [&](int begin, int end) {
    for (int task = begin; task < end; ++task) {
      const int c = task / nrun, f = run[task % nrun];
      Termination why;
      if (inner.ShouldStop(&why)) {
        error[task] = why == Termination::kCancelled ? CancelledError("cross-validation cancelled")
                                                     : DeadlineExceededError("the deadline passed during cross-validation");
        continue;
      }
      // An error names the value and fold it came from.
      auto fail = [&](const Status& s) {
        error[task] = Status(s.code(), "cross-validation, value " + Num(grid[c]) + ", fold " + std::to_string(f) +
                                           ": " + s.message());
      };
      StatusOr<LearnedKernel> k = GuardExceptions("cross-validation learn", [&] { return learn(train[f], grid[c], inner); });
      if (!k.ok()) {
        fail(k.status());
        continue;
      }
      if (options.clusters == 0) {
        score[task] = HeldOutPairAccuracy(*k, train[f], test[f]);
        continue;
      }
      StatusOr<double> s = HeldOutClusterPairAccuracy(*k, test[f], options.clusters, inner);
      if (s.ok()) {
        score[task] = *s;
      } else {
        fail(s.status());
      }
    }
  });
  Termination why;
  if (control.ShouldStop(&why)) {
    return why == Termination::kCancelled ? CancelledError("cross-validation cancelled")
                                          : DeadlineExceededError("the deadline passed during cross-validation");
  }
  for (const Status& s : error) KLS_RETURN_IF_ERROR(s);

  CrossValidationResult r;
  r.folds = folds;
  r.clusters = options.clusters;
  for (size_t c = 0; c < grid.size(); ++c) {
    CrossValidationCandidate cand;
    cand.value = grid[c];
    cand.fold_scores.assign(score.begin() + c * nrun, score.begin() + (c + 1) * nrun);
    r.candidates.push_back(std::move(cand));
  }
  r.Score();
  r.seconds = watch.Seconds();
  return r;
}

}  // namespace kls
