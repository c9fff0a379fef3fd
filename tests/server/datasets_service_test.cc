// kls.v1.Datasets in-process: a KlsServer on port 0 with a temporary data dir.
// Round trips go through kls::Client (dense and sparse encodings); malformed
// streams, which the client library never sends, go through the raw stub.
#include "server/datasets_service.h"

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <set>

#include <array>
#include <cmath>
#include <fstream>
#include <iomanip>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "client/client.h"
#include "core/data/constraint_generators.h"
#include "core/data/csv_reader.h"
#include "core/data/row_reader.h"
#include "core/data/synthetic.h"
#include "kls/v1/datasets.grpc.pb.h"
#include "server/kls_server.h"
#include "temp_dir.h"
#include "test_server.h"

namespace kls::server {
namespace {

using ::testing::HasSubstr;
using Request = kls::v1::UploadDatasetRequest;

Request Header(int64_t n, int32_t dim, int64_t constraints = 0, bool labels = false, bool keys = false) {
  Request r;
  kls::v1::DatasetHeader* h = r.mutable_header();
  h->set_name("test");
  h->set_num_points(n);
  h->set_dim(dim);
  h->set_num_constraints(constraints);
  h->set_has_labels(labels);
  h->set_has_item_keys(keys);
  return r;
}

Request Dense(int64_t first_row, const std::vector<double>& values, const std::vector<int>& labels = {},
              const std::vector<std::string>& keys = {}) {
  Request r;
  kls::v1::FeatureChunk* c = r.mutable_features();
  c->set_first_row(first_row);
  for (double v : values) c->add_values(v);
  for (int l : labels) c->add_labels(l);
  for (const auto& k : keys) c->add_item_keys(k);
  return r;
}

Request Constraints(const std::vector<std::array<int, 3>>& pairs) {
  Request r;
  kls::v1::ConstraintChunk* c = r.mutable_constraints();
  for (const auto& p : pairs) {
    c->add_i(p[0]);
    c->add_j(p[1]);
    c->add_kind(p[2]);
  }
  return r;
}

class DatasetsServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<KlsServer>(kls::testing::TestServerConfig(dir_));
    const Status started = server_->Start();
    ASSERT_TRUE(started.ok()) << started;
    client_ = kls::testing::ClientFor(*server_);
    stub_ = kls::v1::Datasets::NewStub(grpc::CreateChannel(server_->target(), grpc::InsecureChannelCredentials()));
  }

  // Sends `messages` as one Upload stream; the server may end it early.
  grpc::Status UploadRaw(const std::vector<Request>& messages, kls::v1::DatasetInfo* info = nullptr) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    kls::v1::DatasetInfo ignored;
    auto writer = stub_->Upload(&context, info ? info : &ignored);
    for (const Request& m : messages) {
      if (!writer->Write(m)) break;
    }
    writer->WritesDone();
    return writer->Finish();
  }

  // The bad-input checks: code, message fragments, nothing stored, server up.
  void ExpectRejected(const std::vector<Request>& messages, grpc::StatusCode code,
                      const std::vector<std::string>& fragments) {
    const grpc::Status s = UploadRaw(messages);
    EXPECT_EQ(s.error_code(), code) << s.error_message();
    for (const std::string& f : fragments) EXPECT_THAT(s.error_message(), HasSubstr(f));
    const auto list = client_->ListDatasets();
    ASSERT_TRUE(list.ok()) << list.status();
    EXPECT_TRUE(list->empty()) << "a rejected upload stored a data set";
    EXPECT_EQ(*client_->CheckHealth(""), ServingStatus::kServing);
  }

  kls::testing::TempDir dir_;
  std::unique_ptr<KlsServer> server_;
  std::unique_ptr<Client> client_;
  std::unique_ptr<kls::v1::Datasets::Stub> stub_;
};

