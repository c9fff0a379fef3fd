// `method auto`'s selection (core/npkl/auto_select.h): the winner and the
// leaderboard, ties between learned and plain kernels, the budget, resume from
// earlier entries, failures, cancellation, the JSON, the plain kernels, and
// the refinement of the winner's value (its choice, resume, when it is skipped).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <Eigen/Eigenvalues>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <random>
#include <set>
#include <tuple>
#include <thread>

#include "core/eval/baselines.h"
#include "core/data/synthetic.h"
#include "core/graph/laplacian.h"
#include "core/npkl/auto_select.h"
#include "tests/test_util/label_pairs.h"

namespace kls {
namespace {

using ::testing::HasSubstr;

using Labelled = test_util::LabelledPoints;

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

// Two Gaussian blobs at (±3, 0) along feature 0, and wide noise in feature 1.
Labelled Blobs(int n, uint64_t seed) { return test_util::TwoBlobs(n, seed, 3.0); }

// The one-hot label factor blurred by Gaussian noise of sd `noise` (seeded).
StatusOr<LearnedKernel> BlurredLabels(const Labelled& d, double noise, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> g(0.0, noise);
  Eigen::MatrixXd v = Eigen::MatrixXd::Zero(d.x.rows(), 2);
  for (int i = 0; i < v.rows(); ++i) {
    v(i, d.labels[i]) = 1.0;
    v(i, 0) += g(rng);
    v(i, 1) += g(rng);
  }
  return LearnedKernel::FromEmbedding(std::move(v));
}

// A "learned" candidate whose kernel is the one-hot label factor blurred by
// `noise` (0: perfect), the same for every value; counts its calls.
AutoCandidate Fake(const std::string& name, const Labelled& d, double noise, std::atomic<int>* calls = nullptr,
                   double sleep_seconds = 0.0) {
  AutoCandidate c;
  c.name = name;
  c.scaling = "none";
  c.grid = {0.1, 1.0};
  c.learn = [&d, noise, calls, sleep_seconds](const PairwiseConstraints&, double value,
                                               const SolveControl& control) -> StatusOr<LearnedKernel> {
    if (calls) ++*calls;
    if (sleep_seconds > 0) {
      const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(sleep_seconds);
      while (std::chrono::steady_clock::now() < until) {
        KLS_RETURN_IF_ERROR(control.CheckStop("fake"));
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
    }
    return BlurredLabels(d, noise, static_cast<uint64_t>(value * 1000) + 7);
  };
  return c;
}

TEST(AutoSelectTest, TheBestMeanWinsAndEveryCandidateIsOnTheLeaderboard) {
  const Labelled d = Blobs(120, 1);
  const PairwiseConstraints pairs = test_util::RandomLabelPairs(d.labels, 300, 2);
  auto features = std::make_shared<const Eigen::MatrixXd>(d.x);
  std::vector<AutoCandidate> candidates = {Fake("noisy", d, 2.0), Fake("clean", d, 0.0)};
  for (const char* name : {"linear", "rbf"}) candidates.push_back(PlainKernelCandidate(features, name, "none", 2));
  AutoSelectOptions o;
  o.folds = 3;
  auto r = AutoSelect(pairs, candidates, o, SolveControl());
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->entries.size(), 4u);
  EXPECT_EQ(r->entries[r->best].name, "clean");
  EXPECT_DOUBLE_EQ(r->entries[1].mean, 1.0);
  for (const AutoEntry& e : r->entries) {
    // Scored on all folds, or screened out on fold 0 (the noisy learner, far behind the clean one).
    EXPECT_TRUE(e.status == "scored" || e.status == "screened") << e.name << ": " << e.status;
    EXPECT_EQ(e.fold_scores.size(), e.status == "scored" ? 3u : 1u) << e.name;
    EXPECT_EQ(e.screen_means.size(), e.grid.size()) << e.name;
    EXPECT_EQ(e.grid.size(), e.grid_means.size());
    EXPECT_GE(e.sd, 0.0);
    // The reported value is the grid value with the best mean.
    double best = -1;
    for (double m : e.grid_means) best = std::max(best, m);
    EXPECT_DOUBLE_EQ(e.mean, best) << e.name;
  }
  EXPECT_TRUE(r->entries[2].baseline);
  EXPECT_EQ(r->entries[2].name, "linear");
  EXPECT_EQ(r->entries[3].grid.size(), 3u);  // rbf width multiples
  // Feature 0 separates the blobs: the RBF kernel does well, better than the noisy learner.
  EXPECT_GT(r->entries[3].mean, 0.8);
  EXPECT_LT(r->entries[0].mean, r->entries[3].mean);

  const std::string json = r->Json();
  EXPECT_THAT(json, HasSubstr("\"chosen\":\"clean@none\""));
  EXPECT_THAT(json, HasSubstr("\"score\":\"threshold\""));
  EXPECT_THAT(json, HasSubstr("{\"name\":\"rbf\",\"scaling\":\"none\",\"kind\":\"plain\",\"status\":\"scored\""));
  EXPECT_THAT(json, HasSubstr("\"kind\":\"learned\""));
  // The first candidate, the budget's reference, is scored on all folds in the screening.
  EXPECT_EQ(r->entries[0].status, "scored");
  EXPECT_THAT(json, HasSubstr("\"screening\":{\"fold\":0,\"held_out_pairs\":"));
  EXPECT_THAT(json, HasSubstr("\"chosen_folds\":3"));
}

TEST(AutoSelectTest, OnATieTheLearnedKernelWinsOverAPlainOne) {
  const Labelled d = Blobs(80, 3);
  const PairwiseConstraints pairs = test_util::RandomLabelPairs(d.labels, 200, 4);
  AutoCandidate plain = Fake("plain_perfect", d, 0.0);
  plain.baseline = true;
  auto r = AutoSelect(pairs, {plain, Fake("learned_perfect", d, 0.0)}, AutoSelectOptions(), SolveControl());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->entries[r->best].name, "learned_perfect");
}

TEST(AutoSelectTest, APlainKernelWinsOnlyByMoreThanTheNoiseMargin) {
  const Labelled d = Blobs(120, 21);
  const PairwiseConstraints pairs = test_util::RandomLabelPairs(d.labels, 400, 22);  // margin 1/√400 = 0.05
  AutoCandidate perfect_plain = Fake("perfect_plain", d, 0.0);
  perfect_plain.baseline = true;
  // The same learned candidate at two noise levels: slightly and clearly below the perfect plain one.
  auto close = AutoSelect(pairs, {Fake("slightly_noisy", d, 0.18), perfect_plain}, AutoSelectOptions(), SolveControl());
  auto far = AutoSelect(pairs, {Fake("very_noisy", d, 3.0), perfect_plain}, AutoSelectOptions(), SolveControl());
  ASSERT_TRUE(close.ok() && far.ok()) << close.status() << far.status();
  EXPECT_EQ(close->held_out_pairs, 400);
  EXPECT_DOUBLE_EQ(close->margin, 0.05);
  const double close_lead = close->entries[1].mean - close->entries[0].mean;
  const double far_lead = far->entries[1].mean - far->entries[0].mean;
  ASSERT_GT(close_lead, 0.0);
  ASSERT_LT(close_lead, 0.05);
  ASSERT_GE(far_lead, 0.05);
  EXPECT_EQ(close->entries[close->best].name, "slightly_noisy");
  EXPECT_EQ(far->entries[far->best].name, "perfect_plain");
  EXPECT_THAT(close->Json(), HasSubstr("\"held_out_pairs\":400,\"margin\":0.05"));
}

TEST(AutoSelectTest, TheBudgetStopsTheRestAndTheBestScoredOneWins) {
  const Labelled d = Blobs(60, 5);
  const PairwiseConstraints pairs = test_util::RandomLabelPairs(d.labels, 120, 6);
  std::atomic<int> late_calls{0};
  // The reference takes ~6 × 20 ms; the budget is 3 × that; the slow one
  // needs far longer and is cut; the last one never starts.
  std::vector<AutoCandidate> c = {Fake("reference", d, 1.0, nullptr, 0.02), Fake("slow", d, 0.0, nullptr, 2.0),
                                  Fake("late", d, 0.0, &late_calls)};
  AutoSelectOptions o;
  o.reference_multiple = 3.0;
  const auto start = std::chrono::steady_clock::now();
  auto r = AutoSelect(pairs, c, o, SolveControl());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(r.ok()) << r.status();
  // The reference is scored on all folds (the budget's unit); the slow one is
  // cut in its screening, the last one never starts.
  EXPECT_EQ(r->entries[0].status, "scored");
  EXPECT_EQ(r->entries[0].fold_scores.size(), 3u);
  EXPECT_EQ(r->entries[0].screen_means.size(), 2u);
  EXPECT_EQ(r->entries[1].status, "budget");
  EXPECT_TRUE(r->entries[1].fold_scores.empty());
  EXPECT_EQ(r->entries[2].status, "budget");
  EXPECT_EQ(late_calls.load(), 0);
  EXPECT_TRUE(r->budget_reached);
  EXPECT_EQ(r->best, 0);
  EXPECT_EQ(r->chosen_folds, 3);
  EXPECT_NEAR(r->budget_seconds, 3.0 * r->entries[0].seconds, 1e-9);
  EXPECT_LT(seconds, 1.5);  // not the slow candidate's 12 s
  EXPECT_EQ(r->refine.status, "budget");  // the budget is spent: no refinement
  EXPECT_FALSE(r->refine.chosen);

  // An absolute budget too short for anything: nothing scored is an error.
  o.reference_multiple = 0.0;
  o.max_seconds = 1e-6;
  auto none = AutoSelect(pairs, {Fake("slow", d, 0.0, nullptr, 0.5)}, o, SolveControl());
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(none.status().message(), HasSubstr("slow@none: budget"));
}

TEST(AutoSelectTest, EntriesOfAnInterruptedRunAreNotEvaluatedAgain) {
  const Labelled d = Blobs(60, 7);
  const PairwiseConstraints pairs = test_util::RandomLabelPairs(d.labels, 150, 8);
  std::atomic<int> first_calls{0}, second_calls{0};
  std::vector<AutoCandidate> c = {Fake("first", d, 1.0, &first_calls), Fake("second", d, 0.5, &second_calls)};
  // Without the screening (every candidate on all folds; the screening's
  // resume: ResumeSkipsWhatEitherRoundFinished). The first run is cancelled
  // after its first candidate.
  AutoSelectOptions o;
  o.screening = false;
  SolveControl control;
  std::vector<AutoEntry> saved;
  auto interrupted = AutoSelect(pairs, c, o, control, {}, [&](const AutoSelectResult& r) {
    saved = r.entries;
    control.cancel.Cancel();
  });
  ASSERT_FALSE(interrupted.ok());
  EXPECT_EQ(interrupted.status().code(), StatusCode::kCancelled);
  ASSERT_EQ(saved.size(), 1u);
  EXPECT_EQ(first_calls.load(), 6);  // 2 values × 3 folds
  EXPECT_EQ(second_calls.load(), 0);

  auto resumed = AutoSelect(pairs, c, o, SolveControl(), saved);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(first_calls.load(), 6);  // not again
  EXPECT_EQ(second_calls.load(), 6 + 3);  // its grid, then the refinement's one value × 3 folds
  EXPECT_EQ(resumed->refine.key, "second@none");
  EXPECT_EQ(resumed->entries[0].seconds, saved[0].seconds);
  EXPECT_EQ(resumed->entries[0].fold_scores, saved[0].fold_scores);
  EXPECT_EQ(resumed->entries[1].status, "scored");
  // The leaderboard tells the restored entry from the one this run evaluated.
  EXPECT_TRUE(resumed->entries[0].restored);
  EXPECT_FALSE(resumed->entries[1].restored);
  EXPECT_THAT(resumed->Json(), HasSubstr("\"restored\":true"));
  EXPECT_EQ(Count(resumed->Json(), "\"restored\""), 1);
}

TEST(AutoSelectTest, TheScreeningCoversEveryCandidateUnderABudgetThatCutSomeOnAllFolds) {
  const Labelled d = Blobs(60, 31);
  const PairwiseConstraints pairs = test_util::RandomLabelPairs(d.labels, 150, 32);
  // The slow one needs 2 values × 3 folds × 0.25 s = 1.5 s on all folds, 0.5 s on fold 0.
  std::atomic<int> late_calls{0};
  const std::vector<AutoCandidate> c = {Fake("reference", d, 1.0, nullptr, 0.01), Fake("slow", d, 3.0, nullptr, 0.25),
                                        Fake("late", d, 0.0, &late_calls)};
  AutoSelectOptions o;
  o.max_seconds = 1.0;
  o.screening = false;
  auto all_folds = AutoSelect(pairs, c, o, SolveControl());
  ASSERT_TRUE(all_folds.ok()) << all_folds.status();
  EXPECT_EQ(all_folds->entries[1].status, "budget");
  EXPECT_EQ(all_folds->entries[2].status, "budget");
  EXPECT_EQ(late_calls.load(), 0);
  EXPECT_EQ(all_folds->entries[all_folds->best].name, "reference");

  o.screening = true;
  auto screened = AutoSelect(pairs, c, o, SolveControl());
  ASSERT_TRUE(screened.ok()) << screened.status();
  for (const AutoEntry& e : screened->entries) EXPECT_EQ(e.screen_means.size(), e.grid.size()) << e.name;
  EXPECT_EQ(screened->entries[1].status, "screened");  // far behind on fold 0: no other folds
  EXPECT_EQ(screened->entries[2].status, "scored");
  EXPECT_EQ(screened->entries[screened->best].name, "late");
  EXPECT_EQ(screened->chosen_folds, 3);
}

TEST(AutoSelectTest, AScreenedOutCandidateIsNeverEvaluatedOnTheOtherFolds) {
  const Labelled d = Blobs(90, 33);
  const PairwiseConstraints pairs = test_util::RandomLabelPairs(d.labels, 300, 34);
  std::atomic<int> good_calls{0}, bad_calls{0};
  // The first candidate (the reference) is scored on all folds in any case.
  const std::vector<AutoCandidate> c = {Fake("reference", d, 3.0), Fake("bad", d, 3.0, &bad_calls),
                                        Fake("good", d, 0.0, &good_calls)};
  auto r = AutoSelect(pairs, c, AutoSelectOptions(), SolveControl());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->screen_pairs, 100);
  EXPECT_DOUBLE_EQ(r->screen_margin, 0.1);  // 1/√100
  EXPECT_EQ(r->leaders, 1);
  EXPECT_EQ(bad_calls.load(), 2);  // its grid on fold 0, nothing more
  const AutoEntry& bad = r->entries[1];
  EXPECT_EQ(bad.status, "screened");
  EXPECT_EQ(bad.fold_scores.size(), 1u);
  EXPECT_EQ(bad.grid_means, bad.screen_means);
  EXPECT_LT(bad.mean, r->entries[2].mean - r->screen_margin);
  EXPECT_EQ(good_calls.load(), 2 * 3 + 3);  // its grid on the 3 folds, then the refinement's value
  EXPECT_EQ(r->entries[r->best].name, "good");
  const std::string json = r->Json();
  EXPECT_THAT(json, HasSubstr("{\"name\":\"bad\",\"scaling\":\"none\",\"kind\":\"learned\",\"status\":\"screened\",\"value\":"));
  EXPECT_THAT(json, HasSubstr("\"screen_mean\":"));
  EXPECT_THAT(json, HasSubstr("\"leaders\":1}"));

