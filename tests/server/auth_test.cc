// Bearer-token authorization (server/auth.h): the tokens-file parser, the
// method → scope table against the real proto services, and an in-process
// server with a tokens file called with each scope, no token and wrong tokens.
#include "server/auth.h"

#include <gmock/gmock.h>
#include <google/protobuf/descriptor.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <condition_variable>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
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

using ::testing::HasSubstr;
using ::testing::Not;

const std::string kReadToken = "read-token-0123456789abcdef";
const std::string kWriteToken = "write-token-0123456789abcdef";
const std::string kAdminToken = "admin-token-0123456789abcdef";
const std::string kWrongToken = "wrong-token-0123456789abcdef";

// ---- Tokens file ------------------------------------------------------------------

TEST(TokenTableTest, ParsesScopesCommentsAndCumulativeScopes) {
  const auto table = TokenTable::Parse(
      "# tokens\n"
      "\n" +
          kReadToken + "  read   # dashboards\n" + kWriteToken + " read,write\n" + kAdminToken + "\tadmin\n" +
          "tok#with-hash-inside-0123 write\n",
      "tokens.txt");
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_EQ(table->size(), 4u);
  EXPECT_EQ(table->Lookup(kReadToken), Scope::kRead);
  EXPECT_EQ(table->Lookup(kWriteToken), Scope::kWrite);
  EXPECT_EQ(table->Lookup(kAdminToken), Scope::kAdmin);
  EXPECT_EQ(table->Lookup("tok#with-hash-inside-0123"), Scope::kWrite);
  EXPECT_EQ(table->Lookup(kWrongToken), Scope::kNone);
  EXPECT_EQ(table->Lookup(""), Scope::kNone);
  EXPECT_EQ(table->Lookup(kReadToken + "x"), Scope::kNone);
  EXPECT_EQ(table->Lookup(kReadToken.substr(1)), Scope::kNone);
}

TEST(TokenTableTest, Sha256MatchesTheStandardTestVector) {
  // FIPS 180-2, appendix B.1: SHA-256("abc").
  const TokenTable::Hash h = TokenTable::Sha256("abc");
  const uint8_t expected[] = {0xba, 0x78, 0x16, 0xbf, 0x8f, 0x01, 0xcf, 0xea, 0x41, 0x41, 0x40,
                              0xde, 0x5d, 0xae, 0x22, 0x23, 0xb0, 0x03, 0x61, 0xa3, 0x96, 0x17,
                              0x7a, 0x9c, 0xb4, 0x10, 0xff, 0x61, 0xf2, 0x00, 0x15, 0xad};
  EXPECT_TRUE(std::equal(h.begin(), h.end(), std::begin(expected)));
}

TEST(TokenTableTest, ErrorsNameTheLineAndNeverTheToken) {
  struct Case {
    std::string text;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {kReadToken + "\n", "tokens.txt:1: expected 'TOKEN SCOPES'"},
      {"# c\n" + kReadToken + " wirte\n", "tokens.txt:2: unknown scope 'wirte'"},
      {kReadToken + " read write\n", "tokens.txt:1: unexpected text 'write'"},
      {kReadToken + " read,\n", "tokens.txt:1: unknown scope ''"},
      {"short read\n", "tokens.txt:1: the token is 5 characters; 16..512 are required"},
      {kReadToken + " read\n" + kReadToken + " admin\n", "tokens.txt:2: the token repeats the one on line 1"},
      {"# only comments\n\n", "tokens.txt: no tokens"},
  };
  for (const Case& c : cases) {
    const auto table = TokenTable::Parse(c.text, "tokens.txt");
    ASSERT_FALSE(table.ok()) << c.text;
    EXPECT_EQ(table.status().code(), StatusCode::kInvalidArgument) << c.text;
    EXPECT_THAT(table.status().message(), HasSubstr(c.expected)) << c.text;
    EXPECT_THAT(table.status().message(), Not(HasSubstr(kReadToken))) << c.text;
  }
  const auto missing = TokenTable::Load("/nonexistent/kls-tokens");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("/nonexistent/kls-tokens"));
}

