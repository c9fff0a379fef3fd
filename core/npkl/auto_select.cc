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

double SampleSd(const std::vector<double>& v, double mean);

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
  e.sd = SampleSd(best.fold_scores, e.mean);
  for (const CrossValidationCandidate& v : r.candidates) {
    e.grid.push_back(v.value);
    e.grid_means.push_back(v.mean_score);
  }
  e.seconds = seconds;
  return e;
}

// The screening score of `e`: its best grid value's score on fold 0; its
// mean when it has none (an entry of a checkpoint from before the screening).
double ScreenScore(const AutoEntry& e) {
  return e.screen_means.empty() ? e.mean : *std::max_element(e.screen_means.begin(), e.screen_means.end());
}

// Whether `e` has a screening score (ScreenScore).
bool HasScreenScore(const AutoEntry& e) {
  return e.status != "failed" && (!e.screen_means.empty() || e.status == "scored");
}

// The best learned and the best plain entry (file comment: a plain kernel
// needs a lead of the margin), compared at one depth: all the folds when the
// screening's best learned entry is scored on all of them (or, with no
// learned entry screened, when a plain one is); else the screening's fold 0,
// every screened entry by its screening score — so that the budget cutting
// the leader's other folds never hands the win to a cheaper candidate that
// was scored on all folds (the reference always is).
void PickBest(AutoSelectResult* r) {
  int top = -1;  // the best learned entry by screening score (ties: the first)
  bool any_full = false;
  for (size_t i = 0; i < r->entries.size(); ++i) {
    const AutoEntry& e = r->entries[i];
    any_full = any_full || (e.baseline && e.status == "scored");
    if (e.baseline || !HasScreenScore(e)) continue;
    if (top < 0 || ScreenScore(e) > ScreenScore(r->entries[top])) top = static_cast<int>(i);
  }
  const bool full = top >= 0 ? r->entries[top].status == "scored" : any_full;
  auto score = [&](const AutoEntry& e) { return full ? e.mean : ScreenScore(e); };
  auto eligible = [&](const AutoEntry& e) {
    return full ? e.status == "scored" : HasScreenScore(e);
  };
  int learned = -1, plain = -1;
  for (size_t i = 0; i < r->entries.size(); ++i) {
    const AutoEntry& e = r->entries[i];
    if (!eligible(e)) continue;
    int& slot = e.baseline ? plain : learned;
    if (slot < 0 || score(e) > score(r->entries[slot])) slot = static_cast<int>(i);
  }
  const double margin = full ? r->margin : r->screen_margin;
  r->best = learned;
  if (plain >= 0 && (learned < 0 || score(r->entries[plain]) >= score(r->entries[learned]) + margin)) r->best = plain;
  r->chosen_folds = r->best < 0 ? 0 : full ? r->folds : 1;
}

// The leaders of the screening (file comment), plain ones first (their other
// folds cost only the scores), then the learned ones by screening score,
// best first (ties: in the candidates' order).
std::vector<int> Leaders(const AutoSelectResult& r) {
  double top[2] = {-1.0, -1.0};  // the best screening score: learned, plain
  for (const AutoEntry& e : r.entries) {
    if (!HasScreenScore(e)) continue;
    top[e.baseline] = std::max(top[e.baseline], ScreenScore(e));
  }
  std::vector<int> plain, learned;
  for (size_t i = 0; i < r.entries.size(); ++i) {
    const AutoEntry& e = r.entries[i];
    if (!HasScreenScore(e) || ScreenScore(e) < top[e.baseline] - r.screen_margin) continue;
    (e.baseline ? plain : learned).push_back(static_cast<int>(i));
  }
  std::stable_sort(learned.begin(), learned.end(),
                   [&](int a, int b) { return ScreenScore(r.entries[a]) > ScreenScore(r.entries[b]); });
  plain.insert(plain.end(), learned.begin(), learned.end());
  return plain;
}

// The entry of a screened candidate: fold 0's score at every grid value
// (ascending), its best value's (the first of equal ones) as its score.
AutoEntry ScreenedEntry(const AutoCandidate& c, const std::vector<double>& grid, const std::vector<double>& means,
                        double seconds) {
  AutoEntry e = Unscored(c, "screened");
  const int best = FirstLargest(means);
  e.value = grid[best];
  e.mean = means[best];
  e.fold_scores = {e.mean};
  e.grid = grid;
  e.grid_means = means;
  e.screen_means = means;
  e.seconds = e.screen_seconds = seconds;
  return e;
}