TEST_F(DatasetsServiceTest, DenseUploadRoundTripsThroughTheStore) {
  auto iris = ReadCsvFile(std::string(KLS_TEST_DATA_DIR) + "/iris.csv");
  ASSERT_TRUE(iris.ok()) << iris.status();
  for (int i = 0; i < iris->num_points(); ++i) iris->item_keys.push_back("flower-" + std::to_string(i));
  auto constraints = GenerateAdmmProtocol(iris->labels, /*seed=*/3);
  ASSERT_TRUE(constraints.ok());

  UploadOptions options;
  options.name = "iris";
  options.encoding = FeatureEncoding::kDense;
  options.chunk_bytes = 1000;  // many chunks, so ordering and chunking are exercised
  const auto info = client_->UploadDataset(*iris, *constraints, options);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->name(), "iris");
  EXPECT_EQ(info->num_points(), 150);
  EXPECT_EQ(info->dim(), 4);
  EXPECT_EQ(info->num_classes(), 3);
  EXPECT_EQ(info->num_constraints(), constraints->size());

  const auto stored = server_->store()->LoadDataset(info->id());
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(stored->data.features, iris->features);  // bit for bit
  EXPECT_EQ(stored->data.labels, iris->labels);
  EXPECT_EQ(stored->data.item_keys, iris->item_keys);
  ASSERT_EQ(stored->constraints.size(), constraints->size());
  for (int t = 0; t < constraints->size(); ++t) {
    EXPECT_EQ(stored->constraints.pairs[t].i, constraints->pairs[t].i);
    EXPECT_EQ(stored->constraints.pairs[t].j, constraints->pairs[t].j);
    EXPECT_EQ(stored->constraints.pairs[t].kind, constraints->pairs[t].kind);
  }

  const auto got = client_->GetDataset(info->id());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->id(), info->id());
  EXPECT_EQ(got->num_constraints(), info->num_constraints());
  const auto list = client_->ListDatasets();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].id(), info->id());

  ASSERT_TRUE(client_->DeleteDataset(info->id()).ok());
  EXPECT_EQ(client_->GetDataset(info->id()).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(client_->DeleteDataset(info->id()).code(), StatusCode::kNotFound);
  EXPECT_EQ(client_->GetDataset("").status().code(), StatusCode::kInvalidArgument);
}

TEST_F(DatasetsServiceTest, SparseUploadRoundTripsThroughTheStore) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> value(-3, 3);
  std::bernoulli_distribution present(0.1);
  Dataset data;
  data.features = Eigen::MatrixXd::Zero(300, 40);
  for (int i = 0; i < 300; ++i) {
    for (int j = 0; j < 40; ++j) {
      if (present(rng)) data.features(i, j) = value(rng);
    }
    data.labels.push_back(i % 2);
  }
  UploadOptions options;
  options.name = "sparse";
  options.encoding = FeatureEncoding::kSparse;
  options.chunk_bytes = 2048;
  const auto info = client_->UploadDataset(data, PairwiseConstraints{}, options);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->num_points(), 300);
  EXPECT_EQ(info->dim(), 40);
  EXPECT_EQ(info->num_constraints(), 0);
  const auto stored = server_->store()->LoadDataset(info->id());
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(stored->data.features, data.features);
  EXPECT_EQ(stored->data.labels, data.labels);

  // kAuto picks sparse here and dense for iris; both store the same values.
  options.encoding = FeatureEncoding::kAuto;
  const auto again = client_->UploadDataset(data, PairwiseConstraints{}, options);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(server_->store()->LoadDataset(again->id())->data.features, data.features);
}

TEST_F(DatasetsServiceTest, DeclaredSizesBeyondTheLimitsAreResourceExhausted) {
  using C = grpc::StatusCode;
  ExpectRejected({Header(10'000'001, 1)}, C::RESOURCE_EXHAUSTED, {"header.num_points = 10000001", "10000000"});
  ExpectRejected({Header(10, 1'000'001)}, C::RESOURCE_EXHAUSTED, {"header.dim = 1000001"});
  ExpectRejected({Header(2'000'000, 1000)}, C::RESOURCE_EXHAUSTED,
                 {"header.num_points × header.dim", "2000000000", "1073741824"});
  ExpectRejected({Header(10, 2, 100'000'001)}, C::RESOURCE_EXHAUSTED, {"header.num_constraints = 100000001"});
  // Nonsense sizes are plain bad arguments.
  ExpectRejected({Header(0, 2)}, C::INVALID_ARGUMENT, {"header.num_points = 0"});
  ExpectRejected({Header(3, -1)}, C::INVALID_ARGUMENT, {"header.dim = -1"});
  ExpectRejected({Header(3, 2, -5)}, C::INVALID_ARGUMENT, {"header.num_constraints = -5"});
  Request long_name = Header(1, 1);
  long_name.mutable_header()->set_name(std::string(300, 'x'));
  ExpectRejected({long_name}, C::INVALID_ARGUMENT, {"header.name is 300 bytes"});
}

