// mkl: multiple kernel learning — KTA, SVM-MKL, two-layer, infinite and
// unsupervised MKL (core/mkl), options kls.v1.MklOptions; stores the
// classifier attachment.
#include "server/jobs/families/classifier_family.h"
#include "server/jobs/families/family_util.h"

namespace kls::server {
namespace {

class MklFamily : public families::ClassifierFamily<kls::v1::MklOptions> {
 public:
  MklFamily() : ClassifierFamily("mkl") {}

 protected:
  StatusOr<ClassifierTrainingOptions> Convert(const kls::v1::MklOptions& p, const JobSpec&) const override {
    KLS_RETURN_IF_ERROR(families::CheckEnum(kls::v1::MklOptions::Method_IsValid(p.method()), "mkl.method",
                                            p.method(), "KTA, SVM, TWO_LAYER, TWO_LAYER_INFINITE, UNSUPERVISED"));
    ClassifierTrainingOptions o;
    switch (p.method()) {
      case kls::v1::MklOptions::SVM: o.method = ClassifierMethod::kSvm; break;
      case kls::v1::MklOptions::TWO_LAYER: o.method = ClassifierMethod::kTwoLayer; break;
      case kls::v1::MklOptions::TWO_LAYER_INFINITE: o.method = ClassifierMethod::kTwoLayerInfinite; break;
      case kls::v1::MklOptions::UNSUPERVISED: o.method = ClassifierMethod::kUnsupervised; break;
      default: o.method = ClassifierMethod::kKta; break;
    }
    families::CopySharedOptions(p, &o);
    if (p.has_single_features()) o.single_features = p.single_features();
    KLS_RETURN_IF_ERROR(o.Validate(name()));
    return o;
  }
};

KLS_REGISTER_SOLVER_FAMILY(MklFamily);

}  // namespace
}  // namespace kls::server