  // The fully scored one scores exactly what all the folds in one call give it.
  AutoSelectOptions o;
  o.screening = false;
  auto one_round = AutoSelect(pairs, c, o, SolveControl());
  ASSERT_TRUE(one_round.ok()) << one_round.status();
  EXPECT_EQ(r->entries[2].fold_scores, one_round->entries[2].fold_scores);
  EXPECT_EQ(r->entries[2].grid_means, one_round->entries[2].grid_means);
  EXPECT_EQ(r->entries[2].value, one_round->entries[2].value);
  EXPECT_EQ(r->ChosenValue(), one_round->ChosenValue());
}

TEST(AutoSelectTest, ResumeSkipsWhatEitherRoundFinished) {
  const Labelled d = Blobs(90, 35);
  const PairwiseConstraints pairs = test_util::RandomLabelPairs(d.labels, 300, 36);
  std::atomic<int> ref_calls{0}, a_calls{0}, b_calls{0}, c_calls{0};
  // The reference (scored on all folds in round 1) and c are screened out; a and b lead (both perfect).
  const std::vector<AutoCandidate> c = {Fake("reference", d, 3.0, &ref_calls), Fake("a", d, 0.0, &a_calls),
                                        Fake("b", d, 0.0, &b_calls), Fake("c", d, 3.0, &c_calls)};
  // Cancelled after the screening and a's other folds (step 5 of 6).
  SolveControl control;
  std::vector<AutoEntry> saved;
  auto interrupted = AutoSelect(pairs, c, AutoSelectOptions(), control, {}, [&](const AutoSelectResult& r) {
    saved = r.entries;
    if (r.steps == 5) control.cancel.Cancel();
  });
  ASSERT_EQ(interrupted.status().code(), StatusCode::kCancelled);
  EXPECT_EQ(ref_calls.load(), 2 * 3);
  EXPECT_EQ(a_calls.load(), 2 + 4);
  EXPECT_EQ(b_calls.load(), 2);
  EXPECT_EQ(c_calls.load(), 2);
  ASSERT_EQ(saved.size(), 4u);
  EXPECT_EQ(saved[0].status, "scored");
  EXPECT_EQ(saved[1].status, "scored");
  EXPECT_EQ(saved[2].status, "screened");
  EXPECT_EQ(saved[3].status, "screened");

  auto resumed = AutoSelect(pairs, c, AutoSelectOptions(), SolveControl(), saved);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(ref_calls.load(), 2 * 3);    // nothing
  EXPECT_EQ(a_calls.load(), 2 + 4 + 3);  // only the refinement (a wins the tie, listed first)
  EXPECT_EQ(b_calls.load(), 2 + 4);      // not screened again: only its other folds
  EXPECT_EQ(c_calls.load(), 2);          // nothing
  EXPECT_EQ(resumed->entries[resumed->best].name, "a");
  EXPECT_TRUE(resumed->entries[0].restored);
  EXPECT_TRUE(resumed->entries[1].restored);
  EXPECT_FALSE(resumed->entries[2].restored);
  EXPECT_TRUE(resumed->entries[3].restored);
  EXPECT_EQ(resumed->entries[2].status, "scored");
  EXPECT_EQ(resumed->entries[2].fold_scores.size(), 3u);

  // An entry of a checkpoint from before the screening (all folds, no
  // screening scores) is restored as finished.
  std::vector<AutoEntry> old = {resumed->entries[1]};
  old[0].screen_means.clear();
  const int before = a_calls.load();
  auto from_old = AutoSelect(pairs, c, AutoSelectOptions(), SolveControl(), old);
  ASSERT_TRUE(from_old.ok()) << from_old.status();
  EXPECT_EQ(a_calls.load(), before + 3);  // the refinement only
  EXPECT_TRUE(from_old->entries[1].restored);
}

