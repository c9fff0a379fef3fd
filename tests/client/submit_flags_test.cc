// `kls submit`'s flags from the descriptor set (client/cli/submit_flags.h):
// families, flag spellings, value parsing, the errors before any RPC, and the
// request built — without a server.
#include "client/cli/submit_flags.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kls::cli {
namespace {

using ::testing::HasSubstr;

class CliSubmitFlagsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto made = SubmitFlags::FromKlsProtos();
    ASSERT_TRUE(made.ok()) << made.status();
    flags_ = std::move(made).value();
    flags_->AddFlags(&app_);
  }

  // Parses `args` (after "submit") and builds the request.
  StatusOr<kls::v1::SubmitJobRequest> Build(std::vector<std::string> args) {
    std::vector<std::string> reversed(args.rbegin(), args.rend());
    app_.parse(reversed);
    return flags_->BuildRequest();
  }

  std::string Help() const { return app_.help(); }

  CLI::App app_{"submit"};
  std::unique_ptr<SubmitFlags> flags_;
};

TEST_F(CliSubmitFlagsTest, FamiliesAreTheOneofFieldsAndTheAnnotatedMessages) {
  std::vector<std::string> names;
  for (const auto& f : flags_->families()) names.push_back(f.name);
  EXPECT_THAT(names, ::testing::IsSupersetOf({"kl_admm", "bcd_npkl", "simple_npkl", "qsdp", "embedding", "onk", "mkl",
                                              "npk_ranking", "social_strength"}));
  EXPECT_THAT(names, ::testing::Not(::testing::Contains("family_options")));
  const SubmitFlags::Family* kl = flags_->FindFamily("kl_admm");
  ASSERT_NE(kl, nullptr);
  EXPECT_FALSE(kl->packed);
  ASSERT_NE(kl->weight, nullptr);
  EXPECT_EQ(kl->weight->name(), "gamma");
  EXPECT_EQ(kl->job_fields, (std::set<std::string>{"graph", "cross_validation", "warm_start"}));
  EXPECT_EQ(flags_->FindFamily("bcd_npkl")->weight->name(), "c");
  EXPECT_EQ(flags_->FindFamily("qsdp")->job_fields, std::set<std::string>{"graph.connect"});
#ifdef KLS_TEST_FAMILIES
  const SubmitFlags::Family* fixed = flags_->FindFamily("fixed_rank");
  ASSERT_NE(fixed, nullptr) << "(kls.v1.family) is read from the descriptor set";
  EXPECT_TRUE(fixed->packed);
  EXPECT_EQ(fixed->options->full_name(), "kls.testing.FixedRankOptions");
#endif
}

