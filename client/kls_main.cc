// kls: command-line client for kls-server.
//
//   kls [--target HOST:PORT] [--json] [--timeout-seconds S] SUBCOMMAND ...
//       [--token T (or env KLS_TOKEN)] [--tls] [--tls-ca FILE] [--tls-cert FILE --tls-key FILE]
//       [--tls-server-name NAME]
//
//   health [--service NAME] | info | echo TEXT...
//   upload FILE [--name N] [--format auto|csv|libsvm] [--constraints FILE |
//          --protocol admm|bcd|simplenpkl --seed S] [--num-features D] [--progress | --no-progress]
//                                              streams the file in two passes (bounded memory)
//   upload DIR --social [--name N]             a social data set (photos.csv, contacts.csv, ...)
//   datasets                                   list the stored data sets
//   submit --dataset ID --kernel NAME --method kl_admm|bcd_npkl|simple_npkl|qsdp|embedding|onk|mkl|
//          npk_ranking|social_strength
//          [solver and graph options] [--scaling none|zscore|minmax] [--graph-connect error|grow_k|mst]
//          [--priority P] [--deadline-seconds S] [--watch]
//   watch JOB | get JOB | cancel JOB
//   list [--state STATE] [--dataset ID] [--page-size N] [--page-token T]
//   kernels [--name NAME]                      list learned kernels
//   similarity --kernel NAME[:VERSION|@ALIAS] (--pairs "0,1;2,3" | --pairs-file FILE)
//   topk --kernel REF (--item N | --key K | --vector "x,y,..." | --features "x,y,..." [--neighbors 10])
//        [--k 10] [--exclude-self]
//   rerank --kernel REF (--candidates "i,j,..." | --keys "a,b,...") [--prior "p,q,..."] [--damping D] [--k N]
//   strength --kernel REF --pairs "u,v;..."    social strength (social_strength kernels)
//   recommend --kernel REF --user U [--k 10] [--groups]
//   classify --kernel REF FILE.csv             class of each row (onk / mkl kernels)
//   classify --kernel REF --labelled "u,c;..." [--users "u,..."] [--mass-normalization]
//                                              harmonic classes of users (social_strength kernels)
//   export --kernel REF --out FILE.csv
//   import FILE.csv --name NAME                store embedding rows as a kernel
//
// Exit status 0 on success; 1 when the call fails (or a watched job does not
// succeed, or the service is not SERVING), with "<GRPC_STATUS_NAME>: message"
// on stderr; CLI11's codes for bad usage. With --json, stdout carries exactly
// one JSON object either way (failures as {"error": {"code", "message"}}).
// Progress bars (watch, submit --watch, upload) go to stderr.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <map>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "client/client.h"
#include "core/common/names.h"
#include "core/data/constraint_generators.h"
#include "core/data/constraints_file.h"
#include "core/data/csv_reader.h"
#include "core/data/row_reader.h"
#include "core/social/community_csv.h"

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

struct Output {
  bool json_mode = false;

  // Prints a success object (JSON mode) or `text` (plain mode, if non-empty).
  int Success(const json& object, const std::string& text) const {
    if (json_mode) {
      PrintJson(object);
    } else if (!text.empty()) {
      std::cout << text << (text.back() == '\n' ? "" : "\n");
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

// ---- Small text helpers ------------------------------------------------------

std::string Trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in(s);
  while (std::getline(in, part, sep)) parts.push_back(part);
  if (!s.empty() && s.back() == sep) parts.push_back("");
  return parts;
}

bool ParseInt(const std::string& text, int* out) {
  const std::string t = Trim(text);
  const auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), *out);
  return !t.empty() && ec == std::errc() && ptr == t.data() + t.size();
}

bool ParseDouble(const std::string& text, double* out) {
  const std::string t = Trim(text);
  if (t.empty()) return false;
  char* end = nullptr;
  *out = std::strtod(t.c_str(), &end);
  return end == t.c_str() + t.size();
}

// Fixed-width table: first row is the header.
std::string Table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    width.resize(std::max(width.size(), row.size()));
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  std::ostringstream out;
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size(); ++c) {
      out << row[c];
      if (c + 1 < row.size()) out << std::string(width[c] - row[c].size() + 2, ' ');
    }
    out << "\n";
  }
  return out.str();
}

std::string Fixed(double v, int digits = 6) {
  std::ostringstream out;
  out << std::setprecision(digits) << v;
  return out.str();
}

// ---- Message → JSON ------------------------------------------------------------

const char* StateName(kls::v1::JobState s) {
  switch (s) {
    case kls::v1::QUEUED: return "QUEUED";
    case kls::v1::RUNNING: return "RUNNING";
    case kls::v1::SUCCEEDED: return "SUCCEEDED";
    case kls::v1::FAILED: return "FAILED";
    case kls::v1::CANCELLED: return "CANCELLED";
    default: return "UNSPECIFIED";
  }
}

bool IsTerminal(kls::v1::JobState s) {
  return s == kls::v1::SUCCEEDED || s == kls::v1::FAILED || s == kls::v1::CANCELLED;
}

json DatasetJson(const kls::v1::DatasetInfo& d) {
  return {{"id", d.id()},
          {"name", d.name()},
          {"num_points", d.num_points()},
          {"dim", d.dim()},
          {"num_classes", d.num_classes()},
          {"num_constraints", d.num_constraints()},
          {"created_unix_ms", d.created_unix_ms()}};
}

// A summary_json string as a JSON value: {} when empty, the raw string when it does not parse.
json SummaryJson(const std::string& text) {
  if (text.empty()) return json::object();
  json summary = json::parse(text, nullptr, /*allow_exceptions=*/false);
  return summary.is_discarded() ? json(text) : summary;
}

json JobJson(const kls::v1::Job& j) {
  const kls::v1::Progress& p = j.progress();
  return {{"id", j.id()},
          {"dataset_id", j.dataset_id()},
          {"method", j.method()},
          {"state", StateName(j.state())},
          {"priority", j.priority()},
          {"attempts", j.attempts()},
          {"error", j.error()},
          {"kernel_name", j.kernel_name()},
          {"kernel_version", j.kernel_version()},
          {"termination", j.termination()},
          {"progress",
           {{"iteration", p.iteration()},
            {"max_iterations", p.max_iterations()},
            {"objective", p.objective()},
            {"primal_residual", p.primal_residual()},
            {"dual_residual", p.dual_residual()},
            {"elapsed_seconds", p.elapsed_seconds()}}},
          {"created_unix_ms", j.created_unix_ms()},
          {"started_unix_ms", j.started_unix_ms()},
          {"finished_unix_ms", j.finished_unix_ms()},
          {"summary", SummaryJson(j.summary_json())}};
}

json KernelJson(const kls::v1::KernelInfo& k) {
  const json summary = SummaryJson(k.summary_json());
  return {{"name", k.name()},           {"version", k.version()},     {"job_id", k.job_id()},
          {"dataset_id", k.dataset_id()}, {"method", k.method()},       {"num_points", k.num_points()},
          {"rank", k.rank()},           {"summary", summary},         {"created_unix_ms", k.created_unix_ms()}};
}

std::string RefText(const kls::v1::KernelRef& r) {
  if (!r.alias().empty()) return r.name() + "@" + r.alias();
  if (r.version() > 0) return r.name() + ":" + std::to_string(r.version());
  return r.name();
}

// ---- health / info / echo ---------------------------------------------------------

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

// ---- progress bars ------------------------------------------------------------------

// Progress lines on stderr ("[#####.....] 12/100 ..."): redrawn in place on a
// terminal, at most one line per second otherwise (forced lines — a state
// change, the last line — always print). A disabled bar prints nothing.
class ProgressBar {
 public:
  explicit ProgressBar(bool enabled = true) : enabled_(enabled), tty_(StderrIsTerminal()) {}
  ~ProgressBar() { Finish(); }

  static bool StderrIsTerminal() { return isatty(STDERR_FILENO) == 1; }

  // "[#####...................]" for `fraction` in [0, 1].
  static std::string Bar(double fraction) {
    constexpr int kWidth = 24;
    const int filled = static_cast<int>(std::lround(std::clamp(fraction, 0.0, 1.0) * kWidth));
    return "[" + std::string(filled, '#') + std::string(kWidth - filled, '.') + "]";
  }

  static std::string Eta(double seconds) {
    std::ostringstream text;
    text << "ETA " << std::fixed << std::setprecision(0) << std::max(0.0, seconds) << "s";
    return text.str();
  }

  void Show(const std::string& line, bool force = false) {
    if (!enabled_) return;
    const auto now = Clock::now();
    if (!tty_ && !force && now - last_print_ < std::chrono::seconds(1)) return;
    last_print_ = now;
    if (tty_) {
      std::cerr << "\r" << line << "\033[K" << std::flush;
      drawn_ = true;
    } else {
      std::cerr << line << "\n";
    }
  }

  // A job's line: "job-… RUNNING [#####.....] 12/100  objective 3.52e+01  ETA 4s".
  void Update(const kls::v1::Job& job) {
    const bool state_changed = job.state() != last_state_;
    last_state_ = job.state();
    std::ostringstream line;
    const kls::v1::Progress& p = job.progress();
    line << job.id() << " " << StateName(job.state());
    if (p.max_iterations() > 0 || p.iteration() > 0) {
      const double fraction = p.max_iterations() > 0 ? double(p.iteration()) / p.max_iterations() : 0.0;
      line << " " << Bar(fraction) << " " << p.iteration() << "/" << p.max_iterations() << "  objective "
           << std::setprecision(4) << std::scientific << p.objective() << std::defaultfloat;
      if (p.iteration() > 0 && p.max_iterations() > p.iteration() && !IsTerminal(job.state())) {
        line << "  " << Eta(p.elapsed_seconds() / p.iteration() * (p.max_iterations() - p.iteration()));
      }
    }
    Show(line.str(), state_changed);
  }

  void Finish() {
    if (tty_ && drawn_) std::cerr << "\n";
    drawn_ = false;
  }

 private:
  bool enabled_;
  bool tty_;
  bool drawn_ = false;
  kls::v1::JobState last_state_ = kls::v1::JOB_STATE_UNSPECIFIED;
  Clock::time_point last_print_{};
};

// ---- upload / datasets --------------------------------------------------------------

