// Bad input against an in-process server, through raw gRPC stubs so that each
// request is exactly as malformed as intended: every case must get the right
// status code and a message naming the field and the value, nothing may be
// stored, and the server must keep answering (a later Echo succeeds).
#include <gmock/gmock.h>
#include <google/protobuf/unknown_field_set.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "client/client.h"
#include "kls/v1/datasets.grpc.pb.h"
#include "kls/v1/jobs.grpc.pb.h"
#include "kls/v1/kernels.grpc.pb.h"
#include "kls/v1/queries.grpc.pb.h"
#include "kls/v1/service.grpc.pb.h"
#include "server/kls_server.h"
#include "temp_dir.h"
#include "test_server.h"

namespace kls::server {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

using UploadMessages = std::vector<kls::v1::UploadDatasetRequest>;

kls::v1::UploadDatasetRequest Header(int64_t n, int32_t dim, int64_t constraints = 0) {
  kls::v1::UploadDatasetRequest m;
  m.mutable_header()->set_name("bad");
  m.mutable_header()->set_num_points(n);
  m.mutable_header()->set_dim(dim);
  m.mutable_header()->set_num_constraints(constraints);
  return m;
}

kls::v1::UploadDatasetRequest Dense(int64_t first_row, const std::vector<double>& values) {
  kls::v1::UploadDatasetRequest m;
  m.mutable_features()->set_first_row(first_row);
  for (double v : values) m.mutable_features()->add_values(v);
  return m;
}

kls::v1::UploadDatasetRequest Pairs(const std::vector<std::array<int, 3>>& pairs) {
  kls::v1::UploadDatasetRequest m;
  for (const auto& [i, j, kind] : pairs) {
    m.mutable_constraints()->add_i(i);
    m.mutable_constraints()->add_j(j);
    m.mutable_constraints()->add_kind(kind);
  }
  return m;
}

class BadInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<KlsServer>(kls::testing::TestServerConfig(dir_, "off"));
    const Status started = server_->Start();
    ASSERT_TRUE(started.ok()) << started;
    channel_ = grpc::CreateChannel(server_->target(), grpc::InsecureChannelCredentials());
    datasets_ = kls::v1::Datasets::NewStub(channel_);
    jobs_ = kls::v1::Jobs::NewStub(channel_);
    kernels_ = kls::v1::Kernels::NewStub(channel_);
    queries_ = kls::v1::Queries::NewStub(channel_);
    client_ = kls::testing::ClientFor(*server_);
  }

  static void Deadline(grpc::ClientContext* context) {
    context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  }

  // Streams `messages`, half-closes, and returns the server's verdict. The
  // server may end the call early (at the first bad message); later writes
  // then fail, which is fine.
  grpc::Status Upload(const UploadMessages& messages) {
    grpc::ClientContext context;
    Deadline(&context);
    kls::v1::DatasetInfo info;
    auto writer = datasets_->Upload(&context, &info);
    for (const auto& m : messages) {
      if (!writer->Write(m)) break;
    }
    writer->WritesDone();
    return writer->Finish();
  }

  // The server still answers, and no failed upload left a data set behind.
  void ExpectAliveAndNothingStored(size_t expected_datasets = 0) {
    const StatusOr<std::string> echoed = client_->Echo("still here");
    ASSERT_TRUE(echoed.ok()) << echoed.status();
    EXPECT_EQ(*echoed, "still here");
    const auto listed = client_->ListDatasets();
    ASSERT_TRUE(listed.ok()) << listed.status();
    EXPECT_EQ(listed->size(), expected_datasets);
  }

  // A valid labelled data set with constraints, for the Submit cases.
  std::string UploadValid() {
    Dataset d;
    d.features.resize(8, 2);
    std::mt19937 rng(3);
    std::normal_distribution<double> normal;
    for (int i = 0; i < 8; ++i) {
      d.labels.push_back(i % 2);
      for (int j = 0; j < 2; ++j) d.features(i, j) = normal(rng) + 3.0 * (i % 2);
    }
    PairwiseConstraints c;
    c.pairs = {{0, 2, PairKind::kMustLink}, {1, 3, PairKind::kMustLink}, {0, 1, PairKind::kCannotLink}};
    UploadOptions o;
    o.name = "valid";
    const auto info = client_->UploadDataset(d, c, o);
    EXPECT_TRUE(info.ok()) << info.status();
    return info.ok() ? info->id() : "";
  }

  kls::testing::TempDir dir_;
  std::unique_ptr<KlsServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<kls::v1::Datasets::Stub> datasets_;
  std::unique_ptr<kls::v1::Jobs::Stub> jobs_;
  std::unique_ptr<kls::v1::Kernels::Stub> kernels_;
  std::unique_ptr<kls::v1::Queries::Stub> queries_;
  std::unique_ptr<Client> client_;
};