// A learned candidate whose kernel is best at value `peak`: the label factor
// blurred by noise growing with |log10(value / peak)|; counts its calls.
AutoCandidate Peaked(const std::string& name, const Labelled& d, double peak, std::atomic<int>* calls) {
  AutoCandidate c = Fake(name, d, 0.0);
  c.grid = {0.1, 1.0, 10.0};
  c.learn = [&d, peak, calls](const PairwiseConstraints&, double value,
                              const SolveControl&) -> StatusOr<LearnedKernel> {
    ++*calls;
    return BlurredLabels(d, 0.25 + 1.5 * std::abs(std::log10(value / peak)), 11);
  };
  return c;
}

TEST(AutoSelectTest, TheRefinementTriesTheMidpointTowardTheBetterNeighbourAndKeepsTheBetter) {
  const Labelled d = Blobs(90, 41);
  const PairwiseConstraints pairs = test_util::RandomLabelPairs(d.labels, 300, 42);
  for (double peak : {3.0, 0.4, 1.0}) {
    std::atomic<int> calls{0};
    const AutoCandidate c = Peaked("peaked", d, peak, &calls);
    AutoSelectOptions o;
    auto r = AutoSelect(pairs, {c}, o, SolveControl());
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(calls.load(), 3 * 3 + 3) << peak;  // the grid, then one value
    const AutoEntry& w = r->entries[0];
    // Brute force: the neighbour with the better grid mean (ties: the larger), its midpoint ...
    const size_t i = std::find(w.grid.begin(), w.grid.end(), w.value) - w.grid.begin();
    size_t u = i == 0 ? 1 : i - 1;
    if (i > 0 && i + 1 < w.grid.size() && w.grid_means[i + 1] >= w.grid_means[i - 1]) u = i + 1;
    const double mid = std::sqrt(w.value * w.grid[u]);
    EXPECT_EQ(r->refine.status, "scored") << peak;
    EXPECT_EQ(r->refine.key, "peaked@none");
    EXPECT_DOUBLE_EQ(r->refine.from, w.value);
    EXPECT_DOUBLE_EQ(r->refine.value, mid) << peak;
    // ... scored on the same folds as the grid,
    CrossValidationOptions cv;
    cv.grid = {mid};
    auto again = CrossValidate(pairs, c.learn, cv);
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ(r->refine.fold_scores, again->candidates[0].fold_scores) << peak;
    EXPECT_DOUBLE_EQ(r->refine.mean, again->candidates[0].mean_score);
    // ... and learned only when it scores higher.
    EXPECT_EQ(r->refine.chosen, again->candidates[0].mean_score > w.mean) << peak;
    EXPECT_DOUBLE_EQ(r->ChosenValue(), r->refine.chosen ? mid : w.value);
    if (peak == 3.0) {  // the peak lies between the grid's 1 and 10: the midpoint 3.16 wins
      EXPECT_DOUBLE_EQ(w.value, 1.0);
      EXPECT_DOUBLE_EQ(mid, std::sqrt(10.0));
      EXPECT_TRUE(r->refine.chosen);
    }
    if (peak == 1.0) {
      EXPECT_FALSE(r->refine.chosen);  // the grid hit the peak
    }
    const std::string json = r->Json();
    EXPECT_THAT(json, HasSubstr("\"chosen\":\"peaked@none\",\"chosen_value\":"));
    EXPECT_THAT(json, HasSubstr("\"refine\":{\"candidate\":\"peaked@none\",\"status\":\"scored\",\"from\":"));
    EXPECT_THAT(json, HasSubstr("\"fold_scores\":["));
    EXPECT_THAT(json, HasSubstr(std::string("\"chosen\":") + (r->refine.chosen ? "true" : "false")));
  }
}

