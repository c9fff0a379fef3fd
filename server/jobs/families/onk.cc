// onk: the optimal neighborhood kernel classifier (core/mkl/onk.h), options
// kls.v1.OnkOptions; stores the classifier attachment.
#include "server/jobs/families/classifier_family.h"
#include "server/jobs/families/family_util.h"

namespace kls::server {
namespace {

class OnkFamily : public families::ClassifierFamily<kls::v1::OnkOptions> {
 public:
  OnkFamily() : ClassifierFamily("onk") {}

 protected:
  StatusOr<ClassifierTrainingOptions> Convert(const kls::v1::OnkOptions& p, const JobSpec&) const override {
    KLS_RETURN_IF_ERROR(families::CheckEnum(kls::v1::OnkOptions::Solver_IsValid(p.solver()), "onk.solver",
                                            p.solver(), "GRADIENT, ACCELERATED, LEVEL"));
    ClassifierTrainingOptions o;
    o.method = ClassifierMethod::kOnk;
    families::CopySharedOptions(p, &o);
    if (p.has_rho()) o.onk.rho = p.rho();
    if (p.solver() == kls::v1::OnkOptions::ACCELERATED) o.onk.method = OnkMethod::kAccelerated;
    if (p.solver() == kls::v1::OnkOptions::LEVEL) o.onk.method = OnkMethod::kLevel;
    if (p.has_tolerance()) o.onk.tolerance = p.tolerance();
    if (p.has_max_iterations()) o.onk.max_iterations = p.max_iterations();
    if (p.has_sigma_k()) o.sigma_k = p.sigma_k();
    KLS_RETURN_IF_ERROR(o.Validate(name()));
    return o;
  }
};

KLS_REGISTER_SOLVER_FAMILY(OnkFamily);

}  // namespace
}  // namespace kls::server
