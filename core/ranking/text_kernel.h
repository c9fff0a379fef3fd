// Tag-text scores of the social image re-ranking experiments (thesis §6.3.4,
// §6.4.3): normalized tf-idf rows of the image × tag matrix, the text kernel
// K_t = T Tᵀ (the "text" kernel of Table 6.3, and the K_t that NPK ranking
// aligns with, npk_ranking.h), and the raw text score of every image for a
// single-tag query, from which the first re-ranking level picks its
// candidates (rerank.h).
#pragma once

#include <Eigen/Core>
#include <Eigen/SparseCore>

#include "core/common/status.h"

namespace kls {

/// Normalized tf-idf rows (§6.4.3): t_ij = δ_ij idf_j / ‖δ_i idf‖₂ with
/// idf_j = log(n / r_j), r_j = images tagged with j. (The thesis prints
/// idf_j = log(r_j), which would weight frequent tags up; the standard
/// inverse form is used.) An image with no tags keeps a zero row.
/// `tags`: n × V, non-zero = tagged. Errors: empty matrix, negative entries.
StatusOr<Eigen::SparseMatrix<double, Eigen::RowMajor>> TfIdf(const Eigen::SparseMatrix<double>& tags);

/// The text kernel of NPK ranking (§6.4.3): K_t = T Tᵀ, the cosine of the
/// normalized tf-idf rows T of the n × V tag counts. Errors: empty matrix,
/// negative counts. Cost: O(n² V) dense.
StatusOr<Eigen::MatrixXd> TextKernel(const Eigen::MatrixXd& counts);

/// Raw text score of every image for a single-tag query: cos(q, t_i) = t_i[tag].
/// Errors: tag outside [0, V).
StatusOr<Eigen::VectorXd> QueryScores(const Eigen::SparseMatrix<double, Eigen::RowMajor>& tfidf, int tag);

}  // namespace kls
