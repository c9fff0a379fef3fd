// Encodings of model attachments and social data sets: round trips are exact,
// and damaged input is DATA_LOSS / INVALID_ARGUMENT, never a crash or a
// silently wrong model.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "core/data/csv_reader.h"
#include "core/mkl/classifier_training.h"
#include "core/social/community.h"
#include "core/social/community_csv.h"
#include "core/social/pairwise_klr.h"
#include "core/social/social_model.h"

namespace kls {
namespace {

using ::testing::HasSubstr;

Dataset Iris() {
  auto iris = ReadCsvFile(std::string(KLS_TEST_DATA_DIR) + "/iris.csv");
  EXPECT_TRUE(iris.ok()) << iris.status();
  return *iris;
}

TEST(ClassifierIoTest, RoundTripPredictsIdentically) {
  const Dataset iris = Iris();
  ClassifierTrainingOptions o;
  o.method = ClassifierMethod::kKta;
  o.single_features = true;  // C by 5-fold cross-validation
  o.positive_class = 1;
  auto trained = TrainClassifier(iris.features, iris.labels, o);
  ASSERT_TRUE(trained.ok()) << trained.status();
  EXPECT_GT(trained->training_accuracy, 0.9);
  const std::string bytes = SerializeClassifier(trained->model);
  auto parsed = ParseClassifier(bytes);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  auto a = trained->model.DecisionValues(iris.features);
  auto b = parsed->DecisionValues(iris.features);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);  // bit for bit
  EXPECT_EQ(parsed->positive_class, 1);
  EXPECT_EQ(parsed->negative_class, -1);  // three classes: one-vs-rest

  for (size_t cut : {size_t{0}, size_t{7}, bytes.size() / 2, bytes.size() - 1}) {
    auto truncated = ParseClassifier(bytes.substr(0, cut));
    EXPECT_EQ(truncated.status().code(), StatusCode::kDataLoss) << cut;
  }
  std::string wrong = bytes;
  wrong[4] = 9;  // version
  EXPECT_THAT(ParseClassifier(wrong).status().message(), HasSubstr("version"));
  EXPECT_EQ(ParseClassifier(bytes + "x").status().code(), StatusCode::kDataLoss);
}

TEST(ClassifierTrainingTest, ValidateNamesTheFieldUnderThePath) {
  ClassifierTrainingOptions o;
  EXPECT_TRUE(o.Validate("mkl").ok());
  o.folds = 1;
  EXPECT_EQ(o.Validate("mkl").message(), "mkl.folds = 1 must be >= 2");
  EXPECT_EQ(o.Validate().message(), "options.folds = 1 must be >= 2");
  o = {};
  o.c = -3;
  EXPECT_EQ(o.Validate("mkl").message(), "mkl.c = -3 must be finite and > 0 (unset = cross-validation)");
  o.c = 0.0;  // a set 0 is an error, not "choose by cross-validation"
  EXPECT_EQ(o.Validate("mkl").message(), "mkl.c = 0 must be finite and > 0 (unset = cross-validation)");
  // kOnk: the ONK options sit under the same path, as the onk family's message spells them.
  o = {};
  o.method = ClassifierMethod::kOnk;
  o.onk.rho = 0;
  EXPECT_EQ(o.Validate("onk").message(), "onk.rho = 0 must be finite and > 0");
  o.onk.rho = 100;
  o.sigma_k = 0;
  EXPECT_EQ(o.Validate("onk").message(), "onk.sigma_k = 0 must be >= 1");
}

TEST(ClassifierTrainingTest, RejectsBadOptionsAndLabels) {
  const Dataset iris = Iris();
  ClassifierTrainingOptions o;
  o.folds = 1;
  EXPECT_THAT(TrainClassifier(iris.features, iris.labels, o).status().message(), HasSubstr("folds = 1"));
  o = {};
  o.positive_class = 7;
  EXPECT_THAT(TrainClassifier(iris.features, iris.labels, o).status().message(), HasSubstr("positive_class = 7"));
  std::vector<int> one(iris.labels.size(), 0);
  EXPECT_EQ(TrainClassifier(iris.features, one, {}).status().code(), StatusCode::kInvalidArgument);
}

TEST(SocialIoTest, CommunityCsvAndRelationsRoundTrip) {
  CommunityOptions co;
  co.num_users = 40;
  co.num_groups = 12;
  co.mean_photos = 3;
  co.seed = 3;
  auto data = GenerateCommunity(co);
  ASSERT_TRUE(data.ok());
  const std::string dir = ::testing::TempDir() + "/kls_community_csv";
  ASSERT_TRUE(WriteCommunityCsv(*data, dir).ok());
  auto read = ReadCommunityCsv(dir);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->num_users, data->num_users);
  EXPECT_EQ(read->contacts, data->contacts);
  EXPECT_EQ(read->groups, data->groups);
  EXPECT_EQ(read->photo_owner, data->photo_owner);
  EXPECT_EQ(read->favourites, data->favourites);
  EXPECT_TRUE(read->photo_visual.isApprox(data->photo_visual, 1e-15));
  EXPECT_EQ(read->photo_tags.nonZeros(), data->photo_tags.nonZeros());