// The cross-validation over all the folds of a screened entry `e` and its
// other folds `rest` (CrossValidate on only_folds 1..k-1, the same grid): the
// fold scores in fold order, their means summed in the same order as
// CrossValidate's, so a candidate scores exactly what one call on all the
// folds gives it.
StatusOr<CrossValidationResult> WithScreening(const AutoEntry& e, const CrossValidationResult& rest) {
  if (rest.candidates.size() != e.screen_means.size()) {
    return InternalError("auto: " + e.Key() + "'s screening has " + std::to_string(e.screen_means.size()) +
                         " grid values, its other folds " + std::to_string(rest.candidates.size()));
  }
  CrossValidationResult all = rest;
  for (size_t v = 0; v < all.candidates.size(); ++v) {
    CrossValidationCandidate& c = all.candidates[v];
    c.fold_scores.insert(c.fold_scores.begin(), e.screen_means[v]);
  }
  all.Score();
  return all;
}

// The reference's cross-validation seconds (the default budget's unit): its
// seconds, scaled to all `folds` when it was screened on one.
double ReferenceSeconds(const AutoEntry& e, int folds) {
  const size_t n = e.fold_scores.size();
  return n > 0 && n < static_cast<size_t>(folds) ? e.seconds * folds / static_cast<double>(n) : e.seconds;
}

// Sample standard deviation of `v` around `mean`; 0 for fewer than 2 values.
double SampleSd(const std::vector<double>& v, double mean) {
  double ss = 0.0;
  for (double s : v) ss += (s - mean) * (s - mean);
  return v.size() > 1 ? std::sqrt(ss / static_cast<double>(v.size() - 1)) : 0.0;
}

// The refinement's expected cost (file comment): 1.5 × the leading learned
// entry's seconds per grid value on all the folds (a screened leader's fold-0
// seconds × the folds: the screening leaves room for the refinement the
// winner gets when its other folds fit too); 0 without a scored or screened
// learned entry.
double RefineReserve(const AutoSelectResult& r) {
  int leader = -1;
  for (size_t i = 0; i < r.entries.size(); ++i) {
    const AutoEntry& e = r.entries[i];
    if ((e.status == "scored" || e.status == "screened") && !e.baseline &&
        (leader < 0 || e.mean > r.entries[leader].mean)) {
      leader = static_cast<int>(i);
    }
  }
  if (leader < 0 || r.entries[leader].grid.size() < 2) return 0.0;
  return 1.5 * ReferenceSeconds(r.entries[leader], r.folds) / static_cast<double>(r.entries[leader].grid.size());
}

// The expected cost of screening a candidate named `name` (file comment,
// "Budget"): the seconds its twin on another scaling took in this round
// (screened, or cut by the budget: at least that); 0 without one.
double TwinSeconds(const AutoSelectResult& r, const std::string& name) {
  double seconds = 0.0;
  for (const AutoEntry& e : r.entries) {
    if (e.name == name) seconds = std::max(seconds, e.screen_seconds > 0.0 ? e.screen_seconds : e.seconds);
  }
  return seconds;
}

// The refinement's candidate value for `e` (file comment); 0 when there is none.
double RefineValue(const AutoEntry& e) {
  if (e.baseline || e.grid.size() < 2 || e.grid.size() != e.grid_means.size()) return 0.0;
  const auto at = std::find(e.grid.begin(), e.grid.end(), e.value);
  if (at == e.grid.end()) return 0.0;
  const size_t i = static_cast<size_t>(at - e.grid.begin());
  size_t u = i == 0 ? 1 : i - 1;
  if (i > 0 && i + 1 < e.grid.size() && e.grid_means[i + 1] >= e.grid_means[i - 1]) u = i + 1;
  return std::sqrt(e.value * e.grid[u]);
}

