// The baseline guard of a pairwise job (issue 40, item 3): does the learned
// kernel predict held-out pairs better than the plain kernels a user would
// otherwise take? The plain kernels are
//   - linear: K_ij = ⟨x_i, x_j⟩ on the (scaled) features;
//   - rbf: K_ij = exp(−‖x_i − x_j‖² / w), the width w chosen per fold on that
//     fold's training pairs only, over multiples of the median squared
//     distance (core/eval/baselines.h, MedianSquaredDistance);
//   - diffusion, when the caller gives the job's graph Laplacian Δ
//     (options.laplacian) and n <= kDiffusionMaxPoints: K = exp(−β Δ) through Δ's smallest eigenpairs
//     (core/eval/baselines.h, DiffusionBasis / DiffusionKernelFactor), β
//     chosen per fold on that fold's training pairs over multiples of 1 / the
//     largest kept eigenvalue — by the threshold rule's accuracy on them, or
//     by the clustering score on them; ties to the smaller β;
// scored on the same held-out pairs, with the same score, as the learned
// kernel (core/npkl/cross_validation.h):
//   - threshold score (clusters = 0): a plain kernel needs no factor — its
//     K_ij on the scored pairs are computed directly, O(pairs · d) — and the
//     width is the one whose threshold rule is most accurate on the fold's
//     training pairs;
//   - clustering score (clusters >= 2): kernel k-means on a factor of the
//     plain kernel (LinearKernelFactor; RbfKernelFactor, Nyström above
//     max_exact_points) and SelectRbfWidth on the training pairs.
// The verdict: a baseline "beats" the learned kernel when its mean held-out
// score exceeds the learned kernel's by at least max(margin, 1/√m), m the
// number of held-out pairs scored: 1/√m is about two standard errors of a
// difference between two pair accuracies near 0.9 on m pairs, so a lead of
// two pairs out of 36 (iris, one fold of 180 pairs) is called noise, a lead
// of 5 points on 1,000 pairs is not. A guard that cries wolf is ignored.
//
// Thread safety: pure functions.
#pragma once

#include <Eigen/Core>
#include <Eigen/SparseCore>
#include <string>
#include <vector>

#include "core/common/solve_control.h"
#include "core/common/status.h"
#include "core/data/constraints.h"

namespace kls {

/// The lead a plain kernel's mean held-out score needs over a learned one's
/// to count (file comment): max(floor, 1/√m) for m held-out pairs i ≠ j
/// (1 when m = 0). Shared by the guard and `method auto`.
double PlainKernelMargin(int held_out_pairs, double floor = 0.01);

struct BaselineGuardOptions {
  /// 0 = the threshold score; c >= 2 = the clustering score with c clusters.
  int clusters = 0;
  /// RBF width candidates, as multiples of the median squared distance.
  std::vector<double> rbf_multiples = {0.0625, 0.125, 0.25, 0.5, 1.0, 2.0, 4.0};
  /// Clustering score only: exact RBF factors up to this many points, Nyström above.
  int max_exact_points = 1000;
  /// Smallest mean-score lead a baseline needs to be reported as better;
  /// the lead used is max(margin, 1/√m) (file comment).
  double margin = 0.01;
  /// The job's graph Laplacian (n × n, symmetric, both triangles; not owned,
  /// must outlive the call): null = no diffusion candidate.
  const Eigen::SparseMatrix<double>* laplacian = nullptr;
  /// Diffusion β multiples (of 1 / the largest kept eigenvalue) and the eigenpairs kept.
  std::vector<double> diffusion_multiples = {4.0, 16.0, 64.0, 256.0, 1024.0};
  int diffusion_rank = 64;
  Status Validate() const;
};

struct GuardCandidate {
  std::string name;                 ///< "learned", "linear", "rbf", "diffusion"
  std::vector<double> widths;       ///< rbf: the width chosen on each fold
  std::vector<double> betas;        ///< diffusion: the β multiple chosen on each fold ("betas" in the JSON)
  std::vector<double> fold_scores;  ///< held-out score per evaluated fold, in [0, 1]
  double mean = 0.0;
};

struct BaselineGuardResult {
  int folds = 0;                        ///< folds of the split
  std::vector<int> evaluated;           ///< the folds scored
  int clusters = 0;                     ///< 0 = threshold score
  std::vector<GuardCandidate> candidates;  ///< learned first, then linear, rbf (and diffusion with a Laplacian)
  int best_baseline = -1;               ///< index into candidates (>= 1)
  int held_out_pairs = 0;               ///< m: held-out pairs i != j scored, over the evaluated folds
  double margin = 0.0;                  ///< the lead required: max(options.margin, 1/√m)
  bool baseline_better = false;         ///< best baseline mean >= learned mean + margin
  double seconds = 0.0;
  /// One sentence for the job summary: which kernel did better, by how much.
  std::string note;
  /// {"score":"threshold","folds":5,"evaluated":[0],"candidates":[{"name":"learned","fold_scores":[…],
  ///  "mean":…},{"name":"rbf","widths":[…],…}],"best_baseline":"rbf","held_out_pairs":36,"margin":0.167,"baseline_better":false,
  ///  "seconds":…}
  std::string Json() const;
};

/// Scores the plain kernels on `features` (n × d, as the job saw them) on the
/// held-out pairs of the folds in `evaluated` (`fold[t]` is pair t's fold,
/// -1 for a self pair: always training; AssignPairFolds), next to the learned
/// kernel's scores on the same folds (`learned_fold_scores`, one per evaluated
/// fold, in that order). Errors: INVALID_ARGUMENT for mismatched sizes or bad
/// options; CANCELLED / DEADLINE_EXCEEDED from `control`.
StatusOr<BaselineGuardResult> RunBaselineGuard(const Eigen::MatrixXd& features, const PairwiseConstraints& constraints,
                                               const std::vector<int>& fold, int folds,
                                               const std::vector<int>& evaluated,
                                               const std::vector<double>& learned_fold_scores,
                                               const BaselineGuardOptions& options,
                                               const SolveControl& control = SolveControl());

}  // namespace kls
