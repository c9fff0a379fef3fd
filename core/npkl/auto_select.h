// `method auto` (issue 40): pick the kernel for the user by cross-validating
// candidate learners — the pairwise families with their losses, each with its
// loss weight chosen as cross_validation chooses it, and plain kernels — on
// the same folds with the same score, and report a leaderboard.
//
// Every candidate is scored by CrossValidate (core/npkl/cross_validation.h)
// with the same folds (AssignPairFolds(constraints, folds, seed)) and the same
// score (threshold, or kernel k-means with `clusters` clusters). A candidate
// brings its own grid: loss weights for a family, width multiples for the RBF
// kernel, {1} for the linear kernel. Its score is its best grid value's mean
// over the folds (the value cross_validation would choose), reported with the
// standard deviation over the folds. The winner is the best learned candidate
// unless the best plain kernel leads it by at least the baseline guard's noise
// margin max(0.01, 1/√m), m the pairs i ≠ j held out over the folds
// (PlainKernelMargin, core/npkl/baseline_guard.h): a learned kernel is fitted
// to every pair when it is finally learned, which held-out scores cannot see,
// and a lead within the noise of m pairs is no evidence for the plain one
// (measured on wine: the plain RBF's lead of < 1 point on 3 folds picked it in
// 11 of 20 trials, 1.7 points below the best learned kernel on the labels).
// Among candidates of one kind the best mean wins, ties to the one listed first.
//
// Two rounds: successive halving (options.screening, the default).
//   1. Screening: every candidate, in the order given, is scored on fold 0
//      alone (every grid value; CrossValidationOptions.only_folds) — a third
//      of its cost with 3 folds, so a budget that used to end before the last
//      candidates (the z-scored twins, the costly families) now sees them.
//      The first candidate, the reference, is scored on all the folds (its
//      fold-0 scores are its screening): its seconds are the default budget's
//      unit, and one fold's seconds carry its one-time costs (the graph, the
//      first allocations) three times over — measured on iris, a budget from
//      the reference's fold 0 came out up to 3 × the intended one.
//   2. The leaders get the other folds: the learned candidates whose
//      screening score is within the screening margin max(0.01, 1/√m₀) of the
//      best learned one's, and likewise the plain kernels of the best plain
//      one's, m₀ the pairs i ≠ j fold 0 holds out — the noise margin of the
//      plain-kernel guard (below) on the pairs the screening was scored on:
//      a candidate that far behind on one fold has no evidence of being
//      better, and one within it none of being worse, however many candidates
//      there are (a fixed top-k would drop a tie, or keep a distant one). The
//      plain leaders go first (their factors are cached: the other folds cost
//      only the scores), then the learned ones by screening score, best first,
//      so that a budget cuts the least promising. A fully scored candidate's
//      fold scores and mean are exactly those of one CrossValidate call on
//      all the folds (fold 0's scores are kept, not recomputed).
//   Candidates not among the leaders keep status "screened" with their
//   one-fold score (value, mean, fold_scores = [fold 0], grid_means on fold 0).
//   The winner is chosen among the fully scored entries as below when the
//   screening's best learned candidate is one of them; when the budget cut
//   its other folds, among the screening scores of every screened entry
//   instead (one fold for all, margin max(0.01, 1/√m₀)) — like with like, and
//   never a cheaper candidate for having been finished (measured on
//   adult_like: "any learned one fully scored" handed the win to the
//   reference, KL-ADMM, in 20 of 20 trials, 91.9 against 96.4).
//   AutoSelectResult::chosen_folds says which.
// Without screening every candidate is scored on all the folds in round 1,
// and there is no round 2 (the behaviour before the screening).
//
// Budget. Round 1 runs the candidates in the order given (the caller orders
// them by expected cost, the reference first). With options.max_seconds > 0
// the selection stops evaluating at that many seconds after its start
// (counting the seconds of candidates restored from a checkpoint); with
// options.reference_multiple > 0 and no max_seconds, the budget is that
// multiple of the first candidate's cross-validation seconds (on all the
// folds, in both modes). A candidate cut short by the
// budget, and every later one, is reported with status "budget" and no score.
// In round 1 a candidate whose twin on another scaling has run starts only
// while the budget left exceeds the twin's seconds besides the refinement's
// reserve (below): measured on iris, the screening reached BCDNPKL hinge,
// whose learn answers the deadline late, and its second scaling overran the
// budget by up to 0.4 s (14 × a KL-ADMM job; docs/reproduction/auto.md).
// In round 2 a leader starts only while the budget left exceeds its expected
// cost (its screening seconds × the other folds) plus, for a learned one, its
// refinement's (below); once one does not fit, it and every later leader are
// "budget" (keeping the screening score in their fields) — a cheaper leader
// further down is not evaluated in its place, so that the budget never turns
// a worse candidate into the only fully scored one. The caller's own
// deadline and cancellation end the selection with DEADLINE_EXCEEDED /
// CANCELLED.
//
// Resume. `done` holds entries of an earlier, interrupted run (the caller
// keeps them in its checkpoint, after_each gives them), by key (name@scaling):
// a "scored" or "failed" one is not evaluated again in either round; one with
// screening scores (AutoEntry::screen_means: "screened", or a leader the
// budget or an interruption cut in round 2) is not screened again — when a
// leader, it gets only the other folds. Entries of checkpoints from before
// the screening ("scored" on all folds, no screen_means) are restored as
// finished, their mean standing for their screening score.
//
// Refinement. After the selection, the winner — when it is a learned
// candidate with a grid of at least two values — is scored at one more value
// on the same folds: the geometric midpoint √(v · u) of its best value v and
// its better-scored grid neighbour u (ties: the larger; at an end of the grid
// the one neighbour). The midpoint is learned instead of v when its mean
// over the folds is higher (on fold 0 alone when the winner was chosen on the
// screening). Why (docs/reproduction/auto.md, measured on
// chessboard and adult_like): the held-out score tracks the fold kernels'
// accuracy on the labels within ~0.02 at every C and does not change its
// choice with 5 folds or other folds (not noise), but the fold kernels,
// learned from 2/3 of the pairs, peak at C ≈ 3, between the decade grid's
// points, where the grid's C = 10 falls off a cliff (0.70 against 0.91) — so
// the coarse grid chose C = 1. One value costs a third of a candidate; it is
// part of the budget: after the first candidate a candidate starts only while
// the budget's end is more than 1.5 × the leading learned candidate's seconds
// per grid value on all the folds away (the refinement's expected cost, with
// room for its variance over C; a screened leader's fold-0 seconds × the
// folds — the screening keeps what the measured gain of the refinement needs,
// docs/reproduction/auto.md; round 2's rule above), and the refinement itself
// stops at the budget ("budget").
// The learn must accept a value off its grid.
//
// Plain kernels (PlainKernelCandidate): on the candidate's (scaled) features,
//   - linear: K = X Xᵀ (the factor is X itself);
//   - rbf: K_ij = exp(−‖x_i − x_j‖² / (m · median)), m from `rbf_multiples`,
//     median the median squared distance (core/eval/baselines.h); an exact
//     factor up to `max_exact_points`, Nyström with 500 landmarks above;
//   - diffusion (DiffusionKernelCandidate; up to kDiffusionMaxPoints points —
//     above, the server and kls-bench leave it out): K = exp(−β Δ) on the k-NN graph
//     the pairwise families learn on, Δ its normalized Laplacian, through Δ's
//     `diffusion_rank` smallest eigenpairs (core/eval/baselines.h,
//     DiffusionBasis: computed once per candidate, on its first learn),
//     β = m / (the largest kept eigenvalue), m from `diffusion_multiples` —
//     under both scores (a threshold on exp(−βΔ)_ij is not the same rule at
//     every β).
// Their learn ignores the training pairs (the kernel does not depend on
// them), so each grid value's factor is computed once and shared by the folds.
//
// Thread safety: AutoSelect calls one candidate at a time; a candidate's
// learn is called concurrently when options.num_threads != 1.
#pragma once

