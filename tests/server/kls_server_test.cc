// KlsServer in-process on port 0 with a temporary data directory, exercised
// through kls::Client (and raw gRPC for reflection).
#include "server/kls_server.h"

#include <gmock/gmock.h>
#include <google/protobuf/descriptor.h>
#include <google/protobuf/dynamic_message.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/impl/codegen/proto_utils.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "client/client.h"
#include "server/data_dir.h"
#include "temp_dir.h"

namespace kls::server {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

class KlsServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_.listen = "127.0.0.1:0";
    config_.data_dir = dir_.Sub("data");
    config_.workers = 3;
    server_ = std::make_unique<KlsServer>(config_);
    const Status started = server_->Start();
    ASSERT_TRUE(started.ok()) << started;
    client_ = MakeClient(server_->target());
  }

  static std::unique_ptr<Client> MakeClient(const std::string& target) {
    ClientOptions options;
    options.target = target;
    options.timeout_seconds = 10;
    return std::make_unique<Client>(options);
  }

  kls::testing::TempDir dir_;
  ServerConfig config_;
  std::unique_ptr<KlsServer> server_;
  std::unique_ptr<Client> client_;
};

TEST_F(KlsServerTest, PicksAFreePortAndRecordsItInTheLockFile) {
  EXPECT_GT(server_->port(), 0);
  EXPECT_EQ(server_->target(), "127.0.0.1:" + std::to_string(server_->port()));
  const std::string lock = ReadFile(config_.data_dir + "/" + DataDir::kLockFileName);
  EXPECT_THAT(lock, HasSubstr("pid=" + std::to_string(getpid()) + "\n"));
  EXPECT_THAT(lock, HasSubstr("listen=" + server_->target() + "\n"));
}

TEST_F(KlsServerTest, EchoRoundTrip) {
  StatusOr<std::string> echoed = client_->Echo("hello");
  ASSERT_TRUE(echoed.ok()) << echoed.status();
  EXPECT_EQ(*echoed, "hello");

  const std::string binary("\0\x01\xff kls \0", 9);
  echoed = client_->Echo(binary);
  ASSERT_TRUE(echoed.ok()) << echoed.status();
  EXPECT_EQ(*echoed, binary);

  echoed = client_->Echo("");
  ASSERT_TRUE(echoed.ok()) << echoed.status();
  EXPECT_EQ(*echoed, "");

  std::string big(3 * 1024 * 1024, 'x');  // above gRPC's 4 MiB-default neighbourhood, below 64 MiB
  big[12345] = 'y';
  echoed = client_->Echo(big);
  ASSERT_TRUE(echoed.ok()) << echoed.status();
  EXPECT_EQ(*echoed, big);
}

TEST_F(KlsServerTest, MessagesAboveTheLimitAreResourceExhausted) {
  ServerConfig small = config_;
  small.data_dir = dir_.Sub("small");
  small.max_message_mb = 1;
  KlsServer server(small);
  ASSERT_TRUE(server.Start().ok());
  auto client = MakeClient(server.target());

  EXPECT_TRUE(client->Echo(std::string(512 * 1024, 'a')).ok());
  const StatusOr<std::string> too_big = client->Echo(std::string(2 * 1024 * 1024, 'a'));
  EXPECT_EQ(too_big.status().code(), StatusCode::kResourceExhausted) << too_big.status();
}

TEST_F(KlsServerTest, GetServerInfo) {
  const StatusOr<kls::v1::ServerInfo> info = client_->GetServerInfo();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->version(), KlsVersion());
  EXPECT_FALSE(info->version().empty());
  EXPECT_EQ(info->data_dir(), std::filesystem::canonical(config_.data_dir).string());
  EXPECT_EQ(info->data_dir(), server_->data_dir());
  EXPECT_EQ(info->worker_threads(), 3);
  EXPECT_EQ(info->max_message_bytes(), 64LL * 1024 * 1024);
  EXPECT_GE(info->uptime_seconds(), 0.0);
  EXPECT_LT(info->uptime_seconds(), 60.0);

  const StatusOr<kls::v1::ServerInfo> later = client_->GetServerInfo();
  ASSERT_TRUE(later.ok());
  EXPECT_GE(later->uptime_seconds(), info->uptime_seconds());
}

