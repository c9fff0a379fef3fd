// Shared pieces of the `kls` subcommands (client/cli/*.cc): output in text or
// JSON, small text helpers, message → JSON, the progress bar, and the
// registry through which each subcommand file adds its subcommands.
#pragma once

#include <CLI/CLI.hpp>
#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "client/client.h"

namespace kls::cli {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

struct Output {
  bool json_mode = false;

  /// Prints a success object (JSON mode) or `text` (plain mode, if non-empty); returns 0.
  int Success(const json& object, const std::string& text) const;
  /// Prints the error on stderr and, in JSON mode, `object` plus an "error" member on stdout; returns 1.
  int Failure(const kls::Status& status, json object = json::object()) const;
  static void PrintJson(const json& object);
};

// ---- Registry ------------------------------------------------------------------

/// Runs a parsed subcommand; its exit status.
using Runner = std::function<int(kls::Client& client, const Output& out)>;
/// Adds a subcommand's arguments to `app` and returns what runs it once parsed.
using Setup = Runner (*)(CLI::App& app);

/// One `kls` subcommand. Each client/cli/*.cc file adds its own with
/// KLS_CLI_SUBCOMMAND; `order` places it in `kls --help` (static registration
/// order is unspecified).
struct Subcommand {
  int order;
  const char* name;
  const char* help;
  Setup setup;
};

/// Every registered subcommand.
std::vector<Subcommand>& Subcommands();

struct SubcommandRegistration {
  SubcommandRegistration(int order, const char* name, const char* help, Setup setup) {
    Subcommands().push_back({order, name, help, setup});
  }
};

#define KLS_CLI_SUBCOMMAND(order, name, help, setup) \
  static const ::kls::cli::SubcommandRegistration kls_cli_registration_##setup { order, name, help, setup }

// ---- Small text helpers ------------------------------------------------------------

std::string Trim(const std::string& s);
std::vector<std::string> Split(const std::string& s, char sep);
bool ParseInt(const std::string& text, int* out);
bool ParseDouble(const std::string& text, double* out);
/// Fixed-width table: first row is the header.
std::string Table(const std::vector<std::vector<std::string>>& rows);
std::string Fixed(double v, int digits = 6);
/// "0,1;2,3" (also newlines as separators) → pairs; `source` names the input.
kls::StatusOr<std::vector<std::pair<int, int>>> ParsePairs(const std::string& text, const std::string& source);
/// "a,b,c" → the non-empty entries, trimmed.
std::vector<std::string> SplitNonEmpty(const std::string& text);
/// "1,5,9" → item indices (≥ 0); INVALID_ARGUMENT naming `flag` and the entry.
kls::StatusOr<std::vector<int>> ParseIndices(const std::string& text, const std::string& flag);
/// "x,y,..." → numbers; `flag` names the input in errors.
kls::StatusOr<std::vector<double>> ParseNumbers(const std::string& text, const std::string& flag);

// ---- Message → JSON ------------------------------------------------------------------

const char* StateName(kls::v1::JobState s);
bool IsTerminal(kls::v1::JobState s);
json DatasetJson(const kls::v1::DatasetInfo& d);
/// A summary_json string as a JSON value: {} when empty, the raw string when it does not parse.
json SummaryJson(const std::string& text);
/// "12/1000"; "1" for families without an iteration budget; "-" before any.
std::string ProgressText(const kls::v1::Progress& p);
json JobJson(const kls::v1::Job& j);
std::string JobText(const kls::v1::Job& j);
json KernelJson(const kls::v1::KernelInfo& k);
std::string RefText(const kls::v1::KernelRef& r);

// ---- Progress bars ----------------------------------------------------------------------

// Progress lines on stderr ("[#####.....] 12/100 ..."): redrawn in place on a
// terminal, at most one line per second otherwise (forced lines — a state
// change, the last line — always print). A disabled bar prints nothing.
class ProgressBar {
 public:
  explicit ProgressBar(bool enabled = true);
  ~ProgressBar() { Finish(); }

  static bool StderrIsTerminal();
  /// "[#####...................]" for `fraction` in [0, 1].
  static std::string Bar(double fraction);
  static std::string Eta(double seconds);

  void Show(const std::string& line, bool force = false);
  /// A job's line: "job-… RUNNING [#####.....] 12/100  objective 3.52e+01  ETA 4s".
  void Update(const kls::v1::Job& job);
  void Finish();

 private:
  bool enabled_;
  bool tty_;
  bool drawn_ = false;
  kls::v1::JobState last_state_ = kls::v1::JOB_STATE_UNSPECIFIED;
  Clock::time_point last_print_{};
};

/// The id of the data set `id_or_name` names: itself when a data set has that
/// id, else the newest data set with that name (`kls upload --name`). NOT_FOUND
/// naming `flag` and the value when neither matches.
kls::StatusOr<std::string> ResolveDataset(kls::Client& client, const std::string& id_or_name, const std::string& flag);

/// Watches a job to the end; exit status 0 only when it SUCCEEDED.
int WatchToEnd(kls::Client& client, const Output& out, const std::string& id);

}  // namespace kls::cli
