#include "core/eval/baselines.h"

#include <Eigen/Eigenvalues>
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <unordered_map>

#include "core/eval/metrics.h"
#include "core/model/learned_kernel.h"
#include "core/npkl/cross_validation.h"
#include "core/qsdp/smooth_basis.h"

namespace kls {
namespace {

constexpr int kRepairPasses = 20;

int Find(std::vector<int>& parent, int x) {
  while (parent[x] != x) {
    parent[x] = parent[parent[x]];
    x = parent[x];
  }
  return x;
}

Status CheckFeatures(const Eigen::MatrixXd& x) {
  if (x.rows() == 0 || x.cols() == 0) return InvalidArgumentError("features: empty matrix");
  if (!x.allFinite()) return InvalidArgumentError("features: non-finite entry");
  return OkStatus();
}

// Squared distances between the rows of a and b (|a| × |b|), clamped at 0.
Eigen::MatrixXd SquaredDistances(const Eigen::MatrixXd& a, const Eigen::MatrixXd& b) {
  const Eigen::VectorXd na = a.rowwise().squaredNorm(), nb = b.rowwise().squaredNorm();
  Eigen::MatrixXd d = -2.0 * a * b.transpose();
  d.colwise() += na;
  d.rowwise() += nb.transpose();
  return d.cwiseMax(0.0);
}

// V = U Λ^{1/2} of a symmetric PSD matrix, eigenvalues above 1e-10 λ_max.
Eigen::MatrixXd SymmetricFactor(const Eigen::MatrixXd& k, Eigen::MatrixXd* inv_sqrt_basis = nullptr) {
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> es(k);
  const Eigen::VectorXd& w = es.eigenvalues();  // ascending
  const double top = std::max(w(w.size() - 1), 0.0);
  int keep = 0;
  while (keep < w.size() && w(w.size() - 1 - keep) > 1e-10 * top) ++keep;
  keep = std::max(keep, 1);
  Eigen::MatrixXd u = es.eigenvectors().rightCols(keep);
  Eigen::VectorXd lam = w.tail(keep).cwiseMax(0.0);
  if (inv_sqrt_basis) {
    *inv_sqrt_basis = u * lam.cwiseSqrt().cwiseMax(1e-300).cwiseInverse().asDiagonal();
  }
  return u * lam.cwiseSqrt().asDiagonal();
}

Status CheckLabels(const std::vector<int>& truth, const std::vector<int>& predicted) {
  if (truth.size() != predicted.size()) {
    return InvalidArgumentError("predicted: has " + std::to_string(predicted.size()) + " entries but truth has " +
                                std::to_string(truth.size()));
  }
  for (size_t i = 0; i < truth.size(); ++i) {
    if (truth[i] < 0) return InvalidArgumentError("truth[" + std::to_string(i) + "] is negative");
    if (predicted[i] < 0) return InvalidArgumentError("predicted[" + std::to_string(i) + "] is negative");
  }
  return OkStatus();
}

Status CheckSubset(const std::vector<int>& s, size_t n, const char* name) {
  if (s.empty()) return InvalidArgumentError(std::string(name) + ": empty");
  for (int i : s) {
    if (i < 0 || static_cast<size_t>(i) >= n) {
      return InvalidArgumentError(std::string(name) + ": index " + std::to_string(i) + " is out of range");
    }
  }
  return OkStatus();
}

std::vector<int> Restrict(const std::vector<int>& v, const std::vector<int>& subset) {
  std::vector<int> out;
  out.reserve(subset.size());
  for (int i : subset) out.push_back(v[i]);
  return out;
}


// Cannot-link edges inside a cluster (each counted from both ends).
int64_t Violations(const std::vector<std::vector<int>>& conflicts, const std::vector<int>& cluster) {
  int64_t v = 0;
  for (size_t c = 0; c < conflicts.size(); ++c)
    for (int o : conflicts[c]) v += cluster[c] == cluster[o];
  return v;
}

// DSatur backtracking (Brélaz 1979) over the components with cannot-links:
// a k-colouring with no conflict, or empty when there is none or the search
// exceeds kSearchBudget steps. Then the components without cannot-links go,
// in `order`, to the cluster with the fewest points (ties: smaller index).
constexpr int64_t kSearchBudget = 200000;
std::vector<int> ExactColouring(const std::vector<std::vector<int>>& conflicts, const std::vector<int>& comp_size,
                                const std::vector<int>& order, int k) {
  const int m = static_cast<int>(conflicts.size());
  std::vector<int> rank(m), colour(m, -1), size(k, 0);
  for (int i = 0; i < m; ++i) rank[order[i]] = i;
  std::vector<int> nodes;
  for (int c : order)
    if (!conflicts[c].empty()) nodes.push_back(c);
  int64_t steps = 0;
  std::function<bool(int)> solve = [&](int coloured) -> bool {
    if (coloured == static_cast<int>(nodes.size())) return true;
    if (++steps > kSearchBudget) return false;
    int pick = -1, pick_sat = -1;
    std::vector<char> seen(k);
    for (int c : nodes) {
      if (colour[c] >= 0) continue;
      std::fill(seen.begin(), seen.end(), 0);
      int sat = 0;
      for (int o : conflicts[c])
        if (colour[o] >= 0 && !seen[colour[o]]) seen[colour[o]] = 1, ++sat;
      if (sat > pick_sat || (sat == pick_sat && (comp_size[c] > comp_size[pick] ||
                                                 (comp_size[c] == comp_size[pick] && rank[c] < rank[pick])))) {
        pick = c;
        pick_sat = sat;
      }
    }
    std::fill(seen.begin(), seen.end(), 0);
    for (int o : conflicts[pick])
      if (colour[o] >= 0) seen[colour[o]] = 1;
    std::vector<int> candidates;
    bool tried_empty = false;  // empty clusters are interchangeable: try one
    for (int q = 0; q < k; ++q) {
      if (seen[q]) continue;
      if (size[q] == 0) {
        if (tried_empty) continue;
        tried_empty = true;
      }
      candidates.push_back(q);
    }
    std::stable_sort(candidates.begin(), candidates.end(), [&](int a, int b) { return size[a] < size[b]; });
    for (int q : candidates) {
      colour[pick] = q;
      size[q] += comp_size[pick];
      if (solve(coloured + 1)) return true;
      size[q] -= comp_size[pick];
      colour[pick] = -1;
      if (steps > kSearchBudget) return false;
    }
    return false;
  };
  if (!solve(0)) return {};
  for (int c : order) {
    if (!conflicts[c].empty()) continue;
    const int q = static_cast<int>(std::min_element(size.begin(), size.end()) - size.begin());
    colour[c] = q;
    size[q] += comp_size[c];
  }
  return colour;
}

}  // namespace

StatusOr<std::vector<int>> PairsAloneClustering(int n, const PairwiseConstraints& constraints, int k,
                                                uint64_t seed) {
  if (n < 1) return InvalidArgumentError("n = " + std::to_string(n) + " must be >= 1");
  if (k < 1 || k > n) {
    return InvalidArgumentError("k = " + std::to_string(k) + " must be in [1, " + std::to_string(n) + "]");
  }
  KLS_RETURN_IF_ERROR(constraints.Validate(n));
  std::vector<int> parent(n);
  std::iota(parent.begin(), parent.end(), 0);
  for (const Pair& p : constraints.pairs) {
    if (p.kind != PairKind::kMustLink || p.i == p.j) continue;
    const int a = Find(parent, p.i), b = Find(parent, p.j);
    if (a != b) parent[std::max(a, b)] = std::min(a, b);
  }
  // Components, numbered by first appearance (smallest point index).
  std::vector<int> comp_of(n, -1), root_comp(n, -1);
  std::vector<int> comp_size;
  for (int i = 0; i < n; ++i) {
    const int r = Find(parent, i);
    if (root_comp[r] < 0) {
      root_comp[r] = static_cast<int>(comp_size.size());
      comp_size.push_back(0);
    }
    comp_of[i] = root_comp[r];
    ++comp_size[comp_of[i]];
  }
  const int m = static_cast<int>(comp_size.size());
  std::vector<std::vector<int>> conflicts(m);  // cannot-link edges between components (with multiplicity)
  for (const Pair& p : constraints.pairs) {
    if (p.kind != PairKind::kCannotLink) continue;
    const int a = comp_of[p.i], b = comp_of[p.j];
    if (a == b) continue;
    conflicts[a].push_back(b);
    conflicts[b].push_back(a);
  }
  // Order: largest first; equal sizes in a seeded shuffle.
  std::vector<int> order(m);
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(seed);
  for (int i = m - 1; i > 0; --i) {  // Fisher–Yates with integer arithmetic (portable)
    const int j = static_cast<int>(rng() % static_cast<uint64_t>(i + 1));
    std::swap(order[i], order[j]);
  }
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return comp_size[a] > comp_size[b]; });
  std::vector<int> comp_cluster(m, -1), cluster_size(k, 0), count(k, 0);
  for (int c : order) {
    std::fill(count.begin(), count.end(), 0);
    for (int o : conflicts[c]) {
      if (comp_cluster[o] >= 0) ++count[comp_cluster[o]];
    }
    int best = 0;
    for (int q = 1; q < k; ++q) {
      if (count[q] < count[best] || (count[q] == count[best] && cluster_size[q] < cluster_size[best])) best = q;
    }
    comp_cluster[c] = best;
    cluster_size[best] += comp_size[c];
  }
  // Repair: components that still share a cluster with a cannot-linked one
  // move to the cluster with strictly fewer conflicts (ties: fewest points,
  // then the smaller index), in the same order, until a pass moves none.
  for (int pass = 0; pass < kRepairPasses; ++pass) {
    bool moved = false;
    for (int c : order) {
      std::fill(count.begin(), count.end(), 0);
      for (int o : conflicts[c]) ++count[comp_cluster[o]];
      const int now = comp_cluster[c];
      if (count[now] == 0) continue;
      cluster_size[now] -= comp_size[c];
      int best = now;
      for (int q = 0; q < k; ++q) {
        if (count[q] < count[best] || (count[q] == count[best] && q != now && best != now &&
                                       (cluster_size[q] < cluster_size[best] ||
                                        (cluster_size[q] == cluster_size[best] && q < best)))) {
          best = q;
        }
      }
      comp_cluster[c] = best;
      cluster_size[best] += comp_size[c];
      moved = moved || best != now;
    }
    if (!moved) break;
  }
  if (Violations(conflicts, comp_cluster) > 0) {
    std::vector<int> exact = ExactColouring(conflicts, comp_size, order, k);
    if (!exact.empty()) comp_cluster = std::move(exact);
  }
  std::vector<int> assignment(n);
  for (int i = 0; i < n; ++i) assignment[i] = comp_cluster[comp_of[i]];
  return assignment;
}

