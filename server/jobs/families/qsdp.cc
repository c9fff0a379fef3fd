// qsdp: RegPCP and RegMVU (core/qsdp: the regularized kernel problems of
// "Learning kernels with ... smooth basis" solved as a QSDP in the basis),
// options kls.v1.QsdpKernelOptions.
#include <algorithm>
#include <cmath>

#include "server/jobs/families/family_util.h"
#include "server/jobs/families/qsdp.h"
#include "server/jobs/solver_family.h"

namespace kls::server {
namespace {

using families::Num;

class QsdpFamily : public TypedFamily<kls::v1::QsdpKernelOptions, QsdpJobOptions> {
 public:
  QsdpFamily() : TypedFamily("qsdp", [] {
    Traits t;
    t.all_defaults_valid = false;  // problem is required
    return t;
  }()) {}

  Status CheckDataset(const JobSpec& spec, const store::DatasetRecord& d, store::Store*) const override {
    const QsdpJobOptions& o = spec.Options<QsdpJobOptions>();
    const int n = static_cast<int>(d.num_points);
    if (o.mvu) return o.mvu_options.Validate(n, name());
    if (d.num_constraints == 0) {
      return FailedPreconditionError("data set \"" + d.id + "\" has no pairwise constraints; qsdp REGPCP needs "
                                     "must-link / cannot-link pairs");
    }
    return PcpOptions(o, n).Validate(n, name());
  }

 protected:
  StatusOr<QsdpJobOptions> Convert(const kls::v1::QsdpKernelOptions& p, const JobSpec& spec) const override {
    KLS_RETURN_IF_ERROR(families::CheckEnum(kls::v1::QsdpKernelOptions::Problem_IsValid(p.problem()),
                                            "qsdp.problem", p.problem(), "REGPCP, REGMVU"));
    if (p.problem() == kls::v1::QsdpKernelOptions::PROBLEM_UNSPECIFIED) {
      return InvalidArgumentError("qsdp.problem is required: REGPCP or REGMVU");
    }
    QsdpJobOptions o;
    o.mvu = p.problem() == kls::v1::QsdpKernelOptions::REGMVU;
    if (p.has_m()) o.pcp.m = o.mvu_options.m = p.m();
    if (p.has_neighbors()) o.pcp.neighbors = o.mvu_options.neighbors = p.neighbors();
    if (p.has_nu()) o.mvu_options.nu = p.nu();
    if (p.has_gap_tolerance()) o.solver.gap_tolerance = o.solver.ipm.gap_tolerance = p.gap_tolerance();
    if (p.has_max_iterations()) o.solver.ipm.max_iterations = p.max_iterations();
    // What does not need the data set's n now (CheckDataset checks the rest);
    // m, neighbors and nu are the same fields in both problems' options.
    KLS_RETURN_IF_ERROR(o.mvu_options.Validate(0, name()));
    KLS_RETURN_IF_ERROR(o.pcp.Validate(0, name()));
    KLS_RETURN_IF_ERROR(o.solver.Validate(name()));
    o.mvu_options.connect = spec.connect;
    return o;
  }

  StatusOr<JobOutput> RunTyped(const QsdpJobOptions& o, const JobSpec& spec, const store::StoredDataset& data,
                               store::Store*, const SolveControl& control) const override {
    const Eigen::MatrixXd& x = data.data.features;
    StatusOr<RegularizedKernelProblem> problem = InvalidArgumentError("unset");
    if (o.mvu) {
      problem = BuildRegMvu(x, o.mvu_options);
    } else {
      if (data.constraints.size() == 0) {
        return FailedPreconditionError("the data set has no pairwise constraints; qsdp REGPCP needs them");
      }
      problem = BuildRegPcp(x, data.constraints, PcpOptions(o, static_cast<int>(x.rows())));
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
    out.primal_residual = r.stats.certificate.kkt_residual;  // ‖Y − Π₊(Y − ∇f)‖_F / (1 + ‖Y‖_F)
    out.certificate = r.stats.certificate;
    if (out.stats.termination == Termination::kCancelled) return out;
    KLS_ASSIGN_OR_RETURN(out.kernel, KernelFromBasis(problem->basis.vectors, r.y));
    return out;
  }

 private:
  // The σ neighbour of RegPCP's Gaussian width cannot exceed n − 1.
  static RegPcpOptions PcpOptions(const QsdpJobOptions& o, int n) {
    RegPcpOptions p = o.pcp;
    p.sigma_neighbor = std::min(p.sigma_neighbor, std::max(1, n - 1));
    return p;
  }
};

KLS_REGISTER_SOLVER_FAMILY(QsdpFamily);

}  // namespace
}  // namespace kls::server
