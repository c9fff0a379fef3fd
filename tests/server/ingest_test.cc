// The upload and import stream assemblers (server/upload_assembler.h,
// server/import_assembler.h) without gRPC: what a stream assembles to, that
// the first error names the field and sticks, and that messages after a
// rejected header cannot reach the row decoders (they divided by dim = 0).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "server/import_assembler.h"
#include "server/upload_assembler.h"

namespace kls::server {
namespace {

using ::testing::HasSubstr;

kls::v1::UploadDatasetRequest UploadHeader(int64_t n, int dim, int64_t constraints) {
  kls::v1::UploadDatasetRequest m;
  m.mutable_header()->set_name("two-points");
  m.mutable_header()->set_num_points(n);
  m.mutable_header()->set_dim(dim);
  m.mutable_header()->set_num_constraints(constraints);
  return m;
}

kls::v1::UploadDatasetRequest FeatureRows(int64_t first_row, std::initializer_list<double> values) {
  kls::v1::UploadDatasetRequest m;
  m.mutable_features()->set_first_row(first_row);
  for (double v : values) m.mutable_features()->add_values(v);
  return m;
}

TEST(UploadAssemblerTest, AssemblesFeaturesAndConstraints) {
  const UploadLimits limits;
  UploadAssembler upload(limits);
  ASSERT_TRUE(upload.Add(UploadHeader(2, 2, 1)).ok());
  ASSERT_TRUE(upload.Add(FeatureRows(0, {1, 2})).ok());
  ASSERT_TRUE(upload.Add(FeatureRows(1, {3, 4})).ok());
  kls::v1::UploadDatasetRequest pair;
  pair.mutable_constraints()->add_i(0);
  pair.mutable_constraints()->add_j(1);
  pair.mutable_constraints()->add_kind(-1);
  ASSERT_TRUE(upload.Add(pair).ok());
  ASSERT_TRUE(upload.Finish().ok());
  EXPECT_EQ(upload.data().data.features.rows(), 2);
  EXPECT_DOUBLE_EQ(upload.data().data.features(1, 0), 3.0);
  ASSERT_EQ(upload.data().constraints.pairs.size(), 1u);
  EXPECT_EQ(upload.data().constraints.pairs[0].kind, PairKind::kCannotLink);
}

// The feature matrix grows with the rows that arrive, not with the header's
// promise, until a 16th of the promise has arrived; then it takes its full
// size at once (one copy of the rows so far, not a doubling to the end).
TEST(UploadAssemblerTest, FeatureRowsTrustTheHeaderOnlyAfterASixteenthArrived) {
  const UploadLimits limits;
  UploadAssembler upload(limits);
  const int64_t n = 1'000'000;
  ASSERT_TRUE(upload.Add(UploadHeader(n, 2, 0)).ok());
  auto rows = [&](int64_t first, int64_t count) {
    kls::v1::UploadDatasetRequest m;
    m.mutable_features()->set_first_row(first);
    for (int64_t r = 0; r < count; ++r) {
      m.mutable_features()->add_values(static_cast<double>(first + r));
      m.mutable_features()->add_values(1.0);
    }
    return m;
  };
  ASSERT_TRUE(upload.Add(rows(0, 1)).ok());
  EXPECT_EQ(upload.data().data.features.rows(), 1024);  // one row: no million-row matrix
  ASSERT_TRUE(upload.Add(rows(1, 65'535)).ok());
  EXPECT_EQ(upload.data().data.features.rows(), 65'536);  // doubling below n/8
  ASSERT_TRUE(upload.Add(rows(65'536, 1)).ok());           // past n/16 rows: the full size
  EXPECT_EQ(upload.data().data.features.rows(), n);
  EXPECT_EQ(upload.data().data.features(65'536, 0), 65'536.0);
  EXPECT_EQ(upload.data().data.features(777, 0), 777.0);  // the rows before, kept
  EXPECT_EQ(upload.data().data.features(65'537, 1), 0.0);  // not yet sent: zero
}

TEST(UploadAssemblerTest, FirstErrorNamesTheFieldAndSticks) {
  const UploadLimits limits;
  UploadAssembler upload(limits);
  ASSERT_TRUE(upload.Add(UploadHeader(2, 2, 0)).ok());
  const Status bad = upload.Add(FeatureRows(0, {1, std::nan("")}));
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.message(), HasSubstr("features[0][1] = nan is not finite"));
  EXPECT_EQ(upload.Add(FeatureRows(0, {1, 2})).message(), bad.message());
  EXPECT_EQ(upload.Finish().message(), bad.message());
}

TEST(UploadAssemblerTest, RowsAfterARejectedHeaderAreNotDecoded) {
  const UploadLimits limits;
  UploadAssembler upload(limits);
  EXPECT_THAT(upload.Add(UploadHeader(2, 0, 0)).message(), HasSubstr("header.dim = 0 must be >= 1"));
  EXPECT_THAT(upload.Add(FeatureRows(0, {1, 2})).message(), HasSubstr("header.dim = 0"));
}

TEST(UploadAssemblerTest, EmptyAndTruncatedStreams) {
  const UploadLimits limits;
  UploadAssembler empty(limits);
  EXPECT_THAT(empty.Finish().message(), HasSubstr("no DatasetHeader"));
  UploadAssembler truncated(limits);
  ASSERT_TRUE(truncated.Add(UploadHeader(2, 1, 0)).ok());
  ASSERT_TRUE(truncated.Add(FeatureRows(0, {1})).ok());
  EXPECT_THAT(truncated.Finish().message(), HasSubstr("after 1 of header.num_points = 2 rows"));
  UploadAssembler headless(limits);
  EXPECT_THAT(headless.Add(FeatureRows(0, {1})).message(), HasSubstr("must start with a DatasetHeader"));
}

kls::v1::ImportKernelChunk ImportHeader(int64_t n, int dim) {
  kls::v1::ImportKernelChunk c;
  c.mutable_header()->set_name("imported");
  c.mutable_header()->set_num_points(n);
  c.mutable_header()->set_dim(dim);
  return c;
}

kls::v1::ImportKernelChunk ImportRows(int64_t first_row, std::initializer_list<double> values) {
  kls::v1::ImportKernelChunk c;
  c.mutable_rows()->set_first_row(first_row);
  for (double v : values) c.mutable_rows()->add_values(v);
  return c;
}

TEST(ImportAssemblerTest, AssemblesRowsInOrder) {
  const ImportLimits limits;
  ImportAssembler assembler(limits);
  ASSERT_TRUE(assembler.Add(ImportHeader(2, 2)).ok());
  ASSERT_TRUE(assembler.Add(ImportRows(0, {1, 2, 3, 4})).ok());
  ASSERT_TRUE(assembler.Finish().ok());
  const LearnedKernel::Embedding v = assembler.TakeEmbedding();
  ASSERT_EQ(v.rows(), 2);
  EXPECT_DOUBLE_EQ(v(1, 0), 3.0);
}

TEST(ImportAssemblerTest, RejectedHeaderStopsTheStream) {
  const ImportLimits limits;
  ImportAssembler assembler(limits);
  EXPECT_THAT(assembler.Add(ImportHeader(2, 0)).message(), HasSubstr("header.dim = 0 must be >= 1"));
  EXPECT_THAT(assembler.Add(ImportRows(0, {1, 2})).message(), HasSubstr("header.dim = 0"));
  EXPECT_THAT(assembler.Finish().message(), HasSubstr("header.dim = 0"));
}

TEST(ImportAssemblerTest, OutOfOrderRowsAndSecondHeader) {
  const ImportLimits limits;
  ImportAssembler out_of_order(limits);
  ASSERT_TRUE(out_of_order.Add(ImportHeader(2, 1)).ok());
  EXPECT_THAT(out_of_order.Add(ImportRows(1, {1})).message(), HasSubstr("rows.first_row = 1 but 0 rows"));
  ImportAssembler twice(limits);
  ASSERT_TRUE(twice.Add(ImportHeader(2, 1)).ok());
  EXPECT_THAT(twice.Add(ImportHeader(2, 1)).message(), HasSubstr("message 1 repeats the header"));
}

}  // namespace
}  // namespace kls::server
