// Encodings of model attachments and social data sets: round trips are exact,
// and damaged input is DATA_LOSS / INVALID_ARGUMENT, never a crash or a
// silently wrong model.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/data/csv_reader.h"
#include "core/mkl/classifier_training.h"
#include "core/social/community.h"
#include "core/social/community_csv.h"
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

}  // namespace
}  // namespace kls
