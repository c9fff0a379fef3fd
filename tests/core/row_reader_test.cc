// RowReader (the one CSV / LIBSVM parser) and ScanDataFile (the first pass of
// a bounded-memory upload): rows one at a time, the same errors as the
// whole-file readers, and scans that agree with ReadCsvFile / ReadLibsvmFile.
#include "core/data/row_reader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "core/data/csv_reader.h"
#include "core/data/synthetic.h"

namespace kls {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string TempFile(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

// Every row of `reader`, or its error.
StatusOr<std::vector<DataRow>> AllRows(RowReader& reader) {
  std::vector<DataRow> rows;
  DataRow row;
  while (true) {
    KLS_ASSIGN_OR_RETURN(const bool more, reader.Next(&row));
    if (!more) return rows;
    rows.push_back(row);
  }
}

TEST(RowReader, CsvRowsOneAtATime) {
  std::istringstream in("key,a,b,label\n\nx, 1 ,2,0\n\"y\",3,4.5,2\n");
  auto reader = RowReader::Csv(in, "t.csv");
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_TRUE(reader->has_labels());
  EXPECT_TRUE(reader->has_item_keys());
  EXPECT_EQ(reader->dim(), 2);
  EXPECT_THAT(reader->feature_names(), ElementsAre("a", "b"));
  auto rows = AllRows(*reader);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[0].line, 3);
  EXPECT_EQ((*rows)[0].index, 0);
  EXPECT_EQ((*rows)[0].key, "x");
  EXPECT_THAT((*rows)[0].values, ElementsAre(1.0, 2.0));
  EXPECT_TRUE((*rows)[0].columns.empty());
  EXPECT_EQ((*rows)[1].key, "y");
  EXPECT_EQ((*rows)[1].label, 2);
  EXPECT_EQ(reader->rows(), 2);
  // After the end, Next keeps saying so.
  DataRow row;
  auto again = reader->Next(&row);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(*again);
}

TEST(RowReader, LibsvmRowsAreSparseAndLabelsMapAtTheEnd) {
  std::istringstream in("+1 1:0.5 3:2\n-1 # only a label\n\n+1 3:-1 4:0\n");
  auto reader = RowReader::Libsvm(in, "t.svm");
  ASSERT_TRUE(reader.ok()) << reader.status();
  auto rows = AllRows(*reader);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 3u);
  EXPECT_THAT((*rows)[0].columns, ElementsAre(0, 2));
  EXPECT_THAT((*rows)[0].values, ElementsAre(0.5, 2.0));
  EXPECT_TRUE((*rows)[1].columns.empty());
  EXPECT_EQ((*rows)[2].line, 4);
  EXPECT_THAT((*rows)[2].columns, ElementsAre(2, 3));  // explicit zeros are kept as written
  EXPECT_EQ(reader->dim(), 4);
  EXPECT_EQ(reader->ClassId((*rows)[0].label), 1);
  EXPECT_EQ(reader->ClassId((*rows)[1].label), 0);

  std::istringstream ids("0 1:1\n2 1:1\n1 2:1\n");
  auto multi = RowReader::Libsvm(ids, "ids.svm", /*num_features=*/5);
  ASSERT_TRUE(multi.ok());
  ASSERT_TRUE(AllRows(*multi).ok());
  EXPECT_EQ(multi->dim(), 5);
  EXPECT_EQ(multi->ClassId(2), 2);
  EXPECT_EQ(multi->ClassId(1), 1);
}

