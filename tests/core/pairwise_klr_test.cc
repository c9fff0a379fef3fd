// Tests of core/social/pairwise_klr: the pairwise kernel logistic regression
// of thesis eq. (7.3) solved as an import vector machine, and the §7.4.2
// training pair selection.
#include "core/social/pairwise_klr.h"

#include <gtest/gtest.h>

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <random>
#include <set>
#include <vector>

namespace kls {
namespace {

double Softplus(double x) { return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)); }

// Users with explicit features X (n × d); K_u = X Xᵀ.
struct Problem {
  Eigen::MatrixXd x;
  Eigen::MatrixXd k;
  std::vector<UserPair> pairs;
  Eigen::VectorXd y;
};

// Planted problem: users in `clusters` groups with features = centre + noise; a pair is positive
// when both users share a cluster (flipped with probability `flip`).
Problem Planted(int n, int d, int clusters, int num_pairs, double flip, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> g(0.0, 1.0);
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  Eigen::MatrixXd centres(clusters, d);
  for (int c = 0; c < clusters; ++c)
    for (int j = 0; j < d; ++j) centres(c, j) = g(rng);
  Problem p;
  p.x.resize(n, d);
  std::vector<int> label(n);
  for (int i = 0; i < n; ++i) {
    label[i] = i % clusters;
    for (int j = 0; j < d; ++j) p.x(i, j) = centres(label[i], j) + 0.3 * g(rng);
  }
  p.k = p.x * p.x.transpose();
  std::uniform_int_distribution<int> user(0, n - 1);
  std::set<std::pair<int, int>> seen;
  std::vector<double> y;
  while (static_cast<int>(p.pairs.size()) < num_pairs) {
    const int a = user(rng), b = user(rng);
    if (a == b || !seen.insert({std::min(a, b), std::max(a, b)}).second) continue;
    // Half the pairs from the same cluster so both classes are well represented.
    if ((label[a] == label[b]) != (p.pairs.size() % 2 == 0)) continue;
    double lab = label[a] == label[b] ? 1.0 : -1.0;
    if (u01(rng) < flip) lab = -lab;
    p.pairs.push_back({a, b});
    y.push_back(lab);
  }
  p.y = Eigen::Map<Eigen::VectorXd>(y.data(), static_cast<Eigen::Index>(y.size()));
  return p;
}

PairKernelSpec Spec(PairKernel kind, double bias, double link) {
  PairKernelSpec s;
  s.kind = kind;
  s.bias_weight = bias;
  s.link_weight = link;
  return s;
}

// Explicit pair feature whose inner products are the pair kernel:
// [x_a − x_b or vec ½(x_a x_bᵀ + x_b x_aᵀ), √bias, √link · x_a·x_b].
Eigen::VectorXd PairFeature(const Eigen::MatrixXd& x, const PairKernelSpec& spec, const UserPair& p) {
  const Eigen::VectorXd a = x.row(p.a).transpose(), b = x.row(p.b).transpose();
  Eigen::VectorXd base;
  if (spec.kind == PairKernel::kDifference) {
    base = a - b;
  } else {
    const Eigen::MatrixXd m = 0.5 * (a * b.transpose() + b * a.transpose());
    base = Eigen::Map<const Eigen::VectorXd>(m.data(), m.size());
  }
  Eigen::VectorXd out(base.size() + 2);
  out << base, std::sqrt(spec.bias_weight), std::sqrt(spec.link_weight) * a.dot(b);
  return out;
}

