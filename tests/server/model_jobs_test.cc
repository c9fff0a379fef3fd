// Every solver family beyond NPKL through the in-process service: a KlsServer
// on port 0 with a temporary data dir, driven by the C++ client. Each test
// submits a job (qsdp, embedding, onk, mkl, npk_ranking, social_strength),
// waits for it, and checks the query answers against core called directly on
// the same data (Classify vs TrainClassifier, Similarity vs K = QYQᵀ, ReRank vs
// ReRankCandidates, RecommendFriends/Groups vs LearnSocialStrength), plus the
// model-query errors (a query on a kernel without the model it needs, bad
// shapes) and the new families' submit-time validation.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "client/client.h"
#include "core/data/constraint_generators.h"
#include "core/data/csv_reader.h"
#include "core/embed/embedding.h"
#include "core/mkl/classifier_training.h"
#include "core/qsdp/qsdp_solver.h"
#include "core/qsdp/reg_problems.h"
#include "core/ranking/rerank.h"
#include "core/social/community.h"
#include "core/social/harmonic_classifier.h"
#include "core/social/recommendation.h"
#include "core/social/social_model.h"
#include "server/kls_server.h"
#include "iris_subset.h"
#include "temp_dir.h"
#include "test_server.h"

namespace kls::server {
namespace {

using kls::testing::Ref;

using ::testing::HasSubstr;
using ::testing::Not;

class ModelJobsTest : public kls::testing::ServerJobTest {
 protected:
  // Generates an 80-user community (`seed`) and uploads it as a social data set; returns its id.
  std::string UploadCommunity(uint64_t seed, Community* community) {
    CommunityOptions co;
    co.num_users = 80;
    co.num_groups = 20;
    co.mean_photos = 4;
    co.seed = seed;
    auto generated = GenerateCommunity(co);
    EXPECT_TRUE(generated.ok()) << generated.status();
    if (!generated.ok()) return "";
    *community = std::move(generated).value();
    Dataset photos;
    photos.features = community->photo_visual;
    return Upload(photos, {}, community);
  }
};

TEST_F(ModelJobsTest, MklAndOnkClassifiersAnswerLikeCore) {
  const Dataset iris = testing::IrisRows(60);
  const std::string id = Upload(iris);
  for (const char* name : {"mkl", "onk", "umkl"}) {
    SCOPED_TRACE(name);
    const std::string method = std::string(name) == "umkl" ? "mkl" : name;
    kls::v1::SubmitJobRequest r;
    r.set_dataset_id(id);
    ClassifierTrainingOptions core;
    if (std::string(name) == "umkl") {
      r.mutable_mkl()->set_method(kls::v1::MklOptions::UNSUPERVISED);
      r.mutable_mkl()->set_single_features(false);
      r.mutable_mkl()->set_positive_class(0);
      core.method = ClassifierMethod::kUnsupervised;
      core.single_features = false;
    } else if (method == "mkl") {
      r.mutable_mkl()->set_method(kls::v1::MklOptions::KTA);
      r.mutable_mkl()->set_single_features(false);  // C by cross-validation (unit-trace kernels need a large C)
      r.mutable_mkl()->set_positive_class(0);
      core.method = ClassifierMethod::kKta;
      core.single_features = false;
    } else {
      r.mutable_onk()->set_c(1.0);
      r.mutable_onk()->set_rho(10.0);
      r.mutable_onk()->set_positive_class(0);
      core.method = ClassifierMethod::kOnk;
      core.onk.rho = 10.0;
      core.c = 1.0;
    }
    core.positive_class = 0;
    const kls::v1::Job job = Run(r, name);
    ASSERT_EQ(job.method(), method);

    auto expected = TrainClassifier(iris.features, iris.labels, core);
    ASSERT_TRUE(expected.ok()) << expected.status();
    // The C used is the summary's "c" (not a residual); no dual bound: not certified.
    char c_member[64];
    std::snprintf(c_member, sizeof(c_member), "\"c\":%.17g", expected->c);
    EXPECT_THAT(job.summary_json(), HasSubstr(c_member));
    EXPECT_THAT(job.summary_json(), HasSubstr("\"dual_residual\":0,"));
    EXPECT_FALSE(job.certificate().certified());
    // New points: perturbed training rows.
    Eigen::MatrixXd x = iris.features.topRows(10).array() + 0.05;
    kls::v1::ClassifyRequest c;
    *c.mutable_kernel() = Ref(name);
    c.set_dim(static_cast<int>(x.cols()));
    for (int i = 0; i < x.rows(); ++i)
      for (int j = 0; j < x.cols(); ++j) c.add_features(x(i, j));
    auto got = client_->Classify(c);
    ASSERT_TRUE(got.ok()) << got.status();
    auto f = expected->model.DecisionValues(x);
    ASSERT_TRUE(f.ok());
    ASSERT_EQ(got->decision_values_size(), 10);
    int agree = 0;
    for (int i = 0; i < 10; ++i) {
      EXPECT_NEAR(got->decision_values(i), (*f)[i], 1e-6 * (1 + std::abs((*f)[i])));
      EXPECT_EQ(got->labels(i), (*f)[i] > 0 ? 0 : -1);  // three classes: one-vs-rest
      agree += got->labels(i) == 0;
    }
    EXPECT_GE(agree, 9);  // rows 0..9 are class 0 (setosa), linearly separable
    // The stored kernel is the training kernel: similarity queries work on it.
    auto sim = client_->Similarity(Ref(name), {{0, 1}, {5, 5}});
    ASSERT_TRUE(sim.ok()) << sim.status();
    EXPECT_NEAR((*sim)[0], expected->train_kernel(0, 1), 1e-6);
    EXPECT_NEAR((*sim)[1], expected->train_kernel(5, 5), 1e-6);

    c.set_dim(3);  // wrong dimension
    auto bad = client_->Classify(c);
    EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  }
}

TEST_F(ModelJobsTest, QsdpRegPcpKernelEqualsQyqFromCore) {
  const Dataset iris = testing::IrisRows(90);
  auto constraints = GeneratePerClassConstraints(iris.labels, 10, 10, 3);
  ASSERT_TRUE(constraints.ok());
  const std::string id = Upload(iris, *constraints);
  kls::v1::SubmitJobRequest r;
  r.set_dataset_id(id);
  r.mutable_qsdp()->set_problem(kls::v1::QsdpKernelOptions::REGPCP);
  r.mutable_qsdp()->set_m(8);
  r.mutable_qsdp()->set_neighbors(10);
  r.mutable_qsdp()->set_gap_tolerance(1e-8);
  Run(r, "pcp");

  RegPcpOptions po;
  po.m = 8;
  po.neighbors = 10;
  auto problem = BuildRegPcp(iris.features, *constraints, po);
  ASSERT_TRUE(problem.ok()) << problem.status();
  QsdpOptions so;
  so.gap_tolerance = 1e-8;
  auto solved = SolveQsdp(problem->problem, so);
  ASSERT_TRUE(solved.ok());
  const Eigen::MatrixXd k = problem->basis.vectors * solved->y * problem->basis.vectors.transpose();
  std::vector<std::pair<int, int>> pairs = {{0, 0}, {0, 1}, {0, 89}, {30, 60}, {45, 46}};
  auto sim = client_->Similarity(Ref("pcp"), pairs);
  ASSERT_TRUE(sim.ok()) << sim.status();
  for (size_t t = 0; t < pairs.size(); ++t) {
    EXPECT_NEAR((*sim)[t], k(pairs[t].first, pairs[t].second), 1e-5 * (1 + k.diagonal().maxCoeff()));
  }
  // RegPCP without constraints is refused at submit time.
  const std::string bare = Upload(iris);
  r.set_dataset_id(bare);
  auto job = client_->SubmitJob(r);
  EXPECT_EQ(job.status().code(), StatusCode::kFailedPrecondition);
}

TEST_F(ModelJobsTest, EmbeddingJobStoresPrincipalCoordinates) {
  const Dataset iris = testing::IrisRows(60);
  const std::string id = Upload(iris);
  kls::v1::SubmitJobRequest r;
  r.set_dataset_id(id);
  r.mutable_embedding()->set_method(kls::v1::EmbeddingOptions::KPCA);
  r.mutable_embedding()->set_dims(2);
  Run(r, "kpca");
  KpcaOptions ko;
  ko.dims = 2;
  auto kernel = KernelPca(iris.features, ko);
  ASSERT_TRUE(kernel.ok());
  auto coords = PrincipalCoordinates(*kernel, 2);
  ASSERT_TRUE(coords.ok());
  const Eigen::MatrixXd k = *coords * coords->transpose();
  auto sim = client_->Similarity(Ref("kpca"), {{0, 1}, {10, 50}, {7, 7}});
  ASSERT_TRUE(sim.ok()) << sim.status();
  EXPECT_NEAR((*sim)[0], k(0, 1), 1e-8 * (1 + k.norm()));
  EXPECT_NEAR((*sim)[1], k(10, 50), 1e-8 * (1 + k.norm()));
  EXPECT_NEAR((*sim)[2], k(7, 7), 1e-8 * (1 + k.norm()));
  auto info = client_->GetKernel(Ref("kpca"));
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->rank(), 2);