// ---- Method → scope ---------------------------------------------------------------

// Every kls.v1 method and the scope it must need. Each path is also looked up
// in the generated descriptors, so a renamed RPC cannot leave a stale entry.
const std::map<std::string, Scope>& ExpectedScopes() {
  static const std::map<std::string, Scope> kExpected = {
      {"/kls.v1.Admin/Echo", Scope::kRead},          {"/kls.v1.Admin/GetServerInfo", Scope::kRead},
      {"/kls.v1.Admin/Backup", Scope::kAdmin},
      {"/kls.v1.Datasets/Upload", Scope::kWrite},    {"/kls.v1.Datasets/Get", Scope::kRead},
      {"/kls.v1.Datasets/List", Scope::kRead},       {"/kls.v1.Datasets/Delete", Scope::kWrite},
      {"/kls.v1.Datasets/SetAttributes", Scope::kWrite},
      {"/kls.v1.Jobs/Submit", Scope::kWrite},        {"/kls.v1.Jobs/Get", Scope::kRead},
      {"/kls.v1.Jobs/List", Scope::kRead},           {"/kls.v1.Jobs/Cancel", Scope::kWrite},
      {"/kls.v1.Jobs/Watch", Scope::kRead},          {"/kls.v1.Kernels/Get", Scope::kRead},
      {"/kls.v1.Kernels/List", Scope::kRead},        {"/kls.v1.Kernels/Delete", Scope::kWrite},
      {"/kls.v1.Kernels/SetAlias", Scope::kWrite},   {"/kls.v1.Kernels/Export", Scope::kRead},
      {"/kls.v1.Queries/Similarity", Scope::kRead},  {"/kls.v1.Queries/TopK", Scope::kRead},
      {"/kls.v1.Queries/Embed", Scope::kRead},       {"/kls.v1.Kernels/Import", Scope::kWrite},
      {"/kls.v1.Queries/ReRank", Scope::kRead},      {"/kls.v1.Queries/SocialStrength", Scope::kRead},
      {"/kls.v1.Queries/RecommendFriends", Scope::kRead},
      {"/kls.v1.Queries/RecommendGroups", Scope::kRead},
      {"/kls.v1.Queries/Classify", Scope::kRead},    {"/kls.v1.Queries/ClassifyUsers", Scope::kRead},
      {"/kls.v1.Kernels/Inspect", Scope::kRead},     {"/kls.v1.Jobs/History", Scope::kRead},
  };
  return kExpected;
}

TEST(RequiredScopeTest, EveryServiceMethodHasItsScope) {
  const auto* pool = google::protobuf::DescriptorPool::generated_pool();
  for (const auto& [path, scope] : ExpectedScopes()) {
    const size_t slash = path.rfind('/');
    const std::string service = path.substr(1, slash - 1);
    const std::string method = path.substr(slash + 1);
    const auto* descriptor = pool->FindServiceByName(service);
    ASSERT_NE(descriptor, nullptr) << service;
    EXPECT_NE(descriptor->FindMethodByName(method), nullptr) << path;
    EXPECT_EQ(RequiredScope(path), scope) << path;
  }
  // And the other way round: every method of every kls.v1 service is in the table above, so a new RPC
  // cannot silently fall back to admin-only (the model queries once did).
  for (const char* service : {"kls.v1.Admin", "kls.v1.Datasets", "kls.v1.Jobs", "kls.v1.Kernels", "kls.v1.Queries"}) {
    const auto* descriptor = pool->FindServiceByName(service);
    ASSERT_NE(descriptor, nullptr) << service;
    for (int m = 0; m < descriptor->method_count(); ++m) {
      const std::string path = std::string("/") + service + "/" + descriptor->method(m)->name();
      EXPECT_EQ(ExpectedScopes().count(path), 1u) << path << " has no expected scope";
    }
  }
  EXPECT_EQ(RequiredScope("/grpc.health.v1.Health/Check"), Scope::kNone);
  EXPECT_EQ(RequiredScope("/grpc.health.v1.Health/Watch"), Scope::kNone);
  // Fail closed: an unknown or future method needs admin.
  EXPECT_EQ(RequiredScope("/kls.v1.Admin/Shutdown"), Scope::kAdmin);
  EXPECT_EQ(RequiredScope("/kls.v1.Datasets/get"), Scope::kAdmin);
  EXPECT_EQ(RequiredScope(""), Scope::kAdmin);
}

