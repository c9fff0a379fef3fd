// Data model: CSV and LIBSVM readers, Dataset validation.
#include "core/data/csv_reader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <sstream>

namespace kls {
namespace {

using ::testing::HasSubstr;

StatusOr<Dataset> Csv(const std::string& text, ReadOptions o = {}) {
  std::istringstream in(text);
  return ParseCsv(in, "test.csv", o);
}

TEST(CsvReader, ReadsIrisFromTestData) {
  auto d = ReadCsvFile(std::string(KLS_TEST_DATA_DIR) + "/iris.csv");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->num_points(), 150);
  EXPECT_EQ(d->dim(), 4);
  EXPECT_EQ(d->num_classes(), 3);
  EXPECT_DOUBLE_EQ(d->features(0, 0), 5.1);
  EXPECT_DOUBLE_EQ(d->features(149, 3), 1.8);
  EXPECT_EQ(d->labels[0], 0);
  EXPECT_EQ(d->labels[149], 2);
  EXPECT_EQ(d->feature_names[2], "petal_length_cm");
}

TEST(CsvReader, KeysAndNoLabel) {
  auto d = Csv("key,a,b\nx,1,2\ny,3,4\n");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_FALSE(d->has_labels());
  EXPECT_EQ(d->item_keys, (std::vector<std::string>{"x", "y"}));
  EXPECT_DOUBLE_EQ(d->features(1, 1), 4.0);
}

TEST(CsvReader, RaggedRowNamesLineAndCounts) {
  auto d = Csv("a,b,label\n1,2,0\n1,2\n");
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(d.status().message(), HasSubstr("line 3"));
  EXPECT_THAT(d.status().message(), HasSubstr("2 columns, the header has 3"));
}

TEST(CsvReader, NanAndInfAreRejectedWithField) {
  auto d = Csv("a,b,label\n1,nan,0\n");
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(d.status().message(), HasSubstr("column 2 (b)"));
  EXPECT_THAT(d.status().message(), HasSubstr("not finite"));
  auto e = Csv("a,b,label\n1,2,0\ninf,2,1\n");
  ASSERT_FALSE(e.ok());
  EXPECT_THAT(e.status().message(), HasSubstr("line 3, column 1 (a)"));
}

TEST(CsvReader, NonNumberIsRejected) {
  auto d = Csv("a,label\nhello,0\n");
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(d.status().message(), HasSubstr("\"hello\" is not a number"));
}

TEST(CsvReader, MissingAndBadLabels) {
  ReadOptions need_labels;
  need_labels.require_labels = true;
  auto missing = Csv("a,b\n1,2\n", need_labels);
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("missing labels"));
  auto empty = Csv("a,label\n1,\n");
  ASSERT_FALSE(empty.ok());
  EXPECT_THAT(empty.status().message(), HasSubstr("missing label"));
  auto negative = Csv("a,label\n1,-2\n");
  ASSERT_FALSE(negative.ok());
  EXPECT_THAT(negative.status().message(), HasSubstr("\"-2\" is not a non-negative integer"));
}

TEST(CsvReader, EmptyInputs) {
  EXPECT_THAT(Csv("").status().message(), HasSubstr("empty input"));
  EXPECT_THAT(Csv("a,label\n").status().message(), HasSubstr("empty data set"));
}

TEST(CsvReader, SizeLimitIsResourceExhausted) {
  ReadOptions o;
  o.max_points = 2;
  auto d = Csv("a\n1\n2\n3\n", o);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(d.status().message(), HasSubstr("3 points exceed the limit of 2"));
}

TEST(CsvReader, DuplicateKeysAreRejected) {
  auto d = Csv("key,a\nx,1\nx,2\n");
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(d.status().message(), HasSubstr("item_keys[1] = \"x\" is a duplicate"));
}

TEST(CsvReader, WriteThenReadRoundTripsExactly) {
  Dataset d;
  d.features = Eigen::MatrixXd::Random(7, 3);
  d.labels = {0, 1, 2, 0, 1, 2, 0};
  d.item_keys = {"a", "b", "c", "d", "e", "f", "g"};
  const std::string path = ::testing::TempDir() + "/roundtrip.csv";
  ASSERT_TRUE(WriteCsvFile(d, path).ok());
  auto back = ReadCsvFile(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->features, d.features);
  EXPECT_EQ(back->labels, d.labels);
  EXPECT_EQ(back->item_keys, d.item_keys);
  std::remove(path.c_str());
}

StatusOr<Dataset> Libsvm(const std::string& text, int d = 0) {
  std::istringstream in(text);
  return ParseLibsvm(in, "test.svm", d);
}

TEST(LibsvmReader, ParsesSparseRowsAndMapsPlusMinusLabels) {
  auto d = Libsvm("+1 1:0.5 3:2\n-1 2:1 # comment\n\n+1 3:-1\n");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->num_points(), 3);
  EXPECT_EQ(d->dim(), 3);
  EXPECT_EQ(d->labels, (std::vector<int>{1, 0, 1}));
  EXPECT_DOUBLE_EQ(d->features(0, 0), 0.5);
  EXPECT_DOUBLE_EQ(d->features(0, 1), 0.0);
  EXPECT_DOUBLE_EQ(d->features(0, 2), 2.0);
  EXPECT_DOUBLE_EQ(d->features(2, 2), -1.0);
}

TEST(LibsvmReader, FixedDimensionAndErrors) {
  auto fixed = Libsvm("1 2:1\n0 1:1\n", 123);
  ASSERT_TRUE(fixed.ok()) << fixed.status();
  EXPECT_EQ(fixed->dim(), 123);
  EXPECT_EQ(fixed->labels, (std::vector<int>{1, 0}));
  EXPECT_THAT(Libsvm("1 5:1\n", 3).status().message(), HasSubstr("feature index 5 exceeds num_features = 3"));
  EXPECT_THAT(Libsvm("1 3:1 2:1\n").status().message(), HasSubstr("not greater than the previous index 3"));
  EXPECT_THAT(Libsvm("1 0:1\n").status().message(), HasSubstr("feature index \"0\""));
  EXPECT_THAT(Libsvm("1 2:nan\n").status().message(), HasSubstr("not a finite number"));
  EXPECT_THAT(Libsvm("x 2:1\n").status().message(), HasSubstr("label \"x\""));
  EXPECT_THAT(Libsvm("1 2\n").status().message(), HasSubstr("not index:value"));
  EXPECT_THAT(Libsvm("").status().message(), HasSubstr("empty data set"));
}

TEST(Dataset, ValidateNamesFieldAndValue) {
  Dataset d;
  EXPECT_THAT(d.Validate().message(), HasSubstr("empty"));
  d.features = Eigen::MatrixXd::Ones(3, 2);
  d.features(2, 1) = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THAT(d.Validate().message(), HasSubstr("features[2][1]"));
  d.features(2, 1) = 0;
  d.labels = {0, 1};
  EXPECT_THAT(d.Validate().message(), HasSubstr("labels: has 2 entries but the data set has 3 points"));
  d.labels = {0, -1, 1};
  EXPECT_THAT(d.Validate().message(), HasSubstr("labels[1] = -1"));
}

}  // namespace
}  // namespace kls
