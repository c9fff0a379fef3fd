// Runs one NPKL job in core terms: data set → k-NN graph Laplacian →
// NpklProblem → the solver named by the JobSpec. No threads, no store, no
// protobuf: the JobManager calls it on a worker thread with the job's
// SolveControl (cancellation token, deadline, progress sink).
#pragma once

#include "core/common/solve_control.h"
#include "core/common/status.h"
#include "core/npkl/npkl_problem.h"
#include "server/jobs/proto_convert.h"
#include "server/store/store.h"

namespace kls::server {

/// Builds the graph from `data.data.features` with `spec.graph`, pairs it with
/// `data.constraints`, and runs the solver. Outcomes (converged, iteration
/// cap, time limit, cancelled, numerical issue) are in result.stats.termination.
/// Errors: FAILED_PRECONDITION when the data set has no pairwise constraints;
/// whatever BuildGraph or the solver return (INVALID_ARGUMENT, ...). When the
/// control is cancelled or past its deadline before the solver starts, the
/// solver itself reports it on entry.
/// Cost: one k-NN search (O(n² d) brute force) plus the solver's.
StatusOr<NpklResult> RunNpklJob(const JobSpec& spec, const store::StoredDataset& data,
                                const SolveControl& control);

}  // namespace kls::server