#define EXPECT_STATUS(status, code, ...)                                                   \
  do {                                                                                     \
    const grpc::Status s_ = (status);                                                      \
    EXPECT_EQ(s_.error_code(), grpc::StatusCode::code) << s_.error_message();              \
    EXPECT_THAT(s_.error_message(), AllOf(__VA_ARGS__));                                   \
  } while (0)

TEST_F(BadInputTest, NonFiniteFeatures) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_STATUS(Upload({Header(3, 2), Dense(0, {1, 2, nan, 4, 5, 6})}), INVALID_ARGUMENT,
                HasSubstr("features[1][0] = nan is not finite"));
  EXPECT_STATUS(Upload({Header(3, 2), Dense(0, {1, 2}), Dense(1, {3, -inf, 5, 6})}), INVALID_ARGUMENT,
                HasSubstr("features[1][1] = -inf is not finite"));
  kls::v1::UploadDatasetRequest sparse;
  sparse.mutable_features()->set_first_row(0);
  auto* row = sparse.mutable_features()->add_sparse_rows();
  row->add_indices(1);
  row->add_values(inf);
  EXPECT_STATUS(Upload({Header(1, 3), sparse}), INVALID_ARGUMENT, HasSubstr("features[0][1] = inf is not finite"));
  ExpectAliveAndNothingStored();
}

TEST_F(BadInputTest, RaggedRows) {
  EXPECT_STATUS(Upload({Header(3, 2), Dense(0, {1, 2, 3, 4, 5})}), INVALID_ARGUMENT,
                HasSubstr("has 5 values, not a multiple of dim = 2 (ragged rows)"));
  EXPECT_STATUS(Upload({Header(2, 2), Dense(0, {1, 2, 3, 4, 5, 6})}), INVALID_ARGUMENT,
                HasSubstr("carries 3 rows, beyond header.num_points = 2"));
  EXPECT_STATUS(Upload({Header(3, 2), Dense(0, {1, 2}), Dense(0, {3, 4})}), INVALID_ARGUMENT,
                HasSubstr("features.first_row = 0 but 1 rows were received so far"));
  kls::v1::UploadDatasetRequest sparse;
  sparse.mutable_features()->set_first_row(0);
  auto* row = sparse.mutable_features()->add_sparse_rows();
  row->add_indices(0);
  row->add_indices(1);
  row->add_values(1.0);
  EXPECT_STATUS(Upload({Header(1, 3), sparse}), INVALID_ARGUMENT,
                HasSubstr("features[0] (sparse) has 2 indices but 1 values"));
  row->add_values(2.0);
  row->set_indices(1, 3);
  EXPECT_STATUS(Upload({Header(1, 3), sparse}), INVALID_ARGUMENT,
                HasSubstr("features[0] (sparse): index 3 is out of range for dim = 3"));
  ExpectAliveAndNothingStored();
}

TEST_F(BadInputTest, ConstraintIndicesOutOfRange) {
  const auto rows = Dense(0, {1, 2, 3, 4, 5, 6});
  EXPECT_STATUS(Upload({Header(3, 2, 2), rows, Pairs({{0, 1, 1}, {0, 3, -1}})}), INVALID_ARGUMENT,
                HasSubstr("constraints[1]: j = 3 is out of range for 3 points"));
  EXPECT_STATUS(Upload({Header(3, 2, 1), rows, Pairs({{-1, 2, 1}})}), INVALID_ARGUMENT,
                HasSubstr("constraints[0]: i = -1 is out of range for 3 points"));
  EXPECT_STATUS(Upload({Header(3, 2, 1), rows, Pairs({{0, 2, 0}})}), INVALID_ARGUMENT,
                HasSubstr("constraints[0]: kind = 0 is neither must-link (+1) nor cannot-link (-1)"));
  EXPECT_STATUS(Upload({Header(3, 2, 1), rows, Pairs({{0, 1, 1}, {1, 2, 1}})}), INVALID_ARGUMENT,
                HasSubstr("brings the total to 2, beyond header.num_constraints = 1"));
  ExpectAliveAndNothingStored();
}