// Independent solver: Newton on the primal of (7.2)/(7.3), min_w (1/N) Σ ln(1 + e^{−y wᵀφ}) + C/2 ‖w‖².
Eigen::VectorXd PrimalNewton(const Eigen::MatrixXd& phi, const Eigen::VectorXd& y, double c, double* objective) {
  const int n = static_cast<int>(phi.rows()), d = static_cast<int>(phi.cols());
  Eigen::VectorXd w = Eigen::VectorXd::Zero(d);
  auto value = [&](const Eigen::VectorXd& v) {
    const Eigen::VectorXd f = phi * v;
    double s = 0;
    for (int i = 0; i < n; ++i) s += Softplus(-y[i] * f[i]);
    return s / n + 0.5 * c * v.squaredNorm();
  };
  for (int it = 0; it < 200; ++it) {
    const Eigen::VectorXd f = phi * w;
    Eigen::VectorXd g(n), h(n);
    for (int i = 0; i < n; ++i) {
      const double s = 1.0 / (1.0 + std::exp(y[i] * f[i]));
      g[i] = -y[i] * s / n;
      h[i] = s * (1 - s) / n;
    }
    const Eigen::VectorXd grad = phi.transpose() * g + c * w;
    if (grad.lpNorm<Eigen::Infinity>() < 1e-13) break;
    Eigen::MatrixXd hess = phi.transpose() * h.asDiagonal() * phi;
    hess.diagonal().array() += c;
    const Eigen::VectorXd step = -hess.ldlt().solve(grad);
    double t = 1.0;
    const double v0 = value(w);
    while (t > 1e-12 && value(w + t * step) > v0 + 1e-4 * t * grad.dot(step)) t *= 0.5;
    w += t * step;
  }
  *objective = value(w);
  return w;
}

TEST(PairwiseKlr, GradientVanishesOnTheImportSetForBothPairKernels) {
  const Problem p = Planted(40, 5, 4, 160, 0.1, 7);
  for (const PairKernelSpec& kind : {Spec(PairKernel::kSymmetricProduct, 1, 1), Spec(PairKernel::kSymmetricProduct, 0, 0),
                                     Spec(PairKernel::kDifference, 0, 0), Spec(PairKernel::kDifference, 0.5, 2)}) {
    PairwiseKlrOptions o;
    o.pair_kernel = kind;
    o.c = 1e-2;
    o.max_import_vectors = 12;
    o.relative_tolerance = 0.0;
    auto r = SolvePairwiseKlr(p.k, p.pairs, p.y, o);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_GE(r->model.import_pairs.size(), 3u) << PairKernelName(kind.kind);
    EXPECT_LT(r->gradient_inf, 1e-8) << PairKernelName(kind.kind);
    // Independent evaluation of (7.3) and ∇ at the returned α.
    auto e = EvaluatePairwiseKlr(p.k, p.pairs, p.y, r->model, o.c);
    ASSERT_TRUE(e.ok()) << e.status();
    EXPECT_LT(e->gradient.lpNorm<Eigen::Infinity>(), 1e-8) << PairKernelName(kind.kind);
    EXPECT_NEAR(e->objective, r->objective, 1e-12);
    // Perturbing α in any direction does not lower J (first-order optimality, convexity).
    std::mt19937_64 rng(3);
    std::normal_distribution<double> g(0.0, 1.0);
    for (int trial = 0; trial < 5; ++trial) {
      PairwiseKlrModel m = r->model;
      for (Eigen::Index s = 0; s < m.alpha.size(); ++s) m.alpha[s] += 1e-3 * g(rng);
      auto e2 = EvaluatePairwiseKlr(p.k, p.pairs, p.y, m, o.c);
      ASSERT_TRUE(e2.ok());
      EXPECT_GE(e2->objective, r->objective - 1e-12);
    }
  }
}

TEST(PairwiseKlr, ObjectiveDecreasesAsImportVectorsAreAdded) {
  const Problem p = Planted(60, 6, 5, 300, 0.05, 11);
  PairwiseKlrOptions o;
  o.c = 1e-3;
  o.max_import_vectors = 30;
  o.relative_tolerance = 0.0;
  int reported = 0;
  SolveControl control;
  control.progress = [&](const ProgressEvent& e) {
    ++reported;
    EXPECT_EQ(e.iteration, reported);
  };
  auto r = SolvePairwiseKlr(p.k, p.pairs, p.y, o, control);
  ASSERT_TRUE(r.ok()) << r.status();
  const auto& h = r->stats.objective_history;
  ASSERT_EQ(static_cast<int>(h.size()), r->stats.iterations);
  ASSERT_EQ(reported, r->stats.iterations);
  ASSERT_GE(h.size(), 10u);
  EXPECT_LT(h.front(), std::log(2.0));  // J with no import vector: f = 0, J = ln 2
  for (size_t k = 1; k < h.size(); ++k) EXPECT_LE(h[k], h[k - 1] + 1e-12) << "k = " << k;
  EXPECT_LT(h.back(), 0.8 * h.front());
  std::printf("import vectors %zu, J %.4f -> %.4f, training accuracy %.3f\n", h.size(), h.front(), h.back(),
              r->training_accuracy);
  EXPECT_GT(r->training_accuracy, 0.8);
  EXPECT_EQ(r->import_indices.size(), r->model.import_pairs.size());
  std::set<int> distinct(r->import_indices.begin(), r->import_indices.end());
  EXPECT_EQ(distinct.size(), r->import_indices.size());
}