  const std::string bytes = SerializeCommunityRelations(*read);
  auto parsed = ParseCommunityRelations(bytes, read->photo_visual);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->comments.size(), read->comments.size());
  EXPECT_EQ(parsed->contacts, read->contacts);
  EXPECT_EQ(ParseCommunityRelations(bytes.substr(0, bytes.size() - 3), read->photo_visual).status().code(),
            StatusCode::kDataLoss);

  // A malformed file names the file, row and field.
  {
    std::ofstream f(dir + "/contacts.csv", std::ios::app);
    f << "3,x\n";
  }
  auto bad = ReadCommunityCsv(dir);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("contacts.csv"));
  std::filesystem::remove_all(dir);
}

// Ids beyond the service's bounds are errors naming the file, row and field,
// not allocations of their size (a contact id of 2e9 used to ask for 2e9
// contact lists; a day of 1e300 was cast to int).
TEST(SocialIoTest, CommunityCsvBoundsIdsAndDays) {
  const std::string photos = "owner,day,latitude,longitude,v0\n0,1,10,20,0.5\n1,2,11,21,0.25\n";
  auto parse = [&](const std::string& file, const std::string& content, const std::string& photo_file = "") {
    std::map<std::string, std::string> files{{"photos.csv", photo_file.empty() ? photos : photo_file}};
    if (!file.empty()) files[file] = content;
    return ParseCommunityCsv(files);
  };
  ASSERT_TRUE(parse("contacts.csv", "user_a,user_b\n0,1\n").ok());
  const auto big_contact = parse("contacts.csv", "user_a,user_b\n0,2000000000\n");
  EXPECT_EQ(big_contact.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(big_contact.status().message(), HasSubstr("contacts.csv row 1: user_b = '2000000000'"));
  EXPECT_THAT(parse("groups.csv", "user,group\n0,1000000\n").status().message(), HasSubstr("group"));
  EXPECT_THAT(parse("tags.csv", "photo,tag\n2,0\n").status().message(), HasSubstr("tags.csv row 1: photo = '2'"));
  EXPECT_THAT(parse("", "", "owner,day,latitude,longitude,v0\n0,1e300,10,20,0.5\n").status().message(),
              HasSubstr("day = '1e300' is not an integer day number"));
  EXPECT_EQ(ParseCommunityCsv({}).status().code(), StatusCode::kNotFound);
}

TEST(SocialIoTest, SocialGraphRejectsOutOfRangeIds) {
  SocialGraph g;
  g.num_groups = 2;
  g.contacts = {{1}, {0}};
  g.groups = {{0}, {1}};
  auto ok = ParseSocialGraph(SerializeSocialGraph(g), 2);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->contacts, g.contacts);
  EXPECT_EQ(ParseSocialGraph(SerializeSocialGraph(g), 3).status().code(), StatusCode::kDataLoss);
  g.groups = {{0}, {2}};
  EXPECT_THAT(ParseSocialGraph(SerializeSocialGraph(g), 2).status().message(), HasSubstr("groups[1]"));
}

