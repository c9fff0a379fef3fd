// Query computations that a SolveControl stops: the blocked SPD solve
// (core/common/spd_solve.h), the harmonic classifier, the strength graph, the
// harmonic extension and VisualRank re-ranking — each returns CANCELLED /
// DEADLINE_EXCEEDED instead of finishing, and soon after the stop.
#include <gtest/gtest.h>

#include <Eigen/Cholesky>
#include <Eigen/Dense>
#include <chrono>
#include <random>
#include <thread>

#include "core/common/solve_control.h"
#include "core/common/spd_solve.h"
#include "core/model/learned_kernel.h"
#include "core/ranking/kernel_extension.h"
#include "core/ranking/rerank.h"
#include "core/social/harmonic_classifier.h"
#include "core/social/social_model.h"

namespace kls {
namespace {

using Clock = std::chrono::steady_clock;

Eigen::MatrixXd RandomSpd(int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  Eigen::MatrixXd g(n, n);
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < n; ++i) g(i, j) = normal(rng);
  return g * g.transpose() / n + Eigen::MatrixXd::Identity(n, n);
}

SolveControl Cancelled() {
  SolveControl c;
  c.cancel.Cancel();
  return c;
}

SolveControl Expired() {
  SolveControl c;
  c.deadline = Clock::now() - std::chrono::milliseconds(1);
  return c;
}

TEST(SpdSolve, AgreesWithEigensLltAcrossBlockBoundaries) {
  for (int n : {1, 5, 127, 128, 129, 300}) {
    const Eigen::MatrixXd a = RandomSpd(n, 10 + n);
    const Eigen::MatrixXd b = Eigen::MatrixXd::Random(n, 3);
    auto x = SolveSpd(a, b, SolveControl(), "test");
    ASSERT_TRUE(x.ok()) << x.status();
    const Eigen::MatrixXd want = a.llt().solve(b);
    EXPECT_LE((*x - want).norm(), 1e-10 * (1.0 + want.norm())) << "n = " << n;
    EXPECT_LE((a * *x - b).norm(), 1e-10 * (1.0 + b.norm())) << "n = " << n;
  }
}

TEST(SpdSolve, ErrorsNameTheCall) {
  Eigen::MatrixXd indefinite = Eigen::MatrixXd::Identity(200, 200);
  indefinite(150, 150) = -1.0;
  auto bad = SolveSpd(indefinite, Eigen::MatrixXd::Ones(200, 1), SolveControl(), "W");
  EXPECT_EQ(bad.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(bad.status().message(), "W: the matrix is not positive definite");
  EXPECT_EQ(SolveSpd(Eigen::MatrixXd::Identity(3, 3), Eigen::MatrixXd::Ones(2, 1), SolveControl(), "W")
                .status()
                .code(),
            StatusCode::kInvalidArgument);
  auto cancelled = SolveSpd(RandomSpd(50, 1), Eigen::MatrixXd::Ones(50, 1), Cancelled(), "W");
  EXPECT_EQ(cancelled.status().code(), StatusCode::kCancelled);
  EXPECT_EQ(cancelled.status().message(), "W: cancelled");
  auto expired = SolveSpd(RandomSpd(50, 1), Eigen::MatrixXd::Ones(50, 1), Expired(), "W");
  EXPECT_EQ(expired.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(expired.status().message(), "W: deadline exceeded");
}

// The polled stop (a gRPC call's IsCancelled) works like the token.
TEST(SpdSolve, PolledStopRequestIsACancellation) {
  SolveControl control;
  int polls = 0;
  control.stop_requested = [&] { return ++polls > 3; };
  auto x = SolveSpd(RandomSpd(1000, 2), Eigen::MatrixXd::Ones(1000, 1), control, "W");
  EXPECT_EQ(x.status().code(), StatusCode::kCancelled);
  EXPECT_EQ(polls, 4);
}

// ClassifyUsers' computation at 5,000 users: without a stop it takes far
// longer than the deadline; with one it returns DEADLINE_EXCEEDED within
// 100 ms of it, and CANCELLED within 100 ms of a cancel from another thread.
TEST(HarmonicClassify, StopsWithin100MsOfTheDeadlineOrCancellationAt5000Users) {
  const int n = 5000;
  Eigen::MatrixXd w = Eigen::MatrixXd::Random(n, n).cwiseAbs();
  w = (0.5 * (w + w.transpose())).eval();  // dense, non-negative, symmetric
  std::vector<int> labelled, labels;
  for (int i = 0; i < 20; ++i) {
    labelled.push_back(i * 7);
    labels.push_back(i % 2);
  }
  SolveControl deadline;
  deadline.SetTimeLimit(0.1);
  const auto start = Clock::now();
  auto stopped = HarmonicClassify(w, labelled, labels, 0, HarmonicOptions(), deadline);
  const double after_deadline = std::chrono::duration<double>(Clock::now() - deadline.deadline).count();
  EXPECT_EQ(stopped.status().code(), StatusCode::kDeadlineExceeded) << stopped.status();
  EXPECT_LE(after_deadline, 0.1);

  SolveControl cancel;
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    cancel.cancel.Cancel();
  });
  const auto cancel_start = Clock::now();
  auto cancelled = HarmonicClassify(w, labelled, labels, 0, HarmonicOptions(), cancel);
  const double cancel_seconds = std::chrono::duration<double>(Clock::now() - cancel_start).count();
  canceller.join();
  EXPECT_EQ(cancelled.status().code(), StatusCode::kCancelled) << cancelled.status();
  EXPECT_LE(cancel_seconds, 0.1 + 0.1);

  const auto full_start = Clock::now();
  auto full = HarmonicClassify(w, labelled, labels, 0, HarmonicOptions(), SolveControl());
  const double full_seconds = std::chrono::duration<double>(Clock::now() - full_start).count();
  ASSERT_TRUE(full.ok()) << full.status();
  std::printf("[ n=%d ] full solve %.2f s; stopped %.3f s after the deadline, %.3f s after the cancel request\n", n,
              full_seconds, after_deadline, cancel_seconds - 0.1);
  EXPECT_GT(full_seconds, 0.2) << "the case must outlast the deadline to show anything";
  (void)start;
}

TEST(QueryControl, StrengthGraphExtensionAndReRankStop) {
  Eigen::MatrixXd v = Eigen::MatrixXd::Random(300, 5).cwiseAbs();
  const LearnedKernel kernel = *LearnedKernel::FromEmbedding(v);
  EXPECT_EQ(StrengthGraphWeights(kernel, nullptr, Cancelled()).status().code(), StatusCode::kCancelled);
  const auto weights = StrengthGraphWeights(kernel, nullptr, SolveControl());
  ASSERT_TRUE(weights.ok());
  EXPECT_LE((*weights - StrengthGraphWeights(kernel, nullptr)).norm(), 1e-12 * weights->norm());

  const Eigen::MatrixXd train = Eigen::MatrixXd::Random(300, 4);
  const Eigen::MatrixXd queries = Eigen::MatrixXd::Random(40, 4);
  EXPECT_EQ(HarmonicExtension(kernel, train, queries, {}, Expired()).status().code(), StatusCode::kDeadlineExceeded);
  // Blocks of query rows give the rows of the one-block computation.
  auto blocked = HarmonicExtension(kernel, train, queries, {}, SolveControl());
  ASSERT_TRUE(blocked.ok());
  for (int q = 0; q < queries.rows(); ++q) {
    auto one = HarmonicExtension(kernel, train, queries.middleRows(q, 1));
    ASSERT_TRUE(one.ok());
    EXPECT_LE((blocked->row(q) - one->row(0)).norm(), 1e-12 * (1.0 + one->row(0).norm())) << q;
  }

  std::vector<int> candidates(100);
  for (int i = 0; i < 100; ++i) candidates[i] = i;
  EXPECT_EQ(ReRankCandidates(kernel, candidates, Eigen::VectorXd(), VisualRankOptions(), nullptr, Cancelled())
                .status()
                .code(),
            StatusCode::kCancelled);
  EXPECT_TRUE(ReRankCandidates(kernel, candidates, Eigen::VectorXd(), VisualRankOptions()).ok());
}

// An inner solve's control keeps the outer one's stop conditions (the
// cancellation token, the polled stop request, the earlier deadline) and
// nothing of its own.
TEST(SolveControlStopConditions, KeepsCancellationStopRequestAndTheEarlierDeadlineOnly) {
  SolveControl outer;
  outer.SetTimeLimit(3600.0);
  bool requested = false;
  outer.stop_requested = [&requested] { return requested; };
  outer.progress = [](const ProgressEvent&) {};
  outer.checkpoint = [](const Checkpoint&) {};

  const SolveControl inner = outer.StopConditions();
  EXPECT_EQ(inner.deadline, outer.deadline);
  EXPECT_FALSE(inner.progress);
  EXPECT_FALSE(inner.checkpoint);
  EXPECT_EQ(inner.resume_from, nullptr);
  Termination why;
  EXPECT_FALSE(inner.ShouldStop(&why));
  requested = true;
  ASSERT_TRUE(inner.ShouldStop(&why));
  EXPECT_EQ(why, Termination::kCancelled);
  requested = false;
  outer.cancel.Cancel();
  ASSERT_TRUE(inner.ShouldStop(&why));  // the same token
  EXPECT_EQ(why, Termination::kCancelled);

  SolveControl later;
  later.SetTimeLimit(3600.0);
  const auto soon = SolveControl::Clock::now() - std::chrono::seconds(1);
  const SolveControl earlier = later.StopConditions(soon);
  EXPECT_EQ(earlier.deadline, soon);
  ASSERT_TRUE(earlier.ShouldStop(&why));
  EXPECT_EQ(why, Termination::kTimeLimit);
  EXPECT_EQ(later.StopConditions(later.deadline + std::chrono::hours(1)).deadline, later.deadline);
}

}  // namespace
}  // namespace kls
