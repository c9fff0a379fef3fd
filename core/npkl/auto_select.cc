#include "core/npkl/auto_select.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>
#include <set>

#include "core/common/json_text.h"
#include "core/common/parallel.h"
#include "core/eval/baselines.h"
#include "core/npkl/baseline_guard.h"

namespace kls {
namespace {

// An entry without a score yet: `status` "budget" or "failed".
AutoEntry Unscored(const AutoCandidate& c, const char* status) {
  AutoEntry e;
  e.name = c.name;
  e.scaling = c.scaling;
  e.baseline = c.baseline;
  e.status = status;
  return e;
}

// The entry of a finished cross-validation: its best value's fold scores.
AutoEntry Scored(const AutoCandidate& c, const CrossValidationResult& r, double seconds) {
  AutoEntry e = Unscored(c, "scored");
  const CrossValidationCandidate& best = r.candidates[r.best_index];
  e.value = best.value;
  e.fold_scores = best.fold_scores;
  e.mean = best.mean_score;
  double ss = 0.0;
  for (double s : best.fold_scores) ss += (s - e.mean) * (s - e.mean);
  e.sd = best.fold_scores.size() > 1 ? std::sqrt(ss / static_cast<double>(best.fold_scores.size() - 1)) : 0.0;
  for (const CrossValidationCandidate& v : r.candidates) {
    e.grid.push_back(v.value);
    e.grid_means.push_back(v.mean_score);
  }
  e.seconds = seconds;
  return e;
}

// The best learned and the best plain entry (file comment: a plain kernel
// needs a lead of r->margin).
void PickBest(AutoSelectResult* r) {
  int learned = -1, plain = -1;
  for (size_t i = 0; i < r->entries.size(); ++i) {
    const AutoEntry& e = r->entries[i];
    if (e.status != "scored") continue;
    int& slot = e.baseline ? plain : learned;
    if (slot < 0 || e.mean > r->entries[slot].mean) slot = static_cast<int>(i);
  }
  r->best = learned;
  if (plain >= 0 && (learned < 0 || r->entries[plain].mean >= r->entries[learned].mean + r->margin)) r->best = plain;
}

}  // namespace

Status AutoSelectOptions::Validate() const {
  if (folds < 2 || folds > 20) {
    return InvalidArgumentError("auto.folds = " + std::to_string(folds) + " must be in [2, 20]");
  }
  if (clusters != 0 && (clusters < 2 || clusters > 1000)) {
    return InvalidArgumentError("auto.clusters = " + std::to_string(clusters) +
                                " must be 0 (threshold score) or in [2, 1000]");
  }
  if (num_threads < 0 || num_threads > kMaxSolverThreads) {
    return InvalidArgumentError("auto.num_threads = " + std::to_string(num_threads) + " must be in [0, " +
                                std::to_string(kMaxSolverThreads) + "]");
  }
  if (!(std::isfinite(max_seconds) && max_seconds >= 0.0)) {
    return InvalidArgumentError("auto.max_seconds = " + JsonNumber(max_seconds) + " must be finite and >= 0 (0 = none)");
  }
  if (!(std::isfinite(reference_multiple) && reference_multiple >= 0.0)) {
    return InvalidArgumentError("auto.reference_multiple = " + JsonNumber(reference_multiple) + " must be finite and >= 0");
  }
  return OkStatus();
}

std::string AutoSelectResult::Json() const {
  std::string out = "{\"score\":\"" + std::string(clusters ? "kmeans" : "threshold") + "\"";
  if (clusters) out += ",\"clusters\":" + std::to_string(clusters);
  out += ",\"folds\":" + std::to_string(folds);
  out += ",\"budget_seconds\":" + JsonNumber(budget_seconds);
  out += ",\"held_out_pairs\":" + std::to_string(held_out_pairs) + ",\"margin\":" + JsonNumber(margin);
  out += std::string(",\"budget_reached\":") + (budget_reached ? "true" : "false");
  if (best >= 0) out += ",\"chosen\":\"" + JsonEscaped(entries[best].Key()) + "\"";
  out += ",\"candidates\":[";
  for (size_t i = 0; i < entries.size(); ++i) {
    const AutoEntry& e = entries[i];
    out += (i ? ",{" : "{") + std::string("\"name\":\"") + JsonEscaped(e.name) + "\",\"scaling\":\"" +
           JsonEscaped(e.scaling) + "\",\"kind\":\"" + (e.baseline ? "plain" : "learned") + "\",\"status\":\"" +
           e.status + "\"";
    if (e.status == "scored") {
      out += ",\"value\":" + JsonNumber(e.value) + ",\"mean\":" + JsonNumber(e.mean) + ",\"sd\":" + JsonNumber(e.sd) +
             ",\"fold_scores\":" + JsonArray(e.fold_scores) + ",\"grid\":" + JsonArray(e.grid) +
             ",\"grid_means\":" + JsonArray(e.grid_means);
    }
    if (!e.error.empty()) out += ",\"error\":\"" + JsonEscaped(e.error) + "\"";
    out += ",\"seconds\":" + JsonNumber(e.seconds) + "}";
  }
  return out + "],\"seconds\":" + JsonNumber(seconds) + "}";
}

StatusOr<AutoSelectResult> AutoSelect(const PairwiseConstraints& constraints,
                                      const std::vector<AutoCandidate>& candidates, const AutoSelectOptions& options,
                                      const SolveControl& control, const std::vector<AutoEntry>& done,
                                      const std::function<void(const AutoSelectResult&)>& after_each) {
  KLS_RETURN_IF_ERROR(options.Validate());
  if (candidates.empty()) return InvalidArgumentError("auto: no candidate to evaluate");
  std::set<std::string> keys;
  for (const AutoCandidate& c : candidates) {
    if (!keys.insert(c.Key()).second) return InvalidArgumentError("auto: candidate " + c.Key() + " listed twice");
    if (c.grid.empty() || !c.learn) return InvalidArgumentError("auto: candidate " + c.Key() + " has no grid or learn");
  }
  // The folds are CrossValidate's; checked once here so that "too few pairs"
  // is one error, not one per candidate.
  KLS_RETURN_IF_ERROR(AssignPairFolds(constraints, options.folds, options.seed).status());
  int held_out_pairs = 0;  // every pair i != j is held out by exactly one fold
  for (const Pair& p : constraints.pairs) held_out_pairs += p.i != p.j ? 1 : 0;
  std::map<std::string, AutoEntry> restored;
  for (const AutoEntry& e : done) restored[e.Key()] = e;

  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  double restored_seconds = 0.0;
  for (const AutoEntry& e : done) restored_seconds += keys.count(e.Key()) ? e.seconds : 0.0;
  auto elapsed = [&] { return restored_seconds + std::chrono::duration<double>(Clock::now() - start).count(); };

  AutoSelectResult r;
  r.folds = options.folds;
  r.clusters = options.clusters;
  r.budget_seconds = options.max_seconds;
  r.held_out_pairs = held_out_pairs;
  r.margin = PlainKernelMargin(held_out_pairs);
  for (size_t i = 0; i < candidates.size(); ++i) {
    const AutoCandidate& c = candidates[i];
    if (auto it = restored.find(c.Key()); it != restored.end() && it->second.status != "budget") {
      r.entries.push_back(it->second);
    } else if (r.budget_reached) {
      r.entries.push_back(Unscored(c, "budget"));
    } else {
      KLS_RETURN_IF_ERROR(control.CheckStop("auto"));
      SolveControl inner;  // cancellation and the earlier of the job's deadline and the budget
      inner.cancel = control.cancel;
      inner.stop_requested = control.stop_requested;
      inner.deadline = control.deadline;
      if (r.budget_seconds > 0.0) {
        const double left = r.budget_seconds - elapsed();
        if (left <= 0.0) {
          r.budget_reached = true;
          r.entries.push_back(Unscored(c, "budget"));
          continue;
        }
        inner.deadline = std::min(inner.deadline, Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                                      std::chrono::duration<double>(left)));
      }
      CrossValidationOptions cv;
      cv.folds = options.folds;
      cv.seed = options.seed;
      cv.clusters = options.clusters;
      cv.num_threads = options.num_threads;
      cv.grid = c.grid;
      const Stopwatch watch;
      StatusOr<CrossValidationResult> cvr = CrossValidate(constraints, c.learn, cv, inner);
      if (cvr.ok()) {
        r.entries.push_back(Scored(c, *cvr, watch.Seconds()));
      } else {
        KLS_RETURN_IF_ERROR(control.CheckStop("auto"));  // the job's own cancellation or deadline
        AutoEntry e = Unscored(c, "failed");
        e.seconds = watch.Seconds();
        if (cvr.status().code() == StatusCode::kDeadlineExceeded || cvr.status().code() == StatusCode::kCancelled) {
          e.status = "budget";  // only the budget's deadline can have passed
          r.budget_reached = true;
        } else {
          e.error = cvr.status().ToString();
        }
        r.entries.push_back(std::move(e));
      }
    }
    if (i == 0 && options.max_seconds == 0.0 && options.reference_multiple > 0.0) {
      r.budget_seconds = options.reference_multiple * std::max(r.entries.front().seconds, 1e-3);
    }
    PickBest(&r);
    r.seconds = elapsed();
    if (after_each) after_each(r);
  }
  PickBest(&r);
  r.seconds = elapsed();
  if (r.best < 0) {
    std::string why;
    for (const AutoEntry& e : r.entries) {
      why += (why.empty() ? "" : "; ") + e.Key() + ": " + (e.error.empty() ? e.status : e.error);
    }
    return FailedPreconditionError("auto: no candidate could be scored (" + why + ")");
  }
  return r;
}