TEST(AuthorizeTest, DecidesFromTheHeader) {
  const auto table = TokenTable::Parse(kReadToken + " read\n", "t");
  ASSERT_TRUE(table.ok());
  EXPECT_TRUE(Authorize(&*table, "/kls.v1.Queries/TopK", "Bearer " + kReadToken).ok());
  EXPECT_TRUE(Authorize(&*table, "/kls.v1.Queries/TopK", "bearer " + kReadToken).ok());
  EXPECT_TRUE(Authorize(&*table, "/grpc.health.v1.Health/Check", "").ok());
  EXPECT_TRUE(Authorize(nullptr, "/kls.v1.Datasets/Delete", "").ok()) << "no tokens file: auth off";
  const Status basic = Authorize(&*table, "/kls.v1.Queries/TopK", "Basic dXNlcjpwYXNz");
  EXPECT_EQ(basic.code(), StatusCode::kUnauthenticated);
  EXPECT_THAT(basic.message(), HasSubstr("not 'Bearer TOKEN'"));
  const Status denied = Authorize(&*table, "/kls.v1.Jobs/Submit", "Bearer " + kReadToken);
  EXPECT_EQ(denied.code(), StatusCode::kPermissionDenied);
  EXPECT_THAT(denied.message(), HasSubstr("/kls.v1.Jobs/Submit needs a token with scope 'write'"));
  EXPECT_THAT(denied.message(), HasSubstr("the token has scope 'read'"));
  EXPECT_THAT(denied.message(), Not(HasSubstr(kReadToken)));
}

// ---- In-process server with a tokens file -------------------------------------------

class AuthServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string tokens = dir_.Sub("tokens");
    std::ofstream(tokens) << "# test tokens\n"
                          << kReadToken << " read\n"
                          << kWriteToken << " write\n"
                          << kAdminToken << " admin\n";
    ServerConfig config;
    config.listen = "127.0.0.1:0";
    config.data_dir = dir_.Sub("data");
    config.workers = 1;
    config.log_level = "warn";
    config.tokens_file = tokens;
    kls::testing::UseTestStore(dir_, &config);
    server_ = std::make_unique<KlsServer>(config);
    const Status started = server_->Start();
    ASSERT_TRUE(started.ok()) << started;
  }

  std::unique_ptr<Client> MakeClient(const std::string& token) const {
    ClientOptions options;
    options.target = server_->target();
    options.token = token;
    return std::make_unique<Client>(options);
  }

  // A raw call to any method path (also ones no stub knows): the status only.
  Status RawCall(const std::string& method, const std::string& token) const {
    auto channel = grpc::CreateChannel(server_->target(), grpc::InsecureChannelCredentials());
    grpc::GenericStub stub(channel);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
    grpc::Slice empty("");
    grpc::ByteBuffer request(&empty, 1), response;
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    grpc::Status status;
    stub.UnaryCall(&context, method, grpc::StubOptions(), &request, &response, [&](grpc::Status s) {
      std::lock_guard<std::mutex> lock(mu);
      status = std::move(s);
      done = true;
      cv.notify_all();
    });
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return done; });
    return Status(static_cast<StatusCode>(status.error_code()), status.error_message());
  }

  kls::testing::TempDir dir_;
  std::unique_ptr<KlsServer> server_;
};

// One representative call per RPC class; "passed" means the handler ran
// (answers OK or a non-auth error such as NOT_FOUND for a missing id).
struct RpcClass {
  const char* name;
  Scope needs;
  std::function<Status(Client&)> call;
};

