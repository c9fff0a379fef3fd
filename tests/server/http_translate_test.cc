// The HTTP gateway's translation layer (server/http/http_translate.h): the
// route rule, request bodies and query strings → messages, errors → HTTP.
#include "server/http/http_translate.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <set>

#include <google/protobuf/descriptor.h>

#include "kls/v1/datasets.pb.h"
#include "kls/v1/jobs.pb.h"
#include "kls/v1/queries.pb.h"

namespace kls::server::http {
namespace {

using json = nlohmann::json;

const HttpRoute& Route(const std::string& path) {
  for (const HttpRoute& r : KlsHttpRoutes()) {
    if (r.path == path) return r;
  }
  ADD_FAILURE() << "no route " << path;
  static HttpRoute none;
  return none;
}

TEST(HttpRoutes, OneKebabCasePathPerMethodOfEveryService) {
  EXPECT_EQ(KebabCase("TopK"), "top-k");
  EXPECT_EQ(KebabCase("GetServerInfo"), "get-server-info");
  EXPECT_EQ(KebabCase("ReRank"), "re-rank");
  std::set<std::string> paths;
  int methods = 0;
  for (const HttpRoute& r : KlsHttpRoutes()) {
    EXPECT_TRUE(paths.insert(r.path).second) << "duplicate " << r.path;
    EXPECT_EQ(r.path.rfind("/v1/", 0), 0u) << r.path;
    EXPECT_EQ(r.scope, RequiredScope(r.grpc_method)) << r.path;
    ++methods;
  }
  // Every method of every kls.v1 service is routed.
  int expected = 0;
  for (const char* file : {"kls/v1/service.proto", "kls/v1/datasets.proto", "kls/v1/jobs.proto",
                           "kls/v1/kernels.proto", "kls/v1/queries.proto"}) {
    const auto* f = google::protobuf::DescriptorPool::generated_pool()->FindFileByName(file);
    ASSERT_NE(f, nullptr) << file;
    for (int s = 0; s < f->service_count(); ++s) expected += f->service(s)->method_count();
  }
  EXPECT_EQ(methods, expected);
  const HttpRoute& topk = Route("/v1/queries/top-k");
  EXPECT_EQ(topk.grpc_method, "/kls.v1.Queries/TopK");
  EXPECT_TRUE(topk.allows_get);
  const HttpRoute& upload = Route("/v1/datasets/upload");
  EXPECT_TRUE(upload.client_streaming);
  EXPECT_FALSE(upload.allows_get);
  EXPECT_FALSE(Route("/v1/jobs/submit").allows_get);  // write scope: POST only
  EXPECT_TRUE(Route("/v1/jobs/watch").server_streaming);
}

TEST(HttpRoutes, MatchRouteSaysWhatIsWrong) {
  const auto& routes = KlsHttpRoutes();
  EXPECT_TRUE(MatchRoute(routes, "POST", "/v1/queries/top-k").ok());
  EXPECT_TRUE(MatchRoute(routes, "GET", "/v1/queries/top-k").ok());
  const auto missing = MatchRoute(routes, "POST", "/v1/queries/topk");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("/v1/queries/topk"), std::string::npos);
  const auto verb = MatchRoute(routes, "GET", "/v1/jobs/submit");
  EXPECT_EQ(verb.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(verb.status().message().find("allowed: POST"), std::string::npos);
  EXPECT_EQ(MatchRoute(routes, "DELETE", "/v1/queries/top-k").status().code(), StatusCode::kUnimplemented);
}

TEST(HttpTranslate, JsonBodyBecomesTheRequest) {
  const HttpRoute& topk = Route("/v1/queries/top-k");
  auto m = RequestMessages(topk, "POST", "", R"({"kernel":{"name":"k","version":"2"},"item":3,"k":5,
                                               "metric":"COSINE","select":{"filter":"price < 3","exclude":[4,5]}})");
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->size(), 1u);
  const auto& r = static_cast<const kls::v1::TopKRequest&>(*(*m)[0]);
  EXPECT_EQ(r.kernel().name(), "k");
  EXPECT_EQ(r.kernel().version(), 2);
  EXPECT_EQ(r.item(), 3);
  EXPECT_EQ(r.select().exclude_size(), 2);
  EXPECT_EQ(r.k(), 5);
  EXPECT_EQ(r.metric(), kls::v1::COSINE);
  EXPECT_EQ(r.select().filter(), "price < 3");
  // proto field names are accepted too; an empty body is all defaults.
  EXPECT_TRUE(RequestMessages(topk, "POST", "", R"({"min_score": 0.5})").ok());
  auto empty = RequestMessages(topk, "POST", "", "  ");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(static_cast<const kls::v1::TopKRequest&>(*(*empty)[0]).k(), 0);
}

