// Data embedding through the SimpleNPKL scheme (thesis §3.4):
// colored maximum variance unfolding (CMVU, §3.4.1, eq. (3.25)), minimum
// volume embedding (MVE, §3.4.2, eq. (3.26)) and structure preserving
// embedding (SPE, §3.4.3), each "A and ∇J replaced in the SimpleNPKL loop"
// (core/embed/embedding_minimax.h), plus the kernel PCA baseline of Table 3.8.
//
// Every solver returns the learned kernel as a LearnedKernel K = V Vᵀ
// (core/model/learned_kernel.h); PrincipalCoordinates turns it into the
// d-dimensional embedding that is plotted and classified (thesis §3.5.5.2).
//
// Common setting: the capacity tr K² <= B (p = 2), slack weight C; the
// thesis fixes C = 1 and B = m·N, m ∈ {0.1, 1, 2, 10} (§3.5.5). K is
// centered (Σ_ij K_ij = 0) exactly, see embedding_dual.h.
//
//   CMVU   min −tr(HKHY) + (C/2) Σ_{(i,j)∈N} ξ_ij²,  tr(K T_ij) = D_ij − ξ_ij
//          Y = label kernel (Y_ij = 1 for two labeled points of the same class,
//          0 otherwise; unlabeled points have zero rows: semi-supervised).
//          A = HYH + Σ α_ij T_ij,  ∇J_ij = D_ij − tr(T_ij K) − α_ij / C.
//   MVE    repeat: K₀ = Σ_{i<=d} v_i v_iᵀ − Σ_{i>d} v_i v_iᵀ = 2 U_d U_dᵀ − I from the
//          current K (the input kernel at the start), then
//          min −tr(K K₀) + (C/2) Σ ξ_ij²  with the MVU distance constraints (3.26);
//          A = K₀ + Σ α_ij T_ij; until U_d stops changing.
//   SPE    min −tr(KW) + C ξ,  tr(K T_ij) >= tr(K T_ik) − ξ  ∀ i, j ∉ N_i, k ∈ N_i, ξ >= 0;
//          A = W − Σ α_ijk (T_ik − T_ij), ∇J_ijk = tr K (T_ik − T_ij), α >= 0, Σ α <= C.
//          (The thesis writes "Σ_i α_ijk ∈ [0, C]"; with SPE's single slack ξ the
//          dual set is Σ over all triplets <= C, which is what is used here.)
//
// N is the symmetrized k-NN graph of the input (D_ij its squared input-space
// distances; W its 0/1 adjacency; N_i the graph neighbours of i).
//
// Thread safety: all functions are re-entrant.
#pragma once

#include <Eigen/Core>
#include <optional>
#include <string>
#include <vector>

#include "core/common/certificate.h"
#include "core/common/solve_control.h"
#include "core/common/status.h"
#include "core/embed/embedding_minimax.h"
#include "core/model/learned_kernel.h"

namespace kls {

/// The symmetrized k-NN graph the embeddings preserve.
struct NeighborhoodGraph {
  int num_points = 0;
  std::vector<std::vector<int>> neighbors;  ///< N_i, ascending, symmetric (j ∈ N_i ⇔ i ∈ N_j)
  std::vector<int> edge_i, edge_j;          ///< unique edges, edge_i < edge_j
  Eigen::VectorXd squared_distance;         ///< D per edge, ‖x_i − x_j‖²
  /// The k of the k-NN the graph symmetrizes (set by BuildNeighborhood; 0 =
  /// unknown). MVE's start guard compares k-NN neighbourhoods with this k.
  int k = 0;