// The refinement of r->entries[r->best] (file comment), within `deadline`.
Status Refine(const PairwiseConstraints& constraints, const AutoCandidate& c, const AutoSelectOptions& options,
              const SolveControl& control, std::chrono::steady_clock::time_point deadline, bool out_of_budget,
              const AutoRefinement* done, AutoSelectResult* r, bool* restored) {
  const AutoEntry& w = r->entries[r->best];
  AutoRefinement& f = r->refine;
  f = AutoRefinement();
  f.key = w.Key();
  f.from = w.value;
  f.value = RefineValue(w);
  if (f.value <= 0.0) {
    f.status = "skipped";
    f.error = w.baseline ? "a plain kernel won" : "one grid value: nothing to refine";
    return OkStatus();
  }
  if (done != nullptr && done->key == f.key && done->from == f.from && done->value == f.value &&
      done->status != "budget" && (done->status != "scored" || done->fold_scores.size() == w.fold_scores.size())) {
    f = *done;
    *restored = true;
    return OkStatus();
  }
  if (out_of_budget || std::chrono::steady_clock::now() >= deadline) {
    f.status = "budget";
    return OkStatus();
  }
  KLS_RETURN_IF_ERROR(control.CheckStop("auto"));
  const SolveControl inner = control.StopConditions(deadline);
  CrossValidationOptions cv = options.CrossValidation({f.value});
  if (w.fold_scores.size() < static_cast<size_t>(options.folds)) cv.only_folds = {0};  // decided on the screening
  const Stopwatch watch;
  StatusOr<CrossValidationResult> cvr = CrossValidate(constraints, c.learn, cv, inner);
  f.seconds = watch.Seconds();
  if (!cvr.ok()) {
    KLS_RETURN_IF_ERROR(control.CheckStop("auto"));  // the job's own cancellation or deadline
    const StatusCode code = cvr.status().code();
    f.status = code == StatusCode::kDeadlineExceeded || code == StatusCode::kCancelled ? "budget" : "failed";
    if (f.status == "failed") f.error = cvr.status().ToString();
    return OkStatus();
  }
  f.status = "scored";
  f.fold_scores = cvr->candidates.front().fold_scores;
  f.mean = cvr->candidates.front().mean_score;
  f.sd = SampleSd(f.fold_scores, f.mean);
  f.chosen = f.mean > w.mean;
  return OkStatus();
}

}  // namespace

double AutoSelectResult::ChosenValue() const {
  if (refine.chosen) return refine.value;
  return best >= 0 ? entries[best].value : 0.0;
}

std::string AutoRefinement::Json() const {
  std::string out = "{\"candidate\":\"" + JsonEscaped(key) + "\",\"status\":\"" + JsonEscaped(status) + "\"";
  if (status != "skipped") out += ",\"from\":" + JsonNumber(from) + ",\"value\":" + JsonNumber(value);
  if (status == "scored") {
    out += ",\"mean\":" + JsonNumber(mean) + ",\"sd\":" + JsonNumber(sd) + ",\"fold_scores\":" + JsonArray(fold_scores);
  }
  out += std::string(",\"chosen\":") + (chosen ? "true" : "false");
  if (!error.empty()) out += ",\"error\":\"" + JsonEscaped(error) + "\"";
  return out + ",\"seconds\":" + JsonNumber(seconds) + "}";
}

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

CrossValidationOptions AutoSelectOptions::CrossValidation(std::vector<double> grid) const {
  CrossValidationOptions cv;
  cv.folds = folds;
  cv.seed = seed;
  cv.clusters = clusters;
  cv.num_threads = num_threads;
  cv.grid = std::move(grid);
  return cv;
}