TEST(AutoSelectTest, ARestoredRefinementIsNotRunAgainUnlessItIsForAnotherValue) {
  const Labelled d = Blobs(90, 43);
  const PairwiseConstraints pairs = test_util::RandomLabelPairs(d.labels, 300, 44);
  std::atomic<int> calls{0};
  const std::vector<AutoCandidate> c = {Peaked("peaked", d, 3.0, &calls)};
  AutoSelectResult last;
  auto first = AutoSelect(pairs, c, AutoSelectOptions(), SolveControl(), {},
                          [&](const AutoSelectResult& r) { last = r; });
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(last.refine.status, "scored");  // after_each saw the refinement
  ASSERT_EQ(calls.load(), 12);

  // Killed after the refinement: nothing is learned again.
  AutoRefinement saved = last.refine;
  saved.seconds = 42.0;  // a mark
  auto resumed = AutoSelect(pairs, c, AutoSelectOptions(), SolveControl(), last.entries, {}, &saved);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(calls.load(), 12);
  EXPECT_EQ(resumed->refine.seconds, 42.0);
  EXPECT_EQ(resumed->ChosenValue(), first->ChosenValue());

  // A refinement saved for another value (another winner) is run afresh.
  saved.value = 0.5;
  auto other = AutoSelect(pairs, c, AutoSelectOptions(), SolveControl(), last.entries, {}, &saved);
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(calls.load(), 15);
  EXPECT_EQ(other->refine.fold_scores, first->refine.fold_scores);
  EXPECT_NE(other->refine.seconds, 42.0);
}