StatusOr<Eigen::MatrixXd> LinearKernelFactor(const Eigen::MatrixXd& features) {
  KLS_RETURN_IF_ERROR(CheckFeatures(features));
  return features;
}

Status RbfOptions::Validate() const {
  if (max_exact_points < 1) {
    return InvalidArgumentError("rbf.max_exact_points = " + std::to_string(max_exact_points) + " must be >= 1");
  }
  if (landmarks < 1) return InvalidArgumentError("rbf.landmarks = " + std::to_string(landmarks) + " must be >= 1");
  return OkStatus();
}

StatusOr<Eigen::MatrixXd> RbfKernelFactor(const Eigen::MatrixXd& features, double width, const RbfOptions& options) {
  KLS_RETURN_IF_ERROR(CheckFeatures(features));
  KLS_RETURN_IF_ERROR(options.Validate());
  if (!(width > 0) || !std::isfinite(width)) {
    return InvalidArgumentError("width = " + std::to_string(width) + " must be finite and > 0");
  }
  const int n = static_cast<int>(features.rows());
  if (n <= options.max_exact_points) {
    const Eigen::MatrixXd k = (-SquaredDistances(features, features) / width).array().exp().matrix();
    return SymmetricFactor(k);
  }
  // Nyström: m seeded random landmarks.
  const int m = std::min(options.landmarks, n);
  std::vector<int> idx(n);
  std::iota(idx.begin(), idx.end(), 0);
  std::mt19937_64 rng(options.seed);
  for (int i = 0; i < m; ++i) {
    const int j = i + static_cast<int>(rng() % static_cast<uint64_t>(n - i));
    std::swap(idx[i], idx[j]);
  }
  Eigen::MatrixXd land(m, features.cols());
  for (int i = 0; i < m; ++i) land.row(i) = features.row(idx[i]);
  const Eigen::MatrixXd kmm = (-SquaredDistances(land, land) / width).array().exp().matrix();
  Eigen::MatrixXd basis;  // U Λ^{-1/2}
  SymmetricFactor(kmm, &basis);
  const Eigen::MatrixXd knm = (-SquaredDistances(features, land) / width).array().exp().matrix();
  return Eigen::MatrixXd(knm * basis);
}