// The messages of the whole-file readers come from the row reader: same text.
TEST(RowReader, ErrorsAreTheWholeFileReadersErrors) {
  const std::vector<std::string> csv_inputs = {
      "",          "a,b,label\n1,2,0\n1,2\n", "a,b,label\n1,nan,0\n", "a,label\nhello,0\n",
      "a,label\n1,\n", "a,label\n1,-2\n",    "a,label\n",             "key,a\nx,1\nx,2\n",
      "label\n1\n", "a,,label\n1,2,0\n"};
  for (const std::string& text : csv_inputs) {
    std::istringstream whole(text), rows(text);
    const auto dataset = ParseCsv(whole, "e.csv");
    ASSERT_FALSE(dataset.ok()) << text;
    auto reader = RowReader::Csv(rows, "e.csv");
    Status streamed = reader.status();
    if (reader.ok()) streamed = AllRows(*reader).status();
    if (text.rfind("key,", 0) == 0) {
      EXPECT_TRUE(streamed.ok()) << "duplicate keys are Dataset::Validate's (and ScanDataFile's) check";
      continue;
    }
    EXPECT_EQ(streamed.code(), dataset.status().code()) << text;
    EXPECT_EQ(streamed.message(), dataset.status().message()) << text;
  }
  const std::vector<std::string> svm_inputs = {"1 3:1 2:1\n", "1 0:1\n",  "1 2:nan\n", "x 2:1\n",
                                               "1 2\n",       "",         "1\n-1\n",   "2 1:1\n-3 1:1\n-1 1:1\n"};
  for (const std::string& text : svm_inputs) {
    std::istringstream whole(text), rows(text);
    const auto dataset = ParseLibsvm(whole, "e.svm");
    ASSERT_FALSE(dataset.ok()) << text;
    auto reader = RowReader::Libsvm(rows, "e.svm");
    ASSERT_TRUE(reader.ok());
    const Status streamed = AllRows(*reader).status();
    EXPECT_EQ(streamed.code(), dataset.status().code()) << text;
    EXPECT_EQ(streamed.message(), dataset.status().message()) << text;
  }
  std::istringstream fixed("1 5:1\n");
  auto reader = RowReader::Libsvm(fixed, "f.svm", 3);
  ASSERT_TRUE(reader.ok());
  EXPECT_THAT(AllRows(*reader).status().message(), HasSubstr("f.svm line 1: feature index 5 exceeds num_features = 3"));
}