TEST(AutoSelectTest, NothingToRefineForAPlainWinnerOrAOneValueGrid) {
  const Labelled d = Blobs(60, 45);
  const PairwiseConstraints pairs = test_util::RandomLabelPairs(d.labels, 150, 46);
  AutoCandidate plain = Fake("plain_perfect", d, 0.0);
  plain.baseline = true;
  auto r = AutoSelect(pairs, {Fake("very_noisy", d, 3.0), plain}, AutoSelectOptions(), SolveControl());
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->entries[r->best].name, "plain_perfect");
  EXPECT_EQ(r->refine.status, "skipped");
  EXPECT_DOUBLE_EQ(r->ChosenValue(), r->entries[r->best].value);
  EXPECT_THAT(r->Json(), HasSubstr("\"refine\":{\"candidate\":\"plain_perfect@none\",\"status\":\"skipped\""));

  AutoCandidate single = Fake("single", d, 0.5);
  single.grid = {1.0};
  auto one = AutoSelect(pairs, {single}, AutoSelectOptions(), SolveControl());
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->refine.status, "skipped");
  EXPECT_FALSE(one->refine.chosen);
}

TEST(AutoSelectTest, AFailingCandidateIsReportedAndTheOthersGoOn) {
  const Labelled d = Blobs(60, 9);
  const PairwiseConstraints pairs = test_util::RandomLabelPairs(d.labels, 150, 10);
  AutoCandidate broken = Fake("broken", d, 0.0);
  broken.learn = [](const PairwiseConstraints&, double, const SolveControl&) -> StatusOr<LearnedKernel> {
    return InvalidArgumentError("broken.c must be positive");
  };
  auto r = AutoSelect(pairs, {broken, Fake("fine", d, 0.5)}, AutoSelectOptions(), SolveControl());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->entries[0].status, "failed");
  EXPECT_THAT(r->entries[0].error, HasSubstr("broken.c must be positive"));
  EXPECT_EQ(r->entries[r->best].name, "fine");
  EXPECT_THAT(r->Json(), HasSubstr("\"status\":\"failed\",\"error\":\"INVALID_ARGUMENT"));
}

