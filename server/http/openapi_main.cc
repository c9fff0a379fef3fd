// kls-openapi OUT.json VERSION: writes the OpenAPI document of the HTTP/JSON
// API (openapi.h) from the descriptor set compiled into it. Run at build time.
#include <fstream>
#include <iostream>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>

#include "proto/descriptor_set.h"
#include "server/http/openapi.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: kls-openapi OUT.json VERSION\n";
    return 2;
  }
  google::protobuf::FileDescriptorSet set;
  const std::string_view bytes = kls::proto::KlsDescriptorSet();
  if (!set.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    std::cerr << "kls-openapi: the embedded descriptor set does not parse\n";
    return 1;
  }
  google::protobuf::DescriptorPool pool;
  for (const auto& file : set.file()) {
    if (pool.BuildFile(file) == nullptr) {
      std::cerr << "kls-openapi: cannot build " << file.name() << "\n";
      return 1;
    }
  }
  const auto routes = kls::server::http::BuildHttpRoutes(pool);
  std::ofstream out(argv[1]);
  out << kls::server::http::BuildOpenApi(pool, routes, argv[2]);
  if (!out) {
    std::cerr << "kls-openapi: cannot write " << argv[1] << "\n";
    return 1;
  }
  return 0;
}
