// kl_admm: KL-ADMM (core/npkl/kl_admm.h), options kls.v1.KlAdmmOptions.
#include "server/jobs/families/npkl_options.h"
#include "server/jobs/families/pairwise_family.h"

namespace kls::server {

namespace {

// The scalar options: proto field ↔ core member.
const std::vector<families::OptionField<KlAdmmOptions>>& Fields() {
  static const std::vector<families::OptionField<KlAdmmOptions>> fields = {
      {"gamma", &KlAdmmOptions::gamma},
      {"rank", &KlAdmmOptions::rank},
      {"rho_initial", &KlAdmmOptions::rho_initial},
      {"rho_min", &KlAdmmOptions::rho_min},
      {"adaptive_rho", &KlAdmmOptions::adaptive_rho},
      {"max_iterations", &KlAdmmOptions::max_iterations},
      {"tolerance", &KlAdmmOptions::tolerance},
      {"seed", &KlAdmmOptions::seed},
      {"num_threads", &KlAdmmOptions::num_threads}
  };
  return fields;
}

}  // namespace

KlAdmmOptions ToCore(const kls::v1::KlAdmmOptions& p) {
  KlAdmmOptions o;
  families::CopyFromProto(p, Fields(), &o);
  return o;
}

kls::v1::KlAdmmOptions ToProto(const KlAdmmOptions& o) {
  kls::v1::KlAdmmOptions p;
  families::CopyToProto(o, Fields(), &p);
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