StatusOr<LaplacianDiffusionBasis> DiffusionBasis(const Eigen::SparseMatrix<double>& laplacian, int rank) {
  const int n = static_cast<int>(laplacian.rows());
  if (n < 1 || laplacian.cols() != n) {
    return InvalidArgumentError("diffusion kernel: the Laplacian is " + std::to_string(laplacian.rows()) + " x " +
                                std::to_string(laplacian.cols()));
  }
  if (rank < 1) return InvalidArgumentError("diffusion kernel: rank = " + std::to_string(rank) + " must be >= 1");
  if (n > kDiffusionMaxPoints) {
    return FailedPreconditionError("diffusion kernel: " + std::to_string(n) + " points > " +
                                   std::to_string(kDiffusionMaxPoints) + " (the eigenpairs' sparse factorization)");
  }
  KLS_ASSIGN_OR_RETURN(SmoothBasis s, SmoothestEigenvectors(laplacian, std::min(rank, n), 0));
  LaplacianDiffusionBasis b;
  b.vectors = std::move(s.vectors);
  b.eigenvalues = (s.eigenvalues.array() - s.eigenvalues.minCoeff()).cwiseMax(0.0).matrix();
  b.scale = b.eigenvalues.maxCoeff() > 0.0 ? b.eigenvalues.maxCoeff() : 1.0;
  return b;
}