TEST_F(DatasetsServiceTest, StreamShapeErrorsAreInvalidArgument) {
  using C = grpc::StatusCode;
  ExpectRejected({}, C::INVALID_ARGUMENT, {"no DatasetHeader"});
  ExpectRejected({Dense(0, {1, 2}), Header(1, 2)}, C::INVALID_ARGUMENT, {"must start with a DatasetHeader"});
  ExpectRejected({Header(1, 2), Header(1, 2)}, C::INVALID_ARGUMENT, {"second header"});
  ExpectRejected({Header(1, 2), Request()}, C::INVALID_ARGUMENT, {"is empty"});
  // Truncated: fewer rows or constraints than declared.
  ExpectRejected({Header(4, 2), Dense(0, {1, 2, 3, 4})}, C::INVALID_ARGUMENT,
                 {"2 of header.num_points = 4 rows", "truncated"});
  ExpectRejected({Header(2, 2, 3), Dense(0, {1, 2, 3, 4}), Constraints({{0, 1, 1}})}, C::INVALID_ARGUMENT,
                 {"1 of header.num_constraints = 3 constraints"});
  // Too many rows or constraints.
  ExpectRejected({Header(2, 2), Dense(0, {1, 2, 3, 4, 5, 6})}, C::INVALID_ARGUMENT,
                 {"carries 3 rows, beyond header.num_points = 2"});
  ExpectRejected({Header(2, 2, 1), Dense(0, {1, 2, 3, 4}), Constraints({{0, 1, 1}, {0, 0, 1}})},
                 C::INVALID_ARGUMENT, {"beyond header.num_constraints = 1"});
}

TEST_F(DatasetsServiceTest, FeatureErrorsNameTheRowAndColumn) {
  using C = grpc::StatusCode;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  ExpectRejected({Header(3, 3), Dense(0, {1, 2, 3}), Dense(1, {4, 5, nan})}, C::INVALID_ARGUMENT,
                 {"features[1][2] = nan is not finite"});
  ExpectRejected({Header(2, 2), Dense(0, {1, -inf, 3, 4})}, C::INVALID_ARGUMENT, {"features[0][1] = -inf is not finite"});
  // Ragged: values not a multiple of dim.
  ExpectRejected({Header(3, 3), Dense(0, {1, 2, 3, 4})}, C::INVALID_ARGUMENT,
                 {"4 values, not a multiple of dim = 3"});
  // Out of order.
  ExpectRejected({Header(4, 1), Dense(0, {1}), Dense(2, {3})}, C::INVALID_ARGUMENT,
                 {"features.first_row = 2 but 1 rows were received"});
  // Both encodings in one chunk.
  Request both = Dense(0, {1, 2});
  both.mutable_features()->add_sparse_rows();
  ExpectRejected({Header(1, 2), both}, C::INVALID_ARGUMENT, {"both dense values and sparse_rows"});
  // Sparse rows: index range, order, lengths, finiteness.
  auto sparse = [](int64_t first, std::vector<std::pair<int, double>> entries) {
    Request r;
    r.mutable_features()->set_first_row(first);
    kls::v1::SparseRow* row = r.mutable_features()->add_sparse_rows();
    for (auto [i, v] : entries) {
      row->add_indices(i);
      row->add_values(v);
    }
    return r;
  };
  ExpectRejected({Header(1, 3), sparse(0, {{0, 1}, {3, 2}})}, C::INVALID_ARGUMENT,
                 {"features[0] (sparse): index 3 is out of range for dim = 3"});
  ExpectRejected({Header(1, 3), sparse(0, {{2, 1}, {1, 2}})}, C::INVALID_ARGUMENT, {"strictly ascending"});
  ExpectRejected({Header(1, 3), sparse(0, {{1, nan}})}, C::INVALID_ARGUMENT, {"features[0][1] = nan is not finite"});
  Request uneven = sparse(0, {{0, 1}});
  uneven.mutable_features()->mutable_sparse_rows(0)->add_indices(2);
  ExpectRejected({Header(1, 3), uneven}, C::INVALID_ARGUMENT, {"2 indices but 1 values"});
}

