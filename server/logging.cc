#include "server/logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <ctime>
#include <nlohmann/json.hpp>

#include "server/log_context.h"

namespace kls::server {
namespace {

std::string Rfc3339Utc(spdlog::log_clock::time_point t) {
  const auto since_epoch = t.time_since_epoch();
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(since_epoch);
  const auto millis = std::chrono::duration_cast<std::chrono::milliseconds>(since_epoch - seconds).count();
  const std::time_t tt = static_cast<std::time_t>(seconds.count());
  std::tm utc{};
  gmtime_r(&tt, &utc);
  char buf[40];
  const size_t n = std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &utc);
  std::snprintf(buf + n, sizeof(buf) - n, ".%03dZ", static_cast<int>(millis));
  return buf;
}

class JsonLogFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    nlohmann::ordered_json line;
    line["time"] = Rfc3339Utc(msg.time);
    const spdlog::string_view_t level = spdlog::level::to_string_view(msg.level);
    line["level"] = std::string(level.data(), level.size());
    line["message"] = std::string(msg.payload.data(), msg.payload.size());
    const LogContext& c = CurrentLogContext();
    if (!c.request_id.empty()) line["request_id"] = c.request_id;
    if (!c.method.empty()) line["method"] = c.method;
    if (!c.peer.empty()) line["peer"] = c.peer;
    if (!c.job_id.empty()) line["job_id"] = c.job_id;
    const std::string text = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    dest.append(text.data(), text.data() + text.size());
    dest.push_back('\n');
  }
  std::unique_ptr<spdlog::formatter> clone() const override { return std::make_unique<JsonLogFormatter>(); }
};

}  // namespace

std::unique_ptr<spdlog::formatter> MakeJsonLogFormatter() { return std::make_unique<JsonLogFormatter>(); }

void SetUpLogging(const std::string& level, const std::string& format) {
  std::shared_ptr<spdlog::logger> logger = spdlog::get("kls-server");
  if (!logger) logger = spdlog::stderr_color_mt("kls-server");
  spdlog::set_default_logger(logger);
  if (format == "json") {
    logger->set_formatter(MakeJsonLogFormatter());
  } else {
    logger->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%^%l%$] %v");
  }
  spdlog::set_level(spdlog::level::from_str(level));  // validated by ServerConfig
}

}  // namespace kls::server
