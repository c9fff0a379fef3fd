// Conversions between the Jobs API (proto/kls/v1/jobs.proto), the store's
// JobRecord and the core solver option structs. The only place in the job
// layer where proto messages meet core types.
//
// What a JobRecord holds, as text:
//   options_json   the submitted solver options and graph spec, as the JSON of
//                  a kls.v1.SubmitJobRequest with only `graph` and the solver
//                  oneof set, proto field names kept, e.g.
//                    {"graph":{"k":7},"<family>":{"<field>":2,"max_iterations":50}}
//                  Unset (optional) fields are absent and take the core default.
//   progress_json  the last progress and, once the solver returned, its
//                  termination, as the JSON of a kls.v1.Job with only
//                  `progress` and `termination` set, e.g.
//                    {"progress":{"iteration":12,"objective":3.5},"termination":"converged"}
//                  and, once the kernel is stored, `summary_json` (the
//                  kernel's, with its "convergence" history: convergence_history.h)
//
// Validation errors are INVALID_ARGUMENT and name the field and its value the
// way the client spelled it: "<family>.<field> = -1 must be positive and finite",
// "graph.k = 0 must be >= 1".
//
// Thread safety: free functions without shared state.
#pragma once

#include <limits>
#include <optional>
#include <string>

#include "core/common/solve_control.h"
#include "core/common/status.h"
#include "core/graph/laplacian.h"
#include "kls/v1/jobs.pb.h"
#include "server/jobs/solver_family.h"
#include "server/store/store.h"

namespace kls::server {

/// Graph settings for the family `method`: k defaults to 5; WEIGHT_UNSPECIFIED
/// is the family's Traits::default_weight; an unset δ is 0, except for
/// families with Traits::delta_follows_c, where it is c/2 (BCDNPKL's §4.2
/// protocol, which also keeps Δ_UU invertible); sigma unset/0 = automatic.
/// The k-NN search runs on one thread (the worker pool already uses every
/// core); SpecFromRequest then gives it the solver's `num_threads` when the
/// family has one (kl_admm, simple_npkl: 0 = all cores) — the same graph, sooner.
GraphOptions ToCoreGraph(const kls::v1::GraphSpec& spec, const std::string& method, double c);

/// Checks the graph spec fields that do not depend on the data set size
/// (k, weight, sigma, delta, connect).
Status ValidateGraphSpec(const kls::v1::GraphSpec& spec);

// ---- Submit → JobRecord ----------------------------------------------------
/// Validates the request and builds the record to persist (state queued, no
/// id). The solver oneof picks the family from the registry
/// (solver_family.h). Errors (INVALID_ARGUMENT): empty dataset_id; missing
/// solver ("solver: one of <the oneof's families> is required"); a
/// family_options type no registered family has; a bad option, graph field
/// or deadline_seconds (named with its value).
StatusOr<store::JobRecord> JobRecordFromSubmit(const kls::v1::SubmitJobRequest& request);

/// Validates the solver, graph and job-level options of `request` and returns
/// the core spec (the family's options converted and validated, the graph
/// resolved for the family). Errors: INVALID_ARGUMENT naming the field.
StatusOr<JobSpec> SpecFromRequest(const kls::v1::SubmitJobRequest& request);

/// Parses and validates a stored (method, options_json) pair into core
/// settings. INVALID_ARGUMENT for a method no registered family has, malformed JSON, a solver
/// oneof that does not match `method`, or an invalid field.
StatusOr<JobSpec> ParseJobSpec(const std::string& method, const std::string& options_json);

/// Checks the parts of `spec` that depend on the data set: for pairwise
/// families the constraints (FAILED_PRECONDITION) and graph k < n, then the
/// family's own SolverFamily::CheckDataset (ranks ≤ n, labels, a second data
/// set read through `store`).
Status ValidateJobSpecForDataset(const JobSpec& spec, const store::DatasetRecord& dataset, store::Store* store);

// ---- JobRecord → kls.v1.Job ------------------------------------------------
kls::v1::JobState ToProto(store::JobState s);
/// UNSPECIFIED → nullopt-equivalent handled by ToJobFilter; others map 1:1.
StatusOr<store::JobState> ToStore(kls::v1::JobState s);
/// Copies every field; progress and termination come from progress_json
/// (a malformed progress_json is ignored: progress is advisory). The
/// summary's "convergence" member is left out (Jobs.History serves it).
kls::v1::Job ToProtoJob(const store::JobRecord& record);

/// What a stored job record tells of its convergence: the history stored in
/// its summary (a job that succeeded; convergence_history.h), else its last
/// progress (one point), else nothing (a queued job).
std::vector<ProgressEvent> StoredHistory(const store::JobRecord& record);

/// ProgressEvent → kls.v1.Progress (non-finite values as 0, as in progress_json;
/// gap and step left unset when not finite).
void ToProto(const ProgressEvent& event, kls::v1::Progress* progress);

/// JSON for JobRecord::progress_json (see the file comment). `termination`
/// empty = not finished yet; `summary_json` (the kernel's, once stored) is
/// reported as Job.summary_json.
std::string ProgressJson(const ProgressEvent& event, const std::string& termination,
                         const std::string& summary_json = "");

/// The "certificate" member of a kernel's summary_json (JobOutput::certificate)
/// as the API message; nullopt when the summary has none (imported kernels,
/// kernels stored before it existed) or is malformed.
std::optional<kls::v1::Certificate> CertificateFromSummary(const std::string& summary_json);

/// ListJobsRequest → JobFilter: page_size 0 → 100, > 1000 or < 0 is
/// INVALID_ARGUMENT.
StatusOr<store::JobFilter> ToJobFilter(const kls::v1::ListJobsRequest& request);

/// A kernel's summary_json: {"method", "termination", "iterations",
/// "objective", "seconds", "setup_seconds", "primal_residual", "dual_residual",
/// …} followed by `notes`, further members the job adds (JobOutput::summary_notes:
/// ',"scaling":"zscore","graph_connect":{…}'). The optimality certificate is
/// one of those notes, "certificate" (Certificate::Json), and nowhere else.
std::string KernelSummaryJson(const std::string& method, const SolveReport& stats, double primal_residual,
                              double dual_residual, double seconds, const std::string& notes = "");

}  // namespace kls::server
