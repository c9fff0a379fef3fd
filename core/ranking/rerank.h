// Query-dependent two-level social image re-ranking (thesis §6.3.4, §6.4):
// (1) text retrieval over the whole corpus by tf-idf similarity of the query
// and each image's tags (QueryScores, text_kernel.h) picks a candidate set
// (TopCandidates); (2) VisualRank (visual_rank.h) with some kernel on the
// candidates re-orders them (ReRankCandidates for a learned kernel). The
// kernels compared in Table 6.3: raw (no re-ranking), text (linear kernel of
// tf-idf tags, text_kernel.h), linear, polynomial, RBF on visual features
// (parametric_kernels.h), and NPK (npk_ranking.h). The evaluation protocol
// (Top-N accuracy, query splits, validation choice) is ranking_protocol.h.
#pragma once

#include <Eigen/Core>
#include <vector>

#include "core/common/status.h"
#include "core/model/learned_kernel.h"
#include "core/ranking/visual_rank.h"

namespace kls {

/// Query-time re-ranking (the second level of §6.3's two-level scheme):
/// VisualRank (§6.2) on the learned kernel restricted to `candidates`, K_c =
/// V_c V_cᵀ shifted to be non-negative (K_c − min K_c when min K_c < 0, so the
/// walk follows relative similarity), with `prior` (one >= 0 value per
/// candidate, e.g. the text scores; empty = uniform). Returns the candidates
/// (their item indices) by descending score, ties by position in the list.
/// Errors: an index out of range, a duplicate candidate, a bad prior or bad
/// options (INVALID_ARGUMENT naming the field); CANCELLED /
/// DEADLINE_EXCEEDED when `control` stops the power iteration (checked every
/// iteration). O(c² r + c² · iterations).
StatusOr<std::vector<ScoredItem>> ReRankCandidates(const LearnedKernel& kernel, const std::vector<int>& candidates,
                                                   const Eigen::VectorXd& prior, const VisualRankOptions& options,
                                                   int* iterations = nullptr,
                                                   const SolveControl& control = SolveControl());

/// Up to `count` indices with score > 0, by descending score, ties by smaller index.
std::vector<int> TopCandidates(const Eigen::VectorXd& scores, int count);

}  // namespace kls
