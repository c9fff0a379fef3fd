// simple_npkl: SimpleNPKL (core/npkl/simple_npkl.h), options kls.v1.SimpleNpklOptions.
#include "server/jobs/families/npkl_options.h"
#include "server/jobs/families/pairwise_family.h"

namespace kls::server {

SimpleNpklOptions ToCore(const kls::v1::SimpleNpklOptions& p) {
  SimpleNpklOptions o;
  o.loss = families::LossToCore(p.loss(), o.loss);
  if (p.has_c()) o.c = p.c();
  if (p.has_b()) o.b = p.b();
  if (p.has_p()) o.p = p.p();
  if (p.has_max_iterations()) o.max_iterations = p.max_iterations();
  if (p.has_tolerance()) o.tolerance = p.tolerance();
  if (p.has_active_set()) o.active_set = p.active_set();
  if (p.has_low_rank()) o.low_rank = p.low_rank();
  if (p.has_num_threads()) o.num_threads = p.num_threads();
  if (p.has_accelerated()) o.accelerated = p.accelerated();
  if (p.has_start_rank()) o.start_rank = p.start_rank();
  return o;
}

kls::v1::SimpleNpklOptions ToProto(const SimpleNpklOptions& o) {
  kls::v1::SimpleNpklOptions p;
  p.set_loss(families::LossToProto(o.loss));
  p.set_c(o.c);
  p.set_b(o.b);
  p.set_p(o.p);
  p.set_max_iterations(o.max_iterations);
  p.set_tolerance(o.tolerance);
  p.set_active_set(o.active_set);
  p.set_low_rank(o.low_rank);
  p.set_num_threads(o.num_threads);
  p.set_accelerated(o.accelerated);
  p.set_start_rank(o.start_rank);
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