#include <Eigen/Core>
#include <Eigen/SparseCore>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/common/solve_control.h"
#include "core/common/status.h"
#include "core/data/constraints.h"
#include "core/model/learned_kernel.h"
#include "core/npkl/cross_validation.h"
#include "core/npkl/npkl_problem.h"

namespace kls {

/// A learned candidate: a pairwise family with one loss. The list is shared by
/// the server's `auto` family and `kls-bench repro --method auto`.
struct AutoFamilyChoice {
  const char* name;    ///< in the leaderboard and AutoOptions.candidates
  const char* family;  ///< "kl_admm", "bcd_npkl" or "simple_npkl"
  bool has_loss;       ///< false: the family has no loss to choose (KL-ADMM)
  NpklLoss loss;
};
/// KL-ADMM first: it is the reference of the default budget; then BCDNPKL
/// square (AutoOrder), then by cost (BCDNPKL hinge costs 2–4 × the others).
inline constexpr AutoFamilyChoice kAutoFamilies[] = {
    {"kl_admm", "kl_admm", false, NpklLoss::kSquare},
    {"bcd_npkl/square", "bcd_npkl", true, NpklLoss::kSquare},
    {"simple_npkl/hinge", "simple_npkl", true, NpklLoss::kHinge},
    {"simple_npkl/square", "simple_npkl", true, NpklLoss::kSquare},
    {"bcd_npkl/hinge", "bcd_npkl", true, NpklLoss::kHinge},
};
/// The plain-kernel candidates (PlainKernelCandidate; "diffusion":
/// DiffusionKernelCandidate, which needs the graph).
inline constexpr const char* kAutoPlainKernels[] = {"linear", "rbf", "diffusion"};
/// The default budget: this × the first candidate's (KL-ADMM's) seconds —
/// 9, so that with the winner's own learn on all pairs auto stays within 10 ×
/// a KL-ADMM job with C chosen by cross-validation (its 9 learns and one more;
/// at 10 the ratio reached 10.7 on ionosphere, docs/reproduction/auto.md).
inline constexpr double kAutoReferenceMultiple = 9.0;

/// One place in the evaluation order: a family of kAutoFamilies (plain < 0)
/// or a plain kernel of kAutoPlainKernels (family < 0), on scaling `scaling`.
struct AutoSlot {
  int family = -1;
  int plain = -1;
  int scaling = 0;
};
/// The order auto evaluates its candidates in, over `scalings` scalings
/// (the first is the one users get by default), by expected accuracy per
/// second (measured: docs/reproduction/auto.md): the reference (KL-ADMM on
/// scaling 0), the linear kernel (free), BCDNPKL square (the most accurate
/// family on most sets), KL-ADMM on the other scalings, the RBF kernel, the
/// graph's diffusion kernel, then the other families in kAutoFamilies' order — each on every scaling, so a
/// budget that stops early has seen both scalings of what it ran.
std::vector<AutoSlot> AutoOrder(int scalings);

struct AutoCandidate {
  std::string name;     ///< "kl_admm", "bcd_npkl/hinge", "linear", "rbf", "diffusion"
  std::string scaling;  ///< the feature scaling it runs on ("none", "zscore")
  bool baseline = false;  ///< a plain kernel (nothing learned)
  std::vector<double> grid;  ///< loss weights, or width multiples; ascending after CrossValidate
  LearnKernelFn learn;
  /// "name@scaling": the candidate's identity in the leaderboard and in `done`.
  std::string Key() const { return name + "@" + scaling; }
};

struct AutoEntry {
  std::string name, scaling;
  bool baseline = false;
  /// "scored" (on all the folds), "screened" (on fold 0 only: not a leader of
  /// the screening, file comment), "failed" (error says why) or "budget" (not
  /// finished within the budget; a leader cut in round 2 keeps its screening score).
  std::string status;
  std::string error;
  double value = 0.0;               ///< the best grid value (C, γ or width multiple)
  std::vector<double> fold_scores;  ///< at that value, one per fold
  double mean = 0.0, sd = 0.0;      ///< over the folds (sd: sample standard deviation)
  std::vector<double> grid, grid_means;  ///< every grid value and its mean score
  /// The screening: fold 0's score at every grid value (empty: not screened,
  /// or restored from a checkpoint written before the screening), and its seconds.
  std::vector<double> screen_means;
  double screen_seconds = 0.0;
  double seconds = 0.0;  ///< of both rounds
  /// Taken from `done` (an earlier, interrupted run), not evaluated in this one.
  /// In the JSON as "restored":true (absent when false); not in checkpoints.
  bool restored = false;
  std::string Key() const { return name + "@" + scaling; }
};

struct AutoSelectOptions {
  int folds = 3;        ///< 2..20
  uint64_t seed = 1;    ///< of the folds
  int clusters = 0;     ///< 0 = threshold score; c >= 2 = kernel k-means score with c clusters
  int num_threads = 1;  ///< parallel (value, fold) learns within a candidate; 0 = all
  /// Evaluation budget in seconds; 0 = none (then reference_multiple applies).
  double max_seconds = 0.0;
  /// With max_seconds = 0: budget = this × the first candidate's seconds; 0 = none.
  double reference_multiple = 0.0;
  /// Successive halving (file comment): screen every candidate on fold 0,
  /// then the leaders on the other folds; false: every candidate on all the folds.
  bool screening = true;
  /// Called with a candidate's key and the round (1: the screening, or all
  /// the folds without it; 2: a leader's other folds) just before it is
  /// evaluated (not for what is restored from `done`, nor what the budget cut): for logs.
  std::function<void(const std::string& key, int round)> on_start;
  /// INVALID_ARGUMENT naming "auto.<field> = value".
  Status Validate() const;
  /// The cross-validation every candidate is scored with (folds, seed,
  /// clusters, threads) over `grid`, on all the folds.
  CrossValidationOptions CrossValidation(std::vector<double> grid) const;
};

/// The second stage (file comment, "Refinement"): one more loss weight for the
/// winning learned candidate, on the same folds.
struct AutoRefinement {
  std::string key;     ///< the refined candidate, name@scaling
  /// "scored", "budget" (no time left), "failed" (error says why), or
  /// "skipped" (a plain winner, or a one-value grid: nothing to refine).
  std::string status;
  std::string error;
  double from = 0.0;   ///< the winner's grid value
  double value = 0.0;  ///< the value tried: √(from · its better-scored grid neighbour)
  std::vector<double> fold_scores;
  double mean = 0.0, sd = 0.0;
  bool chosen = false;  ///< scored and mean > the winner's: `value` is learned instead of `from`
  double seconds = 0.0;
  /// {"candidate":"bcd_npkl/square@none","status":"scored","from":1,"value":3.16…,"mean":…,"sd":…,
  ///  "fold_scores":[…],"chosen":true,"seconds":…} (error when set; the scores only when scored)
  std::string Json() const;
};

struct AutoSelectResult {
  std::vector<AutoEntry> entries;  ///< in the candidates' order
  AutoRefinement refine;           ///< status empty until the selection has ended
  int best = -1;                   ///< index of the winner in entries
  int folds = 0, clusters = 0;
  int held_out_pairs = 0;          ///< m: pairs i != j held out over the folds
  double margin = 0.0;             ///< the lead a plain kernel needs: PlainKernelMargin(m)
  double budget_seconds = 0.0;     ///< 0 = none
  bool budget_reached = false;
  double seconds = 0.0;            ///< of the whole selection, restored candidates included
  bool screening = false;          ///< options.screening
  int screen_pairs = 0;            ///< m₀: pairs i != j fold 0 holds out (with the screening)
  double screen_margin = 0.0;      ///< the screening's margin max(0.01, 1/√m₀)
  int leaders = 0;                 ///< candidates the screening kept for the other folds
  /// The folds the winner was chosen on: folds, or 1 when the budget left no
  /// learned candidate scored on all of them (file comment); 0 before a winner.
  int chosen_folds = 0;
  /// Evaluations finished (restored ones included): one per candidate in
  /// round 1, one per leader in round 2 — the caller's progress and checkpoint count.
  int steps = 0;
  /// The value to learn the winner with: refine.value when the refinement was
  /// chosen, else entries[best].value.
  double ChosenValue() const;
  /// {"score":"threshold","folds":3,"budget_seconds":…,"budget_reached":false,"chosen":"kl_admm@zscore",
  ///  "candidates":[{"name":"kl_admm","scaling":"zscore","kind":"learned","status":"scored","value":1,
  ///  "mean":…,"sd":…,"fold_scores":[…],"grid":[…],"grid_means":[…],"seconds":…},…],
  ///  "held_out_pairs":…,"margin":…,"chosen_value":…,"refine":{AutoRefinement::Json},"seconds":…}
  /// With the screening also "screening":{"fold":0,"held_out_pairs":m₀,"margin":…,"leaders":…} and
  /// "chosen_folds"; a candidate's score fields are present when it has a score (status "scored",
  /// "screened", or "budget" for a leader cut in round 2: then over fold 0 only, fold_scores has one),
  /// and "screen_mean" (its best fold-0 score) and "screen_seconds" when it was screened.
  std::string Json() const;
};

/// Runs the selection (file comment). `after_each` is called after every
/// evaluation of either round (AutoSelectResult::steps counts them) and after the refinement with the result so far (for
/// checkpoints and progress); `done_refine` is a refinement restored from such
/// a checkpoint, used when its candidate and value are the ones this run
/// would try (else the refinement is run). Errors:
/// bad options, no candidate, duplicate keys; CANCELLED / DEADLINE_EXCEEDED
/// from `control`; FAILED_PRECONDITION when no candidate could be scored
/// (each one's error is in the message).
StatusOr<AutoSelectResult> AutoSelect(const PairwiseConstraints& constraints,
                                      const std::vector<AutoCandidate>& candidates, const AutoSelectOptions& options,
                                      const SolveControl& control, const std::vector<AutoEntry>& done = {},
                                      const std::function<void(const AutoSelectResult&)>& after_each = {},
                                      const AutoRefinement* done_refine = nullptr);

struct PlainKernelOptions {
  /// RBF widths (multiples of the median squared distance) under the clustering
  /// score: one per factor 4 around the median.
  std::vector<double> rbf_multiples = {0.25, 1.0, 4.0};
  int max_exact_points = 1000;  ///< exact RBF factor up to this many points, Nyström above
  /// The RBF factor keeps its max_rank leading directions (the largest
  /// eigenvalues): the clustering score's k-means costs O(n · rank) per step,
  /// and a full-rank factor made the RBF candidate cost 5–8 learned ones.
  int max_rank = 64;
  /// Diffusion kernel: β multiples (of 1 / the largest kept eigenvalue), one
  /// per factor 4, under both scores; and the eigenpairs kept (the factor's rank).
  std::vector<double> diffusion_multiples = {4.0, 16.0, 64.0, 256.0, 1024.0};
  int diffusion_rank = 64;
};

/// The plain kernel `name` ("linear" or "rbf", value = width multiple) on
/// `features`: its factor. INVALID_ARGUMENT for another name ("diffusion"
/// needs the graph: DiffusionPlainKernel).
StatusOr<LearnedKernel> PlainKernel(const Eigen::MatrixXd& features, const std::string& name, double value,
                                    const PlainKernelOptions& options = {});

/// The plain kernel `name` as a candidate on `features` (shared, not copied),
/// labelled `scaling`, for the score with `clusters` (AutoSelectOptions).
/// Grid: linear {1}; rbf the width multiples under the clustering score, {1}
/// under the threshold score — exp(−d²/w) is a monotone function of d for every
/// w, so the threshold rule and its score are the same at every width.
AutoCandidate PlainKernelCandidate(std::shared_ptr<const Eigen::MatrixXd> features, const std::string& name,
                                   const std::string& scaling, int clusters, const PlainKernelOptions& options = {});

/// The graph Laplacian a diffusion candidate is built on, made on first use.
using LaplacianFn = std::function<StatusOr<Eigen::SparseMatrix<double>>()>;

/// The diffusion kernel of `laplacian` at β multiple `value` (file comment): its factor.
StatusOr<LearnedKernel> DiffusionPlainKernel(const Eigen::SparseMatrix<double>& laplacian, double value,
                                             const PlainKernelOptions& options = {});

/// The graph's diffusion kernel as a candidate labelled `scaling` (the
/// features the graph was built on); grid options.diffusion_multiples under
/// both scores. `laplacian` is called once, on the first learn (so the
/// candidate's seconds include the graph and its eigenpairs).
AutoCandidate DiffusionKernelCandidate(LaplacianFn laplacian, const std::string& scaling,
                                       const PlainKernelOptions& options = {});

}  // namespace kls