  // SPE through the SimpleNPKL loop: converges and stores a 2-D embedding.
  r.mutable_embedding()->set_method(kls::v1::EmbeddingOptions::SPE);
  r.mutable_embedding()->set_neighbors(4);
  r.mutable_embedding()->set_max_iterations(200);
  Run(r, "spe");
  auto spe = client_->GetKernel(Ref("spe"));
  ASSERT_TRUE(spe.ok());
  EXPECT_EQ(spe->rank(), 2);
  EXPECT_THAT(spe->summary_json(), HasSubstr("\"method\":\"embedding\""));

  // MVE with relative_slack reaches the solver: the stored coordinates are
  // those of core SolveMve with the same options (the job's scaling
  // ‖HXXᵀH‖_F² = n, B = n), and differ from the absolute-slack job's.
  r.mutable_embedding()->set_method(kls::v1::EmbeddingOptions::MVE);
  r.mutable_embedding()->set_max_iterations(3000);
  r.mutable_embedding()->set_relative_slack(true);
  // The solves themselves are compared: on this iris sample the start guard
  // keeps the start for both jobs and would return KPCA's coordinates twice.
  r.mutable_embedding()->set_keep_start_unless_better(false);
  Run(r, "mve_rel");
  r.mutable_embedding()->set_relative_slack(false);
  Run(r, "mve_abs");
  {
    // The job's scaling, by the same core function: MVE's minorize-maximize
    // path is not convex, so inputs that differ at rounding level can end
    // 1e-4 apart after the 20-update cap; the same input gives the same K.
    const Eigen::MatrixXd x = ScaledToUnitInputGram(iris.features);
    {
      const Eigen::MatrixXd c = x.rowwise() - x.colwise().mean();
      ASSERT_NEAR((c * c.transpose()).squaredNorm(), static_cast<double>(x.rows()), 1e-9 * x.rows());
    }
    auto graph = BuildNeighborhood(x, 4);
    ASSERT_TRUE(graph.ok());
    MveOptions mo;
    mo.inner.b = static_cast<double>(x.rows());
    mo.inner.max_iterations = 3000;
    mo.inner.relative_slack = true;
    mo.keep_start_unless_better = false;
    auto mve = SolveMve(MveProblem{*graph, LearnedKernel::Embedding(x)}, mo);
    ASSERT_TRUE(mve.ok()) << mve.status();
    EXPECT_GT(mve->slack_weight, 10.0);  // iris's neighbour distances are small on this scale
    auto mc = PrincipalCoordinates(mve->kernel, 2);
    ASSERT_TRUE(mc.ok());
    const Eigen::MatrixXd km = *mc * mc->transpose();
    auto rel = client_->Similarity(Ref("mve_rel"), {{0, 1}, {10, 50}, {7, 7}});
    auto abs = client_->Similarity(Ref("mve_abs"), {{0, 1}, {10, 50}, {7, 7}});
    ASSERT_TRUE(rel.ok()) << rel.status();
    ASSERT_TRUE(abs.ok()) << abs.status();
    EXPECT_NEAR((*rel)[0], km(0, 1), 1e-6 * (1 + km.norm()));
    EXPECT_NEAR((*rel)[1], km(10, 50), 1e-6 * (1 + km.norm()));
    EXPECT_NEAR((*rel)[2], km(7, 7), 1e-6 * (1 + km.norm()));
    EXPECT_GT(std::abs((*rel)[1] - (*abs)[1]), 1e-3 * (1 + km.norm()));
  }
  r.clear_embedding();
  r.mutable_embedding()->set_neighbors(4);

