// A plain-socket HTTP/1.0 GET to 127.0.0.1, for the server tests that read
// the metrics page or the HTTP gateway without a client library. Test-only.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <string>

namespace kls::testing {

struct RawHttpResponse {
  std::string status_line;  ///< "HTTP/1.1 200 OK"; empty when nothing came back
  std::string body;         ///< after the blank line; empty without one
  std::string raw;          ///< the whole answer
};

/// GET `path` on 127.0.0.1:`port` with `headers` (each "Name: value\r\n")
/// and Connection: close; reads to the end. A refused connection fails the
/// test and answers an empty response.
inline RawHttpResponse RawHttpGet(int port, const std::string& path, const std::string& headers = "") {
  RawHttpResponse out;
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    ADD_FAILURE() << "cannot connect to 127.0.0.1:" << port;
    return out;
  }
  const std::string request = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n" + headers + "Connection: close\r\n\r\n";
  (void)!write(fd, request.data(), request.size());
  char buf[8192];
  for (ssize_t n; (n = read(fd, buf, sizeof(buf))) > 0;) out.raw.append(buf, static_cast<size_t>(n));
  close(fd);
  out.status_line = out.raw.substr(0, out.raw.find("\r\n"));
  const size_t body = out.raw.find("\r\n\r\n");
  if (body != std::string::npos) out.body = out.raw.substr(body + 4);
  return out;
}

}  // namespace kls::testing
