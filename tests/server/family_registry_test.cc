// The solver-family registry (server/jobs/solver_family.h), checked with the
// toy family of tests/families (built with KLS_TEST_FAMILIES): a core solver,
// its own .proto message and its family file are all it takes for a job to
// run end to end through the real server, its options travelling in
// SubmitJobRequest.family_options.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "kls/testing/fixed_rank.pb.h"
#include "server/jobs/proto_convert.h"
#include "server/jobs/solver_family.h"
#include "test_server.h"
#include "core/data/csv_reader.h"
#include "tests/families/fixed_rank_solver.h"

namespace kls::testing {
namespace {

using ::testing::HasSubstr;
using server::FamilyRegistry;

Dataset Iris(int n) {
  auto iris = ReadCsvFile(std::string(KLS_TEST_DATA_DIR) + "/iris.csv");
  EXPECT_TRUE(iris.ok()) << iris.status();
  Dataset d;
  d.features = iris->features.topRows(n);
  return d;
}

TEST(FamilyRegistryTest, EveryOneofFieldHasItsFamilyAndNamesAreUnique) {
  const FamilyRegistry& registry = FamilyRegistry::Global();
  const auto* oneof = kls::v1::SubmitJobRequest::descriptor()->FindOneofByName("solver");
  std::set<std::string> names;
  for (const server::SolverFamily* f : registry.All()) EXPECT_TRUE(names.insert(f->name()).second) << f->name();
  for (int i = 0; i < oneof->field_count(); ++i) {
    const auto* field = oneof->field(i);
    if (field->name() == "family_options") continue;
    const server::SolverFamily* family = registry.Find(field->name());
    ASSERT_NE(family, nullptr) << field->name();
    EXPECT_EQ(family->options_type(), field->message_type()) << field->name();
    EXPECT_EQ(registry.All()[i], family) << "All() keeps the oneof's order";
  }
  const server::SolverFamily* toy = registry.Find("fixed_rank");
  ASSERT_NE(toy, nullptr);
  EXPECT_EQ(toy->options_type()->options().GetExtension(kls::v1::family), "fixed_rank");
  EXPECT_EQ(registry.FindByTypeName("kls.testing.FixedRankOptions"), toy);
}

kls::v1::SubmitJobRequest FixedRankRequest(const std::string& dataset_id, int rank, double scale) {
  kls::v1::SubmitJobRequest r;
  r.set_dataset_id(dataset_id);
  kls::testing::FixedRankOptions o;
  o.set_rank(rank);
  o.set_scale(scale);
  r.mutable_family_options()->PackFrom(o);
  return r;
}

TEST(FamilyRegistryTest, StoredRequestRoundTripsThroughTheRecord) {
  auto record = server::JobRecordFromSubmit(FixedRankRequest("d", 3, 2.0));
  ASSERT_TRUE(record.ok()) << record.status();
  EXPECT_EQ(record->method, "fixed_rank");
  EXPECT_THAT(record->options_json, HasSubstr("kls.testing.FixedRankOptions"));
  auto spec = server::ParseJobSpec(record->method, record->options_json);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->Options<toy::FixedRankOptions>().rank, 3);
  EXPECT_EQ(spec->Options<toy::FixedRankOptions>().scale, 2.0);
  // No solver section: all defaults, packed for the family.
  auto defaults = server::ParseJobSpec("fixed_rank", "{}");
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_EQ(defaults->Options<toy::FixedRankOptions>().rank, toy::FixedRankOptions().rank);
}

TEST(FamilyRegistryTest, BadOptionsAndUnknownTypesNameTheField) {
  EXPECT_EQ(server::JobRecordFromSubmit(FixedRankRequest("d", 0, 1.0)).status().message(),
            "fixed_rank.rank = 0 must be >= 1");
  EXPECT_THAT(server::JobRecordFromSubmit(FixedRankRequest("d", 2, -1.0)).status().message(),
              HasSubstr("fixed_rank.scale = -1 must be finite and > 0"));
  kls::v1::SubmitJobRequest r;
  r.set_dataset_id("d");
  r.mutable_family_options()->set_type_url("type.googleapis.com/kls.testing.NoSuchOptions");
  const Status unknown = server::JobRecordFromSubmit(r).status();
  EXPECT_EQ(unknown.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(unknown.message(), HasSubstr("family_options.type_url = \"type.googleapis.com/kls.testing.NoSuchOptions\""));
  r.mutable_family_options()->set_type_url("type.googleapis.com/kls.testing.FixedRankOptions");
  r.mutable_family_options()->set_value("\xff\xff");
  EXPECT_THAT(server::JobRecordFromSubmit(r).status().message(), HasSubstr("family_options.value is not a valid"));
  // Scaling applies (the toy reads feature columns); cross-validation does not (not pairwise).
  kls::v1::SubmitJobRequest cv = FixedRankRequest("d", 2, 1.0);
  cv.mutable_cross_validation();
  EXPECT_THAT(server::JobRecordFromSubmit(cv).status().message(),
              HasSubstr("cross_validation is set but method = fixed_rank; it chooses C / gamma for kl_admm, bcd_npkl "
                        "and simple_npkl only"));
}

class FamilyJobTest : public ServerJobTest {};

TEST_F(FamilyJobTest, ToyFamilyRunsEndToEndAndAnswersLikeItsCoreSolver) {
  const Dataset iris = Iris(40);
  const std::string id = Upload(iris);
  const kls::v1::Job job = Run(FixedRankRequest(id, 3, 0.5), "toy");
  EXPECT_EQ(job.method(), "fixed_rank");
  EXPECT_THAT(job.summary_json(), HasSubstr("\"method\":\"fixed_rank\""));
  kls::v1::KernelRef ref;
  ref.set_name("toy");
  auto exported = client_->ExportKernel(ref);
  ASSERT_TRUE(exported.ok()) << exported.status();
  EXPECT_EQ(exported->info.rank(), 3);
  toy::FixedRankOptions o;
  o.rank = 3;
  o.scale = 0.5;
  auto core = toy::SolveFixedRank(iris.features, o, SolveControl());
  ASSERT_TRUE(core.ok()) << core.status();
  const Eigen::MatrixXd k_service = exported->embedding * exported->embedding.transpose();
  const Eigen::MatrixXd k_core = core->kernel.embedding() * core->kernel.embedding().transpose();
  EXPECT_LT((k_service - k_core).norm(), 1e-9 * (1.0 + k_core.norm()));

  // A rank the data set cannot have is refused at submit, naming the field.
  auto too_big = client_->SubmitJob(FixedRankRequest(id, 41, 1.0));
  ASSERT_FALSE(too_big.ok());
  EXPECT_EQ(too_big.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(too_big.status().message(), HasSubstr("fixed_rank.rank = 41 exceeds the data set's 40 points"));
}

TEST_F(FamilyJobTest, EveryFamilyPublishesItsCertificateUnderOneName) {
  const std::string id = Upload(Iris(40));
  kls::v1::SubmitJobRequest mvu;
  mvu.set_dataset_id(id);
  mvu.mutable_qsdp()->set_problem(kls::v1::QsdpKernelOptions::REGMVU);
  const kls::v1::Job qsdp = Run(mvu, "mvu");
  ASSERT_TRUE(qsdp.has_certificate());
  EXPECT_TRUE(qsdp.certificate().certified());
  ASSERT_TRUE(qsdp.certificate().has_gap());
  EXPECT_LE(qsdp.certificate().gap(), 1e-6);
  EXPECT_TRUE(qsdp.certificate().has_lower_bound());
  EXPECT_TRUE(qsdp.certificate().has_kkt_residual());
  EXPECT_THAT(qsdp.summary_json(), HasSubstr("\"certificate\":{\"gap\":"));
  kls::v1::KernelRef ref;
  ref.set_name("mvu");
  auto info = client_->GetKernel(ref);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->certificate().SerializeAsString(), qsdp.certificate().SerializeAsString());

  // A family without a dual bound: no gap, not certified, under the same name.
  const kls::v1::Job toy = Run(FixedRankRequest(id, 2, 1.0), "toy");
  ASSERT_TRUE(toy.has_certificate());
  EXPECT_FALSE(toy.certificate().has_gap());
  EXPECT_FALSE(toy.certificate().certified());
  EXPECT_THAT(toy.summary_json(), HasSubstr("\"certificate\":{\"certified\":false}"));
}

}  // namespace
}  // namespace kls::testing