struct UploadArgs {
  std::string file;
  std::string name;
  std::string format = "auto";
  std::string constraints_file;
  std::string protocol;
  uint64_t seed = 1;
  bool social = false;  ///< `file` is a directory of social CSV files
  std::string append_to;  ///< --append-constraints BASE: `file` is a constraints file
  int num_features = 0;      ///< --num-features: LIBSVM d (0: the largest index in the file)
  bool progress = false;     ///< --progress: always show the progress bar
  bool no_progress = false;  ///< --no-progress: never (default: unless --json on a non-terminal)
};

kls::StatusOr<kls::PairwiseConstraints> GenerateConstraints(const std::string& protocol,
                                                            const std::vector<int>& labels, uint64_t seed) {
  if (labels.empty()) {
    return kls::InvalidArgumentError("--protocol " + protocol + " needs labels, but the file has none");
  }
  if (protocol == "admm") return kls::GenerateAdmmProtocol(labels, seed);
  if (protocol == "bcd") return kls::GenerateBcdProtocol(labels, 0.3, seed);
  if (protocol == "simplenpkl") return kls::GenerateComponentProtocol(labels, 0.7, seed);
  return kls::InvalidArgumentError("--protocol = '" + protocol + "' is not one of admm, bcd, simplenpkl");
}

int RunUploadSocial(kls::Client& client, const Output& out, const UploadArgs& a) {
  auto community = kls::ReadCommunityCsv(a.file);
  if (!community.ok()) return out.Failure(community.status().WithContext(a.file));
  kls::Dataset data;
  data.features = community->photo_visual;
  kls::UploadOptions options;
  options.name = a.name.empty() ? kls::SanitizeName(a.file.substr(a.file.find_last_of('/') + 1)) : a.name;
  const kls::StatusOr<kls::v1::DatasetInfo> info =
      client.UploadDataset(data, kls::PairwiseConstraints(), options, &*community);
  if (!info.ok()) return out.Failure(info.status());
  std::ostringstream text;
  text << info->id() << "  '" << info->name() << "': social data set, " << community->num_users << " users, "
       << community->num_groups << " groups, " << info->num_points() << " photos × " << info->dim()
       << " visual features";
  json j = DatasetJson(*info);
  j["users"] = community->num_users;
  j["groups"] = community->num_groups;
  return out.Success(j, text.str());
}

// `kls upload --append-constraints BASE pairs.csv`: a new data set with BASE's
// features and its pairs followed by the file's (the server merges them).
int RunAppendConstraints(kls::Client& client, const Output& out, const UploadArgs& a) {
  if (a.social || !a.constraints_file.empty() || !a.protocol.empty()) {
    return out.Failure(kls::InvalidArgumentError(
        "--append-constraints takes the constraints file as FILE; --social, --constraints and --protocol do not apply"));
  }
  auto read = kls::ReadConstraintsFile(a.file);
  if (!read.ok()) return out.Failure(read.status());
  kls::UploadOptions options;
  options.name = a.name.empty() ? kls::SanitizeName(a.file.substr(a.file.find_last_of('/') + 1)) : a.name;
  options.base_dataset_id = a.append_to;
  const kls::StatusOr<kls::v1::DatasetInfo> info = client.UploadDataset(kls::Dataset(), *read, options);
  if (!info.ok()) return out.Failure(info.status());
  std::ostringstream text;
  text << info->id() << "  '" << info->name() << "': " << info->num_points() << " points × " << info->dim()
       << " features (shared with " << a.append_to << "), " << info->num_constraints() << " constraints ("
       << read->size() << " appended)";
  json j = DatasetJson(*info);
  j["base_dataset_id"] = a.append_to;
  j["appended_constraints"] = read->size();
  return out.Success(j, text.str());
}

int RunUpload(kls::Client& client, const Output& out, const UploadArgs& a) {
  if (!a.append_to.empty()) return RunAppendConstraints(client, out, a);
  if (a.social) {
    if (!a.constraints_file.empty() || !a.protocol.empty()) {
      return out.Failure(kls::InvalidArgumentError("--social data sets take no --constraints or --protocol"));
    }
    return RunUploadSocial(client, out, a);
  }
  const kls::DataFormat format = a.format == "auto" ? kls::GuessDataFormat(a.file)
                                 : a.format == "csv"  ? kls::DataFormat::kCsv
                                                      : kls::DataFormat::kLibsvm;
  if (!a.constraints_file.empty() && !a.protocol.empty()) {
    return out.Failure(kls::InvalidArgumentError("give either --constraints or --protocol, not both"));
  }
  if (a.num_features != 0 && format != kls::DataFormat::kLibsvm) {
    return out.Failure(kls::InvalidArgumentError("--num-features applies to LIBSVM files only"));
  }
  const bool show_progress = a.progress || (!a.no_progress && (!out.json_mode || ProgressBar::StderrIsTerminal()));
  ProgressBar bar(show_progress);
  // Pass 1: sizes, flags and labels, no features (bounded memory).
  const auto scan_start = Clock::now();
  bar.Show("scanning " + a.file + " ...", true);
  const auto on_scan = [&](int64_t done, int64_t total) {
    std::ostringstream line;
    line << "scanning " << a.file << " " << ProgressBar::Bar(total > 0 ? double(done) / total : 0.0) << " "
         << std::fixed << std::setprecision(1) << done / 1e6 << "/" << total / 1e6 << " MB" << std::defaultfloat;
    const double seconds = std::chrono::duration<double>(Clock::now() - scan_start).count();
    if (done > 0 && total > done) line << "  " << ProgressBar::Eta(seconds / done * (total - done));
    bar.Show(line.str());
  };
  kls::StatusOr<kls::DataFileScan> scan = kls::ScanDataFile(a.file, format, a.num_features, {}, on_scan);
  const double scan_seconds = std::chrono::duration<double>(Clock::now() - scan_start).count();
  if (scan.ok()) {
    std::ostringstream line;
    line << "scanned " << a.file << ": " << scan->num_points << " rows × " << scan->dim << " features, "
         << std::fixed << std::setprecision(1) << scan->file_bytes / 1e6 << " MB in " << scan_seconds << " s";
    bar.Show(line.str(), true);
  }
  bar.Finish();  // the upload bar starts on a line of its own
  if (!scan.ok()) return out.Failure(scan.status());

  kls::PairwiseConstraints constraints;
  if (!a.constraints_file.empty()) {
    auto read = kls::ReadConstraintsFile(a.constraints_file);
    if (!read.ok()) return out.Failure(read.status());
    constraints = std::move(read).value();
  } else if (!a.protocol.empty()) {
    auto generated = GenerateConstraints(a.protocol, scan->labels, a.seed);
    if (!generated.ok()) return out.Failure(generated.status());
    constraints = std::move(generated).value();
  }
  // Check locally first: the message then names the file, not a stream position.
  if (const kls::Status s = constraints.Validate(static_cast<int>(scan->num_points));
      !s.ok() && !constraints.pairs.empty()) {
    return out.Failure(s.WithContext(a.constraints_file.empty() ? "generated constraints" : a.constraints_file));
  }

  // Pass 2: the rows, a chunk at a time as they are parsed, then the pairs.
  kls::UploadOptions options;
  options.name = a.name.empty() ? kls::SanitizeName(a.file.substr(a.file.find_last_of('/') + 1)) : a.name;
  const auto send_start = Clock::now();
  options.on_progress = [&](const kls::UploadProgress& p) {
    const double seconds = std::chrono::duration<double>(Clock::now() - send_start).count();
    const bool rows_done = p.rows_sent == p.num_points;
    const bool last = rows_done && p.constraints_sent == p.num_constraints;
    std::ostringstream line;
    line << "upload " << ProgressBar::Bar(p.num_points > 0 ? double(p.rows_sent) / p.num_points : 1.0) << " "
         << p.rows_sent << "/" << p.num_points << " rows";
    if (p.num_constraints > 0) line << ", " << p.constraints_sent << "/" << p.num_constraints << " pairs";
    line << "  " << std::fixed << std::setprecision(1) << p.bytes_sent / 1e6 << " MB";
    if (seconds > 0) line << "  " << p.bytes_sent / 1e6 / seconds << " MB/s";
    line << std::defaultfloat;
    if (!last && p.rows_sent > 0 && !rows_done) {
      line << "  " << ProgressBar::Eta(seconds / p.rows_sent * (p.num_points - p.rows_sent));
    }
    bar.Show(line.str(), last);
  };
  const kls::StatusOr<kls::v1::DatasetInfo> info = client.UploadDataFile(*scan, constraints, options);
  const double send_seconds = std::chrono::duration<double>(Clock::now() - send_start).count();
  bar.Finish();
  if (!info.ok()) return out.Failure(info.status());
  std::ostringstream text;
  text << info->id() << "  '" << info->name() << "': " << info->num_points() << " points × " << info->dim()
       << " features, " << info->num_classes() << " classes, " << info->num_constraints() << " constraints";
  json j = DatasetJson(*info);
  j["upload"] = {{"file_bytes", scan->file_bytes}, {"scan_seconds", scan_seconds}, {"send_seconds", send_seconds}};
  return out.Success(j, text.str());
}

int RunDatasets(kls::Client& client, const Output& out) {
  const auto list = client.ListDatasets();
  if (!list.ok()) return out.Failure(list.status());
  json items = json::array();
  std::vector<std::vector<std::string>> rows = {{"ID", "NAME", "POINTS", "DIM", "CLASSES", "CONSTRAINTS"}};
  for (const auto& d : *list) {
    items.push_back(DatasetJson(d));
    rows.push_back({d.id(), d.name(), std::to_string(d.num_points()), std::to_string(d.dim()),
                    std::to_string(d.num_classes()), std::to_string(d.num_constraints())});
  }
  return out.Success({{"datasets", items}}, Table(rows));
}

// ---- jobs -----------------------------------------------------------------------

std::string JobText(const kls::v1::Job& j) {
  std::ostringstream text;
  text << "id              " << j.id() << "\n"
       << "state           " << StateName(j.state()) << "\n"
       << "method          " << j.method() << "\n"
       << "dataset         " << j.dataset_id() << "\n"
       << "kernel          " << j.kernel_name()
       << (j.kernel_version() > 0 ? ":" + std::to_string(j.kernel_version()) : std::string()) << "\n"
       << "priority        " << j.priority() << "\n"
       << "attempts        " << j.attempts() << "\n"
       << "progress        " << j.progress().iteration() << "/" << j.progress().max_iterations()
       << "  objective " << Fixed(j.progress().objective()) << "  " << Fixed(j.progress().elapsed_seconds(), 3)
       << " s\n";
  if (!j.termination().empty()) text << "termination     " << j.termination() << "\n";
  if (!j.error().empty()) text << "error           " << j.error() << "\n";
  if (!j.summary_json().empty()) text << "summary         " << j.summary_json() << "\n";
  return text.str();
}