std::vector<AutoSlot> AutoOrder(int scalings) {
  std::vector<AutoSlot> order = {{0, -1, 0}};  // the reference
  auto all = [&](int family, int plain, int first_scaling) {
    for (int s = first_scaling; s < scalings; ++s) order.push_back({family, plain, s});
  };
  all(-1, 0, 0);  // linear
  all(1, -1, 0);  // bcd_npkl/square
  all(0, -1, 1);  // kl_admm on the other scalings
  all(-1, 1, 0);  // rbf
  for (int f = 2; f < static_cast<int>(std::size(kAutoFamilies)); ++f) all(f, -1, 0);
  return order;
}

StatusOr<LearnedKernel> PlainKernel(const Eigen::MatrixXd& features, const std::string& name, double value,
                                    const PlainKernelOptions& options) {
  if (name == "linear") {
    KLS_ASSIGN_OR_RETURN(Eigen::MatrixXd v, LinearKernelFactor(features));
    return LearnedKernel::FromEmbedding(std::move(v));
  }
  if (name == "rbf") {
    KLS_ASSIGN_OR_RETURN(double median, MedianSquaredDistance(features));
    if (!(median > 0)) median = 1.0;  // every point identical: any width gives the same kernel
    RbfOptions rbf;
    rbf.max_exact_points = options.max_exact_points;
    KLS_ASSIGN_OR_RETURN(Eigen::MatrixXd v, RbfKernelFactor(features, value * median, rbf));
    if (options.max_rank > 0 && v.cols() > options.max_rank) {  // the leading directions: largest column norms
      std::vector<int> cols(v.cols());
      for (int c = 0; c < v.cols(); ++c) cols[c] = c;
      const Eigen::VectorXd norms = v.colwise().squaredNorm().transpose();
      std::partial_sort(cols.begin(), cols.begin() + options.max_rank, cols.end(),
                        [&](int a, int b) { return norms(a) > norms(b); });
      Eigen::MatrixXd top(v.rows(), options.max_rank);
      for (int c = 0; c < options.max_rank; ++c) top.col(c) = v.col(cols[c]);
      v = std::move(top);
    }
    return LearnedKernel::FromEmbedding(std::move(v));
  }
  return InvalidArgumentError("plain kernel \"" + name + "\" is not one of linear, rbf");
}

