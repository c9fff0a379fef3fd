// Runs one job in core terms: data set → the solver family named by the
// JobSpec → a JobOutput (the factored kernel to store, plus attachments such
// as a classifier or a social graph). No threads, no protobuf: the
// JobManager calls it on a worker thread with the job's SolveControl
// (cancellation token, deadline, progress sink).
//
// Adding a solver family: a proto options message in the SubmitJobRequest
// oneof, its ToCore in proto_convert.cc, a JobSpec variant alternative, and a
// Run* case here. Nothing else in the job layer changes.
#pragma once

#include <limits>
#include <optional>
#include <vector>

#include "core/common/solve_control.h"
#include "core/common/status.h"
#include "core/model/learned_kernel.h"
#include "server/jobs/proto_convert.h"
#include "server/store/store.h"

namespace kls::server {

/// Attachment names (server/store/store.h Attachment) and their encodings.
inline constexpr const char* kClassifierAttachment = "classifier";     ///< SerializeClassifier
inline constexpr const char* kSocialGraphAttachment = "social_graph";  ///< SerializeSocialGraph
inline constexpr const char* kSocialKlrAttachment = "social_klr";      ///< SerializePairwiseKlrModel
/// The job's feature scaling statistics (FeatureScaler::Serialize, versioned);
/// stored only when the scaling is not none. Absent = identity.
inline constexpr const char* kFeatureScalingAttachment = "feature_scaling";

/// What a finished job stores.
struct JobOutput {
  LearnedKernel kernel;
  std::vector<store::Attachment> attachments;
  SolveStats stats;              ///< termination, iterations, objective, timings
  double primal_residual = 0.0;  ///< solver-specific certificate (see KernelSummaryJson callers)
  double dual_residual = 0.0;
  /// The certified relative gap bound of the solution (NpklResult::duality_gap:
  /// KL-ADMM's and BCDNPKL's Burer–Monteiro bound, SimpleNPKL's duality gap);
  /// NaN where the family has none.
  double duality_gap = std::numeric_limits<double>::quiet_NaN();
  std::optional<ConnectReport> connect;  ///< graph connectivity check / repair (qsdp REGMVU)
  std::optional<CrossValidationResult> cross_validation;  ///< C / γ chosen by cross-validation (NPKL)
  /// Further members of the kernel's summary_json (KernelSummaryJson notes):
  /// the scaling used, a hint when unscaled feature ranges differ by > 100×,
  /// and graph_connect (ConnectReport::Json).
  std::string summary_notes;
};

/// Runs `spec` on `data`, with the features scaled per spec.scaling first
/// (the statistics become the kFeatureScalingAttachment). `store` is used only to load a second data set
/// (npk_ranking's text_dataset_id). Outcomes (converged, iteration cap, time
/// limit, cancelled, numerical issue) are in result.stats.termination; a
/// cancelled run's kernel is empty. Errors: FAILED_PRECONDITION when the data
/// set lacks what the method needs (constraints, labels, social records);
/// INVALID_ARGUMENT / others from the solvers.
/// Cost: the solver's (see each core header).
StatusOr<JobOutput> RunSolverJob(const JobSpec& spec, const store::StoredDataset& data, store::Store* store,
                                 const SolveControl& control);

}  // namespace kls::server