// Watches to the end; exit status 0 only when the job SUCCEEDED.
int WatchToEnd(kls::Client& client, const Output& out, const std::string& id) {
  kls::StatusOr<kls::v1::Job> final_job = [&] {
    ProgressBar bar;
    return client.WatchJob(id, [&](const kls::v1::Job& j) { bar.Update(j); });
  }();
  if (!final_job.ok()) return out.Failure(final_job.status(), {{"id", id}});
  const kls::v1::Job& j = *final_job;
  if (j.state() == kls::v1::FAILED) {
    return out.Failure(kls::Status(kls::StatusCode::kAborted, "job " + j.id() + " failed: " + j.error()), JobJson(j));
  }
  if (j.state() == kls::v1::CANCELLED) {
    return out.Failure(kls::CancelledError("job " + j.id() + " was cancelled"), JobJson(j));
  }
  return out.Success(JobJson(j), JobText(j));
}

// Solver and graph options of `kls submit`; each flag counts only when given.
struct SubmitArgs {
  std::string dataset, kernel, method;
  int priority = 0;
  double deadline_seconds = 0;
  bool watch = false;
  // Each value is read only when its CLI::Option counted.
  double rho_initial = 0, rho_min = 0, tolerance = 0, b = 0, p = 0, graph_sigma = 0, graph_delta = 0;
  std::string gamma, c;  // a number, or "auto" (kl_admm / bcd_npkl / simple_npkl: cross-validation)
  int cv_folds = 0, cv_threads = -1;  // -1: not given
  std::string cv_grid, warm_start;
  int rank = 0, max_iterations = 0, threads = 0, low_rank = 0, graph_k = 0;
  bool adaptive_rho = true, active_set = true, accelerated = true;
  int start_rank = 0;
  uint64_t seed = 0;
  std::string loss, graph_weight, graph_connect, scaling;
  // Families beyond NPKL (qsdp, embedding, onk, mkl, npk_ranking, social_strength).
  std::string problem, algorithm, text_dataset, weighting;
  int m = 0, neighbors = 0, dims = 0, sigma_k = 0, positive_class = 0, folds = 0, laplacian_neighbors = 0;
  double nu = 0, gap_tolerance = 0, kpca_sigma = 0, rho = 0, distance_ratio = 0, cell_degrees = 0;
  bool kpca_rbf = false, single_features = true, relative_slack = false;
  // social_strength with weighting klr.
  double klr_c = 0, klr_bias_weight = 0, klr_link_weight = 0;
  int klr_import_vectors = 0, klr_positives = 0, klr_negatives = 0;
  std::string pair_kernel;
  std::map<std::string, CLI::Option*> flags;  // flag name → option
  bool Given(const std::string& name) const { return flags.at(name)->count() > 0; }
};

kls::StatusOr<kls::v1::Loss> ParseLoss(const std::string& s) {
  if (s == "linear") return kls::v1::LINEAR;
  if (s == "hinge") return kls::v1::HINGE;
  if (s == "square_hinge" || s == "square-hinge") return kls::v1::SQUARE_HINGE;
  if (s == "square") return kls::v1::SQUARE;
  return kls::InvalidArgumentError("--loss = '" + s + "' is not one of linear, hinge, square_hinge, square");
}

// `value` of `flag` among named choices: "--scaling = 'foo' is not one of none, zscore, minmax".
template <typename E>
kls::StatusOr<E> ParseChoice(const std::string& flag, const std::string& value,
                             const std::vector<std::pair<std::string, E>>& choices) {
  std::string names;
  for (const auto& [name, e] : choices) {
    if (name == value) return e;
    names += (names.empty() ? "" : ", ") + name;
  }
  return kls::InvalidArgumentError(flag + " = '" + value + "' is not one of " + names);
}

// --c / --gamma: a positive number, or "auto" where the family allows it.
kls::StatusOr<double> ParseWeight(const std::string& flag, const std::string& text) {
  double v = 0;
  if (!ParseDouble(text, &v)) return kls::InvalidArgumentError(flag + " = '" + text + "' is not a number or auto");
  return v;
}

// --c auto / --gamma auto, --cv-*, --warm-start: the NPKL families' knobs
// (SubmitJobRequest.cross_validation, warm_start).
kls::Status AddNpklKnobs(const SubmitArgs& a, const std::string& weight_flag, const std::string& weight,
                         kls::v1::SubmitJobRequest* r) {
  const bool npkl = a.method == "kl_admm" || a.method == "bcd_npkl" || a.method == "simple_npkl";
  const bool cv_flags = a.cv_folds != 0 || a.cv_threads != -1 || !a.cv_grid.empty();
  if (weight == "auto") {
    if (!npkl) {
      return kls::InvalidArgumentError(weight_flag + " auto applies to kl_admm (--gamma), bcd_npkl and simple_npkl (--c)");
    }
    kls::v1::CrossValidation* cv = r->mutable_cross_validation();
    if (a.cv_folds != 0) cv->set_folds(a.cv_folds);
    if (a.cv_threads != -1) cv->set_num_threads(a.cv_threads);
    if (!a.cv_grid.empty()) {
      std::stringstream in(a.cv_grid);
      std::string item;
      while (std::getline(in, item, ',')) {
        double v = 0;
        if (!ParseDouble(item, &v)) return kls::InvalidArgumentError("--cv-grid: '" + item + "' is not a number");
        cv->add_grid(v);
      }
    }
  } else if (cv_flags) {
    return kls::InvalidArgumentError("--cv-folds, --cv-grid and --cv-threads need --c auto (kl_admm: --gamma auto)");
  }
  if (!a.warm_start.empty()) {
    if (!npkl) return kls::InvalidArgumentError("--warm-start applies to kl_admm, bcd_npkl and simple_npkl");
    KLS_ASSIGN_OR_RETURN(const kls::v1::KernelRef ref, kls::ParseKernelRef(a.warm_start));
    if (!ref.alias().empty()) {
      return kls::InvalidArgumentError("--warm-start = '" + a.warm_start + "': give NAME or NAME:VERSION, not an alias");
    }
    r->mutable_warm_start()->set_kernel_name(ref.name());
    r->mutable_warm_start()->set_version(ref.version());
  }
  return kls::OkStatus();
}

