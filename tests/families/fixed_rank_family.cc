// fixed_rank: the registry's toy family (test builds only, KLS_TEST_FAMILIES):
// options kls.testing.FixedRankOptions (tests/families/proto), sent in
// SubmitJobRequest.family_options; solver tests/families/fixed_rank_solver.h.
#include "kls/testing/fixed_rank.pb.h"
#include "server/jobs/families/family_util.h"
#include "server/jobs/solver_family.h"
#include "tests/families/fixed_rank_solver.h"

namespace kls::server {
namespace {

class FixedRankFamily : public TypedFamily<kls::testing::FixedRankOptions, toy::FixedRankOptions> {
 public:
  FixedRankFamily() : TypedFamily("fixed_rank", Traits()) {}

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
    return out;
  }
};

KLS_REGISTER_SOLVER_FAMILY(FixedRankFamily);

}  // namespace
}  // namespace kls::server
