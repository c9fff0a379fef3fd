// embedding: CMVU, MVE, SPE and KPCA (core/embed), options
// kls.v1.EmbeddingOptions. The stored model is the embedding people use: the
// learned kernel's top `dims` principal coordinates.
#include "core/embed/embedding.h"
#include "server/jobs/families/family_util.h"
#include "server/jobs/solver_family.h"

namespace kls::server {
namespace {


/// CMVU / MVE / SPE / KPCA job settings.
struct EmbeddingJobOptions {
  enum class Method { kCmvu, kMve, kSpe, kKpca };
  Method method = Method::kSpe;
  int neighbors = 5;               ///< k of the neighbourhood graph
  double b = 0.0;                  ///< capacity B; 0 = n (the thesis's B = m·N with m = 1)
  EmbeddingMinimaxOptions inner;   ///< c, tolerance, max_iterations (b set from `b`)
  MveOptions mve;                  ///< dims
  KpcaOptions kpca;                ///< dims, kernel, rbf_sigma
};

class EmbeddingFamily : public TypedFamily<kls::v1::EmbeddingOptions, EmbeddingJobOptions> {
 public:
  EmbeddingFamily() : TypedFamily("embedding", [] {
    Traits t;
    t.all_defaults_valid = false;  // method is required
    return t;
  }()) {}

  Status CheckDataset(const JobSpec& spec, const store::DatasetRecord& d, store::Store*) const override {
    const EmbeddingJobOptions& o = spec.Options<EmbeddingJobOptions>();
    const int n = static_cast<int>(d.num_points);
    if (o.neighbors >= n) {
      return InvalidArgumentError("embedding.neighbors = " + std::to_string(o.neighbors) + " must be < n = " +
                                  std::to_string(n));
    }
    if (o.kpca.dims > n) {
      return InvalidArgumentError("embedding.dims = " + std::to_string(o.kpca.dims) + " exceeds n = " +
                                  std::to_string(n));
    }
    if (o.method == EmbeddingJobOptions::Method::kCmvu && d.num_classes == 0) {
      return FailedPreconditionError("data set \"" + d.id + "\" has no labels; embedding CMVU colours the embedding "
                                     "by class");
    }
    return OkStatus();
  }

 protected:
  StatusOr<EmbeddingJobOptions> Convert(const kls::v1::EmbeddingOptions& p, const JobSpec&) const override {
    KLS_RETURN_IF_ERROR(families::CheckEnum(kls::v1::EmbeddingOptions::Method_IsValid(p.method()),
                                            "embedding.method", p.method(), "CMVU, MVE, SPE, KPCA"));
    EmbeddingJobOptions o;
    switch (p.method()) {
      case kls::v1::EmbeddingOptions::CMVU: o.method = EmbeddingJobOptions::Method::kCmvu; break;
      case kls::v1::EmbeddingOptions::MVE: o.method = EmbeddingJobOptions::Method::kMve; break;
      case kls::v1::EmbeddingOptions::SPE: o.method = EmbeddingJobOptions::Method::kSpe; break;
      case kls::v1::EmbeddingOptions::KPCA: o.method = EmbeddingJobOptions::Method::kKpca; break;
      default: return InvalidArgumentError("embedding.method is required: CMVU, MVE, SPE or KPCA");
    }
    if (p.has_dims()) o.mve.dims = o.kpca.dims = p.dims();
    if (p.has_neighbors()) o.neighbors = p.neighbors();
    if (p.has_c()) o.inner.c = p.c();
    if (p.has_b()) o.b = p.b();
    if (p.has_max_iterations()) o.inner.max_iterations = p.max_iterations();
    if (p.has_tolerance()) o.inner.tolerance = p.tolerance();
    if (p.kpca_rbf()) o.kpca.kernel = KpcaOptions::Kernel::kRbf;
    if (p.has_kpca_sigma()) o.kpca.rbf_sigma = p.kpca_sigma();
    if (p.has_relative_slack()) o.inner.relative_slack = p.relative_slack();
    if (p.has_keep_start_unless_better()) o.mve.keep_start_unless_better = p.keep_start_unless_better();
    if (o.neighbors < 1) {
      return InvalidArgumentError("embedding.neighbors = " + std::to_string(o.neighbors) + " must be >= 1");
    }
    if (p.has_b()) KLS_RETURN_IF_ERROR(CheckPositiveOption("b", o.b, name()));
    KLS_RETURN_IF_ERROR(o.inner.Validate(name()));
    KLS_RETURN_IF_ERROR(o.mve.Validate(name()));
    KLS_RETURN_IF_ERROR(o.kpca.Validate(name()));
    return o;
  }

  StatusOr<JobOutput> RunTyped(const EmbeddingJobOptions& o, const JobSpec&, const store::StoredDataset& data,
                               store::Store*, const SolveControl& control) const override {
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
          // The start guard scores the labels too when the data set has them.
          r = SolveMve(MveProblem{std::move(graph), LearnedKernel::Embedding(x),
                                  data.data.has_labels() ? data.data.labels : std::vector<int>()},
                       mo, control);
          break;
        }
        default:
          r = SolveSpe(SpeProblem{std::move(graph)}, inner, control);
          break;
      }
      KLS_RETURN_IF_ERROR(r.status());
      out.stats = r->stats;
      out.primal_residual = r->stationarity;
      out.certificate = r->stats.certificate;
      out.certificate.kkt_residual = r->stationarity;
      if (out.stats.termination == Termination::kCancelled) return out;
      if (r->mve_start) {
        // Which of start and solve is stored, and why (kls.v1 summary_json).
        out.summary_notes += ",\"mve_start_guard\":" + r->mve_start->Json() + ",\"mve_start_guard_note\":\"" +
                             r->mve_start->Sentence() + "\"";
      }
      kernel = std::move(r->kernel);
      dims = o.mve.dims;
    }
    KLS_RETURN_IF_ERROR(kernel.status());
    KLS_ASSIGN_OR_RETURN(Eigen::MatrixXd coords, PrincipalCoordinates(*kernel, std::min(dims, kernel->rank())));
    KLS_ASSIGN_OR_RETURN(out.kernel, LearnedKernel::FromEmbedding(LearnedKernel::Embedding(coords)));
    return out;
  }
};

KLS_REGISTER_SOLVER_FAMILY(EmbeddingFamily);

}  // namespace
}  // namespace kls::server