TEST(PairwiseKlr, AllImportVectorsAgreeWithPrimalNewton) {
  // Low-rank user kernel: the pair features have dimension d(d+1)/2 (product) or d (difference), + 2, so
  // the IVM stops once S spans them; its optimum must equal the primal optimum over all pairs.
  const Problem p = Planted(25, 3, 3, 60, 0.1, 5);
  for (const PairKernelSpec& kind : {Spec(PairKernel::kSymmetricProduct, 1, 1), Spec(PairKernel::kSymmetricProduct, 0, 0),
                                     Spec(PairKernel::kDifference, 0, 0), Spec(PairKernel::kDifference, 0.5, 2)}) {
    Eigen::MatrixXd phi(p.pairs.size(), PairFeature(p.x, kind, p.pairs[0]).size());
    for (size_t i = 0; i < p.pairs.size(); ++i) phi.row(i) = PairFeature(p.x, kind, p.pairs[i]).transpose();
    const double c = 1e-2;
    double primal = 0;
    const Eigen::VectorXd w = PrimalNewton(phi, p.y, c, &primal);
    PairwiseKlrOptions o;
    o.pair_kernel = kind;
    o.c = c;
    o.max_import_vectors = static_cast<int>(p.pairs.size());
    o.candidates_per_step = 0;
    o.relative_tolerance = 0.0;
    auto r = SolvePairwiseKlr(p.k, p.pairs, p.y, o);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->stats.termination, Termination::kConverged);
    EXPECT_NEAR(r->objective, primal, 1e-9) << PairKernelName(kind.kind);
    auto e = EvaluatePairwiseKlr(p.k, p.pairs, p.y, r->model, c);
    ASSERT_TRUE(e.ok());
    EXPECT_LT((e->f - phi * w).lpNorm<Eigen::Infinity>(), 1e-5) << PairKernelName(kind.kind);
  }
}

TEST(PairwiseKlr, AgreesWithFullDualNewtonOnFullRankKernel) {
  // Full-rank user kernel (Gaussian): every pair is needed; a dense Newton on all N α of (7.3)
  // is the reference, and the IVM approaches it from above as |S| grows.
  const int n = 14;
  std::mt19937_64 rng(9);
  std::normal_distribution<double> g(0.0, 1.0);
  Eigen::MatrixXd x(n, 2);
  for (int i = 0; i < n; ++i) x.row(i) << g(rng), g(rng);
  Eigen::MatrixXd k(n, n);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) k(i, j) = std::exp(-(x.row(i) - x.row(j)).squaredNorm());
  std::vector<UserPair> pairs;
  std::vector<double> y;
  for (int a = 0; a < n; ++a)
    for (int b = a + 1; b < n; b += 3) {
      pairs.push_back({a, b});
      y.push_back((x.row(a) - x.row(b)).norm() < 1.0 ? 1.0 : -1.0);
    }
  const int np = static_cast<int>(pairs.size());
  const Eigen::VectorXd yy = Eigen::Map<Eigen::VectorXd>(y.data(), np);
  Eigen::MatrixXd kp(np, np);
  for (int i = 0; i < np; ++i)
    for (int j = 0; j < np; ++j) kp(i, j) = PairKernelValue(k, PairKernelSpec(), pairs[i], pairs[j]);
  const double c = 1e-3;
  // Reference: Newton on α ∈ R^N, H = K W K + C K (+ tiny ridge), gradient K g + C K α.
  Eigen::VectorXd alpha = Eigen::VectorXd::Zero(np);
  auto value = [&](const Eigen::VectorXd& a) {
    const Eigen::VectorXd f = kp * a;
    double s = 0;
    for (int i = 0; i < np; ++i) s += Softplus(-yy[i] * f[i]);
    return s / np + 0.5 * c * a.dot(kp * a);
  };
  for (int it = 0; it < 100; ++it) {
    const Eigen::VectorXd f = kp * alpha;
    Eigen::VectorXd gl(np), w(np);
    for (int i = 0; i < np; ++i) {
      const double s = 1.0 / (1.0 + std::exp(yy[i] * f[i]));
      gl[i] = -yy[i] * s / np;
      w[i] = s * (1 - s) / np;
    }
    const Eigen::VectorXd grad = kp * gl + c * kp * alpha;
    if (grad.lpNorm<Eigen::Infinity>() < 1e-14) break;
    Eigen::MatrixXd h = kp * w.asDiagonal() * kp + c * kp;
    h.diagonal().array() += 1e-14;
    const Eigen::VectorXd step = -h.ldlt().solve(grad);
    double t = 1.0;
    const double v0 = value(alpha);
    while (t > 1e-12 && value(alpha + t * step) > v0 + 1e-4 * t * grad.dot(step)) t *= 0.5;
    alpha += t * step;
  }
  const double reference = value(alpha);

  PairwiseKlrOptions o;
  o.c = c;
  o.candidates_per_step = 0;
  o.relative_tolerance = 0.0;
  double previous = std::log(2.0);
  for (int q : {3, 8, 16, np}) {
    o.max_import_vectors = q;
    auto r = SolvePairwiseKlr(k, pairs, yy, o);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_GE(r->objective, reference - 1e-10) << "q = " << q;
    EXPECT_LE(r->objective, previous + 1e-12) << "q = " << q;
    previous = r->objective;
    if (q == np) {
      EXPECT_NEAR(r->objective, reference, 1e-8);
      auto e = EvaluatePairwiseKlr(k, pairs, yy, r->model, c);
      ASSERT_TRUE(e.ok());
      EXPECT_LT((e->f - kp * alpha).lpNorm<Eigen::Infinity>(), 1e-4);
    }
  }
}