TEST(HttpTranslate, BadBodiesNameTheField) {
  const HttpRoute& topk = Route("/v1/queries/top-k");
  const auto unknown = RequestMessages(topk, "POST", "", R"({"kernel":{"name":"k"},"kk":5})");
  EXPECT_EQ(unknown.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("kk"), std::string::npos) << unknown.status();
  const auto type = RequestMessages(topk, "POST", "", R"({"k":"abc"})");
  EXPECT_EQ(type.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(type.status().message().find("k"), std::string::npos) << type.status();
  const auto not_json = RequestMessages(topk, "POST", "", "k=5");
  EXPECT_EQ(not_json.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(not_json.status().message().rfind("body: ", 0), 0u) << not_json.status();
}

TEST(HttpTranslate, QueryStringsFollowTheFieldTypes) {
  const HttpRoute& topk = Route("/v1/queries/top-k");
  auto m = RequestMessages(topk, "GET", "kernel.name=my%20k&item=7&select.exclude=1&select.exclude=2&k=3&metric=COSINE&min_score=0.25", "");
  ASSERT_TRUE(m.ok()) << m.status();
  const auto& r = static_cast<const kls::v1::TopKRequest&>(*(*m)[0]);
  EXPECT_EQ(r.kernel().name(), "my k");
  EXPECT_EQ(r.item(), 7);
  ASSERT_EQ(r.select().exclude_size(), 2);
  EXPECT_EQ(r.select().exclude(1), 2);
  EXPECT_EQ(r.k(), 3);
  EXPECT_EQ(r.metric(), kls::v1::COSINE);
  EXPECT_DOUBLE_EQ(r.min_score(), 0.25);
  const auto unknown = RequestMessages(topk, "GET", "kernel.nam=x", "");
  EXPECT_EQ(unknown.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("query parameter 'kernel.nam'"), std::string::npos) << unknown.status();
  const auto bad_number = RequestMessages(topk, "GET", "k=abc", "");
  EXPECT_EQ(bad_number.status().code(), StatusCode::kInvalidArgument);
  const auto message_as_scalar = RequestMessages(topk, "GET", "kernel=x", "");
  EXPECT_EQ(message_as_scalar.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(message_as_scalar.status().message().find("kernel.FIELD"), std::string::npos);
}

TEST(HttpTranslate, ClientStreamsTakeAJsonArray) {
  const HttpRoute& upload = Route("/v1/datasets/upload");
  auto m = RequestMessages(upload, "POST", "",
                           R"([{"header":{"name":"a","numPoints":"2","dim":1}},{"features":{"values":[1,2]}}])");
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->size(), 2u);
  EXPECT_TRUE(static_cast<const kls::v1::UploadDatasetRequest&>(*(*m)[0]).has_header());
  const auto object = RequestMessages(upload, "POST", "", R"({"header":{}})");
  EXPECT_EQ(object.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(object.status().message().find("JSON array"), std::string::npos);
  const auto element = RequestMessages(upload, "POST", "", R"([{"header":{}},{"nope":1}])");
  EXPECT_EQ(element.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(element.status().message().rfind("body[1]: ", 0), 0u) << element.status();
}

TEST(HttpTranslate, ResponsesAndErrors) {
  kls::v1::DatasetInfo info;
  info.set_id("ds-1");
  info.set_num_points(7);
  const json j = json::parse(MessageToJson(info));
  EXPECT_EQ(j["id"], "ds-1");
  EXPECT_EQ(j["numPoints"], "7");  // int64 as a string (canonical mapping)
  EXPECT_EQ(j["dim"], 0);          // defaults included
  const json e = json::parse(ErrorJson(Status(StatusCode::kNotFound, "no \"x\""), "rid"));
  EXPECT_EQ(e["code"], "NOT_FOUND");
  EXPECT_EQ(e["message"], "no \"x\"");
  EXPECT_TRUE(e["details"].is_array());
  EXPECT_EQ(e["request_id"], "rid");
  const std::pair<StatusCode, int> expected[] = {
      {StatusCode::kOk, 200},          {StatusCode::kCancelled, 499},         {StatusCode::kInvalidArgument, 400},
      {StatusCode::kDeadlineExceeded, 504}, {StatusCode::kNotFound, 404},     {StatusCode::kAlreadyExists, 409},
      {StatusCode::kPermissionDenied, 403}, {StatusCode::kUnauthenticated, 401}, {StatusCode::kResourceExhausted, 429},
      {StatusCode::kFailedPrecondition, 412}, {StatusCode::kAborted, 409},    {StatusCode::kOutOfRange, 400},
      {StatusCode::kUnimplemented, 501}, {StatusCode::kInternal, 500},        {StatusCode::kUnavailable, 503},
      {StatusCode::kDataLoss, 500}};
  for (const auto& [code, http] : expected) EXPECT_EQ(HttpStatusOf(code), http) << StatusCodeName(code);
}

TEST(HttpTranslate, QueryParsingDecodes) {
  const auto q = ParseQuery("a=1&b=x%2By+z&&c&d=%zz");
  ASSERT_EQ(q.size(), 4u);
  EXPECT_EQ(q[1].second, "x+y z");
  EXPECT_EQ(q[2].first, "c");
  EXPECT_EQ(q[3].second, "%zz");  // a bad escape stays as written
  EXPECT_EQ(QueryValue("name=iris&seed=3", "seed"), "3");
  EXPECT_EQ(QueryValue("name=iris", "seed"), "");
}

}  // namespace
}  // namespace kls::server::http