TEST_F(DatasetsServiceTest, LabelKeyAndConstraintErrorsNameTheValue) {
  using C = grpc::StatusCode;
  // Labels: one per row when declared, none otherwise, non-negative.
  ExpectRejected({Header(2, 1, 0, true), Dense(0, {1, 2}, {0})}, C::INVALID_ARGUMENT, {"1 labels for 2 rows"});
  ExpectRejected({Header(2, 1), Dense(0, {1, 2}, {0, 1})}, C::INVALID_ARGUMENT, {"header.has_labels is false"});
  ExpectRejected({Header(2, 1, 0, true), Dense(0, {1, 2}, {0, -4})}, C::INVALID_ARGUMENT, {"labels[1] = -4"});
  // Keys: one per row, non-empty, unique across chunks.
  ExpectRejected({Header(2, 1, 0, false, true), Dense(0, {1, 2}, {}, {"a"})}, C::INVALID_ARGUMENT,
                 {"1 item_keys for 2 rows"});
  ExpectRejected({Header(2, 1, 0, false, true), Dense(0, {1}, {}, {"a"}), Dense(1, {2}, {}, {"a"})},
                 C::INVALID_ARGUMENT, {"item_keys[1] = 'a' repeats"});
  ExpectRejected({Header(1, 1, 0, false, true), Dense(0, {1}, {}, {""})}, C::INVALID_ARGUMENT,
                 {"item_keys[0] is empty"});
  // Constraints: indices in range, kind ±1, equal-length arrays, no duplicates.
  ExpectRejected({Header(4, 1, 2), Dense(0, {1, 2, 3, 4}), Constraints({{0, 1, 1}, {2, 10, -1}})},
                 C::INVALID_ARGUMENT, {"constraints[1]: j = 10 is out of range for 4 points"});
  ExpectRejected({Header(4, 1, 1), Constraints({{-1, 1, 1}}), Dense(0, {1, 2, 3, 4})}, C::INVALID_ARGUMENT,
                 {"constraints[0]: i = -1 is out of range for 4 points"});
  ExpectRejected({Header(4, 1, 1), Dense(0, {1, 2, 3, 4}), Constraints({{0, 1, 0}})}, C::INVALID_ARGUMENT,
                 {"constraints[0]: kind = 0"});
  Request uneven = Constraints({{0, 1, 1}});
  uneven.mutable_constraints()->add_i(2);
  ExpectRejected({Header(4, 1, 2), Dense(0, {1, 2, 3, 4}), uneven}, C::INVALID_ARGUMENT, {"equal length"});
  ExpectRejected({Header(4, 1, 2), Dense(0, {1, 2, 3, 4}), Constraints({{0, 1, 1}, {1, 0, -1}})},
                 C::INVALID_ARGUMENT, {"constraints[1]"});
}

TEST_F(DatasetsServiceTest, ConstraintsMayPrecedeOrInterleaveRows) {
  kls::v1::DatasetInfo info;
  const grpc::Status s = UploadRaw({Header(3, 2, 2, true), Constraints({{0, 2, -1}}), Dense(0, {1, 2}, {0}),
                                    Dense(1, {3, 4, 5, 6}, {1, 0}), Constraints({{0, 1, 1}})},
                                   &info);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(info.num_points(), 3);
  EXPECT_EQ(info.num_constraints(), 2);
  EXPECT_EQ(info.num_classes(), 2);
  const auto stored = server_->store()->LoadDataset(info.id());
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored->data.features(2, 1), 6.0);
  EXPECT_EQ(stored->constraints.pairs[0].kind, PairKind::kCannotLink);
}