TEST_F(KlsServerTest, HealthIsServingForTheServerAndAdmin) {
  for (const std::string service : {"", "kls.v1.Admin"}) {
    const StatusOr<ServingStatus> health = client_->CheckHealth(service);
    ASSERT_TRUE(health.ok()) << service << ": " << health.status();
    EXPECT_EQ(*health, ServingStatus::kServing) << service;
  }
  EXPECT_EQ(client_->CheckHealth("kls.v1.NoSuchService").status().code(), StatusCode::kNotFound);
}

TEST_F(KlsServerTest, HealthFollowsSetServing) {
  server_->SetServing(false);
  EXPECT_EQ(*client_->CheckHealth(""), ServingStatus::kNotServing);
  EXPECT_EQ(*client_->CheckHealth("kls.v1.Admin"), ServingStatus::kNotServing);
  server_->SetServing(true);
  EXPECT_EQ(*client_->CheckHealth(""), ServingStatus::kServing);
}

// Asks grpc.reflection.v1alpha for the service list. The reflection messages
// come from the descriptors libgrpc++_reflection registers, so the test needs
// no copy of reflection.proto.
std::vector<std::string> ListServicesByReflection(const std::string& target) {
  namespace pb = google::protobuf;
  const pb::DescriptorPool* pool = pb::DescriptorPool::generated_pool();
  const pb::Descriptor* request_type = pool->FindMessageTypeByName("grpc.reflection.v1alpha.ServerReflectionRequest");
  const pb::Descriptor* response_type =
      pool->FindMessageTypeByName("grpc.reflection.v1alpha.ServerReflectionResponse");
  if (request_type == nullptr || response_type == nullptr) {
    ADD_FAILURE() << "reflection descriptors not linked in";
    return {};
  }
  pb::DynamicMessageFactory factory(pool);
  std::unique_ptr<pb::Message> request(factory.GetPrototype(request_type)->New());
  request->GetReflection()->SetString(request.get(), request_type->FindFieldByName("list_services"), "*");
  std::unique_ptr<pb::Message> response(factory.GetPrototype(response_type)->New());

  grpc::GenericStub stub(grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
  grpc::CompletionQueue cq;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  auto call = stub.PrepareCall(&context, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", &cq);
  intptr_t next_tag = 1;
  auto step = [&](auto&& start) {
    void* tag = reinterpret_cast<void*>(next_tag++);
    start(tag);
    void* got = nullptr;
    bool ok = false;
    return cq.Next(&got, &ok) && got == tag && ok;
  };

  grpc::ByteBuffer request_bytes, response_bytes;
  bool own_buffer = false;
  EXPECT_TRUE(grpc::SerializationTraits<pb::Message>::Serialize(*request, &request_bytes, &own_buffer).ok());
  EXPECT_TRUE(step([&](void* tag) { call->StartCall(tag); }));
  EXPECT_TRUE(step([&](void* tag) { call->Write(request_bytes, tag); }));
  EXPECT_TRUE(step([&](void* tag) { call->WritesDone(tag); }));
  EXPECT_TRUE(step([&](void* tag) { call->Read(&response_bytes, tag); }));
  grpc::Status status;
  EXPECT_TRUE(step([&](void* tag) { call->Finish(&status, tag); }));
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_TRUE(grpc::SerializationTraits<pb::Message>::Deserialize(&response_bytes, response.get()).ok());
  cq.Shutdown();

  std::vector<std::string> names;
  const pb::Message& list =
      response->GetReflection()->GetMessage(*response, response_type->FindFieldByName("list_services_response"));
  const pb::FieldDescriptor* service_field = list.GetDescriptor()->FindFieldByName("service");
  for (int i = 0; i < list.GetReflection()->FieldSize(list, service_field); ++i) {
    const pb::Message& service = list.GetReflection()->GetRepeatedMessage(list, service_field, i);
    names.push_back(service.GetReflection()->GetString(service, service.GetDescriptor()->FindFieldByName("name")));
  }
  return names;
}

TEST_F(KlsServerTest, ReflectionListsTheServices) {
  const std::vector<std::string> services = ListServicesByReflection(server_->target());
  EXPECT_THAT(services, Contains("kls.v1.Admin"));
  EXPECT_THAT(services, Contains("grpc.health.v1.Health"));
  EXPECT_THAT(services, Contains("grpc.reflection.v1alpha.ServerReflection"));
}

TEST_F(KlsServerTest, SecondServerOnTheSameDataDirFailsClearly) {
  KlsServer second(config_);  // same data dir, its own free port
  const Status s = second.Start();
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("is in use by another kls-server"));
  EXPECT_THAT(s.message(), HasSubstr("pid " + std::to_string(getpid())));
  EXPECT_THAT(s.message(), HasSubstr("listening on " + server_->target()));
  EXPECT_EQ(second.port(), 0);  // refused before binding anything
  // The first server is unaffected.
  EXPECT_EQ(*client_->CheckHealth(""), ServingStatus::kServing);
}

TEST_F(KlsServerTest, DataDirThatIsAFileIsRefused) {
  const std::string file = dir_.Sub("not-a-dir");
  std::ofstream(file) << "x";
  ServerConfig config = config_;
  config.data_dir = file;
  KlsServer server(config);
  const Status s = server.Start();
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("exists but is not a directory"));
  EXPECT_THAT(s.message(), HasSubstr(file));
}