TEST(PairwiseKlr, StrengthMatrixMatchesPairScores) {
  const Problem p = Planted(30, 4, 3, 120, 0.05, 21);
  for (const PairKernelSpec& kind : {Spec(PairKernel::kSymmetricProduct, 1, 1), Spec(PairKernel::kDifference, 0, 0),
                                     Spec(PairKernel::kDifference, 1, 1)}) {
    PairwiseKlrOptions o;
    o.pair_kernel = kind;
    o.max_import_vectors = 8;
    auto r = SolvePairwiseKlr(p.k, p.pairs, p.y, o);
    ASSERT_TRUE(r.ok()) << r.status();
    auto score = SocialStrengthMatrix(p.k, r->model, StrengthScale::kScore);
    auto prob = SocialStrengthMatrix(p.k, r->model);
    ASSERT_TRUE(score.ok() && prob.ok());
    const double scale = std::max(1.0, score->cwiseAbs().maxCoeff());
    for (int u = 0; u < 30; ++u)
      for (int v = 0; v < 30; ++v) {
        auto f = PairScore(p.k, r->model, u, v);
        ASSERT_TRUE(f.ok());
        EXPECT_NEAR((*score)(u, v), *f, 1e-12 * scale);
        EXPECT_NEAR((*prob)(u, v), 1.0 / (1.0 + std::exp(-*f)), 1e-12);
        if (kind.kind == PairKernel::kSymmetricProduct) {
          EXPECT_NEAR((*score)(u, v), (*score)(v, u), 1e-12 * scale);
        } else if (kind.bias_weight == 0 && kind.link_weight == 0) {
          EXPECT_NEAR((*score)(u, v), -(*score)(v, u), 1e-12 * scale);  // g(u) − g(v)
        }
      }
    // f on the training pairs equals the fitted values.
    auto e = EvaluatePairwiseKlr(p.k, p.pairs, p.y, r->model, o.c);
    ASSERT_TRUE(e.ok());
    for (size_t i = 0; i < p.pairs.size(); ++i)
      EXPECT_NEAR((*score)(p.pairs[i].a, p.pairs[i].b), e->f[i], 1e-10 * scale);
  }
}