// `kls upload`'s bounded-memory path (ScanDataFile + UploadDataFile, the file
// read twice) stores exactly what the whole-file path (ReadCsvFile /
// ReadLibsvmFile + UploadDataset) stores, for every encoding.
TEST_F(DatasetsServiceTest, StreamedFileUploadStoresWhatTheWholeFileUploadStores) {
  auto adult = MakeAdultLike(700, 5);
  ASSERT_TRUE(adult.ok());
  for (int i = 0; i < adult->num_points(); ++i) adult->item_keys.push_back("row-" + std::to_string(i));
  adult->features(3, 7) = 0.125;  // a value that is not 0 / 1
  const std::string csv = (dir_.path() / "adult.csv").string();
  ASSERT_TRUE(WriteCsvFile(*adult, csv).ok());
  const std::string svm = (dir_.path() / "adult.svm").string();
  {
    std::ofstream out(svm);
    out << std::setprecision(17);
    for (int i = 0; i < adult->num_points(); ++i) {
      out << (adult->labels[i] == 1 ? "+1" : "-1");
      for (int j = 0; j < adult->dim(); ++j) {
        if (adult->features(i, j) != 0 || (i == 5 && j == 2)) out << ' ' << j + 1 << ':' << adult->features(i, j);
      }
      out << (i == 9 ? " # a comment\n" : "\n");
    }
    out << "+1\n";  // a row with no listed feature
  }
  for (const DataFormat format : {DataFormat::kCsv, DataFormat::kLibsvm}) {
    const std::string& path = format == DataFormat::kCsv ? csv : svm;
    const auto whole = format == DataFormat::kCsv ? ReadCsvFile(path) : ReadLibsvmFile(path);
    ASSERT_TRUE(whole.ok()) << whole.status();
    const auto scan = ScanDataFile(path, format);
    ASSERT_TRUE(scan.ok()) << scan.status();
    ASSERT_EQ(scan->labels, whole->labels);
    const auto constraints = GenerateAdmmProtocol(scan->labels, /*seed=*/1);
    ASSERT_TRUE(constraints.ok());
    for (const FeatureEncoding encoding : {FeatureEncoding::kAuto, FeatureEncoding::kDense, FeatureEncoding::kSparse}) {
      SCOPED_TRACE(std::string(DataFormatName(format)) + " encoding " + std::to_string(static_cast<int>(encoding)));
      UploadOptions options;
      options.name = "adult";
      options.encoding = encoding;
      options.chunk_bytes = 3000;  // many chunks
      const auto old_info = client_->UploadDataset(*whole, *constraints, options);
      ASSERT_TRUE(old_info.ok()) << old_info.status();
      std::vector<UploadProgress> seen;
      options.on_progress = [&](const UploadProgress& p) { seen.push_back(p); };
      const auto new_info = client_->UploadDataFile(*scan, *constraints, options);
      ASSERT_TRUE(new_info.ok()) << new_info.status();

      EXPECT_EQ(new_info->num_points(), old_info->num_points());
      EXPECT_EQ(new_info->dim(), old_info->dim());
      EXPECT_EQ(new_info->num_classes(), old_info->num_classes());
      EXPECT_EQ(new_info->num_constraints(), old_info->num_constraints());
      const auto a = server_->store()->LoadDataset(old_info->id());
      const auto b = server_->store()->LoadDataset(new_info->id());
      ASSERT_TRUE(a.ok() && b.ok());
      EXPECT_EQ(b->data.features, a->data.features);  // bit for bit
      EXPECT_EQ(b->data.features, whole->features);
      EXPECT_EQ(b->data.labels, a->data.labels);
      EXPECT_EQ(b->data.item_keys, a->data.item_keys);
      EXPECT_EQ(b->data.item_keys.empty(), format == DataFormat::kLibsvm);
      ASSERT_EQ(b->constraints.size(), a->constraints.size());
      for (int t = 0; t < a->constraints.size(); ++t) {
        EXPECT_EQ(b->constraints.pairs[t].i, a->constraints.pairs[t].i);
        EXPECT_EQ(b->constraints.pairs[t].j, a->constraints.pairs[t].j);
        EXPECT_EQ(b->constraints.pairs[t].kind, a->constraints.pairs[t].kind);
      }
      // Progress: one report per message, rows then pairs, ending at the totals.
      ASSERT_GT(seen.size(), 3u);
      for (size_t k = 1; k < seen.size(); ++k) {
        EXPECT_GE(seen[k].rows_sent, seen[k - 1].rows_sent);
        EXPECT_GT(seen[k].bytes_sent, seen[k - 1].bytes_sent);
      }
      EXPECT_EQ(seen.back().rows_sent, whole->num_points());
      EXPECT_EQ(seen.back().num_points, whole->num_points());
      EXPECT_EQ(seen.back().constraints_sent, constraints->size());
    }
  }
}

