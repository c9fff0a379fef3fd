#include "server/http/http_routes.h"

#include <cctype>

#include <google/protobuf/descriptor.h>

#include "kls/v1/datasets.pb.h"
#include "kls/v1/jobs.pb.h"
#include "kls/v1/kernels.pb.h"
#include "kls/v1/queries.pb.h"
#include "kls/v1/service.pb.h"

namespace kls::server::http {

std::string KebabCase(const std::string& camel) {
  std::string out;
  for (size_t i = 0; i < camel.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(camel[i]);
    if (std::isupper(c) && i > 0) out += '-';
    out += static_cast<char>(std::tolower(c));
  }
  return out;
}

std::vector<HttpRoute> BuildHttpRoutes(const google::protobuf::DescriptorPool& pool) {
  // The generated pool loads files lazily: name one message of each file so
  // that every kls.v1 service is in it.
  (void)kls::v1::EchoRequest::descriptor();
  (void)kls::v1::DatasetInfo::descriptor();
  (void)kls::v1::Job::descriptor();
  (void)kls::v1::KernelInfo::descriptor();
  (void)kls::v1::TopKRequest::descriptor();
  std::vector<HttpRoute> routes;
  for (const char* file_name : {"kls/v1/service.proto", "kls/v1/datasets.proto", "kls/v1/jobs.proto",
                                "kls/v1/kernels.proto", "kls/v1/queries.proto"}) {
    const google::protobuf::FileDescriptor* file = pool.FindFileByName(file_name);
    if (file == nullptr) continue;
    for (int s = 0; s < file->service_count(); ++s) {
      const google::protobuf::ServiceDescriptor* service = file->service(s);
      for (int m = 0; m < service->method_count(); ++m) {
        const google::protobuf::MethodDescriptor* method = service->method(m);
        HttpRoute r;
        r.service = service->name();
        r.path = "/v1/" + KebabCase(service->name()) + "/" + KebabCase(method->name());
        r.grpc_method = "/" + service->full_name() + "/" + method->name();
        r.method = method;
        r.scope = RequiredScope(r.grpc_method);
        r.client_streaming = method->client_streaming();
        r.server_streaming = method->server_streaming();
        r.allows_get = !r.client_streaming && r.scope <= Scope::kRead;
        routes.push_back(std::move(r));
      }
    }
  }
  return routes;
}

const std::vector<HttpRoute>& KlsHttpRoutes() {
  static const std::vector<HttpRoute> routes = BuildHttpRoutes(*google::protobuf::DescriptorPool::generated_pool());
  return routes;
}

}  // namespace kls::server::http