AutoCandidate PlainKernelCandidate(std::shared_ptr<const Eigen::MatrixXd> features, const std::string& name,
                                   const std::string& scaling, int clusters, const PlainKernelOptions& options) {
  // The factor does not depend on the training pairs: one per value, shared by the folds.
  auto cache = std::make_shared<std::map<double, std::shared_ptr<const LearnedKernel>>>();
  auto mutex = std::make_shared<std::mutex>();
  AutoCandidate c;
  c.name = name;
  c.scaling = scaling;
  c.baseline = true;
  c.grid = name == "linear" || clusters == 0 ? std::vector<double>{1.0} : options.rbf_multiples;
  c.learn = [features, name, options, cache, mutex](const PairwiseConstraints&, double value,
                                                     const SolveControl& control) -> StatusOr<LearnedKernel> {
    std::lock_guard<std::mutex> lock(*mutex);
    auto it = cache->find(value);
    if (it == cache->end()) {
      KLS_RETURN_IF_ERROR(control.CheckStop("plain kernel"));
      KLS_ASSIGN_OR_RETURN(LearnedKernel k, PlainKernel(*features, name, value, options));
      it = cache->emplace(value, std::make_shared<const LearnedKernel>(std::move(k))).first;
    }
    return *it->second;
  };
  return c;
}

}  // namespace kls