std::vector<RpcClass> RpcClasses() {
  return {
      {"Echo", Scope::kRead, [](Client& c) { return c.Echo("x").status(); }},
      {"GetServerInfo", Scope::kRead, [](Client& c) { return c.GetServerInfo().status(); }},
      {"Datasets.List", Scope::kRead, [](Client& c) { return c.ListDatasets().status(); }},
      {"Datasets.Get", Scope::kRead, [](Client& c) { return c.GetDataset("ds-missing").status(); }},
      {"Jobs.List", Scope::kRead, [](Client& c) { return c.ListJobs(kls::v1::ListJobsRequest()).status(); }},
      {"Jobs.Watch", Scope::kRead, [](Client& c) { return c.WatchJob("job-missing", nullptr, 5).status(); }},
      {"Kernels.List", Scope::kRead, [](Client& c) { return c.ListKernels().status(); }},
      {"Kernels.Export", Scope::kRead,
       [](Client& c) { return c.ExportKernel(*ParseKernelRef("nope")).status(); }},
      {"Queries.Similarity", Scope::kRead,
       [](Client& c) { return c.Similarity(*ParseKernelRef("nope"), {{0, 1}}).status(); }},
      {"Datasets.Upload", Scope::kWrite,
       [](Client& c) {
         Dataset d;
         d.features = Eigen::MatrixXd::Ones(3, 2);
         UploadOptions o;
         o.name = "tiny";
         return c.UploadDataset(d, PairwiseConstraints(), o).status();
       }},
      {"Datasets.Delete", Scope::kWrite, [](Client& c) { return c.DeleteDataset("ds-missing"); }},
      {"Jobs.Submit", Scope::kWrite,
       [](Client& c) {
         kls::v1::SubmitJobRequest r;
         r.set_dataset_id("ds-missing");
         r.mutable_kl_admm();
         return c.SubmitJob(r).status();
       }},
      {"Jobs.Cancel", Scope::kWrite, [](Client& c) { return c.CancelJob("job-missing").status(); }},
      {"Kernels.Delete", Scope::kWrite, [](Client& c) { return c.DeleteKernel("nope", 0); }},
      {"Kernels.SetAlias", Scope::kWrite, [](Client& c) { return c.SetAlias("nope", "prod", 1).status(); }},
  };
}

bool IsAuthError(const Status& s) {
  return s.code() == StatusCode::kUnauthenticated || s.code() == StatusCode::kPermissionDenied;
}

TEST_F(AuthServerTest, EachScopeAgainstEachRpcClass) {
  const std::vector<std::pair<Scope, std::string>> holders = {
      {Scope::kRead, kReadToken}, {Scope::kWrite, kWriteToken}, {Scope::kAdmin, kAdminToken}};
  for (const auto& [held, token] : holders) {
    auto client = MakeClient(token);
    for (const RpcClass& rpc : RpcClasses()) {
      const Status s = rpc.call(*client);
      if (held >= rpc.needs) {
        EXPECT_FALSE(IsAuthError(s)) << ScopeName(held) << " token, " << rpc.name << ": " << s;
      } else {
        EXPECT_EQ(s.code(), StatusCode::kPermissionDenied) << ScopeName(held) << " token, " << rpc.name << ": " << s;
        EXPECT_THAT(s.message(), HasSubstr("scope '" + std::string(ScopeName(rpc.needs)) + "'")) << rpc.name;
        EXPECT_THAT(s.message(), Not(HasSubstr(token))) << rpc.name;
      }
    }
  }
  // The write token really wrote: the upload above stored data sets.
  auto reader = MakeClient(kReadToken);
  const auto listed = reader->ListDatasets();
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(listed->size(), 2u);  // write and admin uploads
}