TEST(AutoSelectTest, BadOptionsAndCandidatesAreRejectedNamingTheField) {
  const Labelled d = Blobs(40, 11);
  const PairwiseConstraints pairs = test_util::RandomLabelPairs(d.labels, 60, 12);
  AutoSelectOptions o;
  o.folds = 1;
  EXPECT_THAT(AutoSelect(pairs, {Fake("a", d, 0)}, o, SolveControl()).status().message(),
              HasSubstr("auto.folds = 1"));
  o = AutoSelectOptions();
  o.max_seconds = -1;
  EXPECT_THAT(AutoSelect(pairs, {Fake("a", d, 0)}, o, SolveControl()).status().message(),
              HasSubstr("auto.max_seconds = -1"));
  o = AutoSelectOptions();
  o.clusters = 1;
  EXPECT_THAT(AutoSelect(pairs, {Fake("a", d, 0)}, o, SolveControl()).status().message(),
              HasSubstr("auto.clusters = 1"));
  EXPECT_THAT(AutoSelect(pairs, {Fake("a", d, 0), Fake("a", d, 1)}, AutoSelectOptions(), SolveControl())
                  .status()
                  .message(),
              HasSubstr("a@none listed twice"));
  EXPECT_FALSE(AutoSelect(pairs, {}, AutoSelectOptions(), SolveControl()).ok());
  PairwiseConstraints two;
  two.pairs = {pairs.pairs[0], pairs.pairs[1]};
  EXPECT_FALSE(AutoSelect(two, {Fake("a", d, 0)}, AutoSelectOptions(), SolveControl()).ok());  // < 3 folds of pairs
}