std::string AutoSelectResult::Json() const {
  std::string out = "{\"score\":\"" + std::string(clusters ? "kmeans" : "threshold") + "\"";
  if (clusters) out += ",\"clusters\":" + std::to_string(clusters);
  out += ",\"folds\":" + std::to_string(folds);
  out += ",\"budget_seconds\":" + JsonNumber(budget_seconds);
  out += ",\"held_out_pairs\":" + std::to_string(held_out_pairs) + ",\"margin\":" + JsonNumber(margin);
  if (screening) {
    out += ",\"screening\":{\"fold\":0,\"held_out_pairs\":" + std::to_string(screen_pairs) +
           ",\"margin\":" + JsonNumber(screen_margin) + ",\"leaders\":" + std::to_string(leaders) + "}";
  }
  out += std::string(",\"budget_reached\":") + (budget_reached ? "true" : "false");
  if (best >= 0) {
    out += ",\"chosen\":\"" + JsonEscaped(entries[best].Key()) + "\",\"chosen_value\":" + JsonNumber(ChosenValue()) +
           ",\"chosen_folds\":" + std::to_string(chosen_folds);
  }
  if (!refine.status.empty()) out += ",\"refine\":" + refine.Json();
  out += ",\"candidates\":[";
  for (size_t i = 0; i < entries.size(); ++i) {
    const AutoEntry& e = entries[i];
    out += (i ? ",{" : "{") + std::string("\"name\":\"") + JsonEscaped(e.name) + "\",\"scaling\":\"" +
           JsonEscaped(e.scaling) + "\",\"kind\":\"" + (e.baseline ? "plain" : "learned") + "\",\"status\":\"" +
           e.status + "\"";
    if (!e.fold_scores.empty()) {  // scored, or screened (a leader the budget cut too): fold 0 only
      out += ",\"value\":" + JsonNumber(e.value) + ",\"mean\":" + JsonNumber(e.mean) + ",\"sd\":" + JsonNumber(e.sd) +
             ",\"fold_scores\":" + JsonArray(e.fold_scores) + ",\"grid\":" + JsonArray(e.grid) +
             ",\"grid_means\":" + JsonArray(e.grid_means);
    }
    if (!e.screen_means.empty()) {
      out += ",\"screen_mean\":" + JsonNumber(ScreenScore(e)) +
             ",\"screen_seconds\":" + JsonNumber(e.screen_seconds);
    }
    if (!e.error.empty()) out += ",\"error\":\"" + JsonEscaped(e.error) + "\"";
    if (e.restored) out += ",\"restored\":true";
    out += ",\"seconds\":" + JsonNumber(e.seconds) + "}";
  }
  return out + "],\"seconds\":" + JsonNumber(seconds) + "}";
}

namespace {

using Clock = std::chrono::steady_clock;

// One AutoSelect call's evaluation state: the result so far, the clock (with
// the seconds of restored candidates), and the two rounds of the file comment.
class Selection {
 public:
  Selection(const PairwiseConstraints& constraints, const std::vector<AutoCandidate>& candidates,
            const AutoSelectOptions& options, const SolveControl& control, const std::vector<AutoEntry>& done,
            const std::function<void(const AutoSelectResult&)>& after_each, AutoSelectResult* r)
      : constraints_(constraints),
        candidates_(candidates),
        options_(options),
        control_(control),
        after_each_(after_each),
        r_(*r),
        start_(Clock::now()) {
    std::set<std::string> keys;
    for (const AutoCandidate& c : candidates) keys.insert(c.Key());
    for (const AutoEntry& e : done) {
      restored_[e.Key()] = e;
      restored_seconds_ += keys.count(e.Key()) ? e.seconds : 0.0;
    }
  }

  double Elapsed() const { return restored_seconds_ + std::chrono::duration<double>(Clock::now() - start_).count(); }
  void AddRestoredSeconds(double seconds) { restored_seconds_ += seconds; }

  // Round 1, the screening (file comment): every candidate on fold 0 — or,
  // without screening, on all the folds.
  Status Screen() {
    for (size_t i = 0; i < candidates_.size(); ++i) {
      KLS_RETURN_IF_ERROR(ScreenOne(i));
      if (i == 0 && options_.max_seconds == 0.0 && options_.reference_multiple > 0.0) {
        r_.budget_seconds = options_.reference_multiple * std::max(ReferenceSeconds(r_.entries.front(), r_.folds), 1e-3);
      }
      ++r_.steps;
      Report();
    }
    return OkStatus();
  }