kls::StatusOr<kls::v1::SubmitJobRequest> BuildSubmit(const SubmitArgs& a) {
  kls::v1::SubmitJobRequest r;
  r.set_dataset_id(a.dataset);
  r.set_kernel_name(a.kernel);
  r.set_priority(a.priority);
  r.set_deadline_seconds(a.deadline_seconds);

  kls::v1::GraphSpec* g = r.mutable_graph();
  if (a.Given("--graph-k")) g->set_k(a.graph_k);
  if (a.Given("--graph-sigma")) g->set_sigma(a.graph_sigma);
  if (a.Given("--graph-delta")) g->set_delta(a.graph_delta);
  if (a.Given("--graph-weight")) {
    if (a.graph_weight == "binary") {
      g->set_weight(kls::v1::GraphSpec::BINARY);
    } else if (a.graph_weight == "gaussian") {
      g->set_weight(kls::v1::GraphSpec::GAUSSIAN);
    } else {
      return kls::InvalidArgumentError("--graph-weight = '" + a.graph_weight + "' is not binary or gaussian");
    }
  }
  if (a.Given("--graph-connect")) {
    KLS_ASSIGN_OR_RETURN(const auto connect, ParseChoice<kls::v1::GraphSpec::Connect>(
                                                 "--graph-connect", a.graph_connect,
                                                 {{"error", kls::v1::GraphSpec::CONNECT_ERROR},
                                                  {"grow_k", kls::v1::GraphSpec::GROW_K},
                                                  {"mst", kls::v1::GraphSpec::MST}}));
    g->set_connect(connect);
  }
  if (!a.scaling.empty()) {
    KLS_ASSIGN_OR_RETURN(const auto scaling, ParseChoice<kls::v1::SubmitJobRequest::Scaling>(
                                                 "--scaling", a.scaling,
                                                 {{"none", kls::v1::SubmitJobRequest::NONE},
                                                  {"zscore", kls::v1::SubmitJobRequest::ZSCORE},
                                                  {"minmax", kls::v1::SubmitJobRequest::MINMAX}}));
    r.set_scaling(scaling);
  }

  const bool gamma_auto = a.Given("--gamma") && a.gamma == "auto";
  const bool c_auto = a.Given("--c") && a.c == "auto";
  KLS_RETURN_IF_ERROR(AddNpklKnobs(a, gamma_auto ? "--gamma" : "--c", gamma_auto || c_auto ? "auto" : "", &r));
  double gamma = 0, c = 0;  // the numbers, when given and not auto
  if (a.Given("--gamma") && !gamma_auto) {
    KLS_ASSIGN_OR_RETURN(gamma, ParseWeight("--gamma", a.gamma));
  }
  if (a.Given("--c") && !c_auto) {
    KLS_ASSIGN_OR_RETURN(c, ParseWeight("--c", a.c));
  }

  // Which flags each method understands; anything else given is an error.
  std::vector<std::string> allowed;
  if (a.method == "kl_admm") {
    allowed = {"--gamma", "--rank", "--rho-initial", "--rho-min", "--adaptive-rho", "--max-iterations",
               "--tolerance", "--seed", "--threads"};
    kls::v1::KlAdmmOptions* o = r.mutable_kl_admm();
    if (a.Given("--gamma") && !gamma_auto) o->set_gamma(gamma);
    if (a.Given("--rank")) o->set_rank(a.rank);
    if (a.Given("--rho-initial")) o->set_rho_initial(a.rho_initial);
    if (a.Given("--rho-min")) o->set_rho_min(a.rho_min);
    if (a.Given("--adaptive-rho")) o->set_adaptive_rho(a.adaptive_rho);
    if (a.Given("--max-iterations")) o->set_max_iterations(a.max_iterations);
    if (a.Given("--tolerance")) o->set_tolerance(a.tolerance);
    if (a.Given("--seed")) o->set_seed(a.seed);
    if (a.Given("--threads")) o->set_num_threads(a.threads);
  } else if (a.method == "bcd_npkl") {
    allowed = {"--loss", "--c", "--rank", "--max-iterations", "--tolerance", "--seed"};
    kls::v1::BcdNpklOptions* o = r.mutable_bcd_npkl();
    if (a.Given("--loss")) {
      KLS_ASSIGN_OR_RETURN(kls::v1::Loss loss, ParseLoss(a.loss));
      o->set_loss(loss);
    }
    if (a.Given("--c") && !c_auto) o->set_c(c);
    if (a.Given("--rank")) o->set_rank(a.rank);
    if (a.Given("--max-iterations")) o->set_max_iterations(a.max_iterations);
    if (a.Given("--tolerance")) o->set_tolerance(a.tolerance);
    if (a.Given("--seed")) o->set_seed(a.seed);
  } else if (a.method == "simple_npkl") {
    allowed = {"--loss", "--c", "--b", "--p", "--max-iterations", "--tolerance", "--active-set", "--low-rank",
               "--threads", "--accelerated", "--start-rank"};
    kls::v1::SimpleNpklOptions* o = r.mutable_simple_npkl();
    if (a.Given("--loss")) {
      KLS_ASSIGN_OR_RETURN(kls::v1::Loss loss, ParseLoss(a.loss));
      o->set_loss(loss);
    }
    if (a.Given("--c") && !c_auto) o->set_c(c);
    if (a.Given("--b")) o->set_b(a.b);
    if (a.Given("--p")) o->set_p(a.p);
    if (a.Given("--max-iterations")) o->set_max_iterations(a.max_iterations);
    if (a.Given("--tolerance")) o->set_tolerance(a.tolerance);
    if (a.Given("--active-set")) o->set_active_set(a.active_set);
    if (a.Given("--low-rank")) o->set_low_rank(a.low_rank);
    if (a.Given("--threads")) o->set_num_threads(a.threads);
    if (a.Given("--accelerated")) o->set_accelerated(a.accelerated);
    if (a.Given("--start-rank")) o->set_start_rank(a.start_rank);
  } else if (a.method == "qsdp") {
    allowed = {"--problem", "--m", "--neighbors", "--nu", "--gap-tolerance", "--max-iterations"};
    kls::v1::QsdpKernelOptions* o = r.mutable_qsdp();
    if (a.problem == "regpcp") {
      o->set_problem(kls::v1::QsdpKernelOptions::REGPCP);
    } else if (a.problem == "regmvu") {
      o->set_problem(kls::v1::QsdpKernelOptions::REGMVU);
    } else {
      return kls::InvalidArgumentError("--problem = '" + a.problem + "' is not regpcp or regmvu (required for qsdp)");
    }
    if (a.Given("--m")) o->set_m(a.m);
    if (a.Given("--neighbors")) o->set_neighbors(a.neighbors);
    if (a.Given("--nu")) o->set_nu(a.nu);
    if (a.Given("--gap-tolerance")) o->set_gap_tolerance(a.gap_tolerance);
    if (a.Given("--max-iterations")) o->set_max_iterations(a.max_iterations);
  } else if (a.method == "embedding") {
    allowed = {"--algorithm", "--dims", "--neighbors", "--c", "--b", "--max-iterations", "--tolerance",
               "--kpca-rbf", "--kpca-sigma", "--relative-slack"};
    kls::v1::EmbeddingOptions* o = r.mutable_embedding();
    const std::map<std::string, kls::v1::EmbeddingOptions::Method> methods = {
        {"cmvu", kls::v1::EmbeddingOptions::CMVU}, {"mve", kls::v1::EmbeddingOptions::MVE},
        {"spe", kls::v1::EmbeddingOptions::SPE}, {"kpca", kls::v1::EmbeddingOptions::KPCA}};
    auto it = methods.find(a.algorithm);
    if (it == methods.end()) {
      return kls::InvalidArgumentError("--algorithm = '" + a.algorithm +
                                       "' is not cmvu, mve, spe or kpca (required for embedding)");
    }
    o->set_method(it->second);
    if (a.Given("--dims")) o->set_dims(a.dims);
    if (a.Given("--neighbors")) o->set_neighbors(a.neighbors);
    if (a.Given("--c") && !c_auto) o->set_c(c);
    if (a.Given("--b")) o->set_b(a.b);
    if (a.Given("--max-iterations")) o->set_max_iterations(a.max_iterations);
    if (a.Given("--tolerance")) o->set_tolerance(a.tolerance);
    if (a.Given("--kpca-rbf")) o->set_kpca_rbf(a.kpca_rbf);
    if (a.Given("--kpca-sigma")) o->set_kpca_sigma(a.kpca_sigma);
    if (a.Given("--relative-slack")) o->set_relative_slack(a.relative_slack);
  } else if (a.method == "onk") {
    allowed = {"--c", "--rho", "--algorithm", "--tolerance", "--max-iterations", "--sigma-k", "--positive-class",
               "--folds", "--seed"};
    kls::v1::OnkOptions* o = r.mutable_onk();
    if (a.Given("--algorithm")) {
      if (a.algorithm == "gradient") {
        o->set_solver(kls::v1::OnkOptions::GRADIENT);
      } else if (a.algorithm == "accelerated") {
        o->set_solver(kls::v1::OnkOptions::ACCELERATED);
      } else if (a.algorithm == "level") {
        o->set_solver(kls::v1::OnkOptions::LEVEL);
      } else {
        return kls::InvalidArgumentError("--algorithm = '" + a.algorithm + "' is not gradient, accelerated or level");
      }
    }
    if (a.Given("--c") && !c_auto) o->set_c(c);
    if (a.Given("--rho")) o->set_rho(a.rho);
    if (a.Given("--tolerance")) o->set_tolerance(a.tolerance);
    if (a.Given("--max-iterations")) o->set_max_iterations(a.max_iterations);
    if (a.Given("--sigma-k")) o->set_sigma_k(a.sigma_k);
    if (a.Given("--positive-class")) o->set_positive_class(a.positive_class);
    if (a.Given("--folds")) o->set_folds(a.folds);
    if (a.Given("--seed")) o->set_seed(a.seed);
  } else if (a.method == "mkl") {
    allowed = {"--algorithm", "--c", "--single-features", "--positive-class", "--folds", "--seed"};
    kls::v1::MklOptions* o = r.mutable_mkl();
    if (a.Given("--algorithm")) {
      if (a.algorithm == "kta") {
        o->set_method(kls::v1::MklOptions::KTA);
      } else if (a.algorithm == "svm") {
        o->set_method(kls::v1::MklOptions::SVM);
      } else if (a.algorithm == "2lmkl") {
        o->set_method(kls::v1::MklOptions::TWO_LAYER);
      } else if (a.algorithm == "2lmkl-inf") {
        o->set_method(kls::v1::MklOptions::TWO_LAYER_INFINITE);
      } else if (a.algorithm == "umkl") {
        o->set_method(kls::v1::MklOptions::UNSUPERVISED);
      } else {
        return kls::InvalidArgumentError("--algorithm = '" + a.algorithm +
                                         "' is not kta, svm, 2lmkl, 2lmkl-inf or umkl");
      }
    }
    if (a.Given("--c") && !c_auto) o->set_c(c);
    if (a.Given("--single-features")) o->set_single_features(a.single_features);
    if (a.Given("--positive-class")) o->set_positive_class(a.positive_class);
    if (a.Given("--folds")) o->set_folds(a.folds);
    if (a.Given("--seed")) o->set_seed(a.seed);
  } else if (a.method == "npk_ranking") {
    allowed = {"--text-dataset", "--c", "--b", "--neighbors", "--laplacian-neighbors", "--low-rank",
               "--distance-ratio", "--max-iterations", "--tolerance"};
    kls::v1::NpkRankingOptions* o = r.mutable_npk_ranking();
    o->set_text_dataset_id(a.text_dataset);
    if (a.Given("--c") && !c_auto) o->set_c(c);
    if (a.Given("--b")) o->set_b(a.b);
    if (a.Given("--neighbors")) o->set_constraint_neighbors(a.neighbors);
    if (a.Given("--laplacian-neighbors")) o->set_laplacian_neighbors(a.laplacian_neighbors);
    if (a.Given("--low-rank")) o->set_low_rank(a.low_rank);
    if (a.Given("--distance-ratio")) o->set_distance_ratio(a.distance_ratio);
    if (a.Given("--max-iterations")) o->set_max_iterations(a.max_iterations);
    if (a.Given("--tolerance")) o->set_tolerance(a.tolerance);
  } else if (a.method == "social_strength") {
    allowed = {"--weighting", "--cell-degrees"};
    kls::v1::SocialStrengthOptions* o = r.mutable_social_strength();
    if (a.Given("--weighting")) {
      if (a.weighting == "kta") {
        o->set_weighting(kls::v1::SocialStrengthOptions::KTA);
      } else if (a.weighting == "uniform") {
        o->set_weighting(kls::v1::SocialStrengthOptions::UNIFORM);
      } else if (a.weighting == "klr") {
        o->set_weighting(kls::v1::SocialStrengthOptions::KLR);
        allowed.insert(allowed.end(), {"--klr-c", "--klr-import-vectors", "--klr-positives", "--klr-negatives",
                                       "--pair-kernel", "--klr-bias-weight", "--klr-link-weight", "--seed"});
      } else {
        return kls::InvalidArgumentError("--weighting = '" + a.weighting + "' is not kta, uniform or klr");
      }
    }
    if (a.Given("--cell-degrees")) o->set_cell_degrees(a.cell_degrees);
    if (a.Given("--klr-c")) o->set_klr_c(a.klr_c);
    if (a.Given("--klr-import-vectors")) o->set_klr_import_vectors(a.klr_import_vectors);
    if (a.Given("--klr-positives")) o->set_klr_positives(a.klr_positives);
    if (a.Given("--klr-negatives")) o->set_klr_negatives(a.klr_negatives);
    if (a.Given("--klr-bias-weight")) o->set_klr_bias_weight(a.klr_bias_weight);
    if (a.Given("--klr-link-weight")) o->set_klr_link_weight(a.klr_link_weight);
    if (a.Given("--seed")) o->set_klr_seed(a.seed);
    if (a.Given("--pair-kernel")) {
      if (a.pair_kernel == "symmetric_product") {
        o->set_klr_pair_kernel(kls::v1::SocialStrengthOptions::SYMMETRIC_PRODUCT);
      } else if (a.pair_kernel == "difference") {
        o->set_klr_pair_kernel(kls::v1::SocialStrengthOptions::DIFFERENCE);
      } else {
        return kls::InvalidArgumentError("--pair-kernel = '" + a.pair_kernel +
                                         "' is not symmetric_product or difference");
      }
    }
  } else {
    return kls::InvalidArgumentError("--method = '" + a.method +
                                     "' is not one of kl_admm, bcd_npkl, simple_npkl, qsdp, embedding, onk, mkl, "
                                     "npk_ranking, social_strength");
  }
  for (const auto& [name, option] : a.flags) {
    if (option->count() == 0) continue;
    if (name == "--graph-connect") {  // only a family that needs a connected graph uses it
      if (a.method == "qsdp") continue;
      return kls::InvalidArgumentError(name + " does not apply to --method " + a.method +
                                       " (only qsdp regmvu needs a connected graph)");
    }
    if (name.rfind("--graph-", 0) == 0) {
      if (a.method == "kl_admm" || a.method == "bcd_npkl" || a.method == "simple_npkl") continue;
      return kls::InvalidArgumentError(name + " does not apply to --method " + a.method +
                                       " (it builds the graph its paper prescribes)");
    }
    if (std::find(allowed.begin(), allowed.end(), name) == allowed.end()) {
      return kls::InvalidArgumentError(name + " does not apply to --method " + a.method);
    }
  }
  return r;
}

