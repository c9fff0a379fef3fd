// The SimpleNPKL minimax loop (thesis Algorithm/Protocol 1, §3.2.3) with the
// "A and ∇J" of the data-embedding problems of thesis §3.4. CMVU, MVE and SPE
// (core/embed/embedding.h) are thin wrappers that fill an EmbeddingMinimaxProblem.
//
// Primal (over centered K ⪰ 0 with the capacity tr K² <= B, p = 2 as in
// (3.25)):
//
//   square slack  P(K) = −tr(M K) + (C/2) Σ_k (D_k − tr(T_k K))²        CMVU (3.25), MVE (3.26)
//   max slack     P(K) = −tr(M K) + C max(0, max_t [tr(T_near(t) K) − tr(T_far(t) K)])   SPE §3.4.3
//
// (the max-slack form is SPE's single slack ξ: D_far >= D_near − ξ for every
// triplet t = (i, far j ∉ N_i, near k ∈ N_i)).
//
// Dual (the thesis's minimax, eq. (3.25) and the SPE minimax):
//
//   J(α) = min_K −tr(A(α) K) + ℓ(α) = −√B ‖A(α)₊‖_F + ℓ(α),   A(α) = H (M + Σ_k w_k(α) T_k) H,
//   square slack: w = α (one α per pair, free sign: the constraints are the
//                 equalities tr(T_k K) = D_k − ξ_k), ℓ(α) = Σ α_k D_k − ‖α‖²/(2C),
//                 ∇J_k = D_k − tr(T_k K) − α_k / C                    (thesis below (3.25))
//   max slack:    one α_t >= 0 per triplet with Σ_t α_t <= C (from ξ >= 0),
//                 w_far(t) += α_t, w_near(t) −= α_t, i.e. A = W − Σ α (T_ik − T_ij),
//                 ℓ = 0, ∇J_t = tr(K (T_near − T_far))                 (thesis §3.4.3)
//
// with K(α) = √B A₊ / ‖A₊‖_F the closed form (3.8) for p = 2. Weak duality
// P(K) >= J(α) holds for every feasible K and α, so P(K(α)) − J(α) certifies
// the returned K (relative gap (P − J)/max(1, |P|), the stopping rule).
//
// Iteration (Method::kProjectedGradient, and SPE always): α ← Π(α + ∇J(α)/η) with Π the identity (square slack) or the
// Euclidean projection onto {α >= 0, Σ α <= C} (max slack). η is found by the
// ascent test of Prop. 3.28, J(α⁺) >= J(α) + ⟨∇J, α⁺ − α⟩ − (η/2)‖α⁺ − α‖²:
// doubled until it holds, halved after a step that needed no doubling (a
// Lipschitz-constant search; J never decreases). Lemma 3.4's bound does not
// apply directly because the constraint form's equivalent G changes with α.
//
// Method::kLbfgs for the square slack: the dual is unconstrained
// and smooth, so L-BFGS on −J replaces the gradient step; every function
// evaluation is a certified iterate and the stopping rule is unchanged. It
// needs 5–50× fewer spectra than the gradient step at C >= 10 (docs/reproduction/embedding.md).
//
// Method::kNewton (default; square slack, dense path): semismooth Newton-CG
// on the same dual. J is C¹ with a strongly semismooth gradient (K(α) is a
// scaled projection onto the PSD cone), so a generalized Hessian built from
// the whole spectrum of A gives a globally convergent (Armijo), locally
// quadratic iteration whose step count does not grow with C (the form of the
// semismooth Newton method of Qi & Sun for the nearest correlation matrix).
// Each iteration costs one full dense eigendecomposition plus a few dozen
// Hessian products at O(m r + n² r) each (embedding_minimax.cc).
//
// Cost per iteration: one positive spectrum of A (dense O(n³) for
// n <= dense_threshold, else Lanczos at O(nnz(S) + n q + m) per product),
// O(m r) for the distances, O(#triplets) for the SPE gradient and projection
// (O(#triplets log #triplets) when the projection is active).
//
// Thread safety: re-entrant.
#pragma once

#include <Eigen/Core>
#include <memory>
#include <vector>

#include "core/common/byte_io.h"
#include "core/common/certificate.h"
#include "core/common/solve_control.h"
#include "core/common/status.h"
#include "core/embed/embedding_dual.h"

