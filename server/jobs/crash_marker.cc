#include "server/jobs/crash_marker.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>

namespace kls::server {
namespace {

constexpr int kSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
constexpr int kMaxSignal = 65;
struct sigaction g_previous[kMaxSignal];

/// The calling thread's running attempt: the marker's fd and the line's
/// prefix "JOB_ID ATTEMPT " (formatted when the Scope starts, so the handler
/// only copies bytes).
struct Slot {
  int fd = -1;
  int len = 0;
  char line[200];
};
thread_local Slot t_slot;

void OnCrashSignal(int signo, siginfo_t* info, void* context) {
  Slot& slot = t_slot;
  if (slot.fd >= 0 && slot.len > 0) {
    char buf[sizeof(slot.line) + 16];
    std::memcpy(buf, slot.line, static_cast<size_t>(slot.len));
    int n = slot.len;
    char digits[12];
    int d = 0;
    for (int v = signo; v > 0 && d < 11; v /= 10) digits[d++] = static_cast<char>('0' + v % 10);
    while (d > 0) buf[n++] = digits[--d];
    buf[n++] = '\n';
    ssize_t unused = ::write(slot.fd, buf, static_cast<size_t>(n));
    (void)unused;
    ::fsync(slot.fd);
    slot.fd = -1;  // once
  }
  // Hand over to whoever handled it before (the default action: the process
  // dies as it would have without this handler).
  const struct sigaction& prev = g_previous[signo];
  if ((prev.sa_flags & SA_SIGINFO) != 0 && prev.sa_sigaction != nullptr) {
    prev.sa_sigaction(signo, info, context);
    return;
  }
  if (prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN && prev.sa_handler != nullptr) {
    prev.sa_handler(signo);
    return;
  }
  ::signal(signo, SIG_DFL);
  ::raise(signo);  // delivered at once (SA_NODEFER): the default action
}

void InstallHandlersOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (int signo : kSignals) {
      struct sigaction sa;
      std::memset(&sa, 0, sizeof(sa));
      sa.sa_sigaction = OnCrashSignal;
      sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
      sigemptyset(&sa.sa_mask);
      ::sigaction(signo, &sa, &g_previous[signo]);
    }
  });
}

}  // namespace

StatusOr<std::unique_ptr<CrashMarker>> CrashMarker::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return InternalError("opening the crash marker \"" + path + "\": " + std::strerror(errno));
  InstallHandlersOnce();
  return std::unique_ptr<CrashMarker>(new CrashMarker(fd));
}

CrashMarker::~CrashMarker() {
  if (fd_ >= 0) ::close(fd_);
}

CrashMarker::Scope::Scope(const CrashMarker* marker, const std::string& job_id, int attempt) {
  Slot& slot = t_slot;
  slot.fd = -1;
  if (marker == nullptr || marker->fd_ < 0) return;
  const int n = std::snprintf(slot.line, sizeof(slot.line), "%s %d ", job_id.c_str(), attempt);
  if (n <= 0 || n >= static_cast<int>(sizeof(slot.line))) return;
  slot.len = n;
  slot.fd = marker->fd_;
}

CrashMarker::Scope::~Scope() {
  t_slot.fd = -1;
  t_slot.len = 0;
}

StatusOr<std::vector<CrashMarker::Entry>> CrashMarker::Take(const std::string& path) {
  std::vector<Entry> out;
  std::ifstream in(path);
  if (!in) return out;  // no marker: nothing crashed
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    Entry e;
    if (fields >> e.job_id >> e.attempt >> e.signal && e.attempt > 0 && e.signal > 0) out.push_back(std::move(e));
  }
  in.close();
  if (::truncate(path.c_str(), 0) != 0 && errno != ENOENT) {
    return InternalError("truncating the crash marker \"" + path + "\": " + std::strerror(errno));
  }
  return out;
}

}  // namespace kls::server
