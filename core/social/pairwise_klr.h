// Kernel-based learning to rank of social strength (thesis §7.4): pairwise
// kernel logistic regression (KLR) on user pairs, solved as an import vector
// machine (IVM, Zhu & Hastie 2001, "ZH01"), and the training pair selection
// of §7.4.2.
//
// Model (eq. 7.2–7.3). A training example is an ordered user pair û = (a, b)
// with label y ∈ {+1 (b is a contact of a), −1}. With a pair kernel k(û, û')
// built from a user kernel K_u (n × n, e.g. the KTA combination of §7.3) the
// strength is f(û) = Σ_{s∈S} α_s k(û, û_s) over the import set S, and α
// minimizes the dual objective (7.3) restricted to S:
//
//     J(α) = (1/N_p) Σ_i ln(1 + exp(−y_i f(û_i))) + (C/2) αᵀ K_SS α,       (7.3)
//
// N_p the number of training pairs. P(z = 1 | u, v) = σ(f(u, v)) (§7.4.1).
//
// Pair kernels (PairKernelSpec) — a base pair kernel plus two optional
// rank-one terms:
//   kDifference        k₀ = K_u(a,c) + K_u(b,d) − K_u(a,d) − K_u(b,c), the kernel
//                      of Φ(a) − Φ(b) printed under (7.3). It gives
//                      f(u, v) = g(u) − g(v) with g = Σ_s α_s (K_u(·, a_s) − K_u(·, b_s)):
//                      antisymmetric, and for a fixed user u every candidate v is
//                      ranked by −g(v), the same order for every u. A mutual tie
//                      (u, v), (v, u) both labelled +1 cannot be fitted (f sums to 0).
//   kSymmetricProduct  k₀ = ½ [K_u(a,c) K_u(b,d) + K_u(a,d) K_u(b,c)], the kernel of
//                      ½ (Φ(a) ⊗ Φ(b) + Φ(b) ⊗ Φ(a)): f(u, v) = f(v, u) and the
//                      ranking of v depends on u. But Σ_s α_s k₀ is a bilinear form
//                      of rank <= 2|S|; it cannot follow K_u(u, v) itself (rank n),
//                      and with a sparse K_u (the comment kernel) it is zero for
//                      almost every pair.
//   k = k₀ + bias_weight + link_weight · K_u(a,b) K_u(c,d): the kernel of the pair
//   feature [φ₀(û), √bias_weight, √link_weight K_u(u, v)]. In f this is
//   f(u, v) = Σ_s α_s k₀(·) + b + β K_u(u, v) with b = bias_weight Σ_s α_s and
//   β = link_weight Σ_s α_s K_u(a_s, b_s) — a bias and a learned multiple of the
//   first-stage kernel that the pair term "rectifies" (§7.2.1), both penalized
//   through ‖w‖² like the rest, so (7.3) is solved unchanged with this k.
//   bias_weight = link_weight = 0 is the model exactly as printed.
//
// Import vector selection (§7.4.2 second stage, ZH01 §3). Start from S = ∅.
// Each outer iteration draws `candidates_per_step` pairs outside S (0 = all),
// scores each candidate l by the objective J after one Newton step on
// S ∪ {l} from (α, 0), adds the best one, and re-solves (7.3) on the new S by
// damped Newton to ‖∇J‖∞ <= newton_tolerance. The sequence J_1 >= J_2 >= …
// is non-increasing (S grows, each α is optimal on its S). Stops when
// (J_{k−w} − J_k) <= relative_tolerance · |J_k| (w = stop_window, ZH01's
// Δk), when |S| = max_import_vectors, when no candidate is left or none
// lowers J, or on SolveControl (checked once per added import vector).
//
// Cost per outer iteration with q = |S|, N = N_p, c candidates: O(c N q) to
// score candidates plus O(N q²) per Newton iteration (usually 1–3). Memory
// O(N q). The strength matrix costs O(n² q).
//
// Thread safety: pure functions, re-entrant.
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <string_view>
#include <vector>

#include "core/common/solve_control.h"
#include "core/common/status.h"