namespace kls {

struct EmbeddingMinimaxProblem {
  enum class Slack {
    kSquare,  ///< (C/2) Σ ξ_k², equality targets D_k (CMVU, MVE)
    kMax,     ///< C ξ with one ξ >= 0 for all triplets (SPE)
  };
  int num_points = 0;                ///< n >= 2
  EmbeddingPrior prior;              ///< M
  std::vector<int> pair_i, pair_j;   ///< the pairs k = (i, j), i != j, of the T_k
  Slack slack = Slack::kSquare;
  Eigen::VectorXd target;            ///< kSquare: D_k >= 0 per pair
  std::vector<int> triplet_near;     ///< kMax: pair index of (i, k ∈ N_i) per triplet
  std::vector<int> triplet_far;      ///< kMax: pair index of (i, j ∉ N_i) per triplet

  int num_duals() const {
    return slack == Slack::kSquare ? static_cast<int>(pair_i.size()) : static_cast<int>(triplet_near.size());
  }
  /// Field-naming INVALID_ARGUMENT for inconsistent shapes, out-of-range
  /// indices, i == j pairs, negative or non-finite targets.
  Status Validate() const;
};

struct EmbeddingMinimaxOptions {
  enum class Method {
    /// Square slack: L-BFGS (LBFGSpp, Nocedal–Wright strong-Wolfe line search) on the
    /// unconstrained smooth dual, finishing with projected gradient if the
    /// line search breaks down; max slack (SPE): projected gradient. The
    /// square-slack method on the Lanczos path (n > dense_threshold).
    kLbfgs,
    /// The thesis's step for every slack: α ← Π(α + ∇J/η) (Algorithm 5).
    kProjectedGradient,
    /// Default. Square slack with n <= dense_threshold: semismooth Newton-CG
    /// on the dual (generalized Hessian from the full spectrum of A, Jacobi-
    /// preconditioned CG, Armijo line search): 1.2–1.6× faster than kLbfgs
    /// per CMVU / MVE solve at n = 100 with a tighter final gap
    /// (docs/reproduction/embedding.md, "Semismooth Newton"). Otherwise, or if its line search
    /// fails, continues as kLbfgs. Max slack (SPE): projected gradient.
    kNewton,
  };
  Method method = Method::kNewton;
  /// C > 0: slack weight (thesis §3.5.5: C = 1).
  double c = 1.0;
  /// Square slack only: weigh the relative residual ξ_k / D̄ (D̄ = mean of
  /// the targets D_k), i.e. use C / D̄² as the absolute weight, so that C does
  /// not depend on the magnitude of the neighbour distances. With the
  /// absolute weight, C = 1 on data whose neighbour distances are small next
  /// to √B leaves the distances effectively unconstrained and MVE returns a
  /// whitened KPCA (docs/reproduction/embedding.md, "The slack weight C"). Ignored by SPE.
  bool relative_slack = false;
  /// B > 0: capacity tr K² <= B (thesis §3.5.5: B = m·N, m ∈ {0.1, 1, 2, 10}).
  double b = 1.0;
  /// Iterations (>= 1): spectrum evaluations accepted as iterates, i.e.
  /// gradient steps, L-BFGS function evaluations, or Newton trial points
  /// (line-search trials included; each costs one spectrum, a full dense
  /// eigendecomposition for Newton).
  int max_iterations = 500;
  /// Stop when the relative duality gap <= tolerance (>= 0).
  double tolerance = 1e-4;
  /// Initial η (> 0); the step length is 1/η, adapted by the ascent test.
  double initial_eta = 1.0;
  /// η doublings allowed per iteration before kNumericalIssue (>= 1).
  int max_backtracks = 60;
  /// Dense eigensolver at or below this many points (>= 0).
  int dense_threshold = 300;
  /// Spectra relative tolerance (> 0).
  double lanczos_tolerance = 1e-10;