StatusOr<Eigen::MatrixXd> DiffusionKernelFactor(const LaplacianDiffusionBasis& basis, double multiple) {
  if (!(multiple > 0.0) || !std::isfinite(multiple)) {
    return InvalidArgumentError("diffusion kernel: multiple = " + std::to_string(multiple) +
                                " must be positive and finite");
  }
  const double beta = multiple / basis.scale;
  const Eigen::VectorXd w = (-0.5 * beta * basis.eigenvalues.array()).exp().matrix();
  Eigen::MatrixXd v = basis.vectors * w.asDiagonal();
  for (Eigen::Index i = 0; i < v.rows(); ++i) {  // unit diagonal (header)
    const double norm = v.row(i).norm();
    if (norm > 0.0) v.row(i) /= norm;
  }
  return v;
}

StatusOr<double> MedianSquaredDistance(const Eigen::MatrixXd& features, uint64_t seed) {
  KLS_RETURN_IF_ERROR(CheckFeatures(features));
  const int n = static_cast<int>(features.rows());
  if (n < 2) return InvalidArgumentError("features: fewer than 2 points");
  constexpr int kSample = 2000;
  Eigen::MatrixXd x = features;
  if (n > kSample) {
    std::vector<int> idx(n);
    std::iota(idx.begin(), idx.end(), 0);
    std::mt19937_64 rng(seed);
    for (int i = 0; i < kSample; ++i) {
      const int j = i + static_cast<int>(rng() % static_cast<uint64_t>(n - i));
      std::swap(idx[i], idx[j]);
    }
    x.resize(kSample, features.cols());
    for (int i = 0; i < kSample; ++i) x.row(i) = features.row(idx[i]);
  }
  const Eigen::MatrixXd d = SquaredDistances(x, x);
  std::vector<double> v;
  v.reserve(static_cast<size_t>(x.rows()) * (x.rows() - 1) / 2);
  for (int j = 1; j < x.rows(); ++j)
    for (int i = 0; i < j; ++i) v.push_back(d(i, j));
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + mid, v.end());
  double med = v[mid];
  if (v.size() % 2 == 0) {
    const double lower = *std::max_element(v.begin(), v.begin() + mid);
    med = 0.5 * (med + lower);
  }
  return med;
}

