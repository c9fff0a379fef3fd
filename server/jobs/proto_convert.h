// Conversions between the Jobs API (proto/kls/v1/jobs.proto), the store's
// JobRecord and the core solver option structs. The only place in the job
// layer where proto messages meet core types.
//
// What a JobRecord holds, as text:
//   options_json   the submitted solver options and graph spec, as the JSON of
//                  a kls.v1.SubmitJobRequest with only `graph` and the solver
//                  oneof set, proto field names kept, e.g.
//                    {"graph":{"k":7},"kl_admm":{"gamma":2,"max_iterations":50}}
//                  Unset (optional) fields are absent and take the core default.
//   progress_json  the last progress and, once the solver returned, its
//                  termination, as the JSON of a kls.v1.Job with only
//                  `progress` and `termination` set, e.g.
//                    {"progress":{"iteration":12,"objective":3.5},"termination":"converged"}
//
// Validation errors are INVALID_ARGUMENT and name the field and its value the
// way the client spelled it: "kl_admm.gamma = -1 must be positive and finite",
// "graph.k = 0 must be >= 1".
//
// Thread safety: free functions without shared state.
#pragma once

#include <limits>
#include <optional>
#include <string>
#include <variant>

#include "core/common/solve_control.h"
#include "core/common/status.h"
#include "core/data/feature_scaling.h"
#include "core/graph/connect.h"
#include "core/graph/laplacian.h"
#include "core/npkl/bcd_npkl.h"
#include "core/npkl/cross_validation.h"
#include "core/npkl/kl_admm.h"
#include "core/npkl/simple_npkl.h"
#include "core/embed/embedding.h"
#include "core/mkl/classifier_training.h"
#include "core/qsdp/qsdp_solver.h"
#include "core/qsdp/qsdp_subspace.h"
#include "core/qsdp/reg_problems.h"
#include "core/ranking/npk_ranking.h"
#include "core/social/social_model.h"
#include "kls/v1/jobs.pb.h"
#include "server/store/store.h"

