// simple_npkl: SimpleNPKL (core/npkl/simple_npkl.h), options kls.v1.SimpleNpklOptions.
#include "server/jobs/families/npkl_options.h"
#include "server/jobs/families/pairwise_family.h"

namespace kls::server {

namespace {

// The scalar options: proto field ↔ core member.
const std::vector<families::OptionField<SimpleNpklOptions>>& Fields() {
  static const std::vector<families::OptionField<SimpleNpklOptions>> fields = {
      {"c", &SimpleNpklOptions::c},
      {"b", &SimpleNpklOptions::b},
      {"p", &SimpleNpklOptions::p},
      {"max_iterations", &SimpleNpklOptions::max_iterations},
      {"tolerance", &SimpleNpklOptions::tolerance},
      {"active_set", &SimpleNpklOptions::active_set},
      {"low_rank", &SimpleNpklOptions::low_rank},
      {"num_threads", &SimpleNpklOptions::num_threads},
      {"accelerated", &SimpleNpklOptions::accelerated},
      {"start_rank", &SimpleNpklOptions::start_rank},
      {"newton", &SimpleNpklOptions::newton}
  };
  return fields;
}

}  // namespace

SimpleNpklOptions ToCore(const kls::v1::SimpleNpklOptions& p) {
  SimpleNpklOptions o;
  o.loss = families::LossToCore(p.loss(), o.loss);
  families::CopyFromProto(p, Fields(), &o);
  return o;
}

kls::v1::SimpleNpklOptions ToProto(const SimpleNpklOptions& o) {
  kls::v1::SimpleNpklOptions p;
  p.set_loss(families::LossToProto(o.loss));
  families::CopyToProto(o, Fields(), &p);
  return p;
}

namespace {

class SimpleNpklFamily : public families::PairwiseFamily<kls::v1::SimpleNpklOptions, SimpleNpklOptions> {
 public:
  SimpleNpklFamily() : PairwiseFamily(kMethodSimpleNpkl, [] {
    Traits t;
    t.loss_weight_field = "c";
    return t;
  }()) {}

  Status CheckDataset(const JobSpec& spec, const store::DatasetRecord& d, store::Store*) const override {
    return families::CheckAtMostPoints(name() + ".low_rank", spec.Options<SimpleNpklOptions>().low_rank,
                                       d.num_points);
  }

 protected:
  StatusOr<SimpleNpklOptions> Convert(const kls::v1::SimpleNpklOptions& p) const override {
    KLS_RETURN_IF_ERROR(families::ValidateLossEnum(name(), p.loss()));
    return ToCore(p);
  }
  void SetWeight(SimpleNpklOptions* o, double weight) const override { o->c = weight; }
  StatusOr<NpklResult> Solve(const NpklProblem& problem, const SimpleNpklOptions& o,
                             const SolveControl& control) const override {
    return SolveSimpleNpkl(problem, o, control);
  }
};

KLS_REGISTER_SOLVER_FAMILY(SimpleNpklFamily);

}  // namespace
}  // namespace kls::server
