// itml: information-theoretic metric learning (core/metric/itml.h), options
// kls.v1.ItmlOptions (proto/kls/v1/families/itml.proto), sent in
// SubmitJobRequest.family_options. Not a Traits::pairwise family (no k-NN
// graph): it reads the data set's (scaled) feature rows and its pairwise
// constraints directly. The kernel is K = X M Xᵀ stored as V = X L (M = L Lᵀ),
// with L attached as "linear_map", so feature queries are exact: x ↦ x L.
#include <string>

#include "core/metric/itml.h"
#include "core/serving/kernel_servable.h"
#include "kls/v1/families/itml.pb.h"
#include "server/jobs/families/family_util.h"
#include "server/jobs/solver_family.h"

namespace kls::server {
namespace {

using families::Num;

/// The job's options are the core's, except that `prior` holds the client's
/// d·d values as one row (the wire's row-major order) until RunTyped knows d
/// and shapes it d × d; CheckDataset checks the count against the data set.
class ItmlFamily : public TypedFamily<kls::v1::ItmlOptions, ItmlOptions> {
 public:
  ItmlFamily() : TypedFamily("itml", [] {
    Traits t;
    t.attachments = {kLinearMapAttachment};
    return t;
  }()) {}

  Status CheckDataset(const JobSpec& spec, const store::DatasetRecord& d, store::Store*) const override {
    const ItmlOptions& o = spec.Options<ItmlOptions>();
    if (d.num_constraints == 0) {
      return FailedPreconditionError("data set \"" + d.id + "\" has no pairwise constraints; itml learns from "
                                     "must-link / cannot-link pairs, upload some first");
    }
    if (d.dim > kItmlMaxDimension) {
      return FailedPreconditionError("data set \"" + d.id + "\" has " + std::to_string(d.dim) +
                                     " features; itml learns a dense d x d metric at O(d^2) per constraint "
                                     "projection and takes at most " + std::to_string(kItmlMaxDimension));
    }
    if (o.prior.size() > 0 && static_cast<int64_t>(o.prior.size()) != d.dim * d.dim) {
      return InvalidArgumentError("itml.prior has " + std::to_string(o.prior.size()) + " values; data set \"" + d.id +
                                  "\" has " + std::to_string(d.dim) + " features, so M0 needs " +
                                  std::to_string(d.dim * d.dim) + " (d x d, row-major)");
    }
    return OkStatus();
  }

 protected:
  StatusOr<ItmlOptions> Convert(const kls::v1::ItmlOptions& p, const JobSpec&) const override {
    ItmlOptions o;
    if (p.has_gamma()) o.gamma = p.gamma();
    if (p.has_lower()) o.lower = p.lower();
    if (p.has_upper()) o.upper = p.upper();
    if (p.has_max_iterations()) o.max_iterations = p.max_iterations();
    if (p.has_tolerance()) o.tolerance = p.tolerance();
    if (p.has_seed()) o.seed = p.seed();
    if (p.prior_size() > 0) o.prior = Eigen::Map<const Eigen::RowVectorXd>(p.prior().data(), p.prior_size());
    KLS_RETURN_IF_ERROR(o.Validate(name()));
    return o;
  }

  StatusOr<JobOutput> RunTyped(const ItmlOptions& o, const JobSpec&, const store::StoredDataset& data,
                               store::Store*, const SolveControl& control) const override {
    const Eigen::MatrixXd& x = data.data.features;
    const int d = static_cast<int>(x.cols());
    ItmlOptions core = o;
    if (o.prior.size() > 0) {  // the client's row, shaped d × d
      if (static_cast<int64_t>(o.prior.size()) != static_cast<int64_t>(d) * d) {
        return InvalidArgumentError("itml.prior has " + std::to_string(o.prior.size()) + " values; the data set has " +
                                    std::to_string(d) + " features, so M0 needs " + std::to_string(d * d));
      }
      core.prior = Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(
          o.prior.data(), d, d);
    }
    KLS_ASSIGN_OR_RETURN(ItmlResult r, SolveItml(x, data.constraints, core, control));
    JobOutput out;
    out.stats = r.stats;
    out.primal_residual = r.max_violation;
    out.summary_notes = ",\"itml\":{\"sweeps\":" + std::to_string(r.sweeps) +
                        ",\"converged\":" + (r.converged ? "true" : "false") + ",\"lower\":" + Num(r.lower) +
                        ",\"upper\":" + Num(r.upper) + ",\"max_violation\":" + Num(r.max_violation) +
                        ",\"skipped_pairs\":" + std::to_string(r.skipped_pairs) + ",\"rank\":" +
                        std::to_string(r.factor.cols()) + "}";
    if (out.stats.termination == Termination::kCancelled) return out;
    if (r.factor.cols() == 0) return InternalError("itml: the learned metric is zero");
    KLS_ASSIGN_OR_RETURN(out.kernel, LearnedKernel::FromEmbedding(LearnedKernel::Embedding(x * r.factor)));
    out.attachments.push_back({kLinearMapAttachment, SerializeLinearMap(r.factor)});
    return out;
  }
};

KLS_REGISTER_SOLVER_FAMILY(ItmlFamily);

}  // namespace
}  // namespace kls::server