TEST(PairwiseKlr, SymmetricProductLearnsSameClusterTiesTheDifferenceKernelCannot) {
  // A same-cluster tie is symmetric in (u, v); f(u, v) = g(u) − g(v) of the difference kernel cannot
  // separate it, the symmetric product kernel can (held-out pairs, AUC).
  const Problem train = Planted(80, 6, 4, 400, 0.0, 31);
  std::mt19937_64 rng(77);
  std::uniform_int_distribution<int> user(0, 79);
  std::vector<std::pair<int, int>> held;
  std::vector<int> truth;
  for (int t = 0; t < 400; ++t) {
    const int a = user(rng), b = user(rng);
    if (a == b) continue;
    held.push_back({a, b});
    truth.push_back(a % 4 == b % 4);
  }
  auto auc = [&](const Eigen::MatrixXd& f) {
    double wins = 0, total = 0;
    for (size_t i = 0; i < held.size(); ++i)
      for (size_t j = 0; j < held.size(); ++j)
        if (truth[i] && !truth[j]) {
          const double fi = f(held[i].first, held[i].second), fj = f(held[j].first, held[j].second);
          wins += fi > fj ? 1.0 : fi == fj ? 0.5 : 0.0;
          total += 1;
        }
    return wins / total;
  };
  PairwiseKlrOptions o;
  o.max_import_vectors = 40;
  auto sym = SolvePairwiseKlr(train.k, train.pairs, train.y, o);
  o.pair_kernel = Spec(PairKernel::kDifference, 0, 0);
  auto diff = SolvePairwiseKlr(train.k, train.pairs, train.y, o);
  ASSERT_TRUE(sym.ok() && diff.ok());
  const double auc_sym = auc(*SocialStrengthMatrix(train.k, sym->model, StrengthScale::kScore));
  const double auc_diff = auc(*SocialStrengthMatrix(train.k, diff->model, StrengthScale::kScore));
  std::printf("held-out AUC: symmetric product %.3f, difference %.3f\n", auc_sym, auc_diff);
  EXPECT_GT(auc_sym, 0.95);
  EXPECT_LT(auc_diff, 0.7);
}

TEST(PairwiseKlr, CancelledControlStopsAfterOneImportVector) {
  const Problem p = Planted(30, 4, 3, 100, 0.1, 2);
  PairwiseKlrOptions o;
  o.relative_tolerance = 0.0;
  SolveControl control;
  control.cancel.Cancel();
  auto r = SolvePairwiseKlr(p.k, p.pairs, p.y, o, control);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->stats.termination, Termination::kCancelled);
  EXPECT_EQ(r->model.import_pairs.size(), 1u);
  EXPECT_LT(r->gradient_inf, 1e-8);  // the returned α is still optimal on its S
  SolveControl late;
  late.SetTimeLimit(1e-9);
  auto t = SolvePairwiseKlr(p.k, p.pairs, p.y, o, late);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->stats.termination, Termination::kTimeLimit);
}

// --- §7.4.2 training pair selection ---------------------------------------------------------------

struct SelectionFixture {
  int n = 40;
  std::vector<std::vector<int>> contacts;
  std::vector<Eigen::MatrixXd> kernels;
  Eigen::MatrixXd comments;
  SelectionFixture() {
    std::mt19937_64 rng(4);
    std::uniform_real_distribution<double> u01(0.0, 1.0);
    contacts.assign(n, {});
    for (int u = 0; u < n; ++u)
      for (int v = u + 1; v < n; ++v)
        if (u01(rng) < 0.15) {
          contacts[u].push_back(v);
          contacts[v].push_back(u);
        }
    contacts[3].push_back(7);  // an asymmetric contact: 3 lists 7, 7 does not list 3
    std::sort(contacts[3].begin(), contacts[3].end());
    contacts[3].erase(std::unique(contacts[3].begin(), contacts[3].end()), contacts[3].end());
    contacts[7].erase(std::remove(contacts[7].begin(), contacts[7].end(), 3), contacts[7].end());
    for (int t = 0; t < 3; ++t) {
      Eigen::MatrixXd k(n, n);
      for (int i = 0; i < n; ++i)
        for (int j = 0; j <= i; ++j) k(i, j) = k(j, i) = std::floor(4 * u01(rng));  // ties on purpose
      kernels.push_back(k);
    }
    comments = Eigen::MatrixXd::Zero(n, n);
    for (int u = 0; u < n; ++u)
      for (int v : contacts[u]) comments(u, v) = comments(v, u) = std::floor(5 * u01(rng));
  }
  std::vector<const Eigen::MatrixXd*> Ptrs() const {
    std::vector<const Eigen::MatrixXd*> p;
    for (const auto& k : kernels) p.push_back(&k);
    return p;
  }
};

