#include "server/jobs/solver_dispatch.h"

#include <Eigen/SparseCore>
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>

#include "core/common/json_text.h"
#include "core/graph/laplacian.h"
#include "core/npkl/baseline_guard.h"

namespace kls::server {
namespace {

// The warm start's factor: the stored kernel's embedding, which must come
// from a data set with this data set's features.
StatusOr<std::shared_ptr<const Eigen::MatrixXd>> ResolveWarmStart(const JobSpec& spec,
                                                                  const store::StoredDataset& data,
                                                                  store::Store* store) {
  if (!spec.warm_start) return std::shared_ptr<const Eigen::MatrixXd>();
  const std::string field = "warm_start.kernel_name = \"" + spec.warm_start->kernel_name + "\"" +
                            (spec.warm_start->version ? " version " + std::to_string(spec.warm_start->version) : "");
  StatusOr<store::KernelRecord> record = store->GetKernelRecord(spec.warm_start->kernel_name, spec.warm_start->version);
  if (!record.ok()) {
    return Status(record.status().code(), field + ": " + record.status().message());
  }
  const Eigen::MatrixXd& x = data.data.features;
  if (record->num_points != x.rows()) {
    return InvalidArgumentError(field + " has " + std::to_string(record->num_points) + " points, the data set " +
                                std::to_string(x.rows()));
  }
  StatusOr<store::StoredDataset> base = store->LoadDataset(record->dataset_id);
  if (!base.ok()) return Status(base.status().code(), field + ": its data set: " + base.status().message());
  if (base->data.features.rows() != x.rows() || base->data.features.cols() != x.cols() ||
      base->data.features != x) {
    return InvalidArgumentError(field + " was learned on data set \"" + record->dataset_id +
                                "\", whose features differ from this data set's (warm starts need the same "
                                "features; kls upload --append-constraints shares them)");
  }
  KLS_ASSIGN_OR_RETURN(LearnedKernel k, store->LoadKernel(record->name, record->version));
  return std::make_shared<const Eigen::MatrixXd>(k.embedding());
}

// The baseline guard (core/npkl/baseline_guard.h): the learned kernel's
// held-out score against the plain linear and RBF kernels' and the job
// graph's diffusion kernel's. With
// cross-validation, on its folds, from the chosen value's fold scores (free);
// without, one more learn with the job's options on four fifths of the pairs
// (stratified, seed 1), scored on the fifth left out — up to
// kGuardMaxPoints points, where that learn costs seconds; above, skipped with
// the reason (cross_validation gives the guard for free). The guard never
// fails a job that learned: its own errors, and a deadline that passes (the
// job keeps its kernel), land in the summary; a cancellation drops the guard.
constexpr int kGuardFolds = 5;

constexpr int kGuardMaxPoints = 20000;

StatusOr<std::string> BaselineGuardNotes(const JobSpec& spec, const store::StoredDataset& data,
                                         const NpklProblem& problem, std::optional<double> chosen,
                                         const std::shared_ptr<const Eigen::MatrixXd>& warm, const JobOutput& out,
                                         const SolveControl& control) {
  const int n = static_cast<int>(data.data.features.rows());
  auto skipped = [](const std::string& why) { return ",\"baseline_guard\":{\"skipped\":\"" + why + "\"}"; };
  // A job stopped by its deadline keeps its best iterate and has no time
  // left for the guard; a cancelled one goes on as it did without a guard
  // (the job manager sees the cancellation), with no guard in its summary.
  Termination why;
  if (out.stats.termination == Termination::kCancelled || (control.ShouldStop(&why) && why == Termination::kCancelled)) {
    return std::string();
  }
  if (out.stats.termination == Termination::kTimeLimit || control.ShouldStop(&why)) {
    return skipped("the job's deadline passed before the guard could run");
  }
  const SolveControl inner = control.StopConditions();  // no progress, checkpoints or resume
  BaselineGuardOptions options;
  options.laplacian = &problem.laplacian;  // the graph's diffusion kernel on the job's own graph
  std::vector<int> fold, evaluated;
  std::vector<double> learned;
  int folds = kGuardFolds;
  if (out.cross_validation) {
    const CrossValidationOptions& cv = *spec.cross_validation;
    options.clusters = cv.clusters;
    folds = cv.folds;
    KLS_ASSIGN_OR_RETURN(fold, AssignPairFolds(data.constraints, cv.folds, cv.seed));
    for (int f = 0; f < cv.folds; ++f) evaluated.push_back(f);
    learned = out.cross_validation->candidates[out.cross_validation->best_index].fold_scores;
  } else {
    if (n > kGuardMaxPoints) {
      return skipped(std::to_string(n) + " points > " + std::to_string(kGuardMaxPoints) +
                     ": the guard's extra learn is left out; cross_validation scores the plain kernels for free");
    }
    StatusOr<std::vector<int>> assigned = AssignPairFolds(data.constraints, kGuardFolds, 1);
    if (!assigned.ok()) return skipped("fewer than " + std::to_string(kGuardFolds) + " pairs i != j to hold out");
    fold = *std::move(assigned);
    PairwiseConstraints train, test;
    for (size_t t = 0; t < fold.size(); ++t) (fold[t] == 0 ? test : train).pairs.push_back(data.constraints.pairs[t]);
    StatusOr<NpklResult> r =
        spec.family->RunWithWeight(spec, NpklProblem{problem.laplacian, train}, chosen, false, warm, inner);
    if (!r.ok()) {
      if (r.status().code() == StatusCode::kCancelled) return std::string();
      return skipped("the held-out learn failed: " + JsonEscaped(r.status().ToString()));
    }
    if (r->stats.termination == Termination::kCancelled) return std::string();
    if (r->stats.termination == Termination::kTimeLimit) {
      return skipped("the job's deadline passed during the guard's held-out learn");
    }
    evaluated = {0};
    learned = {HeldOutPairAccuracy(r->kernel, train, test)};
  }
  StatusOr<BaselineGuardResult> g =
      RunBaselineGuard(data.data.features, data.constraints, fold, folds, evaluated, learned, options, inner);
  if (!g.ok()) {
    if (g.status().code() == StatusCode::kCancelled) return std::string();
    return skipped(JsonEscaped(g.status().ToString()));
  }
  return ",\"baseline_guard\":" + g->Json() + ",\"baseline_guard_note\":\"" + JsonEscaped(g->note) + "\"";
}

}  // namespace

StatusOr<Eigen::SparseMatrix<double>> PairwiseLaplacian(const JobSpec& spec, const store::StoredDataset& data,
                                                        std::optional<double> value, std::string* graph_json) {
  GraphOptions g = spec.graph;
  if (spec.delta_follows_c && value) g.delta = *value / 2.0;  // BCDNPKL's default δ = C/2 follows the value tried
  KLS_ASSIGN_OR_RETURN(Graph graph, BuildGraph(data.data.features, g));
  if (graph_json) {
    *graph_json = std::string("{\"search\":\"") + KnnMethodName(graph.knn_method) + "\",\"k\":" +
                  std::to_string(g.k) + ",\"knn_seconds\":" + JsonNumber(graph.knn_seconds);
    if (graph.recall.sample > 0) {
      *graph_json += ",\"recall\":" + JsonNumber(graph.recall.recall) + ",\"min_recall\":" +
                     JsonNumber(graph.recall.min_recall) + ",\"recall_sample\":" + std::to_string(graph.recall.sample);
    }
    if (graph.ivf.cells > 0) {
      *graph_json += ",\"cells\":" + std::to_string(graph.ivf.cells) + ",\"probes\":" + std::to_string(graph.ivf.probes);
    }
    *graph_json += "}";
  }
  return std::move(graph.laplacian);
}

StatusOr<LearnKernelFn> PairwiseLearner(const JobSpec& spec, const store::StoredDataset& data,
                                        const std::vector<double>& grid, bool single_thread,
                                        std::shared_ptr<const Eigen::MatrixXd> warm) {
  if (!spec.family->traits().pairwise) return InternalError(spec.method + " is not a pairwise family");
  // One Laplacian per grid value when δ follows C, else one for all.
  auto laplacians = std::make_shared<std::vector<std::pair<double, Eigen::SparseMatrix<double>>>>();
  for (double v : grid) {
    KLS_ASSIGN_OR_RETURN(Eigen::SparseMatrix<double> l, PairwiseLaplacian(spec, data, v));
    laplacians->emplace_back(v, std::move(l));
    if (!spec.delta_follows_c) break;
  }
  if (laplacians->empty()) return InvalidArgumentError("cross-validation grid is empty");
  return LearnKernelFn([spec, laplacians, single_thread, warm](const PairwiseConstraints& train, double value,
                                                               const SolveControl& c) -> StatusOr<LearnedKernel> {
    const Eigen::SparseMatrix<double>* l = &laplacians->front().second;
    for (const auto& [v, m] : *laplacians)
      if (v == value) l = &m;
    KLS_ASSIGN_OR_RETURN(NpklResult r,
                         spec.family->RunWithWeight(spec, NpklProblem{*l, train}, value, single_thread, warm, c));
    return std::move(r.kernel);
  });
}

namespace {

// A pairwise (NPKL) family's job: the graph Laplacian, the loss weight
// chosen by cross-validation when asked, then the final learn.
StatusOr<JobOutput> RunPairwise(const JobSpec& spec, const store::StoredDataset& data, store::Store* store,
                                const SolveControl& control) {
  const SolverFamily& family = *spec.family;
  if (data.constraints.size() == 0) {
    return FailedPreconditionError("the data set has no pairwise constraints; " + spec.method +
                                   " learns from must-link / cannot-link pairs, upload some first");
  }
  KLS_ASSIGN_OR_RETURN(std::shared_ptr<const Eigen::MatrixXd> warm, ResolveWarmStart(spec, data, store));
  JobOutput out;
  std::optional<double> chosen;
  if (spec.cross_validation) {
    const CrossValidationOptions& cv = *spec.cross_validation;
    KLS_ASSIGN_OR_RETURN(LearnKernelFn learn, PairwiseLearner(spec, data, cv.grid, cv.num_threads != 1, warm));
    KLS_ASSIGN_OR_RETURN(CrossValidationResult r, CrossValidate(data.constraints, learn, cv, control));
    chosen = r.best_value;
    out.cross_validation = std::move(r);
  }
  NpklProblem problem;
  std::string graph_json;
  KLS_ASSIGN_OR_RETURN(problem.laplacian, PairwiseLaplacian(spec, data, chosen, &graph_json));
  out.summary_notes += ",\"graph\":" + graph_json;
  problem.constraints = data.constraints;
  KLS_ASSIGN_OR_RETURN(NpklResult r, family.RunWithWeight(spec, problem, chosen, false, warm, control));
  out.kernel = std::move(r.kernel);
  out.stats = r.stats;
  if (out.cross_validation) out.stats.setup_seconds += out.cross_validation->seconds;
  out.primal_residual = r.primal_residual;
  out.dual_residual = r.dual_residual;
  out.certificate = r.stats.certificate;
  if (spec.baseline_guard) {
    KLS_ASSIGN_OR_RETURN(std::string guard, BaselineGuardNotes(spec, data, problem, chosen, warm, out, control));
    out.summary_notes += guard;
  }
  return out;
}

// Unscaled features whose column ranges differ by more than this get a hint in the summary.
constexpr double kHintRangeRatio = 100.0;

// The summary members every job adds: for feature-based families the scaling
// used and the unscaled-range hint; what the connectivity check found or
// added; the cross-validation table; the warm start.
std::string SummaryNotes(const JobSpec& spec, const Eigen::MatrixXd& raw, const JobOutput& out) {
  std::string notes;
  if (spec.family->traits().uses_features) {
    notes += ",\"scaling\":\"" + std::string(FeatureScalingName(spec.scaling)) + "\"";
    const double ratio = spec.scaling == FeatureScaling::kNone ? FeatureRangeRatio(raw) : 1.0;
    if (ratio > kHintRangeRatio) {
      char buf[200];
      std::snprintf(buf, sizeof(buf),
                    ",\"feature_range_ratio\":%.6g,\"hint\":\"feature ranges differ by %.3gx, so the widest "
                    "features dominate distances; consider scaling ZSCORE (kls submit --scaling zscore)\"",
                    ratio, ratio);
      notes += buf;
    }
  }
  notes += ",\"certificate\":" + out.certificate.Json();
  if (out.connect) notes += ",\"graph_connect\":" + out.connect->Json();
  if (out.cross_validation) notes += ",\"cross_validation\":" + out.cross_validation->Json();
  if (spec.warm_start) {
    notes += ",\"warm_start\":{\"kernel_name\":\"" + spec.warm_start->kernel_name +
             "\",\"version\":" + std::to_string(spec.warm_start->version) + "}";
  }
  return notes;
}

}  // namespace

StatusOr<JobOutput> RunSolverJob(const JobSpec& spec, const store::StoredDataset& data, store::Store* store,
                                 const SolveControl& control) {
  if (spec.family == nullptr) return InternalError("job spec without a family (method \"" + spec.method + "\")");
  return GuardExceptions("job", [&]() -> StatusOr<JobOutput> {
    if (spec.family->traits().meta) return spec.family->Run(spec, data, store, control);  // complete as it is
    std::optional<FeatureScaler> scaler;
    std::optional<store::StoredDataset> scaled;
    if (spec.scaling != FeatureScaling::kNone && spec.family->traits().uses_features) {
      KLS_ASSIGN_OR_RETURN(scaler, FeatureScaler::Fit(data.data.features, spec.scaling));
      scaled = data;
      KLS_ASSIGN_OR_RETURN(scaled->data.features, scaler->Apply(data.data.features));
    }
    const store::StoredDataset& input = scaled ? *scaled : data;
    KLS_ASSIGN_OR_RETURN(JobOutput out, spec.family->traits().pairwise ? RunPairwise(spec, input, store, control)
                                                                       : spec.family->Run(spec, input, store, control));
    if (scaler && out.kernel.num_points() > 0) {
      out.attachments.push_back({kFeatureScalingAttachment, scaler->Serialize()});
    }
    out.summary_notes = SummaryNotes(spec, data.data.features, out) + out.summary_notes;
    return out;
  });
}

}  // namespace kls::server
