#include "tests/test_util/postgres_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

namespace kls::testing {
namespace {

namespace fs = std::filesystem;

/// The newest /usr/lib/postgresql/<major>/bin that has initdb and pg_ctl.
std::string FindBinDir() {
  std::vector<std::pair<int, std::string>> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/usr/lib/postgresql", ec)) {
    const fs::path bin = e.path() / "bin";
    if (fs::exists(bin / "initdb") && fs::exists(bin / "pg_ctl")) {
      found.emplace_back(std::atoi(e.path().filename().c_str()), bin.string());
    }
  }
  if (found.empty()) return "";
  std::sort(found.begin(), found.end());
  return found.back().second;
}

/// A loopback port nobody listens on right now (the kernel's choice).
int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof(a);
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  ::close(fd);
  return port;
}

std::string Quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

PostgresServer::~PostgresServer() {
  if (running_) {
    Run("pg_ctl", "stop -D " + Quote(data_dir_) + " -m immediate -w");
  }
  if (!dir_.empty()) {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
}

int PostgresServer::Run(const std::string& tool, const std::string& args) {
  std::string cmd = Quote(bin_dir_ + "/" + tool) + " " + args;
  if (::geteuid() == 0) cmd = "runuser -u postgres -- " + cmd;
  cmd += " >>" + Quote(dir_ + "/" + tool + ".log") + " 2>&1 </dev/null";
  const int rc = std::system(cmd.c_str());
  const int status = rc == -1 ? -1 : WIFEXITED(rc) ? WEXITSTATUS(rc) : 128 + WTERMSIG(rc);
  if (status != 0) {
    error_ = tool + " " + args + " exited with " + std::to_string(status) + "\n" + LogTail(tool + ".log");
  }
  return status;
}

std::string PostgresServer::LogTail(const std::string& file) const {
  std::ifstream in(dir_ + "/" + file);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string all = ss.str();
  return all.size() > 2000 ? all.substr(all.size() - 2000) : all;
}

bool PostgresServer::Init() {
  bin_dir_ = FindBinDir();
  if (bin_dir_.empty()) {
    error_ = "no PostgreSQL server binaries under /usr/lib/postgresql/*/bin (install postgresql)";
    return false;
  }
  // Short base path: the Unix socket path must stay under 108 bytes.
  std::string pattern = "/tmp/kls-pg-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) {
    error_ = "mkdtemp " + pattern + " failed";
    return false;
  }
  dir_ = pattern;
  data_dir_ = dir_ + "/data";
  if (::geteuid() == 0) {
    const passwd* pw = ::getpwnam("postgres");
    if (pw == nullptr || ::chown(dir_.c_str(), pw->pw_uid, pw->pw_gid) != 0) {
      error_ = "running as root needs the postgres user to own " + dir_;
      return false;
    }
  }
  port_ = FreePort();
  if (port_ == 0) {
    error_ = "no free loopback port";
    return false;
  }
  if (Run("initdb", "-A trust -U kls -E UTF8 --no-sync -D " + Quote(data_dir_)) != 0) return false;
  if (!Start()) return false;
  return CreateDatabase("kls");
}

bool PostgresServer::CreateDatabase(const std::string& name) {
  return Run("createdb", "-h 127.0.0.1 -p " + std::to_string(port_) + " -U kls " + Quote(name)) == 0;
}

bool PostgresServer::Psql(const std::string& db, const std::string& sql) {
  return Run("psql", "-X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p " + std::to_string(port_) + " -U kls -d " + Quote(db) +
                         " -c " + Quote(sql)) == 0;
}

bool PostgresServer::Start() {
  const std::string opts = "-p " + std::to_string(port_) + " -c listen_addresses=127.0.0.1 -k " + dir_ +
                           " -c fsync=off -c synchronous_commit=off -c full_page_writes=off";
  if (Run("pg_ctl", "start -w -t 30 -D " + Quote(data_dir_) + " -l " + Quote(dir_ + "/server.log") + " -o " +
                        Quote(opts)) != 0) {
    error_ += "\nserver.log:\n" + LogTail("server.log");
    return false;
  }
  running_ = true;
  return true;
}

bool PostgresServer::Stop() {
  if (Run("pg_ctl", "stop -w -t 30 -m fast -D " + Quote(data_dir_)) != 0) return false;
  running_ = false;
  return true;
}

std::string PostgresServer::uri(const std::string& db) const {
  return "postgresql://kls@127.0.0.1:" + std::to_string(port_) + "/" + db;
}

}  // namespace kls::testing