TEST(TrainingPairs, FollowTheSection742Rules) {
  const SelectionFixture fx;
  std::vector<int> anchors;
  for (int u = 0; u < fx.n; u += 2) anchors.push_back(u);
  TrainingPairOptions o;
  o.positives_per_user = 3;
  o.negatives_per_user = 4;
  o.negative_pool_fraction = 0.6;
  o.symmetric = false;
  auto r = SelectTrainingPairs(fx.contacts, fx.Ptrs(), fx.comments, anchors, o);
  ASSERT_TRUE(r.ok()) << r.status();
  const int pool = static_cast<int>(std::ceil(0.6 * (fx.n - 1)));
  ASSERT_EQ(r->labels.size(), static_cast<Eigen::Index>(r->pairs.size()));
  EXPECT_EQ(r->num_positive + r->num_negative, static_cast<int>(r->pairs.size()));
  std::set<std::pair<int, int>> seen;
  std::vector<int> npos(fx.n, 0), nneg(fx.n, 0);
  for (size_t i = 0; i < r->pairs.size(); ++i) {
    const int u = r->pairs[i].a, v = r->pairs[i].b;
    EXPECT_TRUE(std::binary_search(anchors.begin(), anchors.end(), u));
    EXPECT_NE(u, v);
    EXPECT_TRUE(seen.insert({u, v}).second) << "duplicate pair";
    const bool contact = std::count(fx.contacts[u].begin(), fx.contacts[u].end(), v) > 0;
    if (r->labels[i] > 0) {
      ++npos[u];
      EXPECT_TRUE(contact);
      // No unchosen contact of u communicates more than a chosen one.
      for (int w : fx.contacts[u]) {
        const bool chosen = std::find(r->pairs.begin(), r->pairs.end(), UserPair{u, w}) != r->pairs.end();
        if (!chosen) {
          EXPECT_LE(fx.comments(u, w), fx.comments(u, v));
        }
      }
    } else {
      ++nneg[u];
      EXPECT_FALSE(contact);
      // v is in the tail (the `pool` least similar users, ties included) of u under every kernel.
      for (const auto& k : fx.kernels) {
        int strictly_smaller = 0;
        for (int w = 0; w < fx.n; ++w)
          if (w != u && k(u, w) < k(u, v)) ++strictly_smaller;
        EXPECT_LT(strictly_smaller, pool) << "u = " << u << " v = " << v;
      }
    }
  }
  for (int u : anchors) {
    EXPECT_EQ(npos[u], std::min<int>(3, static_cast<int>(fx.contacts[u].size()))) << "u = " << u;
    EXPECT_LE(nneg[u], 4);
  }
  EXPECT_GT(r->num_negative, 0);
  // Same seed → same pairs; another seed changes the random negatives.
  auto again = SelectTrainingPairs(fx.contacts, fx.Ptrs(), fx.comments, anchors, o);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->pairs, r->pairs);
  o.seed = 2;
  auto other = SelectTrainingPairs(fx.contacts, fx.Ptrs(), fx.comments, anchors, o);
  ASSERT_TRUE(other.ok());
  EXPECT_NE(other->pairs, r->pairs);
}

TEST(TrainingPairs, ConservativeCandidatesAndLeastSimilarChoice) {
  const SelectionFixture fx;
  TrainingPairOptions o;
  o.negatives_per_user = 2;
  o.negative_pool_fraction = 0.5;
  o.least_similar_first = true;
  o.symmetric = false;
  const int u = 10;
  auto r = SelectTrainingPairs(fx.contacts, fx.Ptrs(), fx.comments, {u}, o);
  ASSERT_TRUE(r.ok()) << r.status();
  // Brute force: the candidate set and the two smallest Σ_t K^t (ties by index).
  const int pool = static_cast<int>(std::ceil(0.5 * (fx.n - 1)));
  std::vector<int> candidates;
  for (int v = 0; v < fx.n; ++v) {
    if (v == u || std::count(fx.contacts[u].begin(), fx.contacts[u].end(), v)) continue;
    bool all = true;
    for (const auto& k : fx.kernels) {
      std::vector<double> row;
      for (int w = 0; w < fx.n; ++w)
        if (w != u) row.push_back(k(u, w));
      std::sort(row.begin(), row.end());
      all = all && k(u, v) <= row[pool - 1];
    }
    if (all) candidates.push_back(v);
  }
  ASSERT_GE(candidates.size(), 2u);
  std::stable_sort(candidates.begin(), candidates.end(), [&](int a, int b) {
    double sa = 0, sb = 0;
    for (const auto& k : fx.kernels) sa += k(u, a), sb += k(u, b);
    return sa < sb;
  });
  std::vector<int> negatives;
  for (size_t i = 0; i < r->pairs.size(); ++i)
    if (r->labels[i] < 0) negatives.push_back(r->pairs[i].b);
  EXPECT_EQ(negatives, std::vector<int>(candidates.begin(), candidates.begin() + 2));
}