// A random PSD user kernel (factored) and a random KLR model on it.
struct KlrFixture {
  LearnedKernel kernel;
  PairwiseKlrModel model;
};
KlrFixture RandomKlr(PairKernelSpec spec, int n = 25, int q = 7, unsigned seed = 3) {
  std::srand(seed);
  LearnedKernel::Embedding x = LearnedKernel::Embedding::Random(n, 4);
  auto k = LearnedKernel::FromEmbedding(x);
  EXPECT_TRUE(k.ok());
  KlrFixture f{*k, {}};
  f.model.pair_kernel = spec;
  f.model.num_users = n;
  f.model.alpha = Eigen::VectorXd::Random(q);
  for (int s = 0; s < q; ++s) f.model.import_pairs.push_back({(3 * s + 1) % n, (5 * s + 2) % n});
  return f;
}

TEST(KlrStrengthTest, FactoredRowsAndScoresEqualTheDenseStrengthMatrix) {
  PairKernelSpec product, difference, printed;
  difference.kind = printed.kind = PairKernel::kDifference;
  printed.bias_weight = printed.link_weight = 0.0;
  product.bias_weight = 0.5;
  product.link_weight = 2.0;
  for (const PairKernelSpec& spec : {product, difference, printed}) {
    KlrFixture f = RandomKlr(spec);
    const Eigen::MatrixXd dense = f.kernel.Dense();
    auto expected = SocialStrengthMatrix(dense, f.model);
    ASSERT_TRUE(expected.ok()) << expected.status();
    auto served = KlrStrength::Create(f.kernel, f.model);
    ASSERT_TRUE(served.ok()) << served.status();
    for (int u = 0; u < f.model.num_users; ++u) {
      const Eigen::VectorXd row = served->Row(f.kernel, u);
      for (int v = 0; v < f.model.num_users; ++v) {
        EXPECT_NEAR(row[v], (*expected)(u, v), 1e-12) << PairKernelName(spec.kind) << " " << u << "," << v;
        EXPECT_NEAR(served->Score(f.kernel, u, v), (*expected)(u, v), 1e-12);
      }
    }
    // The harmonic classifier's graph: symmetric, non-negative, zero diagonal, ½(F + Fᵀ).
    const Eigen::MatrixXd w = StrengthGraphWeights(f.kernel, &*served);
    Eigen::MatrixXd sym = 0.5 * (*expected + expected->transpose());
    sym.diagonal().setZero();
    EXPECT_LT((w - sym).cwiseAbs().maxCoeff(), 1e-12);
    EXPECT_EQ(w.diagonal().cwiseAbs().maxCoeff(), 0.0);
    EXPECT_GE(w.minCoeff(), 0.0);
    EXPECT_EQ((w - w.transpose()).cwiseAbs().maxCoeff(), 0.0);
  }
  // A model that does not fit the kernel is rejected.
  KlrFixture f = RandomKlr(product);
  f.model.num_users = 26;
  EXPECT_EQ(KlrStrength::Create(f.kernel, f.model).status().code(), StatusCode::kInvalidArgument);
}

TEST(KlrStrengthTest, EncodingRoundTripsAndRejectsDamage) {
  PairKernelSpec spec;
  spec.kind = PairKernel::kDifference;
  spec.bias_weight = 0.25;
  const KlrFixture f = RandomKlr(spec);
  const std::string bytes = SerializePairwiseKlrModel(f.model);
  auto back = ParsePairwiseKlrModel(bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->pair_kernel.kind, spec.kind);
  EXPECT_EQ(back->pair_kernel.bias_weight, 0.25);
  EXPECT_EQ(back->num_users, f.model.num_users);
  EXPECT_EQ(back->import_pairs, f.model.import_pairs);
  EXPECT_EQ(back->alpha, f.model.alpha);
  for (size_t cut : {size_t{0}, size_t{7}, bytes.size() / 2, bytes.size() - 1})
    EXPECT_EQ(ParsePairwiseKlrModel(bytes.substr(0, cut)).status().code(), StatusCode::kDataLoss) << cut;
  PairwiseKlrModel bad = f.model;
  bad.import_pairs[2].b = 25;  // == num_users
  auto out = ParsePairwiseKlrModel(SerializePairwiseKlrModel(bad));
  EXPECT_EQ(out.status().code(), StatusCode::kDataLoss);
  EXPECT_THAT(out.status().message(), HasSubstr("import_pairs[2]"));
}

}  // namespace
}  // namespace kls
