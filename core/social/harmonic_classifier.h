// Harmonic-function semi-supervised classification (Zhu, Ghahramani &
// Lafferty 2003, "ZGL03"), the collective classifier of thesis §7.5.3 run on a
// learned social-strength graph.
//
// Given a symmetric non-negative weight matrix W (n × n), labelled nodes l with
// one-hot targets Y_l (|l| × c) and unlabelled nodes u, the harmonic solution
// minimizes the graph energy ½ Σ_ij W_ij ‖F_i − F_j‖² with F_l = Y_l fixed:
//
//     (D_uu − W_uu) F_u = W_ul Y_l,     D = diag(W 1),
//
// so every unlabelled F_i is the W-weighted average of its neighbours (the
// harmonic property). Self-loops W_ii cancel from both sides and are ignored.
// Predictions are argmax_c F_ic, or, with class mass normalization (ZGL03 §5),
// argmax_c q_c F_ic / Σ_u F_uc with q the class proportions of the labels.
//
// Solvability: D_uu − W_uu is positive definite iff every connected component
// of the graph that contains an unlabelled node also contains a labelled one;
// otherwise the call fails with FAILED_PRECONDITION naming such a node.
// Cost: O(n²) to check and assemble, O(|u|³) for the dense Cholesky solve.
//
// Thread safety: pure function, re-entrant.
#pragma once

#include <Eigen/Core>
#include <vector>

#include "core/common/solve_control.h"
#include "core/common/status.h"

namespace kls {

struct HarmonicOptions {
  /// Use class mass normalization (ZGL03 §5) for the predicted labels.
  bool class_mass_normalization = false;
  /// Entries of W below this are treated as no edge when checking components (>= 0).
  double edge_threshold = 0.0;

  Status Validate() const;
};

struct HarmonicResult {
  Eigen::MatrixXd scores;   ///< n × c harmonic values F (rows of labelled nodes are one-hot)
  std::vector<int> labels;  ///< n predicted classes (the given class for labelled nodes)
};

/// `weights` n × n symmetric (to 1e-9 relative), non-negative, finite;
/// `labelled` distinct node indices; `labels` their classes in [0, num_classes);
/// num_classes >= 2 (0 = 1 + the largest label).
/// Errors: INVALID_ARGUMENT naming the bad field/entry; FAILED_PRECONDITION
/// when an unlabelled node cannot reach a labelled one; CANCELLED /
/// DEADLINE_EXCEEDED when `control` stops it — checked between the O(n²)
/// passes and inside the O(n³) solve every few milliseconds (spd_solve.h).
StatusOr<HarmonicResult> HarmonicClassify(const Eigen::MatrixXd& weights, const std::vector<int>& labelled,
                                          const std::vector<int>& labels, int num_classes = 0,
                                          const HarmonicOptions& options = HarmonicOptions(),
                                          const SolveControl& control = SolveControl());

}  // namespace kls