TEST_F(KlsServerTest, CreatesNestedDataDir) {
  ServerConfig config = config_;
  config.data_dir = dir_.Sub("a/b/c");
  KlsServer server(config);
  ASSERT_TRUE(server.Start().ok());
  EXPECT_TRUE(std::filesystem::is_directory(dir_.Sub("a/b/c")));
}

TEST_F(KlsServerTest, BusyPortIsUnavailableAndReleasesTheDataDir) {
  ServerConfig config = config_;
  config.listen = server_->target();
  config.data_dir = dir_.Sub("other");
  {
    KlsServer clash(config);
    const Status s = clash.Start();
    EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s;
    EXPECT_THAT(s.message(), HasSubstr(server_->target()));
  }
  config.listen = "127.0.0.1:0";
  KlsServer after(config);
  EXPECT_TRUE(after.Start().ok());
}

TEST_F(KlsServerTest, StopRefusesCallsAndReleasesTheLock) {
  const std::string target = server_->target();
  server_->Stop();
  server_->Stop();  // idempotent

  ClientOptions options;
  options.target = target;
  options.timeout_seconds = 5;
  Client client(options);
  EXPECT_EQ(client.CheckHealth("").status().code(), StatusCode::kUnavailable);

  KlsServer again(config_);
  EXPECT_TRUE(again.Start().ok());
}

TEST_F(KlsServerTest, InvalidConfigIsRejectedBeforeTouchingTheDisk) {
  ServerConfig config = config_;
  config.data_dir = dir_.Sub("never-created");
  config.max_message_mb = 0;
  KlsServer server(config);
  EXPECT_EQ(server.Start().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(std::filesystem::exists(config.data_dir));
}

TEST(ClientTest, NoServerIsUnavailable) {
  // Bind a port and close it: nothing listens there afterwards.
  ServerConfig config;
  kls::testing::TempDir dir;
  config.listen = "127.0.0.1:0";
  config.data_dir = dir.Sub("d");
  std::string target;
  {
    KlsServer server(config);
    ASSERT_TRUE(server.Start().ok());
    target = server.target();
  }
  ClientOptions options;
  options.target = target;
  options.timeout_seconds = 5;
  Client client(options);
  const Status s = client.GetServerInfo().status();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_THAT(s.ToString(), ::testing::StartsWith("UNAVAILABLE: "));
}

}  // namespace
}  // namespace kls::server