  // CMVU needs labels.
  Dataset unlabeled = iris;
  unlabeled.labels.clear();
  r.set_dataset_id(Upload(unlabeled));
  r.mutable_embedding()->set_method(kls::v1::EmbeddingOptions::CMVU);
  EXPECT_EQ(client_->SubmitJob(r).status().code(), StatusCode::kFailedPrecondition);
  r.mutable_embedding()->set_method(kls::v1::EmbeddingOptions::METHOD_UNSPECIFIED);
  auto missing = client_->SubmitJob(r);
  EXPECT_EQ(missing.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(missing.status().message(), HasSubstr("embedding.method"));
}

// Issue 23 in the service: an MVE job whose capacity is too small for the k-NN
// distances (B = 0.1·n on wine) would return an embedding that shatters the
// neighbourhoods; the job returns its start, linear KPCA's coordinates, and
// its summary says so with the scores — neighbourhood preservation, and on a
// labelled data set also the labels' leave-one-out k-NN accuracy. With the guard off
// the job returns the shattered solve.
TEST_F(ModelJobsTest, EmbeddingMveJobKeepsTheKpcaStartWhenTheSolveShattersNeighbourhoods) {
  auto wine = ReadCsvFile(std::string(KLS_TEST_DATA_DIR) + "/wine.csv");
  ASSERT_TRUE(wine.ok()) << wine.status();
  // The first 50 points of classes 0 and 1, alternating, standardized (as core's test).
  const int n = 100;
  Dataset d;
  d.features.resize(n, wine->dim());
  std::vector<int> rows[2];
  for (int i = 0; i < wine->num_points(); ++i)
    if (wine->labels[i] < 2) rows[wine->labels[i]].push_back(i);
  for (int t = 0; t < n; ++t) {
    d.features.row(t) = wine->features.row(rows[t % 2][t / 2]);
    d.labels.push_back(t % 2);
  }
  d.features.rowwise() -= d.features.colwise().mean();
  for (Eigen::Index j = 0; j < d.features.cols(); ++j) d.features.col(j) /= d.features.col(j).norm() / std::sqrt(n - 1.0);
  Dataset unlabeled = d;
  unlabeled.labels.clear();

  // The start, computed here: linear KPCA of the job's input (scaled so ‖HXXᵀH‖_F² = n).
  const Eigen::MatrixXd x = ScaledToUnitInputGram(d.features);
  KpcaOptions ko;
  ko.dims = 2;
  auto kpca = KernelPca(x, ko);
  ASSERT_TRUE(kpca.ok());
  auto kc = PrincipalCoordinates(*kpca, 2);
  ASSERT_TRUE(kc.ok());
  const Eigen::MatrixXd k = *kc * kc->transpose();
  const std::vector<std::pair<int, int>> pairs = {{0, 1}, {10, 50}, {7, 7}, {3, 98}};
  auto same_as_kpca = [&](const std::string& name) {
    auto sim = client_->Similarity(Ref(name), pairs);
    EXPECT_TRUE(sim.ok()) << sim.status();
    if (!sim.ok()) return false;
    bool same = true;
    for (size_t t = 0; t < pairs.size(); ++t)
      same = same && std::abs((*sim)[t] - k(pairs[t].first, pairs[t].second)) <= 1e-8 * (1 + k.norm());
    return same;
  };

  kls::v1::SubmitJobRequest r;
  r.set_dataset_id(Upload(unlabeled));
  r.mutable_embedding()->set_method(kls::v1::EmbeddingOptions::MVE);
  r.mutable_embedding()->set_b(0.1 * n);
  r.mutable_embedding()->set_relative_slack(true);
  r.mutable_embedding()->set_max_iterations(3000);
  kls::v1::Job job = Run(r, "mve_unlabeled");
  std::printf("%s\n", job.summary_json().c_str());
  EXPECT_THAT(job.summary_json(), HasSubstr("\"mve_start_guard\":{\"kept\":\"start\",\"criterion\":"
                                            "\"neighbourhoods\",\"k\":5,\"start_neighbourhood_preservation\":"));
  EXPECT_THAT(job.summary_json(), HasSubstr("\"mve_start_guard_note\":\"kept the KPCA start: 5-NN neighbourhood "
                                            "preservation "));
  EXPECT_THAT(job.summary_json(), Not(HasSubstr("loo_knn_accuracy")));
  EXPECT_TRUE(same_as_kpca("mve_unlabeled"));
  // The summary's scores are core's, for the unguarded solve and the start.
  {
    auto graph = BuildNeighborhood(x, 5);
    ASSERT_TRUE(graph.ok());
    MveOptions mo;
    mo.inner.b = 0.1 * n;
    mo.inner.relative_slack = true;
    mo.inner.max_iterations = 3000;
    auto mve = SolveMve(MveProblem{*graph, LearnedKernel::Embedding(x)}, mo);
    ASSERT_TRUE(mve.ok()) << mve.status();
    ASSERT_TRUE(mve->mve_start.has_value());
    EXPECT_TRUE(mve->mve_start->kept_start);
    EXPECT_GT(mve->mve_start->start_preservation, mve->mve_start->solve_preservation + 0.1);
    EXPECT_THAT(job.summary_json(), HasSubstr(mve->mve_start->Json()));
  }

  // A labelled data set: leave-one-out 5-NN accuracy is scored too, the start is kept.
  r.set_dataset_id(Upload(d));
  job = Run(r, "mve_labeled");
  EXPECT_THAT(job.summary_json(), HasSubstr("\"kept\":\"start\",\"criterion\":\"labels and neighbourhoods\""));
  EXPECT_THAT(job.summary_json(), HasSubstr("\"labeled_points\":100,\"start_loo_knn_accuracy\":"));
  EXPECT_TRUE(same_as_kpca("mve_labeled"));

  // The guard off: the job returns the solve, not KPCA's coordinates, and says nothing about a start.
  r.mutable_embedding()->set_keep_start_unless_better(false);
  job = Run(r, "mve_unguarded");
  EXPECT_THAT(job.summary_json(), Not(HasSubstr("mve_start_guard")));
  EXPECT_FALSE(same_as_kpca("mve_unguarded"));
}

TEST_F(ModelJobsTest, NpkRankingThenReRankMatchesCore) {
  // Items in three visual clusters; tags follow the clusters with noise.
  std::mt19937 rng(5);
  std::normal_distribution<double> noise(0.0, 0.3);
  std::bernoulli_distribution flip(0.2);
  const int n = 45, vocab = 6;
  Dataset visual, text;
  visual.features.resize(n, 3);
  text.features = Eigen::MatrixXd::Zero(n, vocab);
  for (int i = 0; i < n; ++i) {
    const int c = i % 3;
    for (int j = 0; j < 3; ++j) visual.features(i, j) = (j == c ? 2.0 : 0.0) + noise(rng);
    text.features(i, 2 * c) = 1;
    if (flip(rng)) text.features(i, (2 * c + 3) % vocab) = 1;
  }
  const std::string vid = Upload(visual), tid = Upload(text);
  kls::v1::SubmitJobRequest r;
  r.set_dataset_id(vid);
  r.mutable_npk_ranking()->set_text_dataset_id(tid);
  r.mutable_npk_ranking()->set_low_rank(10);
  r.mutable_npk_ranking()->set_constraint_neighbors(4);
  r.mutable_npk_ranking()->set_laplacian_neighbors(6);
  Run(r, "npk");

  kls::v1::ReRankRequest q;
  *q.mutable_kernel() = Ref("npk");
  const std::vector<int> candidates = {0, 3, 6, 1, 4, 2, 9, 12};
  for (int c : candidates) q.add_candidates(c);
  for (size_t t = 0; t < candidates.size(); ++t) q.add_prior(1.0 / (1 + t));
  auto got = client_->ReRank(q);
  ASSERT_TRUE(got.ok()) << got.status();
  auto stored = server_->store()->LoadKernel("npk", 0);
  ASSERT_TRUE(stored.ok());
  Eigen::VectorXd prior(candidates.size());
  for (size_t t = 0; t < candidates.size(); ++t) prior[t] = 1.0 / (1 + t);
  auto expected = ReRankCandidates(*stored, candidates, prior, VisualRankOptions());
  ASSERT_TRUE(expected.ok());
  ASSERT_EQ(got->items_size(), static_cast<int>(candidates.size()));
  for (int t = 0; t < got->items_size(); ++t) {
    EXPECT_EQ(got->items(t).index(), (*expected)[t].index);
    EXPECT_NEAR(got->items(t).score(), (*expected)[t].score, 1e-12);
  }
  // Duplicate candidates, a bad prior and an unknown text data set are refused.
  q.add_candidates(0);
  q.add_prior(1);
  EXPECT_EQ(client_->ReRank(q).status().code(), StatusCode::kInvalidArgument);
  q.clear_prior();
  q.add_prior(-1);
  EXPECT_EQ(client_->ReRank(q).status().code(), StatusCode::kInvalidArgument);
  r.mutable_npk_ranking()->set_text_dataset_id("nope");
  EXPECT_EQ(client_->SubmitJob(r).status().code(), StatusCode::kNotFound);
}

TEST_F(ModelJobsTest, SocialStrengthJobRecommendsLikeCore) {
  Community data;
  const std::string id = UploadCommunity(11, &data);
  ASSERT_FALSE(id.empty());
  const Community* community = &data;
  kls::v1::SubmitJobRequest r;
  r.set_dataset_id(id);
  r.mutable_social_strength()->set_weighting(kls::v1::SocialStrengthOptions::KTA);
  Run(r, "social");

  auto expected = LearnSocialStrength(*community, SocialStrengthOptions());
  ASSERT_TRUE(expected.ok()) << expected.status();
  for (int u : {0, 17, 79}) {
    for (bool groups : {false, true}) {
      kls::v1::RecommendRequest q;
      *q.mutable_kernel() = Ref("social");
      q.set_user(u);
      q.set_k(5);
      auto got = client_->Recommend(q, groups);
      ASSERT_TRUE(got.ok()) << got.status();
      const auto want = groups ? RecommendGroups(expected->strength, expected->graph, u, 5)
                               : RecommendFriends(expected->strength, expected->graph, u, 5);
      ASSERT_EQ(got->items_size(), static_cast<int>(want.size()));
      for (int t = 0; t < got->items_size(); ++t) {
        EXPECT_NEAR(got->items(t).score(), want[t].score, 1e-8 * (1 + std::abs(want[t].score)));
        if (!groups) {
          for (int c : community->contacts[u]) EXPECT_NE(got->items(t).index(), c);  // existing friends excluded
        }
      }
    }
  }
  kls::v1::SocialStrengthRequest s;
  *s.mutable_kernel() = Ref("social");
  s.add_u(3);
  s.add_v(4);
  auto strength = client_->SocialStrength(s);
  ASSERT_TRUE(strength.ok()) << strength.status();
  EXPECT_NEAR(strength->values(0), expected->strength.value(3, 4), 1e-8);

  // A social query on a kernel without a social graph, a user out of range,
  // and a social job on an ordinary data set.
  const Dataset iris = testing::IrisRows(30);
  kls::v1::SubmitJobRequest k;
  k.set_dataset_id(Upload(iris));
  k.mutable_embedding()->set_method(kls::v1::EmbeddingOptions::KPCA);
  Run(k, "plain");
  kls::v1::RecommendRequest q;
  *q.mutable_kernel() = Ref("plain");
  q.set_k(3);
  auto no_model = client_->Recommend(q, false);
  EXPECT_EQ(no_model.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(no_model.status().message(), HasSubstr("social_strength"));
  *q.mutable_kernel() = Ref("social");
  q.set_user(80);
  EXPECT_EQ(client_->Recommend(q, false).status().code(), StatusCode::kInvalidArgument);
  r.set_dataset_id(k.dataset_id());
  r.set_kernel_name("bad");
  auto job = client_->SubmitJob(r);
  ASSERT_TRUE(job.ok());
  auto done = client_->WatchJob(job->id(), [](const kls::v1::Job&) {}, 60);
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done->state(), kls::v1::FAILED);
  EXPECT_THAT(done->error(), HasSubstr("not a social data set"));
}

TEST_F(ModelJobsTest, SocialKlrJobServesThePairwiseModelAndHarmonicClasses) {
  Community data;
  const std::string id = UploadCommunity(12, &data);
  ASSERT_FALSE(id.empty());
  const Community* community = &data;
  kls::v1::SubmitJobRequest r;
  r.set_dataset_id(id);
  auto* o = r.mutable_social_strength();
  o->set_weighting(kls::v1::SocialStrengthOptions::KLR);
  o->set_klr_import_vectors(15);
  o->set_klr_seed(5);
  Run(r, "klr");

  SocialStrengthOptions so;
  so.weighting = StrengthWeighting::kKlr;
  so.klr.max_import_vectors = 15;
  so.klr.seed = so.klr_pairs.seed = 5;
  auto expected = LearnSocialStrength(*community, so);
  ASSERT_TRUE(expected.ok()) << expected.status();
  ASSERT_TRUE(expected->klr.has_value());
  auto klr = KlrStrength::Create(expected->strength, *expected->klr);
  ASSERT_TRUE(klr.ok()) << klr.status();

  // SocialStrength answers σ(f(u, v)) of the pairwise model, not the kernel.
  kls::v1::SocialStrengthRequest s;
  *s.mutable_kernel() = Ref("klr");
  for (auto [u, v] : {std::pair{3, 4}, {4, 3}, {0, 79}, {10, 10}}) {
    s.add_u(u);
    s.add_v(v);
  }
  auto strength = client_->SocialStrength(s);
  ASSERT_TRUE(strength.ok()) << strength.status();
  for (int t = 0; t < s.u_size(); ++t) {
    const double want = klr->Score(expected->strength, s.u(t), s.v(t));
    EXPECT_NEAR(strength->values(t), want, 1e-8);
    EXPECT_GT(strength->values(t), 0.0);
    EXPECT_LT(strength->values(t), 1.0);
  }
  for (int u : {0, 41}) {
    for (bool groups : {false, true}) {
      kls::v1::RecommendRequest q;
      *q.mutable_kernel() = Ref("klr");
      q.set_user(u);
      q.set_k(5);
      auto got = client_->Recommend(q, groups);
      ASSERT_TRUE(got.ok()) << got.status();
      const Eigen::VectorXd row = klr->Row(expected->strength, u);
      const auto want = groups ? RecommendGroupsFromRow(row, expected->graph.groups, expected->graph.num_groups, u, 5)
                               : RecommendFriendsFromRow(row, expected->graph.contacts[u], u, 5);
      ASSERT_EQ(got->items_size(), static_cast<int>(want.size()));
      for (int t = 0; t < got->items_size(); ++t) {
        EXPECT_EQ(got->items(t).index(), want[t].index);
        EXPECT_NEAR(got->items(t).score(), want[t].score, 1e-8 * (1 + std::abs(want[t].score)));
      }
    }
  }

  // ClassifyUsers (§7.5.3): harmonic classes of "lives in city 0" from 20 labelled users.
  kls::v1::ClassifyUsersRequest c;
  *c.mutable_kernel() = Ref("klr");
  std::vector<int> labelled, labels;
  for (int u = 0; u < 80; u += 4) {
    labelled.push_back(u);
    labels.push_back(community->home_city[u] == 0 ? 1 : 0);
    c.add_labelled_users(u);
    c.add_labels(labels.back());
  }
  if (std::set<int>(labels.begin(), labels.end()).size() < 2) {
    labels[0] = 1 - labels[0];
    c.set_labels(0, labels[0]);
  }
  c.set_class_mass_normalization(true);
  auto classes = client_->ClassifyUsers(c);
  ASSERT_TRUE(classes.ok()) << classes.status();
  HarmonicOptions ho;
  ho.class_mass_normalization = true;
  auto want = HarmonicClassify(StrengthGraphWeights(expected->strength, &*klr), labelled, labels, 0, ho);
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_EQ(classes->users_size(), 80);
  for (int u = 0; u < 80; ++u) {
    EXPECT_EQ(classes->users(u), u);
    EXPECT_EQ(classes->labels(u), want->labels[u]) << u;
    EXPECT_NEAR(classes->scores(u), want->scores(u, want->labels[u]), 1e-8);
  }
  c.add_users(7);
  c.add_users(8);
  classes = client_->ClassifyUsers(c);
  ASSERT_TRUE(classes.ok()) << classes.status();
  ASSERT_EQ(classes->users_size(), 2);
  EXPECT_EQ(classes->labels(1), want->labels[8]);

  // Bad input: mismatched lists, a user out of range, one class only, a model without a social graph,
  // KLR options with the KTA weighting, C <= 0.
  kls::v1::ClassifyUsersRequest bad = c;
  bad.add_labels(0);
  EXPECT_EQ(client_->ClassifyUsers(bad).status().code(), StatusCode::kInvalidArgument);
  bad = c;
  bad.set_labelled_users(1, 80);
  auto out_of_range = client_->ClassifyUsers(bad);
  EXPECT_EQ(out_of_range.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(out_of_range.status().message(), HasSubstr("labelled_users[1]"));
  bad = c;
  for (int t = 0; t < bad.labels_size(); ++t) bad.set_labels(t, 0);
  EXPECT_EQ(client_->ClassifyUsers(bad).status().code(), StatusCode::kInvalidArgument);
  bad = c;
  bad.set_labels(2, -1);
  EXPECT_THAT(client_->ClassifyUsers(bad).status().message(), HasSubstr("labels[2] = -1"));
  kls::v1::SubmitJobRequest wrong = r;
  wrong.mutable_social_strength()->set_weighting(kls::v1::SocialStrengthOptions::KTA);
  auto rejected = client_->SubmitJob(wrong);
  EXPECT_EQ(rejected.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(rejected.status().message(), HasSubstr("social_strength.klr_import_vectors is set but weighting = KTA"));
  wrong = r;
  wrong.mutable_social_strength()->set_klr_c(0);
  rejected = client_->SubmitJob(wrong);
  EXPECT_EQ(rejected.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(rejected.status().message(), HasSubstr("social_strength.klr_c = 0"));
}

TEST_F(ModelJobsTest, SocialUploadRejectsBadRecords) {
  CommunityOptions co;
  co.num_users = 10;
  co.mean_photos = 1;
  auto community = GenerateCommunity(co);
  ASSERT_TRUE(community.ok());
  Community bad = *community;
  bad.contacts[0].push_back(10);  // user 10 of 10
  Dataset photos;
  photos.features = bad.photo_visual;
  UploadOptions o;
  auto info = client_->UploadDataset(photos, {}, o, &bad);
  EXPECT_EQ(info.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(info.status().message(), HasSubstr("contact"));
  auto listed = client_->ListDatasets();
  ASSERT_TRUE(listed.ok());
  EXPECT_TRUE(listed->empty());
}

}  // namespace
}  // namespace kls::server