// A file that changes between the scan and the upload: DATA_LOSS, nothing stored.
TEST_F(DatasetsServiceTest, StreamedFileUploadRefusesAFileThatChanged) {
  const std::string path = (dir_.path() / "small.csv").string();
  std::ofstream(path) << "a,b,label\n1,2,0\n3,4,1\n5,6,0\n";
  const auto scan = ScanDataFile(path, DataFormat::kCsv);
  ASSERT_TRUE(scan.ok()) << scan.status();
  UploadOptions options;
  options.chunk_bytes = 16;
  for (const std::string& changed : {std::string("a,b,label\n1,2,0\n3,4,1\n"),
                                     std::string("a,b,label\n1,2,0\n3,4,1\n5,6,0\n7,8,1\n"),
                                     std::string("a,b,label\n1,2,0\n3,4,0\n5,6,0\n"),
                                     std::string("a,b,c,label\n1,2,0,0\n3,4,0,1\n5,6,0,0\n"),
                                     std::string("a,b,label\n1,2,0\n3,x,1\n5,6,0\n")}) {
    std::ofstream(path) << changed;
    const auto info = client_->UploadDataFile(*scan, PairwiseConstraints{}, options);
    ASSERT_FALSE(info.ok()) << changed;
    EXPECT_TRUE(info.status().code() == StatusCode::kDataLoss || info.status().code() == StatusCode::kInvalidArgument)
        << info.status();
    EXPECT_THAT(info.status().message(), HasSubstr("small.csv")) << info.status();
  }
  const auto list = client_->ListDatasets();
  ASSERT_TRUE(list.ok());
  EXPECT_TRUE(list->empty());
}

}  // namespace
}  // namespace kls::server

