// Runs one job in core terms: data set → the JobSpec's solver family
// (solver_family.h) → a JobOutput (the factored kernel to store, plus
// attachments such as a classifier or a social graph). Generic: the feature
// scaling, the pairwise families' cross-validation and warm starts, and the
// summary notes are done here for every family. The JobManager calls it on a
// worker thread with the job's SolveControl (cancellation token, deadline,
// progress sink).
#pragma once

#include <limits>
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

}  // namespace kls::server
