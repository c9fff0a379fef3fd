// kls health | info | echo: is the server up, what is it, does a payload come back.
#include <iostream>
#include <sstream>

#include "client/cli/common.h"

namespace kls::cli {
namespace {

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
  const auto start = Clock::now();
  const kls::StatusOr<std::string> echoed = client.Echo(payload);
  const std::chrono::duration<double, std::milli> elapsed = Clock::now() - start;
  if (!echoed.ok()) return out.Failure(echoed.status());
  if (*echoed != payload) {
    return out.Failure(kls::DataLossError("echo returned " + std::to_string(echoed->size()) +
                                          " bytes that differ from the " + std::to_string(payload.size()) +
                                          " bytes sent"));
  }
  const json object = {{"payload", *echoed}, {"bytes", echoed->size()}, {"round_trip_ms", elapsed.count()}};
  return out.Success(object, *echoed);
}

Runner SetupHealth(CLI::App& app) {
  auto service = std::make_shared<std::string>();
  app.add_option("--service", *service, "Service to ask about, e.g. kls.v1.Admin (default: whole server)");
  return [service](kls::Client& client, const Output& out) { return RunHealth(client, out, *service); };
}

Runner SetupInfo(CLI::App& app) {
  return [](kls::Client& client, const Output& out) { return RunInfo(client, out); };
}

Runner SetupEcho(CLI::App& app) {
  auto words = std::make_shared<std::vector<std::string>>();
  app.add_option("text", *words, "Payload (several words are joined by single spaces)")->required();
  return [words](kls::Client& client, const Output& out) { return RunEcho(client, out, *words); };
}

}  // namespace

KLS_CLI_SUBCOMMAND(10, "health", "Exit 0 only if the server (or --service) is SERVING", SetupHealth);
KLS_CLI_SUBCOMMAND(20, "info", "Version, data directory, uptime, worker threads", SetupInfo);
KLS_CLI_SUBCOMMAND(30, "echo", "Send TEXT and print what comes back", SetupEcho);

}  // namespace kls::cli
