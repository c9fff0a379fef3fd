// Runs one job in core terms: data set → the JobSpec's solver family
// (solver_family.h) → a JobOutput (the factored kernel to store, plus
// attachments such as a classifier or a social graph). Generic: the feature
// scaling, the pairwise families' cross-validation and warm starts, and the
// summary notes are done here for every family. The JobManager calls it on a
// worker thread with the job's SolveControl (cancellation token, deadline,
// progress sink).
#pragma once

#include <Eigen/SparseCore>
#include <limits>
#include <memory>
#include <optional>
#include <vector>

#include "core/common/solve_control.h"
#include "core/common/status.h"
#include "core/model/learned_kernel.h"
#include "core/serving/kernel_servable.h"  // the attachment names
#include "server/jobs/solver_family.h"
#include "server/store/store.h"

namespace kls::server {

/// Runs `spec` on `data`, with the features scaled per spec.scaling first
/// (the statistics become the kFeatureScalingAttachment). `store` serves the
/// family's further reads (a second data set, a warm-start kernel). Outcomes (converged, iteration cap, time
/// limit, cancelled, numerical issue) are in result.stats.termination; a
/// cancelled run's kernel is empty. Errors: FAILED_PRECONDITION when the data
/// set lacks what the method needs (constraints, labels, social records);
/// INVALID_ARGUMENT / others from the solvers.
/// Cost: the solver's (see each core header).
StatusOr<JobOutput> RunSolverJob(const JobSpec& spec, const store::StoredDataset& data, store::Store* store,
                                 const SolveControl& control);

/// A pairwise spec's graph Laplacian over `data`'s (scaled) features, with
/// δ = value / 2 when δ follows C and `value` is set. `graph_json`, when
/// given, receives the summary's graph member: {"search", "k", "knn_seconds"}
/// and, for an approximate search, "recall", "min_recall", "recall_sample".
StatusOr<Eigen::SparseMatrix<double>> PairwiseLaplacian(const JobSpec& spec, const store::StoredDataset& data,
                                                        std::optional<double> value, std::string* graph_json = nullptr);

/// A pairwise spec's learner for CrossValidate: learn(train, value) runs the
/// family with loss weight `value` on `train` over the graph of `data`'s
/// features (the Laplacians of the `grid` values built now: one per value when
/// δ follows C, else one), from `warm` (may be null), one thread per learn
/// when `single_thread`. The learner keeps copies of what it needs.
StatusOr<LearnKernelFn> PairwiseLearner(const JobSpec& spec, const store::StoredDataset& data,
                                        const std::vector<double>& grid, bool single_thread,
                                        std::shared_ptr<const Eigen::MatrixXd> warm);

}  // namespace kls::server