namespace kls::server {
namespace {

// Server-side protocols: the pairs stored for each protocol and seed are
// exactly what core's generator (the one `kls upload --protocol` used to run
// on the client) draws, the response reports them, and bad requests name the field.
TEST_F(DatasetsServiceTest, ProtocolsAreDrawnOnTheServerExactlyAsCoreDrawsThem) {
  auto iris = ReadCsvFile(std::string(KLS_TEST_DATA_DIR) + "/iris.csv");
  ASSERT_TRUE(iris.ok()) << iris.status();
  for (const char* name : {"admm", "bcd", "simplenpkl"}) {
    for (uint64_t seed : {1, 7}) {
      UploadOptions options;
      options.name = std::string("iris-") + name;
      options.protocol.set_name(name);
      options.protocol.set_seed(seed);
      const auto info = client_->UploadDataset(*iris, {}, options);
      ASSERT_TRUE(info.ok()) << info.status();
      ConstraintProtocol request;
      request.name = name;
      request.seed = seed;
      const auto expected = GenerateProtocol(request, iris->labels, "protocol");
      ASSERT_TRUE(expected.ok()) << expected.status();
      const auto stored = server_->store()->LoadDataset(info->id());
      ASSERT_TRUE(stored.ok()) << stored.status();
      ASSERT_EQ(stored->constraints.size(), expected->size()) << name;
      for (int t = 0; t < expected->size(); ++t) {
        EXPECT_EQ(stored->constraints.pairs[t].i, expected->pairs[t].i) << name << " " << t;
        EXPECT_EQ(stored->constraints.pairs[t].j, expected->pairs[t].j) << name << " " << t;
        EXPECT_EQ(stored->constraints.pairs[t].kind, expected->pairs[t].kind) << name << " " << t;
      }
      ASSERT_TRUE(info->has_generated());
      EXPECT_EQ(info->generated().protocol(), name);
      EXPECT_EQ(info->generated().seed(), seed);
      EXPECT_EQ(info->generated().must_link() + info->generated().cannot_link(), expected->size());
      EXPECT_EQ(info->generated().components(), CountConstraintComponents(*expected, 150));
      EXPECT_EQ(info->num_constraints(), expected->size());
    }
  }
  // Parameters: the admm counts without self pairs.
  UploadOptions custom;
  custom.protocol.set_name("admm");
  custom.protocol.set_must_fraction(0.2);
  custom.protocol.set_cannot_fraction(0.1);
  custom.protocol.set_self_pairs(false);
  const auto info = client_->UploadDataset(*iris, {}, custom);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->generated().must_link(), 30);
  EXPECT_EQ(info->generated().cannot_link(), 15);
}

TEST_F(DatasetsServiceTest, BadProtocolRequestsNameTheField) {
  auto iris = ReadCsvFile(std::string(KLS_TEST_DATA_DIR) + "/iris.csv");
  ASSERT_TRUE(iris.ok()) << iris.status();
  const auto expect = [&](const Dataset& data, const PairwiseConstraints& pairs, const kls::v1::ConstraintProtocol& p,
                          const std::string& fragment) {
    UploadOptions options;
    options.protocol = p;
    const auto info = client_->UploadDataset(data, pairs, options);
    ASSERT_FALSE(info.ok()) << fragment;
    EXPECT_EQ(info.status().code(), StatusCode::kInvalidArgument) << info.status();
    EXPECT_THAT(info.status().message(), HasSubstr(fragment));
  };
  kls::v1::ConstraintProtocol p;
  p.set_name("nope");
  expect(*iris, {}, p, "header.protocol.name = 'nope' is not one of admm, bcd, simplenpkl");
  p.set_name("bcd");
  p.set_fraction(0);
  expect(*iris, {}, p, "header.protocol.fraction = 0");
  p.clear_fraction();
  p.set_component_ratio(0.5);
  expect(*iris, {}, p, "header.protocol.component_ratio does not apply to protocol 'bcd'");
  p.clear_component_ratio();
  Dataset unlabelled = *iris;
  unlabelled.labels.clear();
  expect(unlabelled, {}, p, "needs has_labels");
  PairwiseConstraints one;
  one.pairs.push_back({0, 1, PairKind::kMustLink});
  expect(*iris, one, p, "send constraints or a protocol, not both");
  // More chunklets than must-links can make: an error, not an endless draw.
  kls::v1::ConstraintProtocol tiny;
  tiny.set_name("simplenpkl");
  tiny.set_component_ratio(0.01);
  expect(*iris, {}, tiny, "cannot join fewer");
  const auto list = client_->ListDatasets();
  ASSERT_TRUE(list.ok());
  EXPECT_TRUE(list->empty());
}

// `kls upload --append-constraints BASE --protocol P`: the protocol's pairs
// drawn from BASE's labels, those BASE already has skipped, appended to BASE's.
TEST_F(DatasetsServiceTest, AppendDrawsAProtocolsPairsFromTheBaseLabels) {
  auto iris = ReadCsvFile(std::string(KLS_TEST_DATA_DIR) + "/iris.csv");
  ASSERT_TRUE(iris.ok()) << iris.status();
  UploadOptions first;
  first.name = "iris";
  first.protocol.set_name("admm");
  first.protocol.set_seed(1);
  const auto base = client_->UploadDataset(*iris, {}, first);
  ASSERT_TRUE(base.ok()) << base.status();
  UploadOptions append;
  append.base_dataset_id = base->id();
  append.protocol.set_name("bcd");
  append.protocol.set_seed(2);
  const auto more = client_->UploadDataset(Dataset(), {}, append);
  ASSERT_TRUE(more.ok()) << more.status();
  ConstraintProtocol bcd;
  bcd.name = "bcd";
  bcd.seed = 2;
  const auto drawn = GenerateProtocol(bcd, iris->labels, "protocol");
  ASSERT_TRUE(drawn.ok());
  const auto stored_base = server_->store()->LoadDataset(base->id());
  const auto stored = server_->store()->LoadDataset(more->id());
  ASSERT_TRUE(stored_base.ok() && stored.ok());
  std::set<std::pair<int, int>> seen;
  for (const Pair& p : stored_base->constraints.pairs) seen.insert({std::min(p.i, p.j), std::max(p.i, p.j)});
  std::vector<Pair> expected = stored_base->constraints.pairs;
  for (const Pair& p : drawn->pairs) {
    if (seen.insert({std::min(p.i, p.j), std::max(p.i, p.j)}).second) expected.push_back(p);
  }
  ASSERT_EQ(stored->constraints.size(), static_cast<int>(expected.size()));
  EXPECT_LT(expected.size(), stored_base->constraints.pairs.size() + drawn->pairs.size());  // a repeat was skipped
  for (size_t t = 0; t < expected.size(); ++t) {
    EXPECT_EQ(stored->constraints.pairs[t].i, expected[t].i) << t;
    EXPECT_EQ(stored->constraints.pairs[t].j, expected[t].j) << t;
    EXPECT_EQ(stored->constraints.pairs[t].kind, expected[t].kind) << t;
  }
  ASSERT_TRUE(more->has_generated());
  EXPECT_EQ(more->generated().must_link() + more->generated().cannot_link(),
            static_cast<int64_t>(expected.size() - stored_base->constraints.pairs.size()));
  // An unlabelled base has nothing to draw from.
  Dataset unlabelled = *iris;
  unlabelled.labels.clear();
  const auto plain = client_->UploadDataset(unlabelled, {}, UploadOptions());
  ASSERT_TRUE(plain.ok()) << plain.status();
  append.base_dataset_id = plain->id();
  const auto refused = client_->UploadDataset(Dataset(), {}, append);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("has none"));
}

}  // namespace
}  // namespace kls::server
