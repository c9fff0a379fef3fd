#include "server/jobs/convergence_history.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace kls::server {
namespace {

constexpr const char* kMember = "\"convergence\":{";

// The member's arrays, in the order they are written.
constexpr const char* kArrays[] = {"iteration", "objective", "primal_residual", "dual_residual",
                                   "elapsed_seconds"};
// Optional arrays, written when some point has a finite value (null where
// one has none) and NaN when absent (histories stored before them).
struct OptionalArray {
  const char* name;
  double ProgressEvent::*field;
};
constexpr OptionalArray kOptionalArrays[] = {{"gap", &ProgressEvent::gap}, {"step", &ProgressEvent::step}};

std::string Number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.10g", std::isfinite(v) ? v : 0.0);
  return buf;
}

}  // namespace

ConvergenceHistory::ConvergenceHistory(int max_points) : max_points_(std::max(2, max_points)) {
  kept_.reserve(static_cast<size_t>(max_points_));
}

void ConvergenceHistory::Add(const ProgressEvent& event) {
  latest_ = event;
  latest_kept_ = false;
  if (reports_ % stride_ == 0) {
    kept_.push_back(event);
    latest_kept_ = true;
    if (static_cast<int>(kept_.size()) == max_points_) {
      // Keep reports 0, 2·stride, 4·stride, …: every other kept one. The
      // latest (at an odd position) goes; Points() appends it.
      size_t out = 0;
      for (size_t t = 0; t < kept_.size(); t += 2) kept_[out++] = kept_[t];
      kept_.resize(out);
      stride_ *= 2;
      latest_kept_ = false;
    }
  }
  ++reports_;
}

std::vector<ProgressEvent> ConvergenceHistory::Points() const {
  std::vector<ProgressEvent> points = kept_;
  if (reports_ > 0 && !latest_kept_) points.push_back(latest_);
  return points;
}

std::string WithConvergence(const std::string& summary_json, const std::vector<ProgressEvent>& points) {
  if (points.empty()) return summary_json;
  const size_t close = summary_json.find_last_of('}');
  if (summary_json.empty() || summary_json.front() != '{' || close == std::string::npos) return summary_json;
  // Whether the object already has a member: anything but blanks before '}'.
  const size_t last = summary_json.find_last_not_of(" \t\r\n", close - 1);
  const bool has_members = last != std::string::npos && last > 0;

  std::string member = kMember;
  for (size_t a = 0; a < std::size(kArrays); ++a) {
    if (a > 0) member += ',';
    member += '"';
    member += kArrays[a];
    member += "\":[";
    for (size_t t = 0; t < points.size(); ++t) {
      if (t > 0) member += ',';
      const ProgressEvent& e = points[t];
      switch (a) {
        case 0: member += std::to_string(e.iteration); break;
        case 1: member += Number(e.objective); break;
        case 2: member += Number(e.primal_residual); break;
        case 3: member += Number(e.dual_residual); break;
        default: member += Number(e.elapsed_seconds); break;
      }
    }
    member += ']';
  }
  for (const OptionalArray& a : kOptionalArrays) {
    if (std::none_of(points.begin(), points.end(), [&](const ProgressEvent& e) { return std::isfinite(e.*a.field); }))
      continue;
    member += ",\"" + std::string(a.name) + "\":[";
    for (size_t t = 0; t < points.size(); ++t) {
      if (t > 0) member += ',';
      const double v = points[t].*a.field;
      member += std::isfinite(v) ? Number(v) : "null";
    }
    member += ']';
  }
  member += '}';
  return summary_json.substr(0, close) + (has_members ? "," : "") + member + summary_json.substr(close);
}

std::string WithoutConvergence(const std::string& summary_json) {
  const size_t start = summary_json.find(kMember);
  if (start == std::string::npos) return summary_json;
  // The member's value holds arrays of numbers only: its first '}' closes it.
  const size_t end = summary_json.find('}', start + std::char_traits<char>::length(kMember));
  if (end == std::string::npos) return summary_json;
  size_t from = start, to = end + 1;
  if (from > 0 && summary_json[from - 1] == ',') {
    --from;  // ",\"convergence\":{…}" — the usual place, last
  } else if (to < summary_json.size() && summary_json[to] == ',') {
    ++to;  // "{\"convergence\":{…}," — first
  }
  return summary_json.substr(0, from) + summary_json.substr(to);
}

std::optional<std::vector<ProgressEvent>> ConvergenceFromSummary(const std::string& summary_json) {
  if (summary_json.find(kMember) == std::string::npos) return std::nullopt;
  google::protobuf::Struct summary;
  if (!google::protobuf::util::JsonStringToMessage(summary_json, &summary).ok()) return std::nullopt;
  const auto member = summary.fields().find("convergence");
  if (member == summary.fields().end() || !member->second.has_struct_value()) return std::nullopt;
  const auto& fields = member->second.struct_value().fields();
  std::vector<const google::protobuf::ListValue*> arrays;
  for (const char* name : kArrays) {
    const auto it = fields.find(name);
    if (it == fields.end() || !it->second.has_list_value()) return std::nullopt;
    arrays.push_back(&it->second.list_value());
  }
  const int size = arrays[0]->values_size();
  for (const auto* a : arrays) {
    if (a->values_size() != size) return std::nullopt;
    for (const auto& v : a->values())
      if (!v.has_number_value()) return std::nullopt;
  }
  std::vector<ProgressEvent> points(static_cast<size_t>(size));
  for (int t = 0; t < size; ++t) {
    ProgressEvent& e = points[static_cast<size_t>(t)];
    e.iteration = static_cast<int>(arrays[0]->values(t).number_value());
    e.objective = arrays[1]->values(t).number_value();
    e.primal_residual = arrays[2]->values(t).number_value();
    e.dual_residual = arrays[3]->values(t).number_value();
    e.elapsed_seconds = arrays[4]->values(t).number_value();
  }
  for (const OptionalArray& a : kOptionalArrays) {
    const auto it = fields.find(a.name);
    if (it == fields.end() || !it->second.has_list_value()) continue;
    const google::protobuf::ListValue& values = it->second.list_value();
    if (values.values_size() != size) return std::nullopt;
    for (int t = 0; t < size; ++t)
      if (values.values(t).has_number_value()) points[static_cast<size_t>(t)].*a.field = values.values(t).number_value();
  }
  return points;
}

}  // namespace kls::server