  // Round 2 (screening only): the leaders on the other folds, best first.
  Status CompleteLeaders() {
    if (!options_.screening) return OkStatus();
    const std::vector<int> leaders = Leaders(r_);
    r_.leaders = static_cast<int>(leaders.size());
    std::vector<int> rest;
    for (int f = 1; f < options_.folds; ++f) rest.push_back(f);
    for (int l : leaders) {
      AutoEntry& e = r_.entries[l];
      const AutoCandidate& c = candidates_[l];
      if (e.status != "screened") {  // restored finished: counted as in the run that finished it
        ++r_.steps;
        continue;
      }
      if (!r_.budget_reached && r_.budget_seconds > 0.0) {
        // Started only when it and its refinement (learned) can be expected to fit.
        const double cost = e.screen_seconds * (options_.folds - 1);
        const double refine = c.baseline || c.grid.size() < 2 ? 0.0 : 1.5 * e.screen_seconds * options_.folds /
                                                                           static_cast<double>(c.grid.size());
        if (r_.budget_seconds - Elapsed() <= cost + refine) r_.budget_reached = true;
      }
      if (r_.budget_reached) {
        e.status = "budget";  // keeps its screening score
      } else {
        KLS_RETURN_IF_ERROR(CompleteOne(c, rest, &e));
      }
      ++r_.steps;
      Report();
    }
    return OkStatus();
  }

 private:
  // The control of one evaluation: cancellation and the earlier of the job's
  // deadline and the budget's end.
  SolveControl InnerControl() const {
    if (r_.budget_seconds <= 0.0) return control_.StopConditions();
    return control_.StopConditions(Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                      std::chrono::duration<double>(r_.budget_seconds - Elapsed())));
  }

  // Runs `c` on `only_folds` (empty = all); a stop of the budget's making is
  // "budget" (and ends the evaluation), another error "failed".
  StatusOr<CrossValidationResult> Evaluate(const AutoCandidate& c, std::vector<int> only_folds, double* seconds,
                                           std::string* status, std::string* error) {
    CrossValidationOptions cv = options_.CrossValidation(c.grid);
    cv.only_folds = std::move(only_folds);
    const Stopwatch watch;
    StatusOr<CrossValidationResult> cvr = CrossValidate(constraints_, c.learn, cv, InnerControl());
    *seconds = watch.Seconds();
    if (!cvr.ok()) {
      KLS_RETURN_IF_ERROR(control_.CheckStop("auto"));  // the job's own cancellation or deadline
      if (cvr.status().code() == StatusCode::kDeadlineExceeded || cvr.status().code() == StatusCode::kCancelled) {
        *status = "budget";  // only the budget's deadline can have passed
        r_.budget_reached = true;
      } else {
        *status = "failed";
        *error = cvr.status().ToString();
      }
    }
    return cvr;
  }

  void Report() {
    PickBest(&r_);
    r_.seconds = Elapsed();
    if (after_each_) after_each_(r_);
  }

  // Candidate i's screening entry: restored, cut by the budget, or evaluated.
  Status ScreenOne(size_t i) {
    const AutoCandidate& c = candidates_[i];
    const auto it = restored_.find(c.Key());
    const bool finished = it != restored_.end() && (it->second.status == "scored" || it->second.status == "failed");
    const bool screened = options_.screening && it != restored_.end() &&
                          it->second.screen_means.size() == c.grid.size() && !c.grid.empty() &&
                          it->second.status != "failed";
    if (finished || screened) {
      // A leader cut in round 2 ("budget") is screened again only in its status.
      r_.entries.push_back(finished || it->second.status == "screened"
                               ? it->second
                               : ScreenedEntry(c, it->second.grid, it->second.screen_means, it->second.screen_seconds));
      r_.entries.back().restored = true;
      return OkStatus();
    }
    if (r_.budget_reached) {
      r_.entries.push_back(Unscored(c, "budget"));
      return OkStatus();
    }
    KLS_RETURN_IF_ERROR(control_.CheckStop("auto"));
    const double left = r_.budget_seconds - Elapsed();
    if (r_.budget_seconds > 0.0 && (left <= 0.0 || (i > 0 && left <= RefineReserve(r_) + TwinSeconds(r_, c.name)))) {
      r_.budget_reached = true;  // the rest of the budget is the refinement's (and the twin's cost did not fit)
      r_.entries.push_back(Unscored(c, "budget"));
      return OkStatus();
    }
    if (options_.on_start) options_.on_start(c.Key(), 1);
    double seconds = 0.0;
    AutoEntry e = Unscored(c, "");
    // The reference (the first candidate) on all the folds: its seconds are the budget's unit.
    const std::vector<int> first_folds = options_.screening && i > 0 ? std::vector<int>{0} : std::vector<int>{};
    StatusOr<CrossValidationResult> cvr = Evaluate(c, first_folds, &seconds, &e.status, &e.error);
    if (cvr.ok() && options_.screening && i == 0) {
      e = Scored(c, *cvr, seconds);
      for (const CrossValidationCandidate& v : cvr->candidates) e.screen_means.push_back(v.fold_scores.front());
      e.screen_seconds = seconds / options_.folds;
    } else if (cvr.ok() && options_.screening) {
      std::vector<double> grid, means;
      for (const CrossValidationCandidate& v : cvr->candidates) {
        grid.push_back(v.value);
        means.push_back(v.mean_score);
      }
      e = ScreenedEntry(c, grid, means, seconds);
    } else if (cvr.ok()) {
      e = Scored(c, *cvr, seconds);
    } else {
      e.seconds = seconds;
    }
    r_.entries.push_back(std::move(e));
    return OkStatus();
  }