TEST(AutoSelectTest, TheOrderStartsWithTheReferenceAndCoversEveryCandidateOnce) {
  const std::vector<AutoSlot> order = AutoOrder(2);
  ASSERT_EQ(order.size(), 2 * (std::size(kAutoFamilies) + std::size(kAutoPlainKernels)));
  EXPECT_EQ(order[0].family, 0);
  EXPECT_EQ(order[0].scaling, 0);
  std::set<std::tuple<int, int, int>> seen;
  for (const AutoSlot& s : order) {
    EXPECT_TRUE((s.family >= 0) != (s.plain >= 0));
    EXPECT_TRUE(seen.insert({s.family, s.plain, s.scaling}).second);
  }
  // linear, then BCDNPKL square, both scalings each.
  EXPECT_EQ(order[1].plain, 0);
  EXPECT_EQ(order[2].plain, 0);
  EXPECT_EQ(order[3].family, 1);
  EXPECT_EQ(order[4].family, 1);
  EXPECT_EQ(order[5].family, 0);
  EXPECT_EQ(order[5].scaling, 1);
  EXPECT_EQ(AutoOrder(1).size(), std::size(kAutoFamilies) + std::size(kAutoPlainKernels));
}

TEST(AutoSelectTest, PlainKernelsAreTheLinearAndRbfFactors) {
  const Labelled d = Blobs(50, 13);
  auto linear = PlainKernel(d.x, "linear", 1.0);
  ASSERT_TRUE(linear.ok()) << linear.status();
  EXPECT_NEAR(linear->value(3, 7), d.x.row(3).dot(d.x.row(7)), 1e-9);
  auto rbf = PlainKernel(d.x, "rbf", 0.5);
  ASSERT_TRUE(rbf.ok()) << rbf.status();
  EXPECT_NEAR(rbf->value(4, 4), 1.0, 1e-6);
  EXPECT_FALSE(PlainKernel(d.x, "cubic", 1.0).ok());
  // Under the threshold score every width scores the same: one value.
  auto x = std::make_shared<const Eigen::MatrixXd>(d.x);
  EXPECT_EQ(PlainKernelCandidate(x, "rbf", "none", 0).grid, std::vector<double>{1.0});
  EXPECT_EQ(PlainKernelCandidate(x, "rbf", "none", 3).grid.size(), 3u);
  // The RBF factor keeps its leading directions: K ≈ V Vᵀ with rank ≤ max_rank.
  PlainKernelOptions capped;
  capped.max_rank = 5;
  auto low = PlainKernel(d.x, "rbf", 1.0, capped);
  ASSERT_TRUE(low.ok()) << low.status();
  EXPECT_EQ(low->rank(), 5);
  EXPECT_GT(low->value(4, 4), 0.8);  // most of K_ii = 1 is in the leading directions
  EXPECT_EQ(PlainKernelCandidate(x, "linear", "none", 3).grid, std::vector<double>{1.0});
  EXPECT_THAT(std::string(PlainKernel(d.x, "diffusion", 1.0).status().message()), HasSubstr("needs the graph"));
}

// Two moons, noise 0.05 (baseline_guard_test's).
Labelled TwoMoons(int n, uint64_t seed) {
  auto moons = MakeTwoMoons(n, 0.05, seed);
  EXPECT_TRUE(moons.ok()) << moons.status();
  Labelled d;
  if (!moons.ok()) return d;
  d.x = moons->features;
  d.labels = moons->labels;
  return d;
}

StatusOr<Eigen::SparseMatrix<double>> KnnLaplacian(const Eigen::MatrixXd& x, double delta = 0.0) {
  GraphOptions g;
  g.k = 5;
  g.num_threads = 1;
  g.delta = delta;
  KLS_ASSIGN_OR_RETURN(Graph graph, BuildGraph(x, g));
  return std::move(graph.laplacian);
}