int RunSubmit(kls::Client& client, const Output& out, const SubmitArgs& a) {
  const auto request = BuildSubmit(a);
  if (!request.ok()) return out.Failure(request.status());
  const auto job = client.SubmitJob(*request);
  if (!job.ok()) return out.Failure(job.status());
  if (a.watch) {
    if (!out.json_mode) std::cerr << "submitted " << job->id() << "\n";
    return WatchToEnd(client, out, job->id());
  }
  return out.Success(JobJson(*job), job->id() + "  " + StateName(job->state()));
}

int RunGet(kls::Client& client, const Output& out, const std::string& id) {
  const auto job = client.GetJob(id);
  if (!job.ok()) return out.Failure(job.status(), {{"id", id}});
  return out.Success(JobJson(*job), JobText(*job));
}

int RunCancel(kls::Client& client, const Output& out, const std::string& id) {
  const auto job = client.CancelJob(id);
  if (!job.ok()) return out.Failure(job.status(), {{"id", id}});
  return out.Success(JobJson(*job), job->id() + "  " + StateName(job->state()));
}

struct ListArgs {
  std::string state, dataset, page_token;
  int page_size = 0;
};

int RunList(kls::Client& client, const Output& out, const ListArgs& a) {
  kls::v1::ListJobsRequest request;
  if (!a.state.empty()) {
    std::string upper = a.state;
    std::transform(upper.begin(), upper.end(), upper.begin(), [](unsigned char c) { return std::toupper(c); });
    kls::v1::JobState state;
    if (!kls::v1::JobState_Parse(upper, &state) || state == kls::v1::JOB_STATE_UNSPECIFIED) {
      return out.Failure(kls::InvalidArgumentError(
          "--state = '" + a.state + "' is not one of queued, running, succeeded, failed, cancelled"));
    }
    request.set_state(state);
  }
  request.set_dataset_id(a.dataset);
  request.set_page_size(a.page_size);
  request.set_page_token(a.page_token);
  const auto response = client.ListJobs(request);
  if (!response.ok()) return out.Failure(response.status());
  json jobs = json::array();
  std::vector<std::vector<std::string>> rows = {{"ID", "STATE", "METHOD", "DATASET", "KERNEL", "PROGRESS"}};
  for (const kls::v1::Job& j : response->jobs()) {
    jobs.push_back(JobJson(j));
    rows.push_back({j.id(), StateName(j.state()), j.method(), j.dataset_id(),
                    j.kernel_name() + (j.kernel_version() > 0 ? ":" + std::to_string(j.kernel_version()) : ""),
                    std::to_string(j.progress().iteration()) + "/" + std::to_string(j.progress().max_iterations())});
  }
  std::string text = Table(rows);
  if (!response->next_page_token().empty()) text += "next page: --page-token " + response->next_page_token() + "\n";
  return out.Success({{"jobs", jobs}, {"next_page_token", response->next_page_token()}}, text);
}

// ---- kernels and queries ------------------------------------------------------------

int RunKernels(kls::Client& client, const Output& out, const std::string& name) {
  const auto list = client.ListKernels(name);
  if (!list.ok()) return out.Failure(list.status());
  json items = json::array();
  std::vector<std::vector<std::string>> rows = {{"NAME", "VERSION", "METHOD", "DATASET", "POINTS", "RANK", "JOB"}};
  for (const auto& k : *list) {
    items.push_back(KernelJson(k));
    rows.push_back({k.name(), std::to_string(k.version()), k.method(), k.dataset_id(), std::to_string(k.num_points()),
                    std::to_string(k.rank()), k.job_id()});
  }
  return out.Success({{"kernels", items}}, Table(rows));
}

// "0,1;2,3" (also newlines as separators) → pairs; `source` names the input.
kls::StatusOr<std::vector<std::pair<int, int>>> ParsePairs(const std::string& text, const std::string& source) {
  std::vector<std::pair<int, int>> pairs;
  std::string normalized = text;
  std::replace(normalized.begin(), normalized.end(), '\n', ';');
  int index = 0;
  for (const std::string& raw : Split(normalized, ';')) {
    const std::string item = Trim(raw.substr(0, raw.find('#')));
    if (item.empty()) continue;
    const std::vector<std::string> f = Split(item, ',');
    int i = 0, j = 0;
    if (f.size() != 2 || !ParseInt(f[0], &i) || !ParseInt(f[1], &j)) {
      return kls::InvalidArgumentError(source + ": pair " + std::to_string(index) + " '" + item +
                                       "' is not 'i,j' with integers");
    }
    pairs.emplace_back(i, j);
    ++index;
  }
  if (pairs.empty()) return kls::InvalidArgumentError(source + ": no pairs given");
  return pairs;
}

int RunSimilarity(kls::Client& client, const Output& out, const std::string& kernel, const std::string& pairs_text,
                  const std::string& pairs_file) {
  const auto ref = kls::ParseKernelRef(kernel);
  if (!ref.ok()) return out.Failure(ref.status());
  std::string text = pairs_text, source = "--pairs";
  if (!pairs_file.empty()) {
    std::ifstream in(pairs_file);
    if (!in) return out.Failure(kls::NotFoundError("cannot read pairs file '" + pairs_file + "'"));
    std::ostringstream content;
    content << in.rdbuf();
    text = content.str();
    source = pairs_file;
  }
  const auto pairs = ParsePairs(text, source);
  if (!pairs.ok()) return out.Failure(pairs.status());
  const auto values = client.Similarity(*ref, *pairs);
  if (!values.ok()) return out.Failure(values.status(), {{"kernel", kernel}});
  json items = json::array();
  std::vector<std::vector<std::string>> rows = {{"I", "J", "VALUE"}};
  for (size_t t = 0; t < pairs->size(); ++t) {
    const auto [i, j] = (*pairs)[t];
    items.push_back({{"i", i}, {"j", j}, {"value", (*values)[t]}});
    rows.push_back({std::to_string(i), std::to_string(j), Fixed((*values)[t], 10)});
  }
  return out.Success({{"kernel", RefText(*ref)}, {"pairs", items}}, Table(rows));
}

struct TopKArgs {
  std::string kernel, key, vector, features;
  int item = 0, k = 10, neighbors = 10;
  bool exclude_self = false;
  CLI::Option* item_opt = nullptr;
  CLI::Option* key_opt = nullptr;
  CLI::Option* vector_opt = nullptr;
  CLI::Option* features_opt = nullptr;
  CLI::Option* neighbors_opt = nullptr;
};

// "x,y,..." → numbers; `flag` names the input in errors.
kls::StatusOr<std::vector<double>> ParseNumbers(const std::string& text, const std::string& flag) {
  std::vector<double> v;
  for (const std::string& s : Split(text, ',')) {
    double x = 0;
    if (!ParseDouble(s, &x)) return kls::InvalidArgumentError(flag + ": '" + s + "' is not a number");
    v.push_back(x);
  }
  return v;
}

int RunTopK(kls::Client& client, const Output& out, const TopKArgs& a) {
  const auto ref = kls::ParseKernelRef(a.kernel);
  if (!ref.ok()) return out.Failure(ref.status());
  const int given = int(a.item_opt->count() > 0) + int(a.key_opt->count() > 0) + int(a.vector_opt->count() > 0) +
                    int(a.features_opt->count() > 0);
  if (given != 1) {
    return out.Failure(kls::InvalidArgumentError("give exactly one of --item, --key, --vector or --features"));
  }
  kls::v1::TopKRequest request;
  *request.mutable_kernel() = *ref;
  request.set_k(a.k);
  request.set_exclude_self(a.exclude_self);
  json query;
  if (a.item_opt->count() > 0) {
    request.set_item(a.item);
    query = {{"item", a.item}};
  } else if (a.key_opt->count() > 0) {
    request.set_item_key(a.key);
    query = {{"item_key", a.key}};
  } else if (a.features_opt->count() > 0) {
    const auto v = ParseNumbers(a.features, "--features");
    if (!v.ok()) return out.Failure(v.status());
    *request.mutable_features()->mutable_values() = {v->begin(), v->end()};
    if (a.neighbors_opt->count() > 0) request.mutable_features()->set_neighbors(a.neighbors);
    query = {{"features", *v}};
  } else {
    const auto v = ParseNumbers(a.vector, "--vector");
    if (!v.ok()) return out.Failure(v.status());
    *request.mutable_vector()->mutable_values() = {v->begin(), v->end()};
    query = {{"vector", *v}};
  }
  const auto response = client.TopK(request);
  if (!response.ok()) return out.Failure(response.status(), {{"kernel", a.kernel}});
  json items = json::array();
  const bool keyed = std::any_of(response->items().begin(), response->items().end(),
                                 [](const kls::v1::ScoredItem& s) { return !s.item_key().empty(); });
  std::vector<std::vector<std::string>> rows = {{"RANK", "INDEX", "SCORE"}};
  if (keyed) rows[0].push_back("KEY");
  int rank = 1;
  for (const kls::v1::ScoredItem& s : response->items()) {
    json item = {{"index", s.index()}, {"score", s.score()}};
    if (!s.item_key().empty()) item["item_key"] = s.item_key();
    items.push_back(item);
    rows.push_back({std::to_string(rank++), std::to_string(s.index()), Fixed(s.score(), 10)});
    if (keyed) rows.back().push_back(s.item_key());
  }
  return out.Success({{"kernel", RefText(*ref)}, {"query", query}, {"k", a.k}, {"items", items}}, Table(rows));
}