TEST_F(AuthServerTest, MissingOrWrongTokenIsUnauthenticated) {
  for (const std::string& token : {std::string(), kWrongToken, kReadToken.substr(0, 20)}) {
    auto client = MakeClient(token);
    for (const RpcClass& rpc : RpcClasses()) {
      const Status s = rpc.call(*client);
      EXPECT_EQ(s.code(), StatusCode::kUnauthenticated) << "token '" << token << "', " << rpc.name << ": " << s;
      EXPECT_THAT(s.message(), HasSubstr("scope '" + std::string(ScopeName(rpc.needs)) + "'")) << rpc.name;
      if (!token.empty()) EXPECT_THAT(s.message(), Not(HasSubstr(token))) << rpc.name;
    }
  }
  const Status missing = MakeClient("")->Echo("x").status();
  EXPECT_THAT(missing.message(), HasSubstr("missing bearer token"));
  EXPECT_THAT(missing.message(), HasSubstr("/kls.v1.Admin/Echo needs a token with scope 'read'"));
  const Status wrong = MakeClient(kWrongToken)->Echo("x").status();
  EXPECT_THAT(wrong.message(), HasSubstr("invalid bearer token"));
  // Nothing was stored by the rejected uploads.
  const auto listed = MakeClient(kAdminToken)->ListDatasets();
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_TRUE(listed->empty());
}

TEST_F(AuthServerTest, HealthNeedsNoToken) {
  auto anonymous = MakeClient("");
  const auto health = anonymous->CheckHealth();
  ASSERT_TRUE(health.ok()) << health.status();
  EXPECT_EQ(*health, ServingStatus::kServing);
  const auto admin_health = anonymous->CheckHealth("kls.v1.Admin");
  ASSERT_TRUE(admin_health.ok()) << admin_health.status();
}

TEST_F(AuthServerTest, UnknownMethodsNeedAdmin) {
  // A method the server does not implement: only an admin token gets past the
  // token check (and then hears UNIMPLEMENTED).
  const std::string method = "/kls.v1.Admin/NoSuchAdminCall";
  EXPECT_EQ(RawCall(method, "").code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(RawCall(method, kReadToken).code(), StatusCode::kPermissionDenied);
  const Status write = RawCall(method, kWriteToken);
  EXPECT_EQ(write.code(), StatusCode::kPermissionDenied);
  EXPECT_THAT(write.message(), HasSubstr("needs a token with scope 'admin'"));
  EXPECT_EQ(RawCall(method, kAdminToken).code(), StatusCode::kUnimplemented);
}

TEST_F(AuthServerTest, MalformedHeadersAreUnauthenticated) {
  auto channel = grpc::CreateChannel(server_->target(), grpc::InsecureChannelCredentials());
  auto stub = kls::v1::Admin::NewStub(channel);
  for (const std::string& header : {"Basic " + kReadToken, kReadToken, std::string("Bearer "),
                                    std::string("Bearer  ") + kReadToken}) {
    grpc::ClientContext context;
    context.AddMetadata("authorization", header);
    kls::v1::EchoRequest request;
    kls::v1::EchoResponse response;
    const grpc::Status s = stub->Echo(&context, request, &response);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << "'" << header << "'";
  }
  // Two authorization headers are refused rather than guessed between.
  grpc::ClientContext context;
  context.AddMetadata("authorization", "Bearer " + kWrongToken);
  context.AddMetadata("authorization", "Bearer " + kAdminToken);
  kls::v1::EchoResponse response;
  const grpc::Status s = stub->Echo(&context, kls::v1::EchoRequest(), &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(s.error_message(), HasSubstr("more than one authorization header"));
}

TEST(AuthStartTest, BadTokensFileFailsTheStart) {
  kls::testing::TempDir dir;
  ServerConfig config;
  config.listen = "127.0.0.1:0";
  config.data_dir = dir.Sub("data");
  config.log_level = "warn";
  config.tokens_file = dir.Sub("missing-tokens");
  {
    KlsServer server(config);
    const Status s = server.Start();
    EXPECT_EQ(s.code(), StatusCode::kNotFound) << s;
    EXPECT_THAT(s.message(), HasSubstr("missing-tokens"));
  }
  std::ofstream(dir.Sub("bad-tokens")) << kReadToken << " reed\n";
  config.tokens_file = dir.Sub("bad-tokens");
  KlsServer server(config);
  const Status s = server.Start();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("bad-tokens:1: unknown scope 'reed'"));
  EXPECT_THAT(s.message(), Not(HasSubstr(kReadToken)));
}

}  // namespace
}  // namespace kls::server