TEST_F(BadInputTest, AbsurdDeclaredSizes) {
  // Checked on the header, before any memory is reserved.
  EXPECT_STATUS(Upload({Header(1'000'000'000, 2), Dense(0, {1, 2})}), RESOURCE_EXHAUSTED,
                HasSubstr("header.num_points = 1000000000 exceeds the limit of 10000000"));
  EXPECT_STATUS(Upload({Header(3, 2'000'000'000)}), RESOURCE_EXHAUSTED,
                HasSubstr("header.dim = 2000000000 exceeds the limit of 1000000"));
  EXPECT_STATUS(Upload({Header(10'000'000, 1'000)}), RESOURCE_EXHAUSTED,
                HasSubstr("header.num_points × header.dim = 10000000 × 1000 = 10000000000 values exceeds"));
  EXPECT_STATUS(Upload({Header(3, 2, int64_t{1} << 40)}), RESOURCE_EXHAUSTED,
                HasSubstr("header.num_constraints = 1099511627776 exceeds the limit of 100000000"));
  EXPECT_STATUS(Upload({Header(0, 2)}), INVALID_ARGUMENT, HasSubstr("header.num_points = 0 must be >= 1"));
  EXPECT_STATUS(Upload({Header(-5, 2)}), INVALID_ARGUMENT, HasSubstr("header.num_points = -5 must be >= 1"));
  EXPECT_STATUS(Upload({Header(3, -1)}), INVALID_ARGUMENT, HasSubstr("header.dim = -1 must be >= 1"));
  EXPECT_STATUS(Upload({Header(3, 2, -7)}), INVALID_ARGUMENT, HasSubstr("header.num_constraints = -7 must be >= 0"));
  ExpectAliveAndNothingStored();
}

// Peak resident memory of this process (the server runs in it), in bytes.
int64_t PeakRssBytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;  // "VmHWM:  123 kB"
  }
  return -1;
}

TEST_F(BadInputTest, LargeDeclaredSizesCostOnlyWhatArrives) {
  // 10^7 × 20 values is within the limits (2 × 10^8 ≤ 2^30), but the client
  // sends one row and stops. Memory must follow the rows that arrived, not
  // the declaration (1.6 GB of zeroed features before the fix).
  const int64_t before = PeakRssBytes();
  ASSERT_GT(before, 0);
  EXPECT_STATUS(Upload({Header(10'000'000, 20), Dense(0, std::vector<double>(20, 1.0))}), INVALID_ARGUMENT,
                HasSubstr("the stream ended after 1 of header.num_points = 10000000 rows (truncated upload)"));
  EXPECT_LT(PeakRssBytes() - before, int64_t{200} << 20);
  ExpectAliveAndNothingStored();
}

TEST_F(BadInputTest, UploadsLargerThanTheFirstAllocationRoundTrip) {
  // The feature buffer starts at 1024 rows and doubles: 5000 rows cross
  // three growth steps; values, zeros of sparse rows and order must survive.
  std::mt19937 rng(17);
  std::uniform_real_distribution<double> value(-2, 2);
  std::bernoulli_distribution present(0.2);
  for (const FeatureEncoding encoding : {FeatureEncoding::kDense, FeatureEncoding::kSparse}) {
    Dataset data;
    data.features = Eigen::MatrixXd::Zero(5000, 7);
    for (int i = 0; i < 5000; ++i) {
      for (int j = 0; j < 7; ++j) {
        if (encoding == FeatureEncoding::kDense || present(rng)) data.features(i, j) = value(rng);
      }
    }
    UploadOptions options;
    options.name = "grow";
    options.encoding = encoding;
    options.chunk_bytes = 4000;
    const auto info = client_->UploadDataset(data, PairwiseConstraints(), options);
    ASSERT_TRUE(info.ok()) << info.status();
    const auto stored = server_->store()->LoadDataset(info->id());
    ASSERT_TRUE(stored.ok()) << stored.status();
    EXPECT_EQ(stored->data.features, data.features);
  }
}

TEST_F(BadInputTest, TruncatedAndMisorderedStreams) {
  EXPECT_STATUS(Upload({Header(4, 2), Dense(0, {1, 2, 3, 4})}), INVALID_ARGUMENT,
                HasSubstr("the stream ended after 2 of header.num_points = 4 rows (truncated upload)"));
  EXPECT_STATUS(Upload({Header(2, 2, 3), Dense(0, {1, 2, 3, 4}), Pairs({{0, 1, 1}})}), INVALID_ARGUMENT,
                HasSubstr("the stream ended after 1 of header.num_constraints = 3 constraints (truncated upload)"));
  EXPECT_STATUS(Upload({}), INVALID_ARGUMENT, HasSubstr("empty upload: no DatasetHeader was sent"));
  EXPECT_STATUS(Upload({Dense(0, {1, 2}), Header(1, 2)}), INVALID_ARGUMENT,
                HasSubstr("message 0 is not a header"));
  EXPECT_STATUS(Upload({Header(1, 2), Header(1, 2)}), INVALID_ARGUMENT, HasSubstr("message 1 is a second header"));
  EXPECT_STATUS(Upload({Header(1, 2), kls::v1::UploadDatasetRequest()}), INVALID_ARGUMENT,
                HasSubstr("message 1 is empty"));

  // The client gives up mid-stream (cancels): the server drops the partial upload.
  {
    grpc::ClientContext context;
    Deadline(&context);
    kls::v1::DatasetInfo info;
    auto writer = datasets_->Upload(&context, &info);
    ASSERT_TRUE(writer->Write(Header(1000, 4)));
    ASSERT_TRUE(writer->Write(Dense(0, std::vector<double>(40, 1.0))));
    context.TryCancel();
    EXPECT_EQ(writer->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  ExpectAliveAndNothingStored();
}

TEST_F(BadInputTest, BadLabelsAndKeys) {
  auto header = Header(2, 1);
  header.mutable_header()->set_has_item_keys(true);
  auto rows = Dense(0, {1, 2});
  rows.mutable_features()->add_item_keys("a");
  rows.mutable_features()->add_item_keys("a");
  EXPECT_STATUS(Upload({header, rows}), INVALID_ARGUMENT, HasSubstr("item_keys[1] = 'a' repeats an earlier key"));
  header = Header(2, 1);
  header.mutable_header()->set_has_labels(true);
  rows = Dense(0, {1, 2});
  rows.mutable_features()->add_labels(0);
  rows.mutable_features()->add_labels(-3);
  EXPECT_STATUS(Upload({header, rows}), INVALID_ARGUMENT, HasSubstr("labels[1] = -3 must be >= 0"));
  header.mutable_header()->set_name(std::string(300, 'n'));
  EXPECT_STATUS(Upload({header}), INVALID_ARGUMENT, HasSubstr("header.name is 300 bytes; at most 256"));
  ExpectAliveAndNothingStored();
}

TEST_F(BadInputTest, UnknownAndInvalidSolverOptions) {
  const std::string dataset = UploadValid();
  ASSERT_FALSE(dataset.empty());
  auto submit = [&](const kls::v1::SubmitJobRequest& r) {
    grpc::ClientContext context;
    Deadline(&context);
    kls::v1::Job job;
    return jobs_->Submit(&context, r, &job);
  };
  kls::v1::SubmitJobRequest base;
  base.set_dataset_id(dataset);
  base.set_kernel_name("k");

  EXPECT_STATUS(submit(base), INVALID_ARGUMENT, HasSubstr("solver: one of kl_admm, bcd_npkl, simple_npkl, qsdp, embedding, onk, mkl, npk_ranking, social_strength is required"));

  auto r = base;
  r.mutable_bcd_npkl()->set_loss(static_cast<kls::v1::Loss>(42));
  EXPECT_STATUS(submit(r), INVALID_ARGUMENT, HasSubstr("bcd_npkl.loss = 42 is not a known loss"));

  r = base;
  r.mutable_kl_admm()->set_tolerance(std::numeric_limits<double>::quiet_NaN());
  EXPECT_STATUS(submit(r), INVALID_ARGUMENT, HasSubstr("kl_admm.tolerance"), HasSubstr("nan"));

  r = base;
  r.mutable_kl_admm()->set_rank(1000);
  EXPECT_STATUS(submit(r), INVALID_ARGUMENT, HasSubstr("kl_admm.rank = 1000 exceeds the data set's 8 points"));

  r = base;
  r.mutable_simple_npkl();
  r.mutable_graph()->set_k(-2);
  EXPECT_STATUS(submit(r), INVALID_ARGUMENT, HasSubstr("graph.k = -2 must be >= 1"));

  // Core options validate themselves under the family's name, once: the IPM's
  // max_iterations and MVE's inner c are flat in the proto, and so in the message;
  // bounds that need n are checked against the data set's.
  r = base;
  r.mutable_qsdp()->set_problem(kls::v1::QsdpKernelOptions::REGPCP);
  r.mutable_qsdp()->set_max_iterations(0);
  EXPECT_STATUS(submit(r), INVALID_ARGUMENT, HasSubstr("qsdp.max_iterations = 0 must be >= 1"));
  r.mutable_qsdp()->set_max_iterations(10);
  r.mutable_qsdp()->set_m(0);
  EXPECT_STATUS(submit(r), INVALID_ARGUMENT, HasSubstr("qsdp.m = 0 must be >= 1"));
  r.mutable_qsdp()->set_m(9);
  EXPECT_STATUS(submit(r), INVALID_ARGUMENT, HasSubstr("qsdp.m = 9 must be in [1, n] for n = 8"));
  r.mutable_qsdp()->set_m(3);
  r.mutable_qsdp()->set_nu(-1);
  EXPECT_STATUS(submit(r), INVALID_ARGUMENT, HasSubstr("qsdp.nu = -1 must be finite and > 0"));
  r = base;
  r.mutable_embedding()->set_method(kls::v1::EmbeddingOptions::MVE);
  r.mutable_embedding()->set_c(0);
  EXPECT_STATUS(submit(r), INVALID_ARGUMENT, HasSubstr("embedding.c = 0 must be finite and > 0"));
  r.mutable_embedding()->set_c(1);
  r.mutable_embedding()->set_dims(0);
  EXPECT_STATUS(submit(r), INVALID_ARGUMENT, HasSubstr("embedding.dims = 0 must be >= 1"));

  r = base;
  r.mutable_kl_admm();
  r.set_deadline_seconds(-1);
  EXPECT_STATUS(submit(r), INVALID_ARGUMENT, HasSubstr("deadline_seconds = -1 must be finite and >= 0"));

  // An option this server does not know (field 99, e.g. from a newer client):
  // refused rather than silently ignored, so no job runs with other settings
  // than the caller asked for.
  r = base;
  r.mutable_kl_admm()->set_gamma(1.0);
  r.mutable_kl_admm()->GetReflection()->MutableUnknownFields(r.mutable_kl_admm())->AddVarint(99, 7);
  EXPECT_STATUS(submit(r), INVALID_ARGUMENT, HasSubstr("kl_admm"), HasSubstr("unknown field 99"));
  // A solver this server does not know (an unknown member of the oneof).
  r = base;
  r.GetReflection()->MutableUnknownFields(&r)->AddLengthDelimited(40, "");
  EXPECT_STATUS(submit(r), INVALID_ARGUMENT, HasSubstr("unknown field 40"));

  r = base;
  r.set_dataset_id("ds-does-not-exist");
  r.mutable_kl_admm();
  EXPECT_STATUS(submit(r), NOT_FOUND, HasSubstr("ds-does-not-exist"));

  // Nothing was queued by any of these.
  grpc::ClientContext context;
  Deadline(&context);
  kls::v1::ListJobsResponse jobs;
  ASSERT_TRUE(jobs_->List(&context, kls::v1::ListJobsRequest(), &jobs).ok());
  EXPECT_EQ(jobs.jobs_size(), 0);
  ExpectAliveAndNothingStored(1);
}

TEST_F(BadInputTest, BadListAndKernelRequests) {
  {
    grpc::ClientContext context;
    Deadline(&context);
    kls::v1::ListJobsRequest request;
    request.set_page_size(5000);
    kls::v1::ListJobsResponse response;
    EXPECT_STATUS(jobs_->List(&context, request, &response), INVALID_ARGUMENT, HasSubstr("page_size = 5000"));
  }
  {
    grpc::ClientContext context;
    Deadline(&context);
    kls::v1::ListJobsRequest request;
    request.set_state(static_cast<kls::v1::JobState>(77));
    kls::v1::ListJobsResponse response;
    EXPECT_STATUS(jobs_->List(&context, request, &response), INVALID_ARGUMENT, HasSubstr("state = 77"));
  }
  {
    grpc::ClientContext context;
    Deadline(&context);
    kls::v1::SetAliasRequest request;
    request.set_name("k");
    request.set_alias("prod");
    request.set_version(0);
    kls::v1::KernelInfo response;
    EXPECT_STATUS(kernels_->SetAlias(&context, request, &response), INVALID_ARGUMENT,
                  HasSubstr("version = 0 must be >= 1"));
  }
  {
    grpc::ClientContext context;
    Deadline(&context);
    kls::v1::DeleteKernelRequest request;
    request.set_name("k");
    request.set_version(-4);
    kls::v1::DeleteKernelResponse response;
    EXPECT_STATUS(kernels_->Delete(&context, request, &response), INVALID_ARGUMENT, HasSubstr("version = -4"));
  }
  ExpectAliveAndNothingStored();
}

// Names of data sets, kernels and aliases follow [A-Za-z0-9][A-Za-z0-9._-]{0,127}
// (core/common/names.h): paths, ':' and '@' (the NAME:VERSION and NAME@ALIAS
// syntax), spaces, control bytes and overlong names are refused on every write,
// naming the field and the value.
TEST_F(BadInputTest, BadNamesAreRefusedNamingTheField) {
  const auto ExpectInvalid = [](const Status& st, const std::string& field) {
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st;
    EXPECT_THAT(st.message(), HasSubstr(field));
  };
  const std::vector<std::string> bad = {"../../etc/passwd", "a/b", "k:2", "k@prod", "with space", ".hidden",
                                        "-dash", std::string("nul\0x", 5), std::string(129, 'a'), "tab\t"};
  Dataset d;
  d.features = Eigen::MatrixXd::Identity(4, 2);
  d.labels = {0, 1, 0, 1};
  PairwiseConstraints c;
  c.pairs = {{0, 2, PairKind::kMustLink}};
  for (const std::string& name : bad) {
    SCOPED_TRACE(name);
    UploadOptions o;
    o.name = name;
    ExpectInvalid(client_->UploadDataset(d, c, o).status(), "header.name = \"");
    kls::v1::SubmitJobRequest submit;
    submit.set_dataset_id("ds-none");
    submit.set_kernel_name(name);
    submit.mutable_kl_admm();
    ExpectInvalid(client_->SubmitJob(submit).status(), "kernel_name = \"");
    ExpectInvalid(client_->ImportKernel(name, Eigen::MatrixXd::Identity(3, 2)).status(), "header.name = \"");
    ExpectInvalid(client_->SetAlias("k", name, 1).status(), "alias = \"");
  }
  // The message quotes the value (control bytes escaped) and says the rule.
  const Status s = client_->ImportKernel("../../etc/passwd", Eigen::MatrixXd::Identity(3, 2)).status();
  EXPECT_THAT(s.message(), HasSubstr("\"../../etc/passwd\" is not a valid name"));
  EXPECT_THAT(s.message(), HasSubstr("A-Z a-z 0-9 . _ -"));
  EXPECT_THAT(client_->ImportKernel(std::string("nul\0x", 5), Eigen::MatrixXd::Identity(3, 2)).status().message(),
              HasSubstr("\"nul\\x00x\""));
  // Valid names at the edges of the rule are accepted.
  for (const std::string& name : std::vector<std::string>{"a", "A.b_c-9", std::string(128, 'z')}) {
    EXPECT_TRUE(client_->ImportKernel(name, Eigen::MatrixXd::Identity(3, 2)).ok()) << name;
  }
  EXPECT_TRUE(client_->SetAlias("a", "prod-2", 1).ok());
  ExpectAliveAndNothingStored();  // keyless imports store no data set
}

TEST_F(BadInputTest, BadQueries) {
  // A kernel straight into the store (3 points, rank 2).
  store::StoredDataset d;
  d.data.features = Eigen::MatrixXd::Random(3, 2);
  const auto ds = server_->store()->PutDataset("q", d);
  ASSERT_TRUE(ds.ok()) << ds.status();
  LearnedKernel::Embedding v(3, 2);
  v << 1, 0, 0, 1, 1, 1;
  store::KernelRecord record;
  record.name = "k";
  record.dataset_id = ds->id;
  record.method = "test";
  ASSERT_TRUE(server_->store()->PutKernel(record, *LearnedKernel::FromEmbedding(std::move(v))).ok());

  auto call_similarity = [&](const kls::v1::SimilarityRequest& r) {
    grpc::ClientContext context;
    Deadline(&context);
    kls::v1::SimilarityResponse response;
    return queries_->Similarity(&context, r, &response);
  };
  kls::v1::SimilarityRequest sim;
  sim.mutable_kernel()->set_name("k");
  sim.add_i(0);
  sim.add_i(99);
  sim.add_j(1);
  sim.add_j(2);
  EXPECT_STATUS(call_similarity(sim), INVALID_ARGUMENT, HasSubstr("i[1] = 99 is out of range"));
  sim.add_i(1);
  EXPECT_STATUS(call_similarity(sim), INVALID_ARGUMENT, HasSubstr("i has 3 entries but j has 2"));
  kls::v1::SimilarityRequest big;
  big.mutable_kernel()->set_name("k");
  for (int t = 0; t <= 100'000; ++t) {
    big.add_i(0);
    big.add_j(0);
  }
  EXPECT_STATUS(call_similarity(big), INVALID_ARGUMENT, HasSubstr("i has 100001 entries; at most 100000"));

  auto call_topk = [&](const kls::v1::TopKRequest& r) {
    grpc::ClientContext context;
    Deadline(&context);
    kls::v1::TopKResponse response;
    return queries_->TopK(&context, r, &response);
  };
  kls::v1::TopKRequest topk;
  topk.mutable_kernel()->set_name("k");
  topk.set_item(0);
  topk.set_k(0);
  EXPECT_STATUS(call_topk(topk), INVALID_ARGUMENT, HasSubstr("k = 0 must be in [1, 10000]"));
  topk.set_k(2);
  topk.set_item(-1);
  EXPECT_STATUS(call_topk(topk), INVALID_ARGUMENT, HasSubstr("item = -1 is out of range"));
  topk.mutable_vector()->add_values(std::numeric_limits<double>::quiet_NaN());
  topk.mutable_vector()->add_values(1.0);
  EXPECT_STATUS(call_topk(topk), INVALID_ARGUMENT, HasSubstr("vector[0] = nan is not finite"));
  topk.mutable_vector()->add_values(1.0);
  EXPECT_STATUS(call_topk(topk), INVALID_ARGUMENT, HasSubstr("vector has 3 values but the kernel has rank 2"));
  topk.mutable_kernel()->set_name("missing-kernel");
  EXPECT_STATUS(call_topk(topk), NOT_FOUND, HasSubstr("missing-kernel"));
  ExpectAliveAndNothingStored(1);
}

TEST(BadInputAuthTest, MissingOrWrongTokensOnEveryKindOfCall) {
  kls::testing::TempDir dir;
  const std::string token = "bad-input-test-token-0123456789";
  std::ofstream(dir.Sub("tokens")) << token << " write\n";
  ServerConfig config;
  config.listen = "127.0.0.1:0";
  config.data_dir = dir.Sub("data");
  config.workers = 1;
  config.log_level = "off";
  config.tokens_file = dir.Sub("tokens");
  KlsServer server(config);
  ASSERT_TRUE(server.Start().ok());
  auto channel = grpc::CreateChannel(server.target(), grpc::InsecureChannelCredentials());
  auto datasets = kls::v1::Datasets::NewStub(channel);

  for (const std::string& header : {std::string(), "Bearer wrong-" + token, "Bearer " + token}) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    if (!header.empty()) context.AddMetadata("authorization", header);
    kls::v1::DatasetInfo info;
    auto writer = datasets->Upload(&context, &info);  // client streaming
    writer->Write(Header(1, 1));
    writer->Write(Dense(0, {std::numeric_limits<double>::quiet_NaN()}));
    writer->WritesDone();
    const grpc::Status s = writer->Finish();
    if (header.empty()) {
      EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << s.error_message();
      EXPECT_THAT(s.error_message(), HasSubstr("missing bearer token"));
    } else if (header != "Bearer " + token) {
      EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << s.error_message();
      EXPECT_THAT(s.error_message(), HasSubstr("invalid bearer token"));
      EXPECT_THAT(s.error_message(), ::testing::Not(HasSubstr(token)));
    } else {
      // Authorized: now the content is judged.
      EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
      EXPECT_THAT(s.error_message(), HasSubstr("features[0][0] = nan is not finite"));
    }
  }
  ClientOptions options;
  options.target = server.target();
  options.token = token;
  Client client(options);
  const auto echoed = client.Echo("after");
  ASSERT_TRUE(echoed.ok()) << echoed.status();
  EXPECT_EQ(*echoed, "after");
}

}  // namespace
}  // namespace kls::server
