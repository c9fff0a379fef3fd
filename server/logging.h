// kls-server's log output: the default spdlog logger on stderr, in one of two
// formats (config key log_format):
//
//   text  "[2026-01-02 03:04:05.678] [info] message" (coloured on a terminal)
//   json  one JSON object a line:
//         {"time":"2026-01-02T03:04:05.678Z","level":"info","message":"...",
//          "request_id":"...","method":"/kls.v1.Jobs/Submit","peer":"ipv4:...","job_id":"..."}
//         time is UTC (RFC 3339, milliseconds); request_id, method, peer and
//         job_id come from the thread's log context (server/log_context.h)
//         and are left out when empty. Messages are escaped as JSON strings;
//         bytes that are not UTF-8 are replaced with U+FFFD.
#pragma once

#include <memory>
#include <string>

#include <spdlog/formatter.h>

namespace kls::server {

/// Makes the default logger write to stderr at `level` (a ServerConfig
/// log_level) in `format` ("text" or "json"; validated by ServerConfig).
void SetUpLogging(const std::string& level, const std::string& format);

/// The JSON line formatter (see above); for tests and other sinks.
std::unique_ptr<spdlog::formatter> MakeJsonLogFormatter();

}  // namespace kls::server