TEST_F(CliSubmitFlagsTest, OneofFamilyFlagsFillItsOptions) {
  const auto r = Build({"--dataset", "ds-1", "--kernel", "k", "--method", "kl_admm", "--gamma", "10", "--rank", "3",
                        "--adaptive-rho", "false", "--threads", "2", "--seed", "7", "--graph-k", "4"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->dataset_id(), "ds-1");
  EXPECT_EQ(r->kernel_name(), "k");
  ASSERT_TRUE(r->has_kl_admm());
  EXPECT_EQ(r->kl_admm().gamma(), 10);
  EXPECT_EQ(r->kl_admm().rank(), 3);
  ASSERT_TRUE(r->kl_admm().has_adaptive_rho());
  EXPECT_FALSE(r->kl_admm().adaptive_rho());
  EXPECT_EQ(r->kl_admm().num_threads(), 2);  // --threads: (kls.v1.cli_alias)
  EXPECT_EQ(r->kl_admm().seed(), 7u);
  EXPECT_FALSE(r->kl_admm().has_tolerance());  // only flags given are set
  EXPECT_EQ(r->graph().k(), 4);
  EXPECT_FALSE(r->has_cross_validation());
}

TEST_F(CliSubmitFlagsTest, EnumsByNameAliasesAndTheirErrors) {
  auto r = Build({"--dataset", "d", "--method", "bcd_npkl", "--loss", "Square-Hinge", "--c", "2"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->bcd_npkl().loss(), kls::v1::SQUARE_HINGE);
  EXPECT_EQ(r->bcd_npkl().c(), 2);
}

TEST_F(CliSubmitFlagsTest, EnumValueAliases) {
  auto r = Build({"--dataset", "d", "--method", "mkl", "--algorithm", "2lmkl-inf", "--single-features", "0"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->mkl().method(), kls::v1::MklOptions::TWO_LAYER_INFINITE);
  EXPECT_FALSE(r->mkl().single_features());
}

TEST_F(CliSubmitFlagsTest, ABadEnumValueNamesTheFlagAndTheValues) {
  auto r = Build({"--dataset", "d", "--method", "qsdp", "--problem", "regxyz"});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("--problem = 'regxyz' is not one of regpcp, regmvu"));
}

TEST_F(CliSubmitFlagsTest, AFlagOfAnotherFamilyIsRejected) {
  auto r = Build({"--dataset", "d", "--method", "kl_admm", "--c", "2"});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("--c does not apply to --method kl_admm"));
}

TEST_F(CliSubmitFlagsTest, RequiresAndRequestLevelFlags) {
  auto klr = Build({"--dataset", "d", "--method", "social_strength", "--klr-c", "0.1"});
  ASSERT_FALSE(klr.ok());
  EXPECT_THAT(klr.status().message(),
              HasSubstr("--klr-c does not apply to --method social_strength unless --weighting klr"));
  auto graph = Build({"--dataset", "d", "--method", "onk", "--graph-k", "3"});
  ASSERT_FALSE(graph.ok());
  EXPECT_THAT(graph.status().message(), HasSubstr("--graph-k does not apply to --method onk"));
}

TEST_F(CliSubmitFlagsTest, SocialStrengthWithKlr) {
  auto r = Build({"--dataset", "d", "--method", "social_strength", "--weighting", "klr", "--klr-c", "0.1",
                  "--pair-kernel", "difference", "--seed", "3"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->social_strength().weighting(), kls::v1::SocialStrengthOptions::KLR);
  EXPECT_EQ(r->social_strength().klr_c(), 0.1);
  EXPECT_EQ(r->social_strength().klr_pair_kernel(), kls::v1::SocialStrengthOptions::DIFFERENCE);
  EXPECT_EQ(r->social_strength().klr_seed(), 3u);
}

TEST_F(CliSubmitFlagsTest, AutoSetsCrossValidationAndLeavesTheWeightUnset) {
  auto r = Build({"--dataset", "d", "--method", "kl_admm", "--gamma", "auto", "--cv-folds", "4", "--cv-grid", "0.5,2"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->kl_admm().has_gamma());
  EXPECT_EQ(r->cross_validation().folds(), 4);
  EXPECT_EQ(r->cross_validation().grid_size(), 2);
}

TEST_F(CliSubmitFlagsTest, AutoElsewhereAndCvFlagsAlone) {
  auto elsewhere = Build({"--dataset", "d", "--method", "mkl", "--c", "auto"});
  ASSERT_FALSE(elsewhere.ok());
  EXPECT_THAT(elsewhere.status().message(),
              HasSubstr("--c auto applies to kl_admm (--gamma), bcd_npkl and simple_npkl (--c)"));
  app_.clear();
  auto cv_alone = Build({"--dataset", "d", "--method", "bcd_npkl", "--cv-folds", "3"});
  ASSERT_FALSE(cv_alone.ok());
  EXPECT_THAT(cv_alone.status().message(),
              HasSubstr("--cv-folds, --cv-grid, --cv-threads and --cv-clusters need --c auto (kl_admm: --gamma auto)"));
}

TEST_F(CliSubmitFlagsTest, UnknownMethodListsTheFamilies) {
  auto r = Build({"--dataset", "d", "--method", "nope"});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("--method = 'nope' is not one of kl_admm, bcd_npkl, simple_npkl"));
}

TEST_F(CliSubmitFlagsTest, HelpComesFromTheProtoComments) {
  const std::string help = Help();
  EXPECT_THAT(help, HasSubstr("--accelerated"));
  EXPECT_THAT(help, HasSubstr("Accelerated projected gradient with restarts"));  // SimpleNpklOptions.accelerated
  EXPECT_THAT(help, HasSubstr("--threads"));
  EXPECT_THAT(help, HasSubstr("linear|hinge|square_hinge|square"));
}

#ifdef KLS_TEST_FAMILIES
TEST_F(CliSubmitFlagsTest, APackedFamilyTravelsInFamilyOptions) {
  const std::string help = Help();
  EXPECT_THAT(help, HasSubstr("--scale"));
  EXPECT_THAT(help, HasSubstr("Multiplies every kernel entry"));
  auto r = Build({"--dataset", "d", "--method", "fixed_rank", "--rank", "3", "--scale", "0.5"});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->has_family_options());
  EXPECT_EQ(r->family_options().type_url(), "type.googleapis.com/kls.testing.FixedRankOptions");
  const auto json = flags_->RequestJson(*r);
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_THAT(*json, HasSubstr("\"@type\":\"type.googleapis.com/kls.testing.FixedRankOptions\""));
  EXPECT_THAT(*json, HasSubstr("\"rank\":3"));
  EXPECT_THAT(*json, HasSubstr("\"scale\":0.5"));
  app_.clear();
  auto wrong = Build({"--dataset", "d", "--method", "fixed_rank", "--gamma", "1"});
  ASSERT_FALSE(wrong.ok());
  EXPECT_THAT(wrong.status().message(), HasSubstr("--gamma does not apply to --method fixed_rank"));
}
#endif

}  // namespace
}  // namespace kls::cli