// ---- Model queries: rerank, strength, recommend, classify -------------------

json ItemsJson(const google::protobuf::RepeatedPtrField<kls::v1::ScoredItem>& items, const char* index_name,
               std::vector<std::vector<std::string>>* rows) {
  json out = json::array();
  const bool keyed = std::any_of(items.begin(), items.end(),
                                 [](const kls::v1::ScoredItem& s) { return !s.item_key().empty(); });
  *rows = {{"RANK", index_name, "SCORE"}};
  if (keyed) (*rows)[0].push_back("KEY");
  int rank = 1;
  for (const kls::v1::ScoredItem& s : items) {
    json item = {{"index", s.index()}, {"score", s.score()}};
    if (!s.item_key().empty()) item["item_key"] = s.item_key();
    out.push_back(item);
    rows->push_back({std::to_string(rank++), std::to_string(s.index()), Fixed(s.score(), 10)});
    if (keyed) rows->back().push_back(s.item_key());
  }
  return out;
}

struct ReRankArgs {
  std::string kernel, candidates, keys, prior;
  double damping = 0.85;
  int k = 0;
};

int RunReRank(kls::Client& client, const Output& out, const ReRankArgs& a) {
  const auto ref = kls::ParseKernelRef(a.kernel);
  if (!ref.ok()) return out.Failure(ref.status());
  if (a.candidates.empty() == a.keys.empty()) {
    return out.Failure(kls::InvalidArgumentError("give exactly one of --candidates or --keys"));
  }
  kls::v1::ReRankRequest request;
  *request.mutable_kernel() = *ref;
  if (!a.candidates.empty()) {
    for (const std::string& c : Split(a.candidates, ',')) {
      int i = 0;
      if (!ParseInt(c, &i)) return out.Failure(kls::InvalidArgumentError("--candidates: '" + c + "' is not an index"));
      request.add_candidates(i);
    }
  } else {
    for (const std::string& k : Split(a.keys, ',')) request.add_candidate_keys(k);
  }
  if (!a.prior.empty()) {
    for (const std::string& p : Split(a.prior, ',')) {
      double x = 0;
      if (!ParseDouble(p, &x)) return out.Failure(kls::InvalidArgumentError("--prior: '" + p + "' is not a number"));
      request.add_prior(x);
    }
  }
  request.set_damping(a.damping);
  request.set_k(a.k);
  const auto response = client.ReRank(request);
  if (!response.ok()) return out.Failure(response.status(), {{"kernel", a.kernel}});
  std::vector<std::vector<std::string>> rows;
  json items = ItemsJson(response->items(), "INDEX", &rows);
  return out.Success({{"kernel", RefText(*ref)}, {"iterations", response->iterations()}, {"items", items}},
                     Table(rows));
}

int RunStrength(kls::Client& client, const Output& out, const std::string& kernel, const std::string& pairs_text) {
  const auto ref = kls::ParseKernelRef(kernel);
  if (!ref.ok()) return out.Failure(ref.status());
  const auto pairs = ParsePairs(pairs_text, "--pairs");
  if (!pairs.ok()) return out.Failure(pairs.status());
  kls::v1::SocialStrengthRequest request;
  *request.mutable_kernel() = *ref;
  for (const auto& [u, v] : *pairs) {
    request.add_u(u);
    request.add_v(v);
  }
  const auto response = client.SocialStrength(request);
  if (!response.ok()) return out.Failure(response.status(), {{"kernel", kernel}});
  json items = json::array();
  std::vector<std::vector<std::string>> rows = {{"U", "V", "STRENGTH"}};
  for (size_t t = 0; t < pairs->size(); ++t) {
    const auto [u, v] = (*pairs)[t];
    items.push_back({{"u", u}, {"v", v}, {"strength", response->values(static_cast<int>(t))}});
    rows.push_back({std::to_string(u), std::to_string(v), Fixed(response->values(static_cast<int>(t)), 10)});
  }
  return out.Success({{"kernel", RefText(*ref)}, {"pairs", items}}, Table(rows));
}

int RunRecommend(kls::Client& client, const Output& out, const std::string& kernel, int user, int k, bool groups) {
  const auto ref = kls::ParseKernelRef(kernel);
  if (!ref.ok()) return out.Failure(ref.status());
  kls::v1::RecommendRequest request;
  *request.mutable_kernel() = *ref;
  request.set_user(user);
  request.set_k(k);
  const auto response = client.Recommend(request, groups);
  if (!response.ok()) return out.Failure(response.status(), {{"kernel", kernel}});
  std::vector<std::vector<std::string>> rows;
  json items = ItemsJson(response->items(), groups ? "GROUP" : "USER", &rows);
  return out.Success({{"kernel", RefText(*ref)}, {"user", user}, {"what", groups ? "groups" : "friends"},
                      {"items", items}},
                     Table(rows));
}

int RunClassify(kls::Client& client, const Output& out, const std::string& kernel, const std::string& file) {
  const auto ref = kls::ParseKernelRef(kernel);
  if (!ref.ok()) return out.Failure(ref.status());
  const kls::StatusOr<kls::Dataset> data = kls::ReadCsvFile(file);
  if (!data.ok()) return out.Failure(data.status());
  kls::v1::ClassifyRequest request;
  *request.mutable_kernel() = *ref;
  request.set_dim(data->dim());
  for (int i = 0; i < data->num_points(); ++i)
    for (int j = 0; j < data->dim(); ++j) request.add_features(data->features(i, j));
  const auto response = client.Classify(request);
  if (!response.ok()) return out.Failure(response.status(), {{"kernel", kernel}});
  json items = json::array();
  std::vector<std::vector<std::string>> rows = {{"ROW", "LABEL", "DECISION"}};
  int correct = 0;
  for (int i = 0; i < response->labels_size(); ++i) {
    items.push_back({{"row", i}, {"label", response->labels(i)}, {"decision_value", response->decision_values(i)}});
    rows.push_back({std::to_string(i), std::to_string(response->labels(i)), Fixed(response->decision_values(i), 6)});
    if (data->has_labels() && data->labels[i] == response->labels(i)) ++correct;
  }
  json result = {{"kernel", RefText(*ref)}, {"predictions", items}};
  std::string text = Table(rows);
  if (data->has_labels()) {
    const double accuracy = static_cast<double>(correct) / std::max(1, response->labels_size());
    result["accuracy"] = accuracy;
    text += "accuracy " + Fixed(accuracy, 4) + " (" + std::to_string(correct) + " of " +
            std::to_string(response->labels_size()) + " rows match the file's labels)\n";
  }
  return out.Success(result, text);
}

struct ClassifyUsersArgs {
  std::string labelled, users;
  bool mass_normalization = false;
};

int RunClassifyUsers(kls::Client& client, const Output& out, const std::string& kernel, const ClassifyUsersArgs& a) {
  const auto ref = kls::ParseKernelRef(kernel);
  if (!ref.ok()) return out.Failure(ref.status());
  const auto labelled = ParsePairs(a.labelled, "--labelled");
  if (!labelled.ok()) return out.Failure(labelled.status());
  kls::v1::ClassifyUsersRequest request;
  *request.mutable_kernel() = *ref;
  for (const auto& [user, label] : *labelled) {
    request.add_labelled_users(user);
    request.add_labels(label);
  }
  if (!a.users.empty()) {
    for (const std::string& u : Split(a.users, ',')) {
      int user = 0;
      if (!ParseInt(Trim(u), &user)) {
        return out.Failure(kls::InvalidArgumentError("--users: '" + u + "' is not an integer"));
      }
      request.add_users(user);
    }
  }
  request.set_class_mass_normalization(a.mass_normalization);
  const auto response = client.ClassifyUsers(request);
  if (!response.ok()) return out.Failure(response.status(), {{"kernel", kernel}});
  json items = json::array();
  std::vector<std::vector<std::string>> rows = {{"USER", "LABEL", "SCORE"}};
  for (int t = 0; t < response->users_size(); ++t) {
    items.push_back({{"user", response->users(t)}, {"label", response->labels(t)}, {"score", response->scores(t)}});
    rows.push_back({std::to_string(response->users(t)), std::to_string(response->labels(t)),
                    Fixed(response->scores(t), 6)});
  }
  return out.Success({{"kernel", RefText(*ref)}, {"predictions", items}}, Table(rows));
}

int RunExport(kls::Client& client, const Output& out, const std::string& kernel, const std::string& path) {
  const auto ref = kls::ParseKernelRef(kernel);
  if (!ref.ok()) return out.Failure(ref.status());
  const auto exported = client.ExportKernel(*ref);
  if (!exported.ok()) return out.Failure(exported.status(), {{"kernel", kernel}});
  const auto& v = exported->embedding;
  // Header v0..v{r-1}, one row per point, 17 significant digits: core's
  // ReadCsvFile reads it back as an n × r matrix bit for bit.
  const std::string tmp = path + ".tmp";
  {
    std::ofstream file(tmp);
    if (!file) return out.Failure(kls::Status(kls::StatusCode::kPermissionDenied, "cannot write '" + path + "'"));
    file << std::setprecision(17);
    for (Eigen::Index c = 0; c < v.cols(); ++c) file << (c ? "," : "") << "v" << c;
    file << "\n";
    for (Eigen::Index r = 0; r < v.rows(); ++r) {
      for (Eigen::Index c = 0; c < v.cols(); ++c) file << (c ? "," : "") << v(r, c);
      file << "\n";
    }
    file.flush();
    if (!file) return out.Failure(kls::InternalError("writing '" + tmp + "' failed"));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return out.Failure(kls::InternalError("cannot rename '" + tmp + "' to '" + path + "'"));
  }
  json object = KernelJson(exported->info);
  object["out"] = path;
  std::ostringstream text;
  text << "wrote " << path << ": kernel " << exported->info.name() << ":" << exported->info.version() << ", "
       << v.rows() << " × " << v.cols() << " embedding";
  return out.Success(object, text.str());
}