TEST(TrainingPairs, SymmetricModeKeepsOneExamplePerUnorderedPair) {
  const SelectionFixture fx;
  std::vector<int> anchors(fx.n);
  for (int u = 0; u < fx.n; ++u) anchors[u] = u;
  TrainingPairOptions o;
  o.negatives_per_user = 3;
  auto r = SelectTrainingPairs(fx.contacts, fx.Ptrs(), fx.comments, anchors, o);
  ASSERT_TRUE(r.ok()) << r.status();
  std::set<std::pair<int, int>> seen;
  std::set<std::pair<int, int>> positives;
  for (size_t i = 0; i < r->pairs.size(); ++i) {
    const auto key = std::make_pair(std::min(r->pairs[i].a, r->pairs[i].b), std::max(r->pairs[i].a, r->pairs[i].b));
    EXPECT_TRUE(seen.insert(key).second) << "unordered pair twice";
    if (r->labels[i] > 0) positives.insert(key);
  }
  // The same selection without the symmetric rule has at least as many examples.
  o.symmetric = false;
  auto ordered = SelectTrainingPairs(fx.contacts, fx.Ptrs(), fx.comments, anchors, o);
  ASSERT_TRUE(ordered.ok());
  EXPECT_GT(ordered->num_positive, r->num_positive);  // mutual contacts are counted once when symmetric
}

TEST(TrainingPairs, BadInputIsInvalidArgument) {
  const SelectionFixture fx;
  TrainingPairOptions o;
  auto expect_invalid = [&](const StatusOr<TrainingPairs>& r, const std::string& needle) {
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status();
  };
  TrainingPairOptions bad = o;
  bad.positives_per_user = 0;
  expect_invalid(SelectTrainingPairs(fx.contacts, fx.Ptrs(), fx.comments, {0}, bad), "positives_per_user = 0");
  bad = o;
  bad.negative_pool_fraction = 1.5;
  expect_invalid(SelectTrainingPairs(fx.contacts, fx.Ptrs(), fx.comments, {0}, bad), "negative_pool_fraction = 1.5");
  bad = o;
  bad.negatives_per_user = 30;  // N = ceil(0.5 * 39) = 20
  expect_invalid(SelectTrainingPairs(fx.contacts, fx.Ptrs(), fx.comments, {0}, bad), "negatives_per_user = 30");
  expect_invalid(SelectTrainingPairs(fx.contacts, fx.Ptrs(), fx.comments, {0, 40}, o), "anchors[1] = 40");
  expect_invalid(SelectTrainingPairs(fx.contacts, fx.Ptrs(), fx.comments, {2, 2}, o), "repeated");
  expect_invalid(SelectTrainingPairs(fx.contacts, {}, fx.comments, {0}, o), "similarity is empty");
  auto contacts = fx.contacts;
  contacts[5].push_back(99);
  expect_invalid(SelectTrainingPairs(contacts, fx.Ptrs(), fx.comments, {0}, o), "contacts[5] contains 99");
  const Eigen::MatrixXd small = Eigen::MatrixXd::Zero(3, 3);
  expect_invalid(SelectTrainingPairs(fx.contacts, {&small}, fx.comments, {0}, o), "similarity[0] is not 40 x 40");
}

