#include "server/jobs/solver_dispatch.h"

#include <Eigen/Eigenvalues>
#include <Eigen/SparseCore>
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <type_traits>
#include <variant>

#include "core/graph/laplacian.h"
#include "core/ranking/rerank.h"

namespace kls::server {
namespace {

bool Stopped(const SolveStats& stats) { return stats.termination == Termination::kCancelled; }

// One learn of the job's NPKL family. `value` (when set) replaces C / γ,
// `single_thread` caps the solver at one thread (cross-validation runs its
// learns in parallel instead), `warm` is the initial factor (may be null).
StatusOr<NpklResult> SolveNpklFamily(const JobSpec& spec, const NpklProblem& problem, std::optional<double> value,
                                     bool single_thread, const std::shared_ptr<const Eigen::MatrixXd>& warm,
                                     const SolveControl& control) {
  return std::visit(
      [&](auto options) -> StatusOr<NpklResult> {
        using T = std::decay_t<decltype(options)>;
        if constexpr (std::is_same_v<T, KlAdmmOptions>) {
          if (value) options.gamma = *value;
          if (single_thread) options.num_threads = 1;
          options.initial_factor = warm;
          return SolveKlAdmm(problem, options, control);
        } else if constexpr (std::is_same_v<T, BcdNpklOptions>) {
          if (value) options.c = *value;
          if (single_thread) options.num_threads = 1;
          options.initial_factor = warm;
          return SolveBcdNpkl(problem, options, control);
        } else if constexpr (std::is_same_v<T, SimpleNpklOptions>) {
          if (value) options.c = *value;
          if (single_thread) options.num_threads = 1;
          options.initial_factor = warm;
          return SolveSimpleNpkl(problem, options, control);
        } else {
          return InternalError("RunNpkl called for " + spec.method);
        }
      },
      spec.options);
}

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

StatusOr<JobOutput> RunNpkl(const JobSpec& spec, const store::StoredDataset& data, store::Store* store,
                            const SolveControl& control) {
  if (data.constraints.size() == 0) {
    return FailedPreconditionError("the data set has no pairwise constraints; " + spec.method +
                                   " learns from must-link / cannot-link pairs, upload some first");
  }
  KLS_ASSIGN_OR_RETURN(std::shared_ptr<const Eigen::MatrixXd> warm, ResolveWarmStart(spec, data, store));
  // BCDNPKL's default δ = C/2 follows the value being tried.
  auto laplacian = [&](std::optional<double> value) -> StatusOr<Eigen::SparseMatrix<double>> {
    GraphOptions g = spec.graph;
    if (spec.delta_follows_c && value) g.delta = *value / 2.0;
    KLS_ASSIGN_OR_RETURN(Graph graph, BuildGraph(data.data.features, g));
    return std::move(graph.laplacian);
  };
  JobOutput out;
  std::optional<double> chosen;
  if (spec.cross_validation) {
    const CrossValidationOptions& cv = *spec.cross_validation;
    std::vector<std::pair<double, NpklProblem>> problems;  // one per grid value (δ may differ)
    for (double v : cv.grid) {
      KLS_ASSIGN_OR_RETURN(Eigen::SparseMatrix<double> l, laplacian(v));
      problems.push_back({v, NpklProblem{std::move(l), PairwiseConstraints()}});
      if (!spec.delta_follows_c) break;  // the same Laplacian for every value
    }
    LearnKernelFn learn = [&](const PairwiseConstraints& train, double value,
                              const SolveControl& c) -> StatusOr<LearnedKernel> {
      const NpklProblem* base = &problems.front().second;
      for (const auto& [v, p] : problems)
        if (v == value) base = &p;
      KLS_ASSIGN_OR_RETURN(NpklResult r, SolveNpklFamily(spec, NpklProblem{base->laplacian, train}, value,
                                                         cv.num_threads != 1, warm, c));
      return std::move(r.kernel);
    };
    KLS_ASSIGN_OR_RETURN(CrossValidationResult r, CrossValidate(data.constraints, learn, cv, control));
    chosen = r.best_value;
    out.cross_validation = std::move(r);
  }
  NpklProblem problem;
  KLS_ASSIGN_OR_RETURN(problem.laplacian, laplacian(chosen));
  problem.constraints = data.constraints;
  KLS_ASSIGN_OR_RETURN(NpklResult r, SolveNpklFamily(spec, problem, chosen, false, warm, control));
  out.kernel = std::move(r.kernel);
  out.stats = r.stats;
  if (out.cross_validation) out.stats.setup_seconds += out.cross_validation->seconds;
  out.primal_residual = r.primal_residual;
  out.dual_residual = r.dual_residual;
  out.duality_gap = r.duality_gap;
  return out;
}

// K = Q Y Qᵀ as a factor V = Q U Λ₊^{1/2} (Y = U Λ Uᵀ, m × m).
StatusOr<LearnedKernel> FactorQyq(const Eigen::MatrixXd& q, const Eigen::MatrixXd& y) {
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(0.5 * (y + y.transpose()));
  if (eig.info() != Eigen::Success) return InternalError("eigendecomposition of Y failed");
  const Eigen::VectorXd& lambda = eig.eigenvalues();
  const double top = lambda.size() ? lambda.maxCoeff() : 0.0;
  std::vector<int> keep;
  for (int i = static_cast<int>(lambda.size()) - 1; i >= 0; --i)
    if (lambda[i] > 1e-12 * std::max(top, 1e-300)) keep.push_back(i);
  if (keep.empty()) keep.push_back(static_cast<int>(lambda.size()) - 1);  // Y = 0: a zero kernel of rank 1
  LearnedKernel::Embedding v(q.rows(), static_cast<Eigen::Index>(keep.size()));
  for (size_t c = 0; c < keep.size(); ++c) {
    v.col(c) = q * eig.eigenvectors().col(keep[c]) * std::sqrt(std::max(0.0, lambda[keep[c]]));
  }
  return LearnedKernel::FromEmbedding(std::move(v));
}

StatusOr<JobOutput> RunQsdp(const QsdpJobOptions& o, const store::StoredDataset& data, const SolveControl& control) {
  const Eigen::MatrixXd& x = data.data.features;
  StatusOr<RegularizedKernelProblem> problem = InvalidArgumentError("unset");
  if (o.mvu) {
    problem = BuildRegMvu(x, o.mvu_options);
  } else {
    if (data.constraints.size() == 0) {
      return FailedPreconditionError("the data set has no pairwise constraints; qsdp REGPCP needs them");
    }
    RegPcpOptions p = o.pcp;
    p.sigma_neighbor = std::min(p.sigma_neighbor, std::max(1, static_cast<int>(x.rows()) - 1));
    problem = BuildRegPcp(x, data.constraints, p);
  }
  if (o.mvu && o.mvu_options.connect != ConnectMode::kMst &&
      problem.status().code() == StatusCode::kFailedPrecondition) {
    return FailedPreconditionError(problem.status().message() +
                                   " (graph.connect = MST, the default, joins the components by their shortest edges)");
  }
  KLS_RETURN_IF_ERROR(problem.status());
  KLS_ASSIGN_OR_RETURN(QsdpSubspaceResult r, SolveQsdpSubspace(problem->problem, o.solver, control));
  JobOutput out;
  if (o.mvu) out.connect = problem->connect;
  out.stats = r.stats;
  out.stats.setup_seconds += problem->graph_seconds + problem->basis_seconds;
  out.primal_residual = r.kkt_residual;  // ‖Y − Π₊(Y − ∇f)‖_F / (1 + ‖Y‖_F)
  out.dual_residual = r.relative_gap;    // certified relative duality gap
  if (Stopped(out.stats)) return out;
  KLS_ASSIGN_OR_RETURN(out.kernel, FactorQyq(problem->basis.vectors, r.y));
  return out;
}

StatusOr<JobOutput> RunEmbedding(const EmbeddingJobOptions& o, const store::StoredDataset& data,
                                 const SolveControl& control) {
  Eigen::MatrixXd x = data.data.features;
  const int n = static_cast<int>(x.rows());
  JobOutput out;
  StatusOr<LearnedKernel> kernel = InvalidArgumentError("unset");
  int dims = o.kpca.dims;
  if (o.method == EmbeddingJobOptions::Method::kKpca) {
    Stopwatch watch;
    kernel = KernelPca(x, o.kpca);
    out.stats.iterations = 1;
    out.stats.solve_seconds = watch.Seconds();
  } else {
    // Thesis §3.5.5 scaling: B = n (m = 1) is relative to the input kernel.
    x = ScaledToUnitInputGram(std::move(x));
    KLS_ASSIGN_OR_RETURN(NeighborhoodGraph graph, BuildNeighborhood(x, o.neighbors));
    EmbeddingMinimaxOptions inner = o.inner;
    inner.b = o.b > 0 ? o.b : static_cast<double>(n);
    StatusOr<EmbeddingResult> r = InvalidArgumentError("unset");
    switch (o.method) {
      case EmbeddingJobOptions::Method::kCmvu:
        if (!data.data.has_labels()) return FailedPreconditionError("embedding CMVU needs the data set's labels");
        r = SolveColoredMvu(ColoredMvuProblem{std::move(graph), data.data.labels}, inner, control);
        break;
      case EmbeddingJobOptions::Method::kMve: {
        MveOptions mo = o.mve;
        mo.inner = inner;
        r = SolveMve(MveProblem{std::move(graph), LearnedKernel::Embedding(x)}, mo, control);
        break;
      }
      default:
        r = SolveSpe(SpeProblem{std::move(graph)}, inner, control);
        break;
    }
    KLS_RETURN_IF_ERROR(r.status());
    out.stats = r->stats;
    out.primal_residual = r->stationarity;
    out.dual_residual = r->duality_gap;
    if (Stopped(out.stats)) return out;
    kernel = std::move(r->kernel);
    dims = o.mve.dims;
  }
  KLS_RETURN_IF_ERROR(kernel.status());
  // The stored model is the embedding people use: its top `dims` principal coordinates.
  KLS_ASSIGN_OR_RETURN(Eigen::MatrixXd coords, PrincipalCoordinates(*kernel, std::min(dims, kernel->rank())));
  KLS_ASSIGN_OR_RETURN(out.kernel, LearnedKernel::FromEmbedding(LearnedKernel::Embedding(coords)));
  return out;
}

StatusOr<JobOutput> RunClassifier(const ClassifierTrainingOptions& o, const store::StoredDataset& data,
                                  const SolveControl& control) {
  if (!data.data.has_labels()) {
    return FailedPreconditionError("the data set has no labels; a classifier learns from labelled rows");
  }
  KLS_ASSIGN_OR_RETURN(ClassifierTrainingResult r, TrainClassifier(data.data.features, data.data.labels, o, control));
  JobOutput out;
  out.stats = r.stats;
  out.primal_residual = 1.0 - r.training_accuracy;  // training error
  out.dual_residual = r.c;                           // the C chosen
  if (r.train_kernel.size() == 0) {  // stopped before the model existed
    if (out.stats.termination == Termination::kTimeLimit) {
      return DeadlineExceededError("the deadline passed before the classifier was trained");
    }
    return out;
  }
  KLS_ASSIGN_OR_RETURN(out.kernel, LearnedKernel::FromDenseKernel(r.train_kernel, 1e-10));
  out.attachments.push_back({kClassifierAttachment, SerializeClassifier(r.model)});
  return out;
}

StatusOr<JobOutput> RunNpkRanking(const NpkRankingJobOptions& o, const store::StoredDataset& data,
                                  store::Store* store, const SolveControl& control) {
  KLS_ASSIGN_OR_RETURN(store::StoredDataset text, store->LoadDataset(o.text_dataset_id));
  const Eigen::MatrixXd& counts = text.data.features;
  if (counts.rows() != data.data.features.rows()) {
    return InvalidArgumentError("npk_ranking.text_dataset_id has " + std::to_string(counts.rows()) +
                                " rows, the data set " + std::to_string(data.data.features.rows()));
  }
  if ((counts.array() < 0).any()) {
    return InvalidArgumentError("npk_ranking.text_dataset_id: tag counts must be >= 0");
  }
  // Text kernel: cosine of the normalized tf-idf rows (§6.4.3).
  KLS_ASSIGN_OR_RETURN(auto tfidf, TfIdf(counts.sparseView()));
  const Eigen::MatrixXd t = Eigen::MatrixXd(tfidf);
  const Eigen::MatrixXd kt = t * t.transpose();
  KLS_ASSIGN_OR_RETURN(NpkRankingResult r, SolveNpkRanking(data.data.features, kt, o.options, control));
  JobOutput out;
  out.stats = r.stats;
  out.dual_residual = r.duality_gap;
  if (Stopped(out.stats)) return out;
  out.kernel = std::move(r.kernel);
  return out;
}

StatusOr<JobOutput> RunSocial(const SocialStrengthOptions& o, const store::StoredDataset& data,
                              const SolveControl& control) {
  if (!data.social) {
    return FailedPreconditionError("the data set is not a social data set (upload with header.social / kls upload "
                                   "--social DIR)");
  }
  KLS_ASSIGN_OR_RETURN(SocialStrengthModel m, LearnSocialStrength(*data.social, o, control));
  JobOutput out;
  out.stats = m.stats;
  out.primal_residual = m.alignment;
  if (Stopped(out.stats) || out.stats.termination == Termination::kTimeLimit) {
    if (m.strength.num_points() == 0) {
      if (out.stats.termination == Termination::kTimeLimit) {
        return DeadlineExceededError("the deadline passed before the social kernels were built");
      }
      return out;
    }
  }
  out.kernel = std::move(m.strength);
  out.attachments.push_back({kSocialGraphAttachment, SerializeSocialGraph(m.graph)});
  if (m.klr) out.attachments.push_back({kSocialKlrAttachment, SerializePairwiseKlrModel(*m.klr)});
  return out;
}

StatusOr<JobOutput> Dispatch(const JobSpec& spec, const store::StoredDataset& data, store::Store* store,
                             const SolveControl& control) {
  return std::visit(
      [&](const auto& options) -> StatusOr<JobOutput> {
        using T = std::decay_t<decltype(options)>;
        if constexpr (std::is_same_v<T, QsdpJobOptions>) {
          return RunQsdp(options, data, control);
        } else if constexpr (std::is_same_v<T, EmbeddingJobOptions>) {
          return RunEmbedding(options, data, control);
        } else if constexpr (std::is_same_v<T, ClassifierTrainingOptions>) {
          return RunClassifier(options, data, control);
        } else if constexpr (std::is_same_v<T, NpkRankingJobOptions>) {
          return RunNpkRanking(options, data, store, control);
        } else if constexpr (std::is_same_v<T, SocialStrengthOptions>) {
          return RunSocial(options, data, control);
        } else {
          return RunNpkl(spec, data, store, control);
        }
      },
      spec.options);
}

// Unscaled features whose column ranges differ by more than this get a hint in the summary.
constexpr double kHintRangeRatio = 100.0;

// The summary members every feature-based job adds: the scaling used, the
// unscaled-range hint, and what the connectivity check found or added.
std::string SummaryNotes(const JobSpec& spec, const Eigen::MatrixXd& raw, const JobOutput& out) {
  std::string notes;
  if (spec.method != kMethodSocialStrength) {
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
  return GuardExceptions("job", [&]() -> StatusOr<JobOutput> {
    std::optional<FeatureScaler> scaler;
    std::optional<store::StoredDataset> scaled;
    if (spec.scaling != FeatureScaling::kNone && spec.method != kMethodSocialStrength) {
      KLS_ASSIGN_OR_RETURN(scaler, FeatureScaler::Fit(data.data.features, spec.scaling));
      scaled = data;
      KLS_ASSIGN_OR_RETURN(scaled->data.features, scaler->Apply(data.data.features));
    }
    KLS_ASSIGN_OR_RETURN(JobOutput out, Dispatch(spec, scaled ? *scaled : data, store, control));
    if (scaler && out.kernel.num_points() > 0) {
      out.attachments.push_back({kFeatureScalingAttachment, scaler->Serialize()});
    }
    out.summary_notes = SummaryNotes(spec, data.data.features, out);
    return out;
  });
}

}  // namespace kls::server
