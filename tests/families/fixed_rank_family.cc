// fixed_rank: the registry's toy family (test builds only, KLS_TEST_FAMILIES):
// options kls.testing.FixedRankOptions (tests/families/proto), sent in
// SubmitJobRequest.family_options; solver tests/families/fixed_rank_solver.h.
// Its kernels carry an attachment of its own kind, "fixed_rank_scale"
// (tests/families/fixed_rank_scale.h), registered below so that the server
// parses it for the queries (the toy query's Scale reads it).
#include "core/serving/attachment_kinds.h"
#include "kls/testing/fixed_rank.pb.h"
#include "server/jobs/families/family_util.h"
#include "server/jobs/solver_family.h"
#include "tests/families/fixed_rank_scale.h"
#include "tests/families/fixed_rank_solver.h"

namespace kls::server {
namespace {

class FixedRankFamily : public TypedFamily<kls::testing::FixedRankOptions, toy::FixedRankOptions> {
 public:
  FixedRankFamily() : TypedFamily("fixed_rank", MakeTraits()) {}

  Status CheckDataset(const JobSpec& spec, const store::DatasetRecord& d, store::Store*) const override {
    return families::CheckAtMostPoints(name() + ".rank", spec.Options<toy::FixedRankOptions>().rank,
                                       d.num_points);
  }

 protected:
  StatusOr<toy::FixedRankOptions> Convert(const kls::testing::FixedRankOptions& p, const JobSpec&) const override {
    toy::FixedRankOptions o;
    if (p.has_rank()) o.rank = p.rank();
    if (p.has_scale()) o.scale = p.scale();
    KLS_RETURN_IF_ERROR(o.Validate(name()));
    return o;
  }

  StatusOr<JobOutput> RunTyped(const toy::FixedRankOptions& o, const JobSpec&, const store::StoredDataset& data,
                               store::Store*, const SolveControl& control) const override {
    KLS_ASSIGN_OR_RETURN(toy::FixedRankResult r, toy::SolveFixedRank(data.data.features, o, control));
    JobOutput out;
    out.stats = r.stats;
    out.kernel = std::move(r.kernel);
    if (out.kernel.num_points() > 0) {  // not for a stopped run
      out.attachments.push_back({toy::kFixedRankScaleAttachment, toy::SerializeFixedRankScale(o.scale)});
    }
    return out;
  }

 private:
  static Traits MakeTraits() {
    Traits t;
    t.attachments = {toy::kFixedRankScaleAttachment};  // read by the toy query's Scale
    return t;
  }
};

KLS_REGISTER_SOLVER_FAMILY(FixedRankFamily);
KLS_REGISTER_ATTACHMENT_KIND(toy::FixedRankScale, toy::kFixedRankScaleAttachment, toy::ParseFixedRankScale);

}  // namespace
}  // namespace kls::server