  int num_edges() const { return static_cast<int>(edge_i.size()); }
  /// Consistent sizes, symmetric neighbour lists, indices in range.
  Status Validate() const;
};

/// Symmetrized exact k-NN graph of the rows of `features` (n × d).
/// Errors: k < 1 or k >= n, empty or non-finite features. O(n² d).
StatusOr<NeighborhoodGraph> BuildNeighborhood(const Eigen::MatrixXd& features, int k);

/// `features` scaled so that the centered input Gram matrix has
/// ‖HXXᵀH‖_F² = n (thesis §3.5.5: B = m·N is then relative to the input
/// kernel, m = 1 its own Frobenius norm). Computed from the d × d matrix
/// XcᵀXc (same nonzero spectrum), O(n d²), no n × n matrix. Unchanged when
/// all rows are equal.
Eigen::MatrixXd ScaledToUnitInputGram(Eigen::MatrixXd features);

/// MVE against the start it improves on (issue 23; CompareMveWithStart).
/// Scores of the d-dimensional principal coordinates of the start (the input
/// kernel's, i.e. linear kernel PCA) and of the MVE solve.
struct MveStartComparison {
  bool kept_start = false;        ///< the start was returned instead of the solve
  int k = 0;                      ///< neighbourhood size of both scores (the MVE graph's k)
  double start_preservation = 0;  ///< NeighborhoodPreservation(input, start coordinates, k)
  double solve_preservation = 0;  ///< NeighborhoodPreservation(input, solve coordinates, k)
  int labeled_points = 0;         ///< points with a label >= 0; 0 = no label score
  /// Leave-one-out k-NN accuracy of the labels over the labelled points (−1 when
  /// there are too few of them: fewer than k + 1 labelled, or no labels).
  double start_loo_accuracy = -1.0;
  double solve_loo_accuracy = -1.0;
  /// The criterion that decided: "labels and neighbourhoods" (both scores must
  /// hold) or "neighbourhoods" (no usable labels).
  std::string criterion;
  /// JSON object of all the above, e.g. {"kept":"start","criterion":"labels",
  /// "k":5,"start_neighbourhood_preservation":0.78,…}.
  std::string Json() const;
  /// One line for people: "kept the KPCA start: 5-NN neighbourhood preservation 0.41 (MVE) vs 0.78
  /// (KPCA start)[, leave-one-out 5-NN accuracy … on N labels]".
  std::string Sentence() const;
};

/// Result of every embedding solver.
struct EmbeddingResult {
  LearnedKernel kernel;          ///< K = V Vᵀ (centered)
  /// termination, iterations (all inner iterations), P history; certificate:
  /// the last inner solve's, gap = its relative duality gap (P − J)/max(1, |P|),
  /// lower_bound = J, certified when the gap <= the inner tolerance.
  SolveReport stats;
  double stationarity = 0.0;     ///< ‖α − Π(α + ∇J)‖∞ of the last solve
  int quasi_newton_iterations = 0;  ///< of stats.iterations, those spent in L-BFGS (MVE: all solves)
  int newton_steps = 0;          ///< Newton directions (inner.method = kNewton; MVE: all solves)
  long long cg_products = 0;     ///< Hessian-vector products of those Newton steps
  double slack_weight = 0.0;     ///< the absolute slack weight C used (C / D̄² with relative_slack)
  Eigen::VectorXd dual;          ///< α of the last solve (per edge, or per SPE triplet)
  int outer_iterations = 1;      ///< MVE: K₀ updates performed; 1 otherwise
  Eigen::MatrixXd mve_basis;     ///< MVE: U_d of the K₀ = 2 U_d U_dᵀ − I of the returned solve (n × d)
  double mve_change = 0.0;       ///< MVE: last ‖U_d U_dᵀ − U_d' U_d'ᵀ‖_F / √(2d)
  /// MVE: the outer objective F(K_t) (see MveObjective) after each K₀ update, t = 1, 2, …
  std::vector<double> mve_objective;
  /// MVE: slack allowed in the ascent check F(K_{t+1}) >= F(K_t) − slack_t (the inner solves' certified gaps).
  std::vector<double> mve_ascent_slack;
  /// MVE: the last K₀ update decreased F by more than its slack and was rejected
  /// (the returned K is the previous one; mve_objective's last entry is the rejected F).
  bool mve_ascent_stopped = false;
  /// MVE with MveOptions::keep_start_unless_better: the comparison of the solve
  /// with its start. When kept_start, `kernel` is the start's (K = initial ·
  /// initialᵀ) and every other field still describes the rejected solve.
  std::optional<MveStartComparison> mve_start;
};

struct ColoredMvuProblem {
  NeighborhoodGraph graph;
  std::vector<int> labels;  ///< n entries: class id >= 0, or −1 for an unlabeled point
  Status Validate() const;
};

/// CMVU (3.25) by the SimpleNPKL loop. Errors: INVALID_ARGUMENT for the
/// problem (naming the field) or options; see SolveEmbeddingMinimax.
StatusOr<EmbeddingResult> SolveColoredMvu(const ColoredMvuProblem& problem, const EmbeddingMinimaxOptions& options,
                                          const SolveControl& control = SolveControl());

struct MveProblem {
  NeighborhoodGraph graph;
  LearnedKernel::Embedding initial;  ///< n × r factor of the input kernel (K at the start)
  /// Optional class ids for the start guard (MveOptions::keep_start_unless_better):
  /// empty, or n entries, each a class id >= 0 or −1 (unlabelled). MVE itself
  /// never sees them.
  std::vector<int> labels = {};
  Status Validate() const;
};

struct MveOptions {
  EmbeddingMinimaxOptions inner;  ///< each (3.26) solve
  /// Target dimensionality d >= 1 (the top d eigenvalues are grown).
  int dims = 2;
  /// K₀ updates (>= 1).
  int max_outer_iterations = 20;
  /// Stop when ‖U_d U_dᵀ − U_d' U_d'ᵀ‖_F / √(2d) <= outer_tolerance (>= 0).
  double outer_tolerance = 1e-3;
  /// Also stop when the outer objective F (MveObjective) changes by at most
  /// objective_tolerance · max(1, |F|) between two K₀ updates (>= 0; 0 = off).
  double objective_tolerance = 0.0;
  /// Inexact minorize–maximize: each K₀ update's inner solve stops at the
  /// relative gap max(inner.tolerance, min(1e-2, inexact_factor · last
  /// relative change of F)), so early updates, far from the fixed point, are
  /// cheap and the last ones are as tight as inner.tolerance (>= 0; 0 = every
  /// solve to inner.tolerance). The ascent check uses each solve's own gap.
  /// A stop rule that fires after a loose solve is confirmed: the loop goes
  /// on with every solve at inner.tolerance and stops when a rule fires
  /// again, so the returned K is certified at inner.tolerance.
  double inexact_factor = 0.0;
  /// Start each K₀ update's L-BFGS from the previous update's curvature pairs
  /// (EmbeddingCurvatureMemory; inner.method = kLbfgs only): 26–39% fewer
  /// spectra per MVE solve on wine / ionosphere / breast cancer, same
  /// certified optimum.
  bool reuse_curvature = true;
  /// Never worse than the start (issue 23): after the solve, compare it with
  /// the start by CompareMveWithStart and return the start unless the solve is
  /// at least as good (result.mve_start says which and why). Needs graph.k
  /// (BuildNeighborhood sets it). Default on: with a capacity B too small for
  /// the k-NN distances MVE's objective rises while its top-d coordinates
  /// shatter the neighbourhoods (wine at B = 0.1·N: 5-NN accuracy 54–57 %
  /// against KPCA's 92 %), no setting of B is safe on every data set, and the
  /// check costs O(n² r), a fraction of one K₀ update. Off = the solve as is.
  bool keep_start_unless_better = true;
  /// INVALID_ARGUMENT "<path>.<field> = <value> <rule>"; `inner`'s options
  /// under the same path (the service's embedding.c is inner.c).
  Status Validate(std::string_view path = "options") const;
};

/// The objective the MVE outer loop ascends ([SJ07] with the square slack of
/// (3.26)): F(K) = Σ_{i<=d} λ_i(K) − Σ_{i>d} λ_i(K) − (C/2) Σ_e (D_e − tr(T_e K))²,
/// for K = V Vᵀ with V's columns orthogonal in descending norm (as returned by
/// the SimpleNPKL solve). By Ky Fan, tr(K K₀) <= Σ_{i<=d} λ_i − Σ_{i>d} λ_i for
/// every K₀ = 2 U Uᵀ − I, with equality when U spans K's top-d eigenvectors;
/// so each K₀ update is a minorize–maximize step and F(K_{t+1}) >= F(K_t) up to
/// the inner solve's duality gap.
double MveObjective(const Eigen::MatrixXd& v, int dims, const NeighborhoodGraph& graph, double c);

/// MVE (3.26): K₀ updates around warm-started SimpleNPKL solves. The result's
/// stats.objective_history (and mve_objective) holds F(K_t) (MveObjective)
/// after each outer iteration; termination is the outer loop's (kConverged
/// when U_d or F settled, or when an update would decrease F by more than the
/// inner solves' certified gaps — then the previous K is returned).
///
/// Checkpoints (format "mve/1"). With control.checkpoint set, the state is
/// handed to it (CheckpointTimer) after a K₀ update that does not end the run
/// once control.checkpoint_interval_seconds of solve time have passed since
/// the start or the last checkpoint; Checkpoint::iteration counts inner
/// iterations, as stats.iterations does. It holds the outer iterate (U_d of
/// the next K₀, the dual warm start α, the kept solve's factor V, α and
/// certificate), the outer bookkeeping (F and ascent slack per update, the
/// last relative change of F, the confirming flag), the counters and the
/// L-BFGS curvature memory carried to the next solve. The inner solves are
/// not checkpointed themselves. With control.ResumeFrom("mve/1") set and
/// matching, the run continues with the next K₀ update: stats.iterations,
/// the progress numbering and outer_iterations go on,
/// stats.resumed_from_iteration = checkpoint.iteration, and the result is
/// bit-identical to the uninterrupted run's. A checkpoint matches when it was
/// taken for the same graph, initial factor and the options that shape the
/// iterates (all but max_outer_iterations — a fingerprint); any other
/// checkpoint is ignored and the solve starts afresh.
StatusOr<EmbeddingResult> SolveMve(const MveProblem& problem, const MveOptions& options,
                                   const SolveControl& control = SolveControl());

/// Neighbourhood preservation of `embedding` with respect to `reference` (the
/// same n points as rows): the mean over points i of |N_ref(i) ∩ N_emb(i)| / k,
/// where N_emb(i) are the k nearest other rows of `embedding` (Euclidean; equal
/// distances by smaller index) and N_ref(i) every point whose reference distance
/// to i is at most the k-th smallest (so duplicate points in the reference do
/// not make the score depend on their order). 1 = every k-NN neighbourhood of
/// the reference kept; a random embedding scores about k / (n − 1). Needs no
/// labels. Errors: different row counts, k < 1 or k >= n, non-finite entries.
/// O(n² (r + d)) time, O(n) memory.
StatusOr<double> NeighborhoodPreservation(const Eigen::MatrixXd& reference, const Eigen::MatrixXd& embedding, int k);

/// MVE's start guard (issue 23): is the MVE solve at least as good as the start
/// it improves on? `input` holds the input points (or any factor of the input
/// kernel: only its distances are used), `start` and `solve` the d-dimensional
/// principal coordinates of the start (linear KPCA) and of the solve, k the MVE
/// graph's k. The solve is kept when it is at least as good as the start on
/// every score there is:
///   - its neighbourhood preservation of the input's k-NN
///     (NeighborhoodPreservation) — exactly what MVE's distance constraints
///     promise to keep — is at least the start's (criterion "neighbourhoods");
///   - and, when labels (n entries, class id >= 0 or −1 = unlabelled) give at
///     least k + 1 labelled points, also its leave-one-out k-NN accuracy over
///     them (LeaveOneOutKnnAccuracy) is at least the start's (criterion
///     "labels and neighbourhoods").
/// The labels are not allowed to outvote the neighbourhoods: on a few dozen
/// labels a collapsed solve can gain leave-one-out accuracy by chance (measured
/// in docs/reproduction/embedding.md, "MVE: the start guard in core").
/// Errors: mismatched sizes, k out of range, labels < −1, non-finite entries.
StatusOr<MveStartComparison> CompareMveWithStart(const Eigen::MatrixXd& input, const Eigen::MatrixXd& start,
                                                 const Eigen::MatrixXd& solve, int k,
                                                 const std::vector<int>& labels = {});

struct SpeProblem {
  NeighborhoodGraph graph;
  /// Guard against the O(n² k) triplet count (>= 1).
  long long max_triplets = 20'000'000;
  Status Validate() const;
};

/// SPE (§3.4.3) by the SimpleNPKL loop over all triplets (i, j ∉ N_i, k ∈ N_i).
/// Resumable: the projected-gradient loop's "embedding_pg/1" checkpoints
/// (SolveEmbeddingMinimax).
StatusOr<EmbeddingResult> SolveSpe(const SpeProblem& problem, const EmbeddingMinimaxOptions& options,
                                   const SolveControl& control = SolveControl());

struct KpcaOptions {
  enum class Kernel {
    kLinear,  ///< K = X Xᵀ (PCA)
    kRbf,     ///< K_ij = exp(−‖x_i − x_j‖² / (2σ²))
  };
  Kernel kernel = Kernel::kLinear;
  /// RBF width σ > 0; 0 = the mean distance of each point to its 10 nearest neighbours, halved.
  double rbf_sigma = 0.0;
  /// Output dimensions >= 1.
  int dims = 2;
  /// INVALID_ARGUMENT "<path>.<field> = <value> <rule>".
  Status Validate(std::string_view path = "options") const;
};

/// Kernel PCA (baseline of Table 3.8): the top `dims` principal coordinates of
/// the centered kernel HKH, V = U_d Λ_d^{1/2}. Linear kernel: thin SVD of the
/// centered X (O(n d²)); RBF: dense eigendecomposition of HKH (O(n³)).
StatusOr<LearnedKernel> KernelPca(const Eigen::MatrixXd& features, const KpcaOptions& options);

/// The top `dims` principal coordinates of a learned kernel: center V, thin
/// SVD HV = P Σ Qᵀ, return P_d Σ_d (n × dims, zero columns when rank < dims).
/// Distances and the centered kernel's top-d part are those of K. O(n r²).
StatusOr<Eigen::MatrixXd> PrincipalCoordinates(const LearnedKernel& kernel, int dims);

}  // namespace kls