// CSV rows → Kernels.Import. The file is the layout `export` writes (header,
// one embedding row per line), optionally with a first column `key`.
int RunImport(kls::Client& client, const Output& out, const std::string& path, const std::string& name) {
  kls::StatusOr<kls::Dataset> data = kls::ReadCsvFile(path);
  if (!data.ok()) return out.Failure(data.status());
  if (data->has_labels()) {
    return out.Failure(kls::InvalidArgumentError(
        "'" + path + "' has a label column; import takes embedding rows only (remove the 'label' column)"));
  }
  const kls::LearnedKernel::Embedding v = data->features;  // column-major → row-major
  const auto info = client.ImportKernel(name, v, data->item_keys);
  if (!info.ok()) return out.Failure(info.status(), {{"file", path}});
  json object = KernelJson(*info);
  object["file"] = path;
  std::ostringstream text;
  text << "imported " << path << " as kernel " << info->name() << ":" << info->version() << " ("
       << info->num_points() << " × " << info->rank() << (data->item_keys.empty() ? "" : ", with item keys") << ")";
  return out.Success(object, text.str());
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
  std::string tls_ca, tls_cert, tls_key;
  app.add_option("--token", options.token, "Bearer token sent with every call")->envname("KLS_TOKEN");
  app.add_flag("--tls", options.tls, "Connect with TLS (implied by --tls-ca/--tls-cert; default CAs: the system's)");
  app.add_option("--tls-ca", tls_ca, "CA certificate (PEM) that signed the server's certificate");
  app.add_option("--tls-cert", tls_cert, "Client certificate (PEM) for servers that require mutual TLS");
  app.add_option("--tls-key", tls_key, "Private key (PEM) of --tls-cert");
  app.add_option("--tls-server-name", options.tls_server_name,
                 "Name to verify the server certificate against (default: the --target host)");

  std::string service;
  CLI::App* health = app.add_subcommand("health", "Exit 0 only if the server (or --service) is SERVING");
  health->add_option("--service", service, "Service to ask about, e.g. kls.v1.Admin (default: whole server)");
  CLI::App* info = app.add_subcommand("info", "Version, data directory, uptime, worker threads");
  std::vector<std::string> words;
  CLI::App* echo = app.add_subcommand("echo", "Send TEXT and print what comes back");
  echo->add_option("text", words, "Payload (several words are joined by single spaces)")->required();

  UploadArgs upload_args;
  CLI::App* upload = app.add_subcommand("upload", "Upload a CSV or LIBSVM data set (with constraints)");
  upload->add_option("file", upload_args.file,
                     "CSV (header; last column 'label') or LIBSVM file; with --append-constraints the pairs file")
      ->required();
  upload->add_option("--name", upload_args.name, "Data-set name (default: the file name)");
  upload->add_option("--format", upload_args.format, "auto (by extension: .csv → csv), csv or libsvm")
      ->check(CLI::IsMember({"auto", "csv", "libsvm"}))
      ->capture_default_str();
  upload->add_option("--constraints", upload_args.constraints_file,
                     "Pairwise constraints, lines 'i,j,kind' with kind 1/-1 or must/cannot");
  upload->add_option("--protocol", upload_args.protocol, "Generate constraints from the labels: admm, bcd, simplenpkl")
      ->check(CLI::IsMember({"admm", "bcd", "simplenpkl"}));
  upload->add_option("--seed", upload_args.seed, "Seed of the constraint protocol")->capture_default_str();
  upload->add_option("--append-constraints", upload_args.append_to,
                     "BASE: FILE is a constraints file ('i,j,kind' lines); store a new data set sharing BASE's "
                     "features with BASE's pairs plus FILE's");
  upload->add_option("--num-features", upload_args.num_features,
                     "LIBSVM: the number of features d (default: the largest index in the file)")
      ->check(CLI::NonNegativeNumber);
  CLI::Option* progress_flag = upload->add_flag(
      "--progress", upload_args.progress,
      "Always show the progress bar on stderr (rows sent, MB/s, ETA); default: shown, except with --json when "
      "stderr is not a terminal");
  upload->add_flag("--no-progress", upload_args.no_progress, "Never show the progress bar")->excludes(progress_flag);
  upload->add_flag("--social", upload_args.social,
                   "FILE is a directory of social CSV files (photos.csv, tags.csv, comments.csv, contacts.csv, "
                   "groups.csv, faves.csv; README)");
  CLI::App* datasets = app.add_subcommand("datasets", "List the stored data sets");

  SubmitArgs submit_args;
  CLI::App* submit = app.add_subcommand("submit", "Submit a kernel-learning job");
  submit->add_option("--dataset", submit_args.dataset, "Data-set id (from upload)")->required();
  submit->add_option("--kernel", submit_args.kernel, "Name of the kernel to learn (versions increment per name)");
  submit->add_option("--method", submit_args.method,
                     "kl_admm, bcd_npkl, simple_npkl, qsdp, embedding, onk, mkl, npk_ranking or social_strength")
      ->required();
  submit->add_option("--priority", submit_args.priority, "Higher runs first");
  submit->add_option("--deadline-seconds", submit_args.deadline_seconds, "Solver time limit (0 = none)");
  submit->add_flag("--watch", submit_args.watch, "Watch the job until it ends");
  // Every solver flag is recorded by name, so that Given() and the per-method check can find it.
  const auto option = [&](const std::string& name, auto& value, const std::string& help) {
    submit_args.flags[name] = submit->add_option(name, value, help);
  };
  option("--gamma", submit_args.gamma, "kl_admm: weight γ of the constraint loss, or auto (cross-validation)");
  option("--rank", submit_args.rank, "kl_admm, bcd_npkl: embedding rank (0 = automatic)");
  option("--rho-initial", submit_args.rho_initial, "kl_admm: initial ρ");
  option("--rho-min", submit_args.rho_min, "kl_admm: smallest ρ");
  option("--adaptive-rho", submit_args.adaptive_rho, "kl_admm: adapt ρ (true/false)");
  option("--max-iterations", submit_args.max_iterations, "Iteration cap");
  option("--tolerance", submit_args.tolerance, "Convergence tolerance");
  option("--seed", submit_args.seed, "kl_admm, bcd_npkl, onk, mkl, social_strength klr: random seed");
  option("--threads", submit_args.threads, "kl_admm, simple_npkl: threads (0 = all cores)");
  option("--loss", submit_args.loss, "bcd_npkl, simple_npkl: linear, hinge, square_hinge, square");
  option("--c", submit_args.c,
         "bcd_npkl, simple_npkl (number or auto = cross-validation), embedding, npk_ranking: C; onk, mkl: SVM C");
  option("--b", submit_args.b, "simple_npkl, embedding, npk_ranking: capacity B");
  option("--p", submit_args.p, "simple_npkl: p of the p-norm");
  option("--active-set", submit_args.active_set, "simple_npkl: active set (true/false)");
  option("--low-rank", submit_args.low_rank, "simple_npkl: low-rank eigensolver rank; npk_ranking: m (0 = full)");
  option("--accelerated", submit_args.accelerated,
         "simple_npkl: accelerated projected gradient (true, the default) or the thesis's plain step (false)");
  option("--start-rank", submit_args.start_rank,
         "simple_npkl: positive rank of the cold start's A (default 8; 0 = alpha0 = C)");
  option("--problem", submit_args.problem, "qsdp: regpcp or regmvu");
  option("--m", submit_args.m, "qsdp: basis size m");
  option("--neighbors", submit_args.neighbors, "qsdp, embedding: k-NN graph; npk_ranking: constraint neighbours");
  option("--nu", submit_args.nu, "qsdp regmvu: ν");
  option("--gap-tolerance", submit_args.gap_tolerance, "qsdp: certified relative duality gap");
  option("--algorithm", submit_args.algorithm,
         "embedding: cmvu|mve|spe|kpca; onk: gradient|accelerated|level; mkl: kta|svm|2lmkl|2lmkl-inf|umkl");
  option("--dims", submit_args.dims, "embedding: output dimensions");
  option("--kpca-rbf", submit_args.kpca_rbf, "embedding kpca: RBF kernel (true/false)");
  option("--kpca-sigma", submit_args.kpca_sigma, "embedding kpca: RBF width");
  option("--relative-slack", submit_args.relative_slack,
         "embedding cmvu/mve: C weighs xi / mean(D), absolute weight C / mean(D)^2 (true/false)");
  option("--rho", submit_args.rho, "onk: ρ");
  option("--sigma-k", submit_args.sigma_k, "onk: base width rule k");
  option("--positive-class", submit_args.positive_class, "onk, mkl: class for f(x) > 0 (default: the largest id)");
  option("--folds", submit_args.folds, "onk, mkl: cross-validation folds");
  option("--single-features", submit_args.single_features, "mkl kta: per-feature kernels in the bank (true/false)");
  option("--text-dataset", submit_args.text_dataset, "npk_ranking: data set of per-item tag counts");
  option("--laplacian-neighbors", submit_args.laplacian_neighbors, "npk_ranking: k of the Laplacian graph");
  option("--distance-ratio", submit_args.distance_ratio, "npk_ranking: distance rescaling ratio");
  option("--weighting", submit_args.weighting, "social_strength: kta, uniform or klr (§7.4)");
  option("--klr-c", submit_args.klr_c, "social_strength klr: C of (7.3)");
  option("--klr-import-vectors", submit_args.klr_import_vectors, "social_strength klr: maximum import vectors");
  option("--klr-positives", submit_args.klr_positives, "social_strength klr: positive pairs per user (§7.4.2)");
  option("--klr-negatives", submit_args.klr_negatives, "social_strength klr: negative pairs per user (§7.4.2)");
  option("--pair-kernel", submit_args.pair_kernel, "social_strength klr: symmetric_product or difference");
  option("--klr-bias-weight", submit_args.klr_bias_weight, "social_strength klr: bias feature");
  option("--klr-link-weight", submit_args.klr_link_weight, "social_strength klr: K(u, v) feature");
  option("--cell-degrees", submit_args.cell_degrees, "social_strength: geo cell size");
  option("--graph-k", submit_args.graph_k, "Graph: neighbours (default 5)");
  option("--graph-weight", submit_args.graph_weight, "Graph: binary or gaussian");
  option("--graph-sigma", submit_args.graph_sigma, "Graph: Gaussian width (0 = auto)");
  option("--graph-delta", submit_args.graph_delta, "Graph: δ ≥ 0");
  option("--graph-connect", submit_args.graph_connect,
         "qsdp regmvu, disconnected k-NN graph: error, grow_k or mst (default: join components by shortest edges)");
  submit->add_option("--cv-folds", submit_args.cv_folds, "--c/--gamma auto: folds (default 3)");
  submit->add_option("--cv-grid", submit_args.cv_grid, "--c/--gamma auto: candidates 'a,b,c' (default 0.1,1,10)");
  submit->add_option("--cv-threads", submit_args.cv_threads,
                     "--c/--gamma auto: parallel (value, fold) learns (default 1, 0 = all cores)");
  submit->add_option("--warm-start", submit_args.warm_start,
                     "kl_admm, bcd_npkl, simple_npkl: start from kernel NAME[:VERSION] of a data set with the same "
                     "features");
  submit->add_option("--scaling", submit_args.scaling,
                     "Feature scaling: none (default), zscore or minmax; "
                     "stored with the kernel and applied to feature queries");

  std::string job_id;
  CLI::App* watch = app.add_subcommand("watch", "Show a job's progress until it ends");
  watch->add_option("job", job_id, "Job id")->required();
  CLI::App* get = app.add_subcommand("get", "Show one job");
  get->add_option("job", job_id, "Job id")->required();
  CLI::App* cancel = app.add_subcommand("cancel", "Cancel a queued or running job");
  cancel->add_option("job", job_id, "Job id")->required();
  ListArgs list_args;
  CLI::App* list = app.add_subcommand("list", "List jobs, oldest first");
  list->add_option("--state", list_args.state, "queued, running, succeeded, failed or cancelled");
  list->add_option("--dataset", list_args.dataset, "Only jobs on this data set");
  list->add_option("--page-size", list_args.page_size, "Jobs per page (default 100, at most 1000)");
  list->add_option("--page-token", list_args.page_token, "next_page_token of the previous page");

  std::string kernel_name;
  CLI::App* kernels = app.add_subcommand("kernels", "List learned kernels");
  kernels->add_option("--name", kernel_name, "Only versions of this name");

  std::string sim_kernel, pairs_text, pairs_file;
  CLI::App* similarity = app.add_subcommand("similarity", "Kernel values K_ij for pairs");
  similarity->add_option("--kernel", sim_kernel, "NAME, NAME:VERSION or NAME@ALIAS")->required();
  auto* pairs_opt = similarity->add_option("--pairs", pairs_text, "Pairs 'i,j;i,j;...'");
  auto* pairs_file_opt = similarity->add_option("--pairs-file", pairs_file, "File of 'i,j' lines");
  pairs_opt->excludes(pairs_file_opt);

  TopKArgs topk_args;
  CLI::App* topk = app.add_subcommand("topk", "The k items most similar to an item, key or vector");
  topk->add_option("--kernel", topk_args.kernel, "NAME, NAME:VERSION or NAME@ALIAS")->required();
  topk_args.item_opt = topk->add_option("--item", topk_args.item, "Query item index");
  topk_args.key_opt = topk->add_option("--key", topk_args.key, "Query item key");
  topk_args.vector_opt = topk->add_option("--vector", topk_args.vector, "Query vector 'x,y,...' (length = rank)");
  topk_args.features_opt = topk->add_option(
      "--features", topk_args.features, "An item the kernel was not trained on: its raw features 'x,y,...'");
  topk_args.neighbors_opt =
      topk->add_option("--neighbors", topk_args.neighbors, "--features: nearest training points of the extension");
  topk_args.neighbors_opt->needs(topk_args.features_opt);
  topk->add_option("--k", topk_args.k, "How many items")->capture_default_str();
  topk->add_flag("--exclude-self", topk_args.exclude_self, "Leave the query item out");

  ReRankArgs rerank_args;
  CLI::App* rerank = app.add_subcommand("rerank", "Re-rank candidate items by VisualRank on a kernel");
  rerank->add_option("--kernel", rerank_args.kernel, "NAME, NAME:VERSION or NAME@ALIAS")->required();
  rerank->add_option("--candidates", rerank_args.candidates, "Candidate item indices 'i,j,...'");
  rerank->add_option("--keys", rerank_args.keys, "Candidate item keys 'a,b,...'");
  rerank->add_option("--prior", rerank_args.prior, "One prior score >= 0 per candidate (e.g. text scores)");
  rerank->add_option("--damping", rerank_args.damping, "VisualRank damping λ_d in [0, 1)")->capture_default_str();
  rerank->add_option("--k", rerank_args.k, "How many results (0 = all)");

  std::string strength_kernel, strength_pairs;
  CLI::App* strength = app.add_subcommand("strength", "Social strength f(u, v) for pairs of users");
  strength->add_option("--kernel", strength_kernel, "A social_strength kernel")->required();
  strength->add_option("--pairs", strength_pairs, "Pairs 'u,v;u,v;...'")->required();

  std::string recommend_kernel;
  int recommend_user = 0, recommend_k = 10;
  bool recommend_groups = false;
  CLI::App* recommend = app.add_subcommand("recommend", "Friend (default) or group suggestions for a user");
  recommend->add_option("--kernel", recommend_kernel, "A social_strength kernel")->required();
  recommend->add_option("--user", recommend_user, "User id")->required();
  recommend->add_option("--k", recommend_k, "How many suggestions")->capture_default_str();
  recommend->add_flag("--groups", recommend_groups, "Suggest groups instead of friends");

  std::string classify_kernel, classify_file;
  ClassifyUsersArgs classify_users;
  CLI::App* classify = app.add_subcommand(
      "classify", "Classify CSV rows (onk / mkl model) or users (social_strength model, harmonic §7.5.3)");
  classify->add_option("--kernel", classify_kernel, "An onk or mkl kernel, or a social_strength kernel")->required();
  CLI::Option* classify_file_opt =
      classify->add_option("file", classify_file, "CSV (header; an optional last column 'label' is compared)");
  CLI::Option* labelled_opt = classify->add_option("--labelled", classify_users.labelled,
                                                   "Users with known classes: \"user,class;user,class;...\"");
  classify_file_opt->excludes(labelled_opt);
  classify->add_option("--users", classify_users.users, "Users to classify: \"u,v,...\" (default: every user)")
      ->needs(labelled_opt);
  classify->add_flag("--mass-normalization", classify_users.mass_normalization,
                     "Class mass normalization (ZGL03 §5)")
      ->needs(labelled_opt);
  classify->callback([classify_file_opt, labelled_opt] {
    if (classify_file_opt->count() == 0 && labelled_opt->count() == 0) {
      throw CLI::RequiredError("classify needs FILE.csv (onk / mkl) or --labelled (social_strength)");
    }
  });

  std::string export_kernel, export_path;
  CLI::App* export_cmd = app.add_subcommand("export", "Download a kernel's embedding V (K = V Vᵀ) as CSV");
  export_cmd->add_option("--kernel", export_kernel, "NAME, NAME:VERSION or NAME@ALIAS")->required();
  export_cmd->add_option("--out", export_path, "CSV file to write (header v0..v{r-1})")->required();

  std::string import_file, import_name;
  CLI::App* import_cmd = app.add_subcommand("import", "Store an embedding V (CSV rows) as a kernel K = V Vᵀ");
  import_cmd->add_option("file", import_file, "CSV: header, one row per item; optional first column 'key'")
      ->required();
  import_cmd->add_option("--name", import_name, "Kernel name (the next version of it is created)")->required();

  CLI11_PARSE(app, argc, argv);

  // gRPC metadata values must be printable ASCII; say so instead of failing every call.
  if (!std::all_of(options.token.begin(), options.token.end(), [](char c) { return c > 0x20 && c < 0x7f; })) {
    return out.Failure(kls::InvalidArgumentError("--token (or KLS_TOKEN) has a space or a non-printable character"));
  }
  if (options.tls || !tls_ca.empty() || !tls_cert.empty() || !tls_key.empty()) {
    if (const kls::Status s = kls::LoadTlsFiles(tls_ca, tls_cert, tls_key, &options); !s.ok()) {
      return out.Failure(s);
    }
  }
  kls::Client client(options);
  if (health->parsed()) return RunHealth(client, out, service);
  if (info->parsed()) return RunInfo(client, out);
  if (echo->parsed()) return RunEcho(client, out, words);
  if (upload->parsed()) return RunUpload(client, out, upload_args);
  if (datasets->parsed()) return RunDatasets(client, out);
  if (submit->parsed()) return RunSubmit(client, out, submit_args);
  if (watch->parsed()) return WatchToEnd(client, out, job_id);
  if (get->parsed()) return RunGet(client, out, job_id);
  if (cancel->parsed()) return RunCancel(client, out, job_id);
  if (list->parsed()) return RunList(client, out, list_args);
  if (kernels->parsed()) return RunKernels(client, out, kernel_name);
  if (similarity->parsed()) {
    if (pairs_opt->count() + pairs_file_opt->count() != 1) {
      return out.Failure(kls::InvalidArgumentError("give --pairs or --pairs-file"));
    }
    return RunSimilarity(client, out, sim_kernel, pairs_text, pairs_file);
  }
  if (topk->parsed()) return RunTopK(client, out, topk_args);
  if (rerank->parsed()) return RunReRank(client, out, rerank_args);
  if (strength->parsed()) return RunStrength(client, out, strength_kernel, strength_pairs);
  if (recommend->parsed()) return RunRecommend(client, out, recommend_kernel, recommend_user, recommend_k, recommend_groups);
  if (classify->parsed()) {
    if (!classify_users.labelled.empty()) return RunClassifyUsers(client, out, classify_kernel, classify_users);
    return RunClassify(client, out, classify_kernel, classify_file);
  }
  if (export_cmd->parsed()) return RunExport(client, out, export_kernel, export_path);
  if (import_cmd->parsed()) return RunImport(client, out, import_file, import_name);
  return 2;  // unreachable: require_subcommand(1)
}