  // A leader's other folds, joined with its screening fold.
  Status CompleteOne(const AutoCandidate& c, const std::vector<int>& rest, AutoEntry* e) {
    KLS_RETURN_IF_ERROR(control_.CheckStop("auto"));
    if (options_.on_start) options_.on_start(c.Key(), 2);
    double seconds = 0.0;
    std::string status, error;
    StatusOr<CrossValidationResult> cvr = Evaluate(c, rest, &seconds, &status, &error);
    if (cvr.ok()) {
      KLS_ASSIGN_OR_RETURN(CrossValidationResult all, WithScreening(*e, *cvr));
      const std::vector<double> screen_means = e->screen_means;
      const double screen_seconds = e->screen_seconds;
      *e = Scored(c, all, e->seconds + seconds);
      e->screen_means = screen_means;
      e->screen_seconds = screen_seconds;
    } else {
      e->status = status;
      e->error = error;
      e->seconds += seconds;
    }
    e->restored = false;
    return OkStatus();
  }

  const PairwiseConstraints& constraints_;
  const std::vector<AutoCandidate>& candidates_;
  const AutoSelectOptions& options_;
  const SolveControl& control_;
  const std::function<void(const AutoSelectResult&)>& after_each_;
  AutoSelectResult& r_;
  std::map<std::string, AutoEntry> restored_;
  const Clock::time_point start_;
  double restored_seconds_ = 0.0;
};

}  // namespace