TEST(AutoSelectTest, TheDiffusionKernelIsExpOfMinusBetaLaplacianWithUnitDiagonalAndIgnoresDelta) {
  const Labelled d = TwoMoons(40, 3);
  auto l = KnnLaplacian(d.x);
  ASSERT_TRUE(l.ok()) << l.status();
  PlainKernelOptions full;
  full.diffusion_rank = 40;  // every eigenpair: exact
  auto k = DiffusionPlainKernel(*l, 4.0, full);
  ASSERT_TRUE(k.ok()) << k.status();
  auto basis = DiffusionBasis(*l, 40);
  ASSERT_TRUE(basis.ok()) << basis.status();
  EXPECT_NEAR(basis->eigenvalues(0), 0.0, 1e-12);
  const double beta = 4.0 / basis->scale;
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> es{Eigen::MatrixXd(*l)};
  const Eigen::MatrixXd e =
      es.eigenvectors() * (-beta * es.eigenvalues().array()).exp().matrix().asDiagonal() * es.eigenvectors().transpose();
  const Eigen::VectorXd inv_sqrt = e.diagonal().cwiseSqrt().cwiseInverse();
  const Eigen::MatrixXd expected = inv_sqrt.asDiagonal() * e * inv_sqrt.asDiagonal();  // unit diagonal
  const Eigen::MatrixXd v = k->embedding();
  EXPECT_LE((v * v.transpose() - expected).cwiseAbs().maxCoeff(), 1e-8);
  // Δ + δI: the same kernel (the shift is removed).
  auto shifted = KnnLaplacian(d.x, 0.5);
  ASSERT_TRUE(shifted.ok());
  auto same = DiffusionPlainKernel(*shifted, 4.0, full);
  ASSERT_TRUE(same.ok()) << same.status();
  const Eigen::MatrixXd w = same->embedding();
  EXPECT_LE((w * w.transpose() - expected).cwiseAbs().maxCoeff(), 1e-8);
  // The default keeps 64 eigenpairs (here all 40); a smaller rank is the factor's rank.
  PlainKernelOptions low;
  low.diffusion_rank = 8;
  auto eight = DiffusionPlainKernel(*l, 4.0, low);
  ASSERT_TRUE(eight.ok());
  EXPECT_EQ(eight->rank(), 8);
  EXPECT_FALSE(DiffusionPlainKernel(*l, 0.0).ok());
}

TEST(AutoSelectTest, OnTwoMoonsAutoPicksTheGraphsDiffusionKernelOverLinearRbfAndAPoorLearnedOne) {
  const Labelled d = TwoMoons(200, 5);
  const PairwiseConstraints pairs = test_util::RandomLabelPairs(d.labels, 400, 6);
  auto features = std::make_shared<const Eigen::MatrixXd>(d.x);
  for (int clusters : {0, 2}) {
    SCOPED_TRACE(clusters);
    std::atomic<int> graphs{0};
    std::vector<AutoCandidate> candidates = {Fake("poor", d, 1.0)};
    for (const char* name : {"linear", "rbf"}) candidates.push_back(PlainKernelCandidate(features, name, "none", clusters));
    candidates.push_back(DiffusionKernelCandidate(
        [&] {
          ++graphs;
          return KnnLaplacian(d.x);
        },
        "none"));
    EXPECT_EQ(candidates.back().grid, PlainKernelOptions().diffusion_multiples);  // under both scores
    AutoSelectOptions o;
    o.clusters = clusters;
    std::vector<std::string> started;
    o.on_start = [&](const std::string& key, int round) {
      if (round == 1) started.push_back(key);  // the screening; round 2 continues the leaders
    };
    auto r = AutoSelect(pairs, candidates, o, SolveControl());
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(graphs.load(), 1);  // the graph and its eigenpairs once, for every value and fold
    EXPECT_EQ(started, (std::vector<std::string>{"poor@none", "linear@none", "rbf@none", "diffusion@none"}));
    const AutoEntry& diffusion = r->entries[3];
    EXPECT_EQ(diffusion.name, "diffusion");
    EXPECT_TRUE(diffusion.baseline);
    EXPECT_GE(diffusion.mean, 0.95);
    EXPECT_GT(diffusion.mean, r->entries[1].mean + 0.1);
    EXPECT_GT(diffusion.mean, r->entries[2].mean + 0.05);
    EXPECT_EQ(r->entries[r->best].Key(), "diffusion@none");
    EXPECT_THAT(r->Json(), HasSubstr("\"chosen\":\"diffusion@none\""));
    EXPECT_THAT(r->Json(), HasSubstr("{\"name\":\"diffusion\",\"scaling\":\"none\",\"kind\":\"plain\",\"status\":\"scored\""));
  }
}

}  // namespace
}  // namespace kls
