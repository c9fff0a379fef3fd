// core/ must know nothing of gRPC or protobuf (the layering rule of docs/ARCHITECTURE.md).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

namespace {

TEST(Layering, CoreIncludesNoGrpcOrProtobuf) {
  const std::filesystem::path core = std::filesystem::path(KLS_SOURCE_DIR) / "core";
  ASSERT_TRUE(std::filesystem::is_directory(core)) << core;
  const std::regex forbidden(R"(#\s*include\s*[<"](grpcpp|grpc/|grpc\+\+|google/protobuf)|\.pb\.h)");
  int files = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(core)) {
    const auto ext = entry.path().extension().string();
    if (ext != ".h" && ext != ".cc" && ext != ".txt") continue;
    ++files;
    std::ifstream in(entry.path());
    std::string line;
    int line_no = 0;
    while (std::getline(in, line)) {
      ++line_no;
      EXPECT_FALSE(std::regex_search(line, forbidden)) << entry.path() << ":" << line_no << ": " << line;
      if (ext == ".txt") {
        EXPECT_EQ(line.find("gRPC::"), std::string::npos) << entry.path() << ":" << line_no;
        EXPECT_EQ(line.find("protobuf::"), std::string::npos) << entry.path() << ":" << line_no;
      }
    }
  }
  EXPECT_GT(files, 10);
}

}  // namespace
