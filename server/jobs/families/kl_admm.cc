// kl_admm: KL-ADMM (core/npkl/kl_admm.h), options kls.v1.KlAdmmOptions.
#include "server/jobs/families/npkl_options.h"
#include "server/jobs/families/pairwise_family.h"

namespace kls::server {

KlAdmmOptions ToCore(const kls::v1::KlAdmmOptions& p) {
  KlAdmmOptions o;
  if (p.has_gamma()) o.gamma = p.gamma();
  if (p.has_rank()) o.rank = p.rank();
  if (p.has_rho_initial()) o.rho_initial = p.rho_initial();
  if (p.has_rho_min()) o.rho_min = p.rho_min();
  if (p.has_adaptive_rho()) o.adaptive_rho = p.adaptive_rho();
  if (p.has_max_iterations()) o.max_iterations = p.max_iterations();
  if (p.has_tolerance()) o.tolerance = p.tolerance();
  if (p.has_seed()) o.seed = p.seed();
  if (p.has_num_threads()) o.num_threads = p.num_threads();
  return o;
}

kls::v1::KlAdmmOptions ToProto(const KlAdmmOptions& o) {
  kls::v1::KlAdmmOptions p;
  p.set_gamma(o.gamma);
  p.set_rank(o.rank);
  p.set_rho_initial(o.rho_initial);
  p.set_rho_min(o.rho_min);
  p.set_adaptive_rho(o.adaptive_rho);
  p.set_max_iterations(o.max_iterations);
  p.set_tolerance(o.tolerance);
  p.set_seed(o.seed);
  p.set_num_threads(o.num_threads);
  return p;
}

namespace {

class KlAdmmFamily : public families::PairwiseFamily<kls::v1::KlAdmmOptions, KlAdmmOptions> {
 public:
  KlAdmmFamily() : PairwiseFamily(kMethodKlAdmm, [] {
    Traits t;
    t.default_weight = EdgeWeight::kGaussian;
    t.loss_weight_field = "gamma";
    return t;
  }()) {}

  Status CheckDataset(const JobSpec& spec, const store::DatasetRecord& d, store::Store*) const override {
    return families::CheckAtMostPoints(name() + ".rank", spec.Options<KlAdmmOptions>().rank, d.num_points);
  }

 protected:
  StatusOr<KlAdmmOptions> Convert(const kls::v1::KlAdmmOptions& p) const override { return ToCore(p); }
  void SetWeight(KlAdmmOptions* o, double weight) const override { o->gamma = weight; }
  StatusOr<NpklResult> Solve(const NpklProblem& problem, const KlAdmmOptions& o,
                             const SolveControl& control) const override {
    return SolveKlAdmm(problem, o, control);
  }
};

KLS_REGISTER_SOLVER_FAMILY(KlAdmmFamily);

}  // namespace
}  // namespace kls::server