Status RbfWidthOptions::Validate() const {
  if (multiples.empty()) return InvalidArgumentError("rbf_width.multiples: empty");
  for (double m : multiples) {
    if (!(m > 0) || !std::isfinite(m)) {
      return InvalidArgumentError("rbf_width.multiples: " + std::to_string(m) + " must be finite and > 0");
    }
  }
  if (clusters < 2) return InvalidArgumentError("rbf_width.clusters = " + std::to_string(clusters) + " must be >= 2");
  return rbf.Validate();
}

StatusOr<RbfWidthSelection> SelectRbfWidth(const Eigen::MatrixXd& train_features,
                                           const PairwiseConstraints& train_pairs, const RbfWidthOptions& options) {
  KLS_RETURN_IF_ERROR(options.Validate());
  KLS_RETURN_IF_ERROR(CheckFeatures(train_features));
  const int n = static_cast<int>(train_features.rows());
  KLS_RETURN_IF_ERROR(train_pairs.Validate(n));
  bool any = false;
  for (const Pair& p : train_pairs.pairs) any = any || p.i != p.j;
  if (!any) return InvalidArgumentError("rbf_width: no pair i != j to score widths on");
  RbfWidthSelection sel;
  KLS_ASSIGN_OR_RETURN(sel.median, MedianSquaredDistance(train_features, options.rbf.seed));
  if (!(sel.median > 0)) sel.median = 1.0;  // every point identical: any width
  sel.multiples = options.multiples;
  std::sort(sel.multiples.begin(), sel.multiples.end());
  sel.multiples.erase(std::unique(sel.multiples.begin(), sel.multiples.end()), sel.multiples.end());
  for (double m : sel.multiples) {
    KLS_ASSIGN_OR_RETURN(Eigen::MatrixXd v, RbfKernelFactor(train_features, m * sel.median, options.rbf));
    KLS_ASSIGN_OR_RETURN(LearnedKernel kernel, LearnedKernel::FromEmbedding(LearnedKernel::Embedding(v)));
    KLS_ASSIGN_OR_RETURN(double score, HeldOutClusterPairAccuracy(kernel, train_pairs, options.clusters));
    sel.scores.push_back(score);
  }
  auto closeness = [&](int i) { return std::abs(std::log(sel.multiples[i])); };
  int best = 0;
  for (int i = 1; i < static_cast<int>(sel.scores.size()); ++i) {
    const double s = sel.scores[i], b = sel.scores[best];
    if (s > b || (s == b && closeness(i) <= closeness(best))) best = i;  // equal closeness: the wider (later) one
  }
  sel.best_index = best;
  sel.width = sel.multiples[best] * sel.median;
  return sel;
}

