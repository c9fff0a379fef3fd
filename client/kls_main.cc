// kls: command-line client for kls-server.
//
//   kls [--target HOST:PORT] [--json] [--timeout-seconds S] health [--service NAME]
//   kls ... info
//   kls ... echo TEXT...
//
// Exit status 0 on success; 1 when the call fails or (health) the service is
// not SERVING, with "<GRPC_STATUS_NAME>: message" on stderr; CLI11's codes for
// bad usage. With --json, stdout carries exactly one JSON object either way
// (failures as {"error": {"code": ..., "message": ...}}).
#include <CLI/CLI.hpp>
#include <chrono>
#include <iostream>
#include <sstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "client/client.h"

namespace {

using nlohmann::json;

struct Output {
  bool json_mode = false;

  // Prints a success object (JSON mode) or `text` (plain mode, if non-empty).
  int Success(const json& object, const std::string& text) const {
    if (json_mode) {
      PrintJson(object);
    } else if (!text.empty()) {
      std::cout << text << "\n";
    }
    return 0;
  }

  // Prints the error on stderr and, in JSON mode, `object` plus an "error" member on stdout.
  int Failure(const kls::Status& status, json object = json::object()) const {
    std::cerr << status.ToString() << "\n";
    if (json_mode) {
      object["error"] = {{"code", kls::StatusCodeName(status.code())}, {"message", status.message()}};
      PrintJson(object);
    }
    return 1;
  }

  static void PrintJson(const json& object) {
    // Echo payloads are arbitrary bytes: replace invalid UTF-8 rather than throw.
    std::cout << object.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
  }
};

int RunHealth(kls::Client& client, const Output& out, const std::string& service) {
  const kls::StatusOr<kls::ServingStatus> health = client.CheckHealth(service);
  if (!health.ok()) return out.Failure(health.status(), {{"service", service}});
  const std::string name = kls::ServingStatusName(*health);
  json object = {{"service", service}, {"status", name}};
  if (*health != kls::ServingStatus::kServing) {
    const std::string who = service.empty() ? "server" : "service '" + service + "'";
    return out.Failure(kls::Status(kls::StatusCode::kUnavailable, who + " is " + name), object);
  }
  return out.Success(object, name);
}

int RunInfo(kls::Client& client, const Output& out) {
  const kls::StatusOr<kls::v1::ServerInfo> info = client.GetServerInfo();
  if (!info.ok()) return out.Failure(info.status());
  const json object = {
      {"version", info->version()},
      {"data_dir", info->data_dir()},
      {"uptime_seconds", info->uptime_seconds()},
      {"worker_threads", info->worker_threads()},
      {"max_message_bytes", info->max_message_bytes()},
  };
  std::ostringstream text;
  text << "version            " << info->version() << "\n"
       << "data_dir           " << info->data_dir() << "\n"
       << "uptime_seconds     " << info->uptime_seconds() << "\n"
       << "worker_threads     " << info->worker_threads() << "\n"
       << "max_message_bytes  " << info->max_message_bytes();
  return out.Success(object, text.str());
}

int RunEcho(kls::Client& client, const Output& out, const std::vector<std::string>& words) {
  std::string payload;
  for (size_t i = 0; i < words.size(); ++i) payload += (i ? " " : "") + words[i];
  const auto start = std::chrono::steady_clock::now();
  const kls::StatusOr<std::string> echoed = client.Echo(payload);
  const std::chrono::duration<double, std::milli> elapsed = std::chrono::steady_clock::now() - start;
  if (!echoed.ok()) return out.Failure(echoed.status());
  if (*echoed != payload) {
    return out.Failure(kls::DataLossError("echo returned " + std::to_string(echoed->size()) +
                                          " bytes that differ from the " + std::to_string(payload.size()) +
                                          " bytes sent"));
  }
  const json object = {{"payload", *echoed}, {"bytes", echoed->size()}, {"round_trip_ms", elapsed.count()}};
  return out.Success(object, *echoed);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kls — command-line client for the kernel learning service"};
  app.require_subcommand(1);
  app.fallthrough();  // global flags may also follow the subcommand

  kls::ClientOptions options;
  Output out;
  app.add_option("--target", options.target, "Server address HOST:PORT")->capture_default_str();
  app.add_flag("--json", out.json_mode, "Print exactly one JSON object");
  app.add_option("--timeout-seconds", options.timeout_seconds, "Deadline for each call")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--max-message-mb", options.max_message_mb, "Largest message sent or received, in MiB")
      ->capture_default_str()
      ->check(CLI::Range(1, 2047));

  std::string service;
  CLI::App* health = app.add_subcommand("health", "Exit 0 only if the server (or --service) is SERVING");
  health->add_option("--service", service, "Service to ask about, e.g. kls.v1.Admin (default: whole server)");
  CLI::App* info = app.add_subcommand("info", "Version, data directory, uptime, worker threads");
  std::vector<std::string> words;
  CLI::App* echo = app.add_subcommand("echo", "Send TEXT and print what comes back");
  echo->add_option("text", words, "Payload (several words are joined by single spaces)")->required();

  CLI11_PARSE(app, argc, argv);

  kls::Client client(options);
  if (health->parsed()) return RunHealth(client, out, service);
  if (info->parsed()) return RunInfo(client, out);
  if (echo->parsed()) return RunEcho(client, out, words);
  return 2;  // unreachable: require_subcommand(1)
}