StatusOr<AutoSelectResult> AutoSelect(const PairwiseConstraints& constraints,
                                      const std::vector<AutoCandidate>& candidates, const AutoSelectOptions& options,
                                      const SolveControl& control, const std::vector<AutoEntry>& done,
                                      const std::function<void(const AutoSelectResult&)>& after_each,
                                      const AutoRefinement* done_refine) {
  KLS_RETURN_IF_ERROR(options.Validate());
  if (candidates.empty()) return InvalidArgumentError("auto: no candidate to evaluate");
  std::set<std::string> keys;
  for (const AutoCandidate& c : candidates) {
    if (!keys.insert(c.Key()).second) return InvalidArgumentError("auto: candidate " + c.Key() + " listed twice");
    if (c.grid.empty() || !c.learn) return InvalidArgumentError("auto: candidate " + c.Key() + " has no grid or learn");
  }
  // The folds are CrossValidate's; checked once here so that "too few pairs"
  // is one error, not one per candidate.
  KLS_ASSIGN_OR_RETURN(std::vector<int> fold_of, AssignPairFolds(constraints, options.folds, options.seed));
  int held_out_pairs = 0, screen_pairs = 0;  // every pair i != j is held out by exactly one fold
  for (int f : fold_of) {
    held_out_pairs += f >= 0 ? 1 : 0;
    screen_pairs += f == 0 ? 1 : 0;
  }
  AutoSelectResult r;
  r.folds = options.folds;
  r.clusters = options.clusters;
  r.budget_seconds = options.max_seconds;
  r.held_out_pairs = held_out_pairs;
  r.margin = PlainKernelMargin(held_out_pairs);
  r.screening = options.screening;
  r.screen_pairs = options.screening ? screen_pairs : 0;
  r.screen_margin = options.screening ? PlainKernelMargin(screen_pairs) : 0.0;
  Selection selection(constraints, candidates, options, control, done, after_each, &r);
  KLS_RETURN_IF_ERROR(selection.Screen());
  KLS_RETURN_IF_ERROR(selection.CompleteLeaders());
  PickBest(&r);
  r.seconds = selection.Elapsed();
  if (r.best < 0) {
    std::string why;
    for (const AutoEntry& e : r.entries) {
      why += (why.empty() ? "" : "; ") + e.Key() + ": " + (e.error.empty() ? e.status : e.error);
    }
    return FailedPreconditionError("auto: no candidate could be scored (" + why + ")");
  }
  Clock::time_point deadline = Clock::time_point::max();
  if (r.budget_seconds > 0.0) {
    deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                  std::chrono::duration<double>(r.budget_seconds - selection.Elapsed()));
  }
  bool refine_restored = false;
  KLS_RETURN_IF_ERROR(Refine(constraints, candidates[r.best], options, control, deadline,
                             r.budget_seconds > 0.0 && selection.Elapsed() >= r.budget_seconds, done_refine, &r,
                             &refine_restored));
  if (refine_restored) selection.AddRestoredSeconds(r.refine.seconds);
  if (r.refine.status == "budget") r.budget_reached = true;
  r.seconds = selection.Elapsed();
  if (after_each && r.refine.status != "skipped") after_each(r);
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
  all(-1, 2, 0);  // diffusion
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
  if (name == "diffusion") {
    return InvalidArgumentError("plain kernel \"diffusion\" needs the graph (DiffusionPlainKernel)");
  }
  return InvalidArgumentError("plain kernel \"" + name + "\" is not one of linear, rbf, diffusion");
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

StatusOr<LearnedKernel> DiffusionPlainKernel(const Eigen::SparseMatrix<double>& laplacian, double value,
                                             const PlainKernelOptions& options) {
  KLS_ASSIGN_OR_RETURN(LaplacianDiffusionBasis basis, DiffusionBasis(laplacian, options.diffusion_rank));
  KLS_ASSIGN_OR_RETURN(Eigen::MatrixXd v, DiffusionKernelFactor(basis, value));
  return LearnedKernel::FromEmbedding(std::move(v));
}

AutoCandidate DiffusionKernelCandidate(LaplacianFn laplacian, const std::string& scaling,
                                       const PlainKernelOptions& options) {
  // The basis once (on the first learn), then one factor per value, shared by the folds.
  struct State {
    std::mutex mutex;
    std::shared_ptr<const LaplacianDiffusionBasis> basis;
    std::map<double, std::shared_ptr<const LearnedKernel>> kernels;
  };
  auto state = std::make_shared<State>();
  AutoCandidate c;
  c.name = "diffusion";
  c.scaling = scaling;
  c.baseline = true;
  c.grid = options.diffusion_multiples;
  c.learn = [laplacian = std::move(laplacian), options, state](const PairwiseConstraints&, double value,
                                                               const SolveControl& control) -> StatusOr<LearnedKernel> {
    std::lock_guard<std::mutex> lock(state->mutex);
    if (!state->basis) {
      KLS_RETURN_IF_ERROR(control.CheckStop("diffusion kernel"));
      KLS_ASSIGN_OR_RETURN(Eigen::SparseMatrix<double> l, laplacian());
      KLS_ASSIGN_OR_RETURN(LaplacianDiffusionBasis b, DiffusionBasis(l, options.diffusion_rank));
      state->basis = std::make_shared<const LaplacianDiffusionBasis>(std::move(b));
    }
    auto it = state->kernels.find(value);
    if (it == state->kernels.end()) {
      KLS_ASSIGN_OR_RETURN(Eigen::MatrixXd v, DiffusionKernelFactor(*state->basis, value));
      KLS_ASSIGN_OR_RETURN(LearnedKernel k, LearnedKernel::FromEmbedding(std::move(v)));
      it = state->kernels.emplace(value, std::make_shared<const LearnedKernel>(std::move(k))).first;
    }
    return *it->second;
  };
  return c;
}

}  // namespace kls