StatusOr<HoldoutSplit> StratifiedHoldout(const std::vector<int>& labels, double fraction, uint64_t seed) {
  if (!(fraction > 0.0 && fraction < 1.0)) {
    return InvalidArgumentError("holdout fraction = " + std::to_string(fraction) + " must be in (0, 1)");
  }
  if (labels.empty()) return InvalidArgumentError("labels: empty");
  std::map<int, std::vector<int>> classes;
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] < 0) return InvalidArgumentError("labels[" + std::to_string(i) + "] is negative");
    classes[labels[i]].push_back(static_cast<int>(i));
  }
  std::mt19937_64 rng(seed);
  HoldoutSplit split;
  for (auto& [label, members] : classes) {
    const int c = static_cast<int>(members.size());
    const int h = std::min(c - 1, static_cast<int>(std::lround(fraction * c)));
    for (int i = 0; i < h; ++i) {  // partial Fisher–Yates: the first h are held out
      const int j = i + static_cast<int>(rng() % static_cast<uint64_t>(c - i));
      std::swap(members[i], members[j]);
    }
    split.heldout.insert(split.heldout.end(), members.begin(), members.begin() + h);
    split.train.insert(split.train.end(), members.begin() + h, members.end());
  }
  std::sort(split.train.begin(), split.train.end());
  std::sort(split.heldout.begin(), split.heldout.end());
  if (split.heldout.empty()) return InvalidArgumentError("holdout: no point held out (classes too small)");
  if (split.train.empty()) return InvalidArgumentError("holdout: no training point");
  return split;
}

StatusOr<double> CrossPairAccuracy(const std::vector<int>& truth, const std::vector<int>& predicted,
                                   const std::vector<int>& a, const std::vector<int>& b) {
  KLS_RETURN_IF_ERROR(CheckLabels(truth, predicted));
  KLS_RETURN_IF_ERROR(CheckSubset(a, truth.size(), "a"));
  KLS_RETURN_IF_ERROR(CheckSubset(b, truth.size(), "b"));
  // Counts of a's points per label, per cluster and per (label, cluster) cell;
  // then, over b: pairs with the same label, the same cluster, and both.
  std::unordered_map<int, int64_t> by_label, by_cluster;
  std::unordered_map<int64_t, int64_t> by_cell;
  auto cell = [](int l, int c) { return (static_cast<int64_t>(l) << 32) | static_cast<uint32_t>(c); };
  for (int i : a) {
    ++by_label[truth[i]];
    ++by_cluster[predicted[i]];
    ++by_cell[cell(truth[i], predicted[i])];
  }
  int64_t same_label = 0, same_cluster = 0, both = 0;
  for (int j : b) {
    auto l = by_label.find(truth[j]);
    if (l != by_label.end()) same_label += l->second;
    auto c = by_cluster.find(predicted[j]);
    if (c != by_cluster.end()) same_cluster += c->second;
    auto e = by_cell.find(cell(truth[j], predicted[j]));
    if (e != by_cell.end()) both += e->second;
  }
  const double total = static_cast<double>(a.size()) * static_cast<double>(b.size());
  return 1.0 - static_cast<double>(same_label + same_cluster - 2 * both) / total;
}

StatusOr<double> SubsetPairAccuracy(const std::vector<int>& truth, const std::vector<int>& predicted,
                                    const std::vector<int>& subset) {
  KLS_RETURN_IF_ERROR(CheckLabels(truth, predicted));
  KLS_RETURN_IF_ERROR(CheckSubset(subset, truth.size(), "subset"));
  return PairAccuracy(Restrict(truth, subset), Restrict(predicted, subset));
}

StatusOr<double> SubsetNmi(const std::vector<int>& truth, const std::vector<int>& predicted,
                           const std::vector<int>& subset) {
  KLS_RETURN_IF_ERROR(CheckLabels(truth, predicted));
  KLS_RETURN_IF_ERROR(CheckSubset(subset, truth.size(), "subset"));
  return NormalizedMutualInformation(Restrict(truth, subset), Restrict(predicted, subset));
}

}  // namespace kls