  /// INVALID_ARGUMENT naming the field under `path` ("options.b = -1 must be finite and > 0").
  Status Validate(std::string_view path = "options") const;
};

struct EmbeddingMinimaxResult {
  Eigen::MatrixXd v;      ///< n × r, K = V Vᵀ = √B A₊/‖A₊‖_F, columns in descending eigenvalue order
  Eigen::VectorXd alpha;  ///< final dual variables (num_duals)
  /// objective_history = P per iterate (element 0: the start);
  /// certificate: gap = (P − J) / max(1, |P|), lower_bound = J,
  /// certified when gap <= tolerance.
  SolveReport stats;
  double primal = 0.0;    ///< P(K)
  double dual = 0.0;      ///< J(α)
  double stationarity = 0.0;  ///< ‖α − Π(α + ∇J(α))‖∞
  int quasi_newton_iterations = 0;  ///< of stats.iterations, those spent in L-BFGS
  int newton_steps = 0;             ///< kNewton: Newton directions computed
  long long cg_products = 0;        ///< kNewton: Hessian-vector products in CG
  double slack_weight = 0.0;        ///< the absolute C used (SlackWeight)
};

/// The L-BFGS curvature pairs of one SolveEmbeddingMinimax, kept for the
/// next solve of a nearby problem (MVE's successive K₀ updates change J only
/// through the prior, so the last solve's pairs are a good model of the next
/// one's Hessian). A direction that is not an ascent direction for the new
/// problem empties the memory; pairs of another dimension are dropped. Not
/// thread-safe: one memory per solve sequence.
class EmbeddingCurvatureMemory {
 public:
  EmbeddingCurvatureMemory();
  ~EmbeddingCurvatureMemory();
  EmbeddingCurvatureMemory(EmbeddingCurvatureMemory&&) noexcept;
  EmbeddingCurvatureMemory& operator=(EmbeddingCurvatureMemory&&) noexcept;

  struct State;  // LBFGSpp's BFGSMat and its dimension (embedding_minimax.cc)
  State& state() { return *state_; }
  /// The pairs (in order), their dimension and the Newton hand-over flag, for
  /// a checkpoint of the solve sequence (SolveMve); Restore reads them back
  /// so that the next solve's L-BFGS is bit-identical. Restore leaves the
  /// memory unchanged and returns DATA_LOSS on malformed bytes.
  void Save(ByteWriter* w) const;
  Status Restore(ByteReader* r);

 private:
  std::unique_ptr<State> state_;
};

/// Runs the loop from α₀ = `alpha0` (projected; nullptr = 0), with the L-BFGS
/// method starting from `memory`'s curvature pairs and leaving its own there
/// (nullptr: an empty memory). Progress: one
/// event per iteration (objective = P, primal_residual = relative gap,
/// dual_residual = ‖Δα‖∞). Termination as in SolveSimpleNpkl. Errors:
/// INVALID_ARGUMENT (problem, options, alpha0 size), INTERNAL (eigensolver),
/// RESOURCE_EXHAUSTED (allocation).
///
/// Checkpoints (format "embedding_pg/1"), for a solve that is projected
/// gradient throughout (the max slack, i.e. SPE, or Method::kProjectedGradient;
/// the Newton and L-BFGS phases are not checkpointed). With control.checkpoint
/// set, the state is handed to it (CheckpointTimer) after a step that does not
/// end the run once control.checkpoint_interval_seconds of solve time have
/// passed since the start or the last checkpoint: η, the current iterate in
/// full (α, the n × r factor of K(α), z, ∇J, P, J), the Lanczos warm start and
/// the objective history. With control.ResumeFrom("embedding_pg/1") set and
/// matching, the run continues from it (stats.iterations, objective_history
/// and the progress numbering go on, stats.resumed_from_iteration =
/// checkpoint.iteration) and the result is bit-identical to the uninterrupted
/// run's. A checkpoint matches when it was taken for the same problem, start
/// α₀ and the options that shape the iterates (all but tolerance and
/// max_iterations — a fingerprint); any other checkpoint is ignored and the
/// solve starts afresh.
StatusOr<EmbeddingMinimaxResult> SolveEmbeddingMinimax(const EmbeddingMinimaxProblem& problem,
                                                       const EmbeddingMinimaxOptions& options,
                                                       const SolveControl& control = SolveControl(),
                                                       const Eigen::VectorXd* alpha0 = nullptr,
                                                       EmbeddingCurvatureMemory* memory = nullptr);

/// The absolute slack weight the solver uses: options.c, or options.c / D̄²
/// with relative_slack and the square slack (D̄ = mean target, when > 0).
double SlackWeight(const EmbeddingMinimaxProblem& problem, const EmbeddingMinimaxOptions& options);

/// Euclidean projection onto {α >= 0, Σ α <= cap} (the SPE dual set). O(m log m).
Eigen::VectorXd ProjectCappedSimplex(const Eigen::VectorXd& a, double cap);
/// The same projection in place; `scratch` is reused between calls (no
/// allocation once it has grown to a->size()).
void ProjectCappedSimplexInPlace(Eigen::VectorXd* a, double cap, std::vector<double>* scratch);

}  // namespace kls