namespace kls {

/// An ordered user pair (a, b): "b as a friend of a".
struct UserPair {
  int a = 0;
  int b = 0;
  bool operator==(const UserPair& o) const { return a == o.a && b == o.b; }
};

enum class PairKernel {
  kSymmetricProduct,  ///< ½[K(a,c)K(b,d) + K(a,d)K(b,c)] (default; symmetric strength)
  kDifference,        ///< K(a,c) + K(b,d) − K(a,d) − K(b,c), as printed under (7.3)
};
/// "symmetric_product", "difference".
const char* PairKernelName(PairKernel k);

struct PairKernelSpec {
  PairKernel kind = PairKernel::kSymmetricProduct;  ///< k₀ (see the file comment)
  double bias_weight = 1.0;  ///< >= 0: constant feature (bias of f); 0 = as printed
  double link_weight = 1.0;  ///< >= 0: feature K_u(u, v) (f can follow the first-stage kernel); 0 = as printed

  /// INVALID_ARGUMENT "<field>.bias_weight = …" etc.
  Status Validate(const char* field) const;
};

/// k(û, û') from the user kernel (no bounds checks; indices must be valid).
double PairKernelValue(const Eigen::MatrixXd& user_kernel, const PairKernelSpec& spec, const UserPair& p,
                       const UserPair& q);

// ---------------------------------------------------------------------------
// §7.4.2 first stage: training pair selection.
//
// For every anchor user u (the training users):
//   positives  the contacts v of u ranked by the communication kernel
//              K³(u, v) (mutual comments), the first `positives_per_user`
//              (ties in random order);
//   negatives  the conservative rule: for every similarity kernel K^t the
//              list L_t(u) holds the users v ≠ u whose K^t(u, v) is at most the
//              N-th smallest value of row u (the tail of u's descending order,
//              ties at the threshold included), N = ceil(negative_pool_fraction
//              · (n − 1)); the candidates are the users in every L_t(u) that are
//              not contacts of u. `negatives_per_user` (N_e < N) of them are
//              taken: uniformly at random, or with least_similar_first the ones
//              with the smallest Σ_t K^t(u, v) (ties by index).
// A pair selected twice is kept once; with a symmetric pair kernel (u, v) and
// (v, u) are one example (the first kept), and a negative whose reverse is a
// positive (asymmetric contact lists) is dropped.
struct TrainingPairOptions {
  int positives_per_user = 5;           ///< contacts with the most mutual comments per anchor (>= 1)
  int negatives_per_user = 10;          ///< N_e per anchor (>= 1; may be cut by the candidates available)
  double negative_pool_fraction = 0.5;  ///< N / (n − 1), in (0, 1]; N must exceed N_e
  bool least_similar_first = false;     ///< true: the N_e smallest Σ_t K^t; false: N_e at random
  bool symmetric = true;                ///< treat (u, v) and (v, u) as one example (set for kSymmetricProduct)
  uint64_t seed = 1;                    ///< tie breaking and random negatives

  /// INVALID_ARGUMENT "<path>.positives_per_user = 0 must be >= 1" etc.
  Status Validate(std::string_view path = "options") const;
};

struct TrainingPairs {
  std::vector<UserPair> pairs;
  Eigen::VectorXd labels;  ///< +1 / −1, one per pair
  int num_positive = 0;
  int num_negative = 0;
  int anchors_without_negatives = 0;  ///< anchors whose conservative candidate set was empty
};

/// `contacts`: contact list of each of the n users (asymmetric allowed);
/// `similarity`: the K^t (each n × n) of the negative rule;
/// `communication`: K³ (n × n) ranking the positives; `anchors`: the users u
/// whose pairs are selected (distinct). Errors: INVALID_ARGUMENT naming the
/// bad option, shape or index.
StatusOr<TrainingPairs> SelectTrainingPairs(const std::vector<std::vector<int>>& contacts,
                                            const std::vector<const Eigen::MatrixXd*>& similarity,
                                            const Eigen::MatrixXd& communication, const std::vector<int>& anchors,
                                            const TrainingPairOptions& options);

// ---------------------------------------------------------------------------
// KLR / IVM.

struct PairwiseKlrOptions {
  PairKernelSpec pair_kernel;      ///< k of (7.3), see the file comment
  double c = 1e-3;                 ///< C > 0 of (7.3) (the loss is a mean over pairs)
  int max_import_vectors = 100;    ///< upper bound on |S| (>= 1)
  int candidates_per_step = 32;    ///< pairs scored per added import vector (>= 0; 0 = all outside S)
  double relative_tolerance = 1e-3;  ///< stop when J_{k−w} − J_k <= tol · |J_k| (>= 0)
  int stop_window = 3;             ///< w of the stop rule (>= 1)
  int max_newton_iterations = 50;  ///< per re-solve (>= 1)
  double newton_tolerance = 1e-9;  ///< ‖∇J‖∞ target of each re-solve (> 0)
  uint64_t seed = 1;               ///< candidate sampling