TEST(PairwiseKlr, ValidateNamesTheFieldUnderThePath) {
  PairwiseKlrOptions o;
  EXPECT_TRUE(o.Validate("job.klr").ok());
  o.max_import_vectors = 0;
  EXPECT_EQ(o.Validate("job.klr").message(), "job.klr.max_import_vectors = 0 must be >= 1");
  o.max_import_vectors = 100;
  o.pair_kernel.bias_weight = -2;
  EXPECT_EQ(o.Validate("job.klr").message(), "job.klr.pair_kernel.bias_weight = -2 must be finite and >= 0");
  TrainingPairOptions t;
  t.positives_per_user = 0;
  EXPECT_EQ(t.Validate("job.pairs").message(), "job.pairs.positives_per_user = 0 must be >= 1");
  EXPECT_EQ(t.Validate().message(), "options.positives_per_user = 0 must be >= 1");
}

TEST(PairwiseKlr, BadInputIsInvalidArgument) {
  const Problem p = Planted(20, 3, 2, 40, 0.0, 1);
  PairwiseKlrOptions o;
  auto expect_invalid = [&](const Status& s, const std::string& needle) {
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find(needle), std::string::npos) << s;
  };
  PairwiseKlrOptions bad = o;
  bad.c = 0;
  expect_invalid(SolvePairwiseKlr(p.k, p.pairs, p.y, bad).status(), "options.c = 0");
  bad = o;
  bad.max_import_vectors = 0;
  expect_invalid(SolvePairwiseKlr(p.k, p.pairs, p.y, bad).status(), "options.max_import_vectors = 0");
  bad = o;
  bad.candidates_per_step = -1;
  expect_invalid(SolvePairwiseKlr(p.k, p.pairs, p.y, bad).status(), "options.candidates_per_step = -1");
  bad = o;
  bad.newton_tolerance = std::nan("");
  expect_invalid(SolvePairwiseKlr(p.k, p.pairs, p.y, bad).status(), "options.newton_tolerance = nan");
  bad = o;
  bad.stop_window = 0;
  expect_invalid(SolvePairwiseKlr(p.k, p.pairs, p.y, bad).status(), "options.stop_window = 0");
  bad = o;
  bad.pair_kernel.link_weight = -1;
  expect_invalid(SolvePairwiseKlr(p.k, p.pairs, p.y, bad).status(), "options.pair_kernel.link_weight = -1");

  expect_invalid(SolvePairwiseKlr(Eigen::MatrixXd::Zero(20, 19), p.pairs, p.y, o).status(), "20 x 19");
  Eigen::MatrixXd asym = p.k;
  asym(0, 1) += 1.0;
  expect_invalid(SolvePairwiseKlr(asym, p.pairs, p.y, o).status(), "not symmetric");
  Eigen::MatrixXd nonfinite = p.k;
  nonfinite(2, 2) = std::numeric_limits<double>::infinity();
  expect_invalid(SolvePairwiseKlr(nonfinite, p.pairs, p.y, o).status(), "non-finite");
  auto pairs = p.pairs;
  pairs[4] = {3, 20};
  expect_invalid(SolvePairwiseKlr(p.k, pairs, p.y, o).status(), "pairs[4] = (3, 20)");
  Eigen::VectorXd y = p.y;
  y[6] = 0.0;
  expect_invalid(SolvePairwiseKlr(p.k, p.pairs, y, o).status(), "labels[6] = 0");
  expect_invalid(SolvePairwiseKlr(p.k, p.pairs, Eigen::VectorXd::Ones(p.y.size()), o).status(), "all +1");
  expect_invalid(SolvePairwiseKlr(p.k, p.pairs, p.y.head(5), o).status(), "labels has 5 entries");
  expect_invalid(SolvePairwiseKlr(p.k, {}, Eigen::VectorXd(), o).status(), "pairs is empty");

  auto r = SolvePairwiseKlr(p.k, p.pairs, p.y, o);
  ASSERT_TRUE(r.ok());
  expect_invalid(SocialStrengthMatrix(Eigen::MatrixXd::Identity(5, 5), r->model).status(), "learned on 20 users");
  PairwiseKlrModel m = r->model;
  m.alpha.conservativeResize(m.alpha.size() + 1);
  m.alpha[m.alpha.size() - 1] = 0;
  expect_invalid(SocialStrengthMatrix(p.k, m).status(), "model.alpha has");
  expect_invalid(PairScore(p.k, r->model, 0, 25).status(), "(0, 25)");
}

}  // namespace
}  // namespace kls