namespace kls::server {

/// Method names as stored in JobRecord::method and reported in kls.v1.Job.
inline constexpr const char* kMethodKlAdmm = "kl_admm";
inline constexpr const char* kMethodBcdNpkl = "bcd_npkl";
inline constexpr const char* kMethodSimpleNpkl = "simple_npkl";
inline constexpr const char* kMethodQsdp = "qsdp";
inline constexpr const char* kMethodEmbedding = "embedding";
inline constexpr const char* kMethodOnk = "onk";
inline constexpr const char* kMethodMkl = "mkl";
inline constexpr const char* kMethodNpkRanking = "npk_ranking";
inline constexpr const char* kMethodSocialStrength = "social_strength";

/// Every method, in the order of the SubmitJobRequest oneof.
inline constexpr const char* kAllMethods[] = {kMethodKlAdmm, kMethodBcdNpkl, kMethodSimpleNpkl,
                                              kMethodQsdp,   kMethodEmbedding, kMethodOnk,
                                              kMethodMkl,    kMethodNpkRanking, kMethodSocialStrength};

/// RegPCP / RegMVU job settings (core/qsdp).
struct QsdpJobOptions {
  bool mvu = false;      ///< RegMVU (else RegPCP)
  RegPcpOptions pcp;
  RegMvuOptions mvu_options;
  QsdpSubspaceOptions solver;  ///< the interior-point / face solver (qsdp_subspace.h)
};

/// CMVU / MVE / SPE / KPCA job settings (core/embed).
struct EmbeddingJobOptions {
  enum class Method { kCmvu, kMve, kSpe, kKpca };
  Method method = Method::kSpe;
  int neighbors = 5;               ///< k of the neighbourhood graph
  double b = 0.0;                  ///< capacity B; 0 = n (the thesis's B = m·N with m = 1)
  EmbeddingMinimaxOptions inner;   ///< c, tolerance, max_iterations (b set from `b`)
  MveOptions mve;                  ///< dims
  KpcaOptions kpca;                ///< dims, kernel, rbf_sigma
};

/// NPK ranking job settings (core/ranking).
struct NpkRankingJobOptions {
  NpkRankingOptions options;
  std::string text_dataset_id;     ///< the items' tag counts, same number of rows
};

/// A job's solver settings in core terms: what solver_dispatch runs. onk and
/// mkl share ClassifierTrainingOptions (its `method` tells them apart).
struct JobSpec {
  std::string method;   ///< one of kAllMethods
  GraphOptions graph;   ///< NPKL only: defaults resolved (k = 5, weight per method, δ per method)
  std::variant<KlAdmmOptions, BcdNpklOptions, SimpleNpklOptions, QsdpJobOptions, EmbeddingJobOptions,
               ClassifierTrainingOptions, NpkRankingJobOptions, SocialStrengthOptions>
      options;
  /// Feature scaling fitted on the data set before the solver runs (never for
  /// social_strength). Unset = none for every family: each family's paper
  /// tables are reproduced on raw features (docs/SERVICE.md "Job options").
  FeatureScaling scaling = FeatureScaling::kNone;
  /// graph.connect (qsdp REGMVU; also copied into QsdpJobOptions::mvu_options).
  ConnectMode connect = ConnectMode::kMst;
  /// SubmitJobRequest.cross_validation (NPKL families only): C / γ is chosen
  /// by CrossValidate before the final learn.
  std::optional<CrossValidationOptions> cross_validation;
  /// BCDNPKL with graph.delta unset: δ = C/2 follows C, the chosen one too.
  bool delta_follows_c = false;
  /// SubmitJobRequest.warm_start (NPKL families only): the kernel to start
  /// from (version 0 = latest), resolved by the worker from the store.
  struct WarmStartRef {
    std::string kernel_name;
    int64_t version = 0;
  };
  std::optional<WarmStartRef> warm_start;
};


// ---- Solver options: proto ↔ core ------------------------------------------
// ToCore: every unset optional field keeps the core struct's in-class default.
// ToProto: sets every field (round trip ToCore(ToProto(x)) == x for the
// fields the proto mirrors).
KlAdmmOptions ToCore(const kls::v1::KlAdmmOptions& p);
BcdNpklOptions ToCore(const kls::v1::BcdNpklOptions& p);
SimpleNpklOptions ToCore(const kls::v1::SimpleNpklOptions& p);
// The other families (one direction: the stored request is the source of truth).
StatusOr<QsdpJobOptions> ToCore(const kls::v1::QsdpKernelOptions& p);
StatusOr<EmbeddingJobOptions> ToCore(const kls::v1::EmbeddingOptions& p);
StatusOr<ClassifierTrainingOptions> ToCore(const kls::v1::OnkOptions& p);
StatusOr<ClassifierTrainingOptions> ToCore(const kls::v1::MklOptions& p);
StatusOr<NpkRankingJobOptions> ToCore(const kls::v1::NpkRankingOptions& p);
StatusOr<SocialStrengthOptions> ToCore(const kls::v1::SocialStrengthOptions& p);
kls::v1::KlAdmmOptions ToProto(const KlAdmmOptions& o);
kls::v1::BcdNpklOptions ToProto(const BcdNpklOptions& o);
kls::v1::SimpleNpklOptions ToProto(const SimpleNpklOptions& o);

/// Graph settings for `method`: k defaults to 5; WEIGHT_UNSPECIFIED is
/// Gaussian for kl_admm and binary otherwise; an unset δ is 0, except for
/// bcd_npkl where it is C/2 (the BCDNPKL §4.2 protocol, which also keeps Δ_UU
/// invertible); sigma unset/0 = automatic. The k-NN search runs on one thread
/// (the worker pool already uses every core).
GraphOptions ToCoreGraph(const kls::v1::GraphSpec& spec, const std::string& method, double bcd_c);

/// Checks the graph spec fields that do not depend on the data set size
/// (k, weight, sigma, delta, connect).
Status ValidateGraphSpec(const kls::v1::GraphSpec& spec);

// ---- Submit → JobRecord ----------------------------------------------------
/// Validates the request and builds the record to persist (state queued, no
/// id). Errors (INVALID_ARGUMENT): empty dataset_id; missing solver ("solver:
/// one of kl_admm, bcd_npkl, simple_npkl is required"); a bad option, graph
/// field or deadline_seconds (named with its value).
StatusOr<store::JobRecord> JobRecordFromSubmit(const kls::v1::SubmitJobRequest& request);

/// Parses and validates a stored (method, options_json) pair into core
/// settings. INVALID_ARGUMENT for an unknown method, malformed JSON, a solver
/// oneof that does not match `method`, or an invalid field.
StatusOr<JobSpec> ParseJobSpec(const std::string& method, const std::string& options_json);

/// Checks the parts of `spec` that depend on the data set: graph k < n, ranks
/// ≤ n (INVALID_ARGUMENT), and what the method needs from it
/// (FAILED_PRECONDITION): pairwise constraints (NPKL, RegPCP), labels (CMVU,
/// onk, mkl).
Status ValidateJobSpecForDataset(const JobSpec& spec, const store::DatasetRecord& dataset);

// ---- JobRecord → kls.v1.Job ------------------------------------------------
kls::v1::JobState ToProto(store::JobState s);
/// UNSPECIFIED → nullopt-equivalent handled by ToJobFilter; others map 1:1.
StatusOr<store::JobState> ToStore(kls::v1::JobState s);
/// Copies every field; progress and termination come from progress_json
/// (a malformed progress_json is ignored: progress is advisory).
kls::v1::Job ToProtoJob(const store::JobRecord& record);

/// JSON for JobRecord::progress_json (see the file comment). `termination`
/// empty = not finished yet; `summary_json` (the kernel's, once stored) is
/// reported as Job.summary_json.
std::string ProgressJson(const ProgressEvent& event, const std::string& termination,
                         const std::string& summary_json = "");

/// ListJobsRequest → JobFilter: page_size 0 → 100, > 1000 or < 0 is
/// INVALID_ARGUMENT.
StatusOr<store::JobFilter> ToJobFilter(const kls::v1::ListJobsRequest& request);

/// A kernel's summary_json: {"method", "termination", "iterations",
/// "objective", "seconds", "setup_seconds", "primal_residual", "dual_residual",
/// …} followed by `notes`, further members the job adds (JobOutput::summary_notes:
/// ',"scaling":"zscore","graph_connect":{…}'). "duality_gap" (the certified
/// relative gap bound) is there when `duality_gap` is finite.
std::string KernelSummaryJson(const std::string& method, const SolveStats& stats, double primal_residual,
                              double dual_residual, double seconds, const std::string& notes = "",
                              double duality_gap = std::numeric_limits<double>::quiet_NaN());

}  // namespace kls::server
