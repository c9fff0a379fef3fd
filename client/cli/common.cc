// Shared pieces of the `kls` subcommands (common.h).
#include "client/cli/common.h"

#include <chrono>

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <iomanip>
#include <iostream>
#include <sstream>

namespace kls::cli {

int Output::Success(const json& object, const std::string& text) const {
  if (json_mode) {
    PrintJson(object);
  } else if (!text.empty()) {
    std::cout << text << (text.back() == '\n' ? "" : "\n");
  }
  return 0;
}

int Output::Failure(const kls::Status& status, json object) const {
  std::cerr << status.ToString() << "\n";
  if (json_mode) {
    object["error"] = {{"code", kls::StatusCodeName(status.code())}, {"message", status.message()}};
    PrintJson(object);
  }
  return 1;
}

void Output::PrintJson(const json& object) {
  // Echo payloads are arbitrary bytes: replace invalid UTF-8 rather than throw.
  std::cout << object.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
}

std::vector<Subcommand>& Subcommands() {
  static std::vector<Subcommand> all;
  return all;
}

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

std::vector<std::string> SplitNonEmpty(const std::string& text) {
  std::vector<std::string> out;
  for (const std::string& part : Split(text, ',')) {
    const std::string t = Trim(part);
    if (!t.empty()) out.push_back(t);
  }
  return out;
}

kls::StatusOr<std::vector<int>> ParseIndices(const std::string& text, const std::string& flag) {
  std::vector<int> out;
  for (const std::string& part : SplitNonEmpty(text)) {
    int v = 0;
    if (!ParseInt(part, &v) || v < 0) return kls::InvalidArgumentError(flag + ": '" + part + "' is not an item index");
    out.push_back(v);
  }
  return out;
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

std::string Fixed(double v, int digits) {
  std::ostringstream out;
  out << std::setprecision(digits) << v;
  return out.str();
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

// ---- Message → JSON ------------------------------------------------------------

const char* StateName(kls::v1::JobState s) {
  switch (s) {
    case kls::v1::QUEUED:
      return "QUEUED";
    case kls::v1::RUNNING:
      return "RUNNING";
    case kls::v1::SUCCEEDED:
      return "SUCCEEDED";
    case kls::v1::FAILED:
      return "FAILED";
    case kls::v1::CANCELLED:
      return "CANCELLED";
    default:
      return "UNSPECIFIED";
  }
}

bool IsTerminal(kls::v1::JobState s) {
  return s == kls::v1::SUCCEEDED || s == kls::v1::FAILED || s == kls::v1::CANCELLED;
}

json DatasetJson(const kls::v1::DatasetInfo& d) {
  json j = {{"id", d.id()},
          {"name", d.name()},
          {"num_points", d.num_points()},
          {"dim", d.dim()},
          {"num_classes", d.num_classes()},
          {"num_constraints", d.num_constraints()},
          {"created_unix_ms", d.created_unix_ms()},
          {"attributes", d.attributes()},
          {"attributes_version", d.attributes_version()}};
  if (d.has_generated()) {
    j["generated"] = {{"protocol", d.generated().protocol()},     {"seed", d.generated().seed()},
                      {"must_link", d.generated().must_link()},   {"cannot_link", d.generated().cannot_link()},
                      {"components", d.generated().components()}};
  }
  return j;
}

// A summary_json string as a JSON value: {} when empty, the raw string when it does not parse.
json SummaryJson(const std::string& text) {
  if (text.empty()) return json::object();
  json summary = json::parse(text, nullptr, /*allow_exceptions=*/false);
  return summary.is_discarded() ? json(text) : summary;
}

// {"gap":…, "lower_bound":…, "kkt_residual":…, "certified":…}: the members
// the solve had; null when the job or kernel has no certificate yet.
json CertificateJson(bool present, const kls::v1::Certificate& c) {
  if (!present) return nullptr;
  json out = {{"certified", c.certified()}};
  if (c.has_gap()) out["gap"] = c.gap();
  if (c.has_lower_bound()) out["lower_bound"] = c.lower_bound();
  if (c.has_kkt_residual()) out["kkt_residual"] = c.kkt_residual();
  return out;
}

std::string ProgressText(const kls::v1::Progress& p) {
  if (p.max_iterations() > 0) return std::to_string(p.iteration()) + "/" + std::to_string(p.max_iterations());
  // Families without an iteration budget (mkl, social, ...) report only a count.
  return p.iteration() > 0 ? std::to_string(p.iteration()) : std::string("-");
}

json ProgressJson(const kls::v1::Progress& p) {
  json out = {{"iteration", p.iteration()},
              {"max_iterations", p.max_iterations()},
              {"objective", p.objective()},
              {"primal_residual", p.primal_residual()},
              {"dual_residual", p.dual_residual()},
              {"elapsed_seconds", p.elapsed_seconds()}};
  if (p.has_gap()) out["gap"] = p.gap();
  if (p.has_step()) out["step"] = p.step();
  return out;
}

json JobJson(const kls::v1::Job& j) {
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
          {"progress", ProgressJson(j.progress())},
          {"created_unix_ms", j.created_unix_ms()},
          {"started_unix_ms", j.started_unix_ms()},
          {"finished_unix_ms", j.finished_unix_ms()},
          {"owner", j.owner()},
          {"lease_expires_unix_ms", j.lease_expires_unix_ms()},
          {"counted_failures", j.counted_failures()},
          {"last_attempt_end", j.last_attempt_end()},
          {"lost_attempts", j.lost_attempts()},
          {"not_before_unix_ms", j.not_before_unix_ms()},
          {"certificate", CertificateJson(j.has_certificate(), j.certificate())},
          {"summary", SummaryJson(j.summary_json())}};
}

json KernelJson(const kls::v1::KernelInfo& k) {
  const json summary = SummaryJson(k.summary_json());
  return {{"name", k.name()},
          {"version", k.version()},
          {"job_id", k.job_id()},
          {"dataset_id", k.dataset_id()},
          {"method", k.method()},
          {"num_points", k.num_points()},
          {"rank", k.rank()},
          {"certificate", CertificateJson(k.has_certificate(), k.certificate())},
          {"summary", summary},
          {"created_unix_ms", k.created_unix_ms()}};
}

std::string RefText(const kls::v1::KernelRef& r) {
  if (!r.alias().empty()) return r.name() + "@" + r.alias();
  if (r.version() > 0) return r.name() + ":" + std::to_string(r.version());
  return r.name();
}

// ---- Progress bars ------------------------------------------------------------------

ProgressBar::ProgressBar(bool enabled) : enabled_(enabled), tty_(StderrIsTerminal()) {}

bool ProgressBar::StderrIsTerminal() { return isatty(STDERR_FILENO) == 1; }

std::string ProgressBar::Bar(double fraction) {
  constexpr int kWidth = 24;
  const int filled = static_cast<int>(std::lround(std::clamp(fraction, 0.0, 1.0) * kWidth));
  return "[" + std::string(filled, '#') + std::string(kWidth - filled, '.') + "]";
}

std::string ProgressBar::Eta(double seconds) {
  std::ostringstream text;
  text << "ETA " << std::fixed << std::setprecision(0) << std::max(0.0, seconds) << "s";
  return text.str();
}

void ProgressBar::Show(const std::string& line, bool force) {
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

void ProgressBar::Update(const kls::v1::Job& job) {
  const bool state_changed = job.state() != last_state_;
  last_state_ = job.state();
  std::ostringstream line;
  const kls::v1::Progress& p = job.progress();
  line << job.id() << " " << StateName(job.state());
  if (p.max_iterations() > 0 || p.iteration() > 0) {
    const double fraction = p.max_iterations() > 0 ? double(p.iteration()) / p.max_iterations() : 0.0;
    line << " " << Bar(fraction) << " " << ProgressText(p) << "  objective "
         << std::setprecision(4) << std::scientific << p.objective() << std::defaultfloat;
    if (p.has_gap()) line << "  gap " << std::setprecision(2) << std::scientific << p.gap() << std::defaultfloat;
    if (p.iteration() > 0 && p.max_iterations() > p.iteration() && !IsTerminal(job.state())) {
      line << "  " << Eta(p.elapsed_seconds() / p.iteration() * (p.max_iterations() - p.iteration()));
    }
  }
  Show(line.str(), state_changed);
}

void ProgressBar::Finish() {
  if (tty_ && drawn_) std::cerr << "\n";
  drawn_ = false;
}

// ---- Jobs ------------------------------------------------------------------------------

namespace {

// `method auto`'s leaderboard (summary member "auto") as a table, best first;
// "" when the summary has none.
std::string LeaderboardText(const std::string& summary_json) {
  const json summary = SummaryJson(summary_json);
  if (!summary.is_object() || !summary.contains("auto") || !summary["auto"].is_object()) return "";
  const json& a = summary.at("auto");
  const json candidates = a.value("candidates", json::array());
  std::vector<json> rows(candidates.begin(), candidates.end());
  std::stable_sort(rows.begin(), rows.end(), [](const json& x, const json& y) {
    // Scored on all folds first, then screened on fold 0 (core/npkl/auto_select.h), each best first.
    auto rank = [](const json& r) {
      const std::string s = r.value("status", "");
      return s == "scored" ? 0 : s == "screened" ? 1 : 2;
    };
    if (rank(x) != rank(y)) return rank(x) < rank(y);
    return rank(x) < 2 && x.value("mean", 0.0) > y.value("mean", 0.0);
  });
  const std::string chosen = a.value("chosen", "");
  std::ostringstream t;
  t << "leaderboard     " << a.value("score", "") << " score, " << a.value("folds", 0) << " folds";
  if (!chosen.empty()) t << "; chosen " << chosen;
  const json refine = a.value("refine", json::object());
  if (refine.value("chosen", false)) {  // the winner's value refined on the same folds (core/npkl/auto_select.h)
    t << " at " << Fixed(refine.value("value", 0.0), 4) << " (refined from " << Fixed(refine.value("from", 0.0), 4)
      << ": mean " << Fixed(refine.value("mean", 0.0), 4) << ")";
  }
  if (a.value("budget_reached", false)) t << "; budget of " << Fixed(a.value("budget_seconds", 0.0), 3) << " s reached";
  t << "\n";
  std::vector<std::vector<std::string>> table = {{"", "candidate", "scaling", "kind", "value", "mean +- sd", "seconds", "status"}};
  for (const json& r : rows) {
    const bool scored = r.value("status", "") == "scored" || r.value("status", "") == "screened";
    std::ostringstream score;
    if (scored) score << std::fixed << std::setprecision(4) << r.value("mean", 0.0) << " +- " << r.value("sd", 0.0);
    table.push_back({r.value("name", "") + "@" + r.value("scaling", "") == chosen ? "*" : "", r.value("name", ""),
                     r.value("scaling", ""), r.value("kind", ""), scored ? Fixed(r.value("value", 0.0), 4) : "-",
                     scored ? score.str() : "-", Fixed(r.value("seconds", 0.0), 3),
                     r.value("status", "") + (r.contains("error") ? ": " + r.value("error", "") : std::string())});
  }
  t << Table(table);
  return t.str();
}

}  // namespace

std::string JobText(const kls::v1::Job& j) {
  std::ostringstream text;
  text << "id              " << j.id() << "\n"
       << "state           " << StateName(j.state()) << "\n"
       << "method          " << j.method() << "\n"
       << "dataset         " << j.dataset_id() << "\n"
       << "kernel          " << j.kernel_name()
       << (j.kernel_version() > 0 ? ":" + std::to_string(j.kernel_version()) : std::string()) << "\n"
       << "priority        " << j.priority() << "\n"
       << "attempts        " << j.attempts() << " (" << j.counted_failures() << " counted failures"
       << (j.lost_attempts() > 0 ? ", " + std::to_string(j.lost_attempts()) + " lost in a row" : std::string())
       << (j.last_attempt_end().empty() ? std::string() : "; last ended " + j.last_attempt_end()) << ")\n"
       << "progress        " << ProgressText(j.progress()) << "  objective " << Fixed(j.progress().objective())
       << (j.progress().has_gap() ? "  gap " + Fixed(j.progress().gap(), 3) : std::string()) << "  "
       << Fixed(j.progress().elapsed_seconds(), 3) << " s\n";
  if (j.state() == kls::v1::QUEUED && j.not_before_unix_ms() > 0) {
    const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::system_clock::now().time_since_epoch()).count();
    if (j.not_before_unix_ms() > now_ms) {
      text << "back-off        starts again in "
           << Fixed(static_cast<double>(j.not_before_unix_ms() - now_ms) / 1000.0, 1) << " s\n";
    }
  }
  if (!j.owner().empty()) {
    const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::system_clock::now().time_since_epoch()).count();
    text << "owner           " << j.owner() << "  lease expires in "
         << Fixed(static_cast<double>(j.lease_expires_unix_ms() - now_ms) / 1000.0, 1) << " s\n";
  }
  if (!j.termination().empty()) text << "termination     " << j.termination() << "\n";
  if (!j.error().empty()) text << "error           " << j.error() << "\n";
  if (!j.summary_json().empty()) text << "summary         " << j.summary_json() << "\n";
  text << LeaderboardText(j.summary_json());
  return text.str();
}

kls::StatusOr<std::string> ResolveDataset(kls::Client& client, const std::string& id_or_name, const std::string& flag) {
  const auto by_id = client.GetDataset(id_or_name);
  if (by_id.ok()) return by_id->id();
  if (by_id.status().code() != kls::StatusCode::kNotFound) return by_id.status();
  const auto all = client.ListDatasets();
  if (!all.ok()) return all.status();
  const kls::v1::DatasetInfo* newest = nullptr;
  for (const kls::v1::DatasetInfo& d : *all) {
    if (d.name() == id_or_name && (newest == nullptr || d.created_unix_ms() > newest->created_unix_ms())) newest = &d;
  }
  if (newest == nullptr) {
    return kls::NotFoundError(flag + " = '" + id_or_name + "': no data set has this id or name (kls datasets list)");
  }
  return newest->id();
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

}  // namespace kls::cli