TEST(RowReader, SizeLimitsAreCheckedAsRowsArrive) {
  ReadOptions o;
  o.max_points = 2;
  std::istringstream in("a\n1\n2\n3\n4\n");
  auto reader = RowReader::Csv(in, "big.csv", o);
  ASSERT_TRUE(reader.ok());
  DataRow row;
  EXPECT_TRUE(*reader->Next(&row));
  EXPECT_TRUE(*reader->Next(&row));
  const auto third = reader->Next(&row);
  ASSERT_FALSE(third.ok());
  EXPECT_EQ(third.status().code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(third.status().message(), HasSubstr("3 points exceed the limit of 2"));
}

TEST(RowReader, OpenFileNamesAMissingFile) {
  const auto csv = RowReader::OpenFile("/nonexistent/x.csv", DataFormat::kCsv);
  EXPECT_EQ(csv.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(csv.status().message(), ReadCsvFile("/nonexistent/x.csv").status().message());
  const auto svm = RowReader::OpenFile("/nonexistent/x.svm", DataFormat::kLibsvm);
  EXPECT_EQ(svm.status().message(), ReadLibsvmFile("/nonexistent/x.svm").status().message());
  EXPECT_EQ(GuessDataFormat("a/b.CSV"), DataFormat::kCsv);
  EXPECT_EQ(GuessDataFormat("a/b.svm"), DataFormat::kLibsvm);
  EXPECT_EQ(GuessDataFormat("csv"), DataFormat::kLibsvm);
}

void ExpectScanMatches(const DataFileScan& scan, const Dataset& data) {
  EXPECT_EQ(scan.num_points, data.num_points());
  EXPECT_EQ(scan.dim, data.dim());
  EXPECT_EQ(scan.has_labels, data.has_labels());
  EXPECT_EQ(scan.has_item_keys, !data.item_keys.empty());
  EXPECT_EQ(scan.labels, data.labels);
  EXPECT_EQ(scan.nonzeros, (data.features.array() != 0.0).count());
}

TEST(ScanDataFile, AgreesWithTheWholeFileReaders) {
  auto adult = MakeAdultLike(500, 3);
  ASSERT_TRUE(adult.ok());
  for (int i = 0; i < adult->num_points(); ++i) adult->item_keys.push_back("p" + std::to_string(i));
  const std::string csv = ::testing::TempDir() + "/scan.csv";
  ASSERT_TRUE(WriteCsvFile(*adult, csv).ok());
  auto scan = ScanDataFile(csv, DataFormat::kCsv);
  ASSERT_TRUE(scan.ok()) << scan.status();
  auto read = ReadCsvFile(csv);
  ASSERT_TRUE(read.ok());
  ExpectScanMatches(*scan, *read);
  EXPECT_GT(scan->file_bytes, 0);

  const std::string svm = TempFile("scan.svm", "-1 1:0.5 7:2\n+1\n+1 2:0 3:1\n");
  auto svm_scan = ScanDataFile(svm, DataFormat::kLibsvm);
  ASSERT_TRUE(svm_scan.ok()) << svm_scan.status();
  ExpectScanMatches(*svm_scan, *ReadLibsvmFile(svm));
  EXPECT_THAT(svm_scan->labels, ElementsAre(0, 1, 1));
  EXPECT_EQ(svm_scan->nonzeros, 3);
  auto fixed = ScanDataFile(svm, DataFormat::kLibsvm, 10);
  ASSERT_TRUE(fixed.ok());
  EXPECT_EQ(fixed->dim, 10);
  std::remove(csv.c_str());
  std::remove(svm.c_str());
}

TEST(ScanDataFile, KeyErrorsAreDatasetValidatesInRowOrder) {
  const std::vector<std::string> inputs = {
      "key,a\nx,1\ny,2\nx,3\n",          // duplicate at row 2
      "key,a\nx,1\n,2\nx,3\n",           // empty (row 1) before the duplicate (row 2)
      "key,a\nx,1\ny,2\ny,3\n,4\n",      // duplicate (row 2) before the empty (row 3)
      "key,a\na,1\nb,2\nc,3\nb,4\na,5\n",  // two duplicate pairs: the first in row order wins
      "key,a\nx,1\n,2\n,3\n",            // two empty keys
  };
  for (const std::string& text : inputs) {
    const std::string path = TempFile("keys.csv", text);
    const auto read = ReadCsvFile(path);
    ASSERT_FALSE(read.ok()) << text;
    const auto scan = ScanDataFile(path, DataFormat::kCsv);
    ASSERT_FALSE(scan.ok()) << text;
    EXPECT_EQ(scan.status().code(), read.status().code()) << text;
    EXPECT_EQ(scan.status().message(), read.status().message()) << text;
    std::remove(path.c_str());
  }
  const std::string ok = TempFile("keys-ok.csv", "key,a,label\nx,1,0\ny,0,1\nz,0,1\n");
  const auto scan = ScanDataFile(ok, DataFormat::kCsv);
  ASSERT_TRUE(scan.ok()) << scan.status();
  EXPECT_TRUE(scan->has_item_keys);
  EXPECT_EQ(scan->nonzeros, 1);
  std::remove(ok.c_str());
}

TEST(ScanDataFile, ParseErrorsAreTheReadersErrors) {
  const std::string path = TempFile("bad.csv", "a,b,label\n1,2,0\n1,x,1\n");
  EXPECT_EQ(ScanDataFile(path, DataFormat::kCsv).status().message(), ReadCsvFile(path).status().message());
  EXPECT_THAT(ScanDataFile(path, DataFormat::kCsv).status().message(),
              HasSubstr("bad.csv line 3, column 2 (b): \"x\" is not a number"));
  std::remove(path.c_str());
}

}  // namespace
}  // namespace kls