  /// INVALID_ARGUMENT "<path>.c = 0 must be finite and > 0",
  /// "<path>.pair_kernel.link_weight = -1 …" etc.
  Status Validate(std::string_view path = "options") const;
};

/// What the service stores: the import pairs and their coefficients. The
/// user kernel K_u they refer to is kept by the caller (it is n × n).
struct PairwiseKlrModel {
  PairKernelSpec pair_kernel;
  std::vector<UserPair> import_pairs;  ///< û_s, s ∈ S
  Eigen::VectorXd alpha;               ///< α_s
  int num_users = 0;                   ///< n of the user kernel it was learned with
};

struct PairwiseKlrResult {
  PairwiseKlrModel model;
  std::vector<int> import_indices;  ///< positions of S in the training pairs, in order of selection
  double objective = 0.0;           ///< J(α) of (7.3) at the returned α
  double gradient_inf = 0.0;        ///< ‖∇_α J‖∞ at the returned α (optimality on S)
  double training_accuracy = 0.0;   ///< fraction of pairs with y_i f(û_i) > 0
  SolveReport stats;                 ///< iterations = |S|; objective_history[k−1] = J with k import vectors
};

/// Learns α by the IVM. `user_kernel` n × n symmetric finite; pairs index
/// users in [0, n); labels ±1 with both classes present. Errors:
/// INVALID_ARGUMENT naming the field; outcomes in stats.termination.
StatusOr<PairwiseKlrResult> SolvePairwiseKlr(const Eigen::MatrixXd& user_kernel, const std::vector<UserPair>& pairs,
                                             const Eigen::VectorXd& labels, const PairwiseKlrOptions& options,
                                             const SolveControl& control = SolveControl());

/// Objective (7.3), its gradient and the fitted f on all pairs for a given
/// import set and α (exposed for tests and diagnostics).
struct PairwiseKlrEvaluation {
  double objective = 0.0;
  Eigen::VectorXd gradient;  ///< ∇_α J (|S|)
  Eigen::VectorXd f;         ///< f(û_i) on every training pair
};
StatusOr<PairwiseKlrEvaluation> EvaluatePairwiseKlr(const Eigen::MatrixXd& user_kernel,
                                                    const std::vector<UserPair>& pairs, const Eigen::VectorXd& labels,
                                                    const PairwiseKlrModel& model, double c);

/// f(u, v) of a model (raw score, before σ).
StatusOr<double> PairScore(const Eigen::MatrixXd& user_kernel, const PairwiseKlrModel& model, int u, int v);

/// σ(f) = 1 / (1 + e^{−f}) = P(z = 1 | u, v) (§7.4.1), without overflow.
double StrengthProbability(double f);

/// Versioned binary encoding of a model (byte_io.h). Parse checks the pair
/// kernel, the sizes and every index against num_users (DATA_LOSS on error).
std::string SerializePairwiseKlrModel(const PairwiseKlrModel& model);
StatusOr<PairwiseKlrModel> ParsePairwiseKlrModel(const std::string& bytes);

enum class StrengthScale {
  kProbability,  ///< σ(f) = P(z = 1 | u, v) ∈ (0, 1) (§7.4.1; Def. 7.1 asks f >= 0)
  kScore,        ///< f itself
};

/// The users × users strength matrix F(u, v) for RecommendFriends /
/// RecommendGroups (recommendation.h). O(n² |S|) time, n² doubles.
/// Errors: INVALID_ARGUMENT when the kernel does not match the model.
StatusOr<Eigen::MatrixXd> SocialStrengthMatrix(const Eigen::MatrixXd& user_kernel, const PairwiseKlrModel& model,
                                               StrengthScale scale = StrengthScale::kProbability);

}  // namespace kls
