// social_strength: kernel-based social strength (core/social), options
// kls.v1.SocialStrengthOptions. Learns from a social data set's records, not
// feature columns; stores the social graph (and the KLR model) attachments.
#include <string>
#include <utility>

#include "core/common/names.h"
#include "core/social/social_model.h"
#include "server/jobs/families/family_util.h"
#include "server/jobs/solver_dispatch.h"
#include "server/jobs/solver_family.h"

namespace kls::server {
namespace {

class SocialStrengthFamily : public TypedFamily<kls::v1::SocialStrengthOptions, SocialStrengthOptions> {
 public:
  SocialStrengthFamily() : TypedFamily("social_strength", [] {
    Traits t;
    t.uses_features = false;
    t.attachments = {kSocialGraphAttachment, kSocialKlrAttachment};
    return t;
  }()) {}

 protected:
  StatusOr<SocialStrengthOptions> Convert(const kls::v1::SocialStrengthOptions& p, const JobSpec&) const override {
    using P = kls::v1::SocialStrengthOptions;
    KLS_RETURN_IF_ERROR(families::CheckEnum(P::Weighting_IsValid(p.weighting()), "social_strength.weighting", p.weighting(),
                                  "KTA, UNIFORM, KLR"));
    KLS_RETURN_IF_ERROR(families::CheckEnum(P::PairKernel_IsValid(p.klr_pair_kernel()), "social_strength.klr_pair_kernel",
                                  p.klr_pair_kernel(), "SYMMETRIC_PRODUCT, DIFFERENCE"));
    SocialStrengthOptions o;
    if (p.weighting() == P::UNIFORM) o.weighting = StrengthWeighting::kUniform;
    if (p.weighting() == P::KLR) o.weighting = StrengthWeighting::kKlr;
    if (p.has_cell_degrees()) o.kernels.cell_degrees = p.cell_degrees();
    if (o.weighting != StrengthWeighting::kKlr) {
      // KLR options with another weighting would be silently ignored: reject them instead.
      const char* set = p.has_klr_c() ? "klr_c" : p.has_klr_import_vectors() ? "klr_import_vectors"
                        : p.has_klr_positives() ? "klr_positives" : p.has_klr_negatives() ? "klr_negatives"
                        : p.klr_pair_kernel() != P::PAIR_KERNEL_UNSPECIFIED ? "klr_pair_kernel"
                        : p.has_klr_bias_weight() ? "klr_bias_weight" : p.has_klr_link_weight() ? "klr_link_weight"
                        : p.has_klr_seed() ? "klr_seed" : nullptr;
      if (set) {
        return InvalidArgumentError(std::string("social_strength.") + set + " is set but weighting = " +
                                    P::Weighting_Name(p.weighting()) + "; the klr_* options need weighting = KLR");
      }
    }
    if (p.has_klr_c()) o.klr.c = p.klr_c();
    if (p.has_klr_import_vectors()) o.klr.max_import_vectors = p.klr_import_vectors();
    if (p.has_klr_positives()) o.klr_pairs.positives_per_user = p.klr_positives();
    if (p.has_klr_negatives()) o.klr_pairs.negatives_per_user = p.klr_negatives();
    if (p.klr_pair_kernel() == P::DIFFERENCE) o.klr.pair_kernel.kind = PairKernel::kDifference;
    if (p.has_klr_bias_weight()) o.klr.pair_kernel.bias_weight = p.klr_bias_weight();
    if (p.has_klr_link_weight()) o.klr.pair_kernel.link_weight = p.klr_link_weight();
    if (p.has_klr_seed()) o.klr.seed = o.klr_pairs.seed = p.klr_seed();
    KLS_RETURN_IF_ERROR(o.Validate(name()));  // names the proto's fields: social_strength.klr_c = …
    return o;
  }

  StatusOr<JobOutput> RunTyped(const SocialStrengthOptions& o, const JobSpec&, const store::StoredDataset& data,
                               store::Store*, const SolveControl& control) const override {
    if (!data.social) {
      return FailedPreconditionError("the data set is not a social data set (upload with header.social / kls upload "
                                     "--social DIR)");
    }
    KLS_ASSIGN_OR_RETURN(SocialStrengthModel m, LearnSocialStrength(*data.social, o, control));
    JobOutput out;
    out.stats = m.stats;
    out.primal_residual = m.alignment;
    const Termination t = out.stats.termination;
    if ((t == Termination::kCancelled || t == Termination::kTimeLimit) && m.strength.num_points() == 0) {
      if (t == Termination::kTimeLimit) {
        return DeadlineExceededError("the deadline passed before the social kernels were built");
      }
      return out;
    }
    out.kernel = std::move(m.strength);
    out.attachments.push_back({kSocialGraphAttachment, SerializeSocialGraph(m.graph)});
    if (m.klr) out.attachments.push_back({kSocialKlrAttachment, SerializePairwiseKlrModel(*m.klr)});
    return out;
  }
};

KLS_REGISTER_SOLVER_FAMILY(SocialStrengthFamily);

}  // namespace
}  // namespace kls::server
