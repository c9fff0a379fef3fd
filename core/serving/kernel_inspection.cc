#include "core/serving/kernel_inspection.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <unordered_set>

#include <Eigen/Eigenvalues>

namespace kls {
namespace {

// Rows per block of the Gram product between two checks of the control.
constexpr Eigen::Index kGramBlockRows = 4096;

// A uniform draw from [0, bound] (bound < 2^31): the modulo bias is below
// 2^-32, irrelevant for a picture, and unlike std::uniform_int_distribution
// the draw is the same on every standard library.
int Draw(std::mt19937_64& rng, int bound) {
  return static_cast<int>(rng() % (static_cast<uint64_t>(bound) + 1));
}

// Floyd's algorithm: k distinct indices of [0, n), ascending.
std::vector<int> Floyd(int n, int k, std::mt19937_64& rng) {
  std::vector<int> out;
  if (k >= n) {
    out.resize(static_cast<size_t>(std::max(n, 0)));
    for (int i = 0; i < n; ++i) out[static_cast<size_t>(i)] = i;
    return out;
  }
  std::unordered_set<int> chosen;
  chosen.reserve(static_cast<size_t>(k) * 2);
  for (int j = n - k; j < n; ++j) {
    const int t = Draw(rng, j);
    chosen.insert(chosen.count(t) ? j : t);
  }
  out.assign(chosen.begin(), chosen.end());
  std::sort(out.begin(), out.end());
  return out;
}

// Sorts ascending indices by label, keeping index order within a label.
void SortByLabel(std::vector<int>* items, const std::vector<int>& labels) {
  if (labels.empty()) return;
  std::stable_sort(items->begin(), items->end(),
                   [&](int a, int b) { return labels[static_cast<size_t>(a)] < labels[static_cast<size_t>(b)]; });
}

// Makes the entry of largest magnitude positive (a fixed sign per picture).
void FixSign(Eigen::Ref<Eigen::VectorXd> u) {
  Eigen::Index at = 0;
  u.cwiseAbs().maxCoeff(&at);
  if (u(at) < 0) u = -u;
}

}  // namespace

std::vector<int> SampleIndices(int n, int k, uint64_t seed) {
  std::mt19937_64 rng(seed);
  return Floyd(n, k, rng);
}

StatusOr<KernelInspection> InspectKernel(const LearnedKernel::Embedding& v, const std::vector<int>& labels,
                                         const InspectionOptions& options, const SolveControl& control) {
  const Eigen::Index n = v.rows(), r = v.cols();
  if (n < 1 || r < 1) {
    return InvalidArgumentError("the kernel's factor is " + std::to_string(n) + " x " + std::to_string(r) +
                                "; it needs at least one row and one column");
  }
  if (!labels.empty() && static_cast<Eigen::Index>(labels.size()) != n) {
    return InvalidArgumentError("labels has " + std::to_string(labels.size()) + " entries for " +
                                std::to_string(n) + " items");
  }
  if (options.sample < 1) return InvalidArgumentError("sample = " + std::to_string(options.sample) + " must be >= 1");
  if (options.heatmap < 1) {
    return InvalidArgumentError("heatmap = " + std::to_string(options.heatmap) + " must be >= 1");
  }
  if (options.spectrum < 0) {
    return InvalidArgumentError("spectrum = " + std::to_string(options.spectrum) + " must be >= 0");
  }

  KernelInspection out;
  out.trace = v.squaredNorm();

  // The Gram matrix on the factor's smaller side; its eigenvalues are K's
  // non-zero ones.
  const bool columns = r <= n;
  const Eigen::Index size = std::min(n, r);
  Eigen::MatrixXd gram = Eigen::MatrixXd::Zero(size, size);
  if (columns) {
    for (Eigen::Index first = 0; first < n; first += kGramBlockRows) {
      KLS_RETURN_IF_ERROR(control.CheckStop("inspect"));
      const Eigen::Index rows = std::min(kGramBlockRows, n - first);
      gram.selfadjointView<Eigen::Lower>().rankUpdate(v.middleRows(first, rows).transpose());
    }
    gram = gram.selfadjointView<Eigen::Lower>();
  } else {
    KLS_RETURN_IF_ERROR(control.CheckStop("inspect"));
    gram.noalias() = v * v.transpose();
  }
  KLS_RETURN_IF_ERROR(control.CheckStop("inspect"));
  const Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(gram);
  if (eig.info() != Eigen::Success) return InternalError("inspect: the eigensolver did not converge");
  const Eigen::VectorXd& lambda = eig.eigenvalues();  // ascending
  const Eigen::Index shown = std::min<Eigen::Index>(options.spectrum, size);
  out.eigenvalues.reserve(static_cast<size_t>(shown));
  for (Eigen::Index k = 0; k < shown; ++k) out.eigenvalues.push_back(std::max(0.0, lambda(size - 1 - k)));

  // The scatter sample and the heat-map sub-sample, from one seeded stream.
  std::mt19937_64 rng(options.seed);
  out.items = Floyd(static_cast<int>(n), options.sample, rng);
  const std::vector<int> picked = Floyd(static_cast<int>(out.items.size()), options.heatmap, rng);
  out.heatmap_items.reserve(picked.size());
  for (int position : picked) out.heatmap_items.push_back(out.items[static_cast<size_t>(position)]);
  SortByLabel(&out.items, labels);
  SortByLabel(&out.heatmap_items, labels);

  // Principal coordinates of the sampled rows: V u_k (columns), or √λ_k w_k
  // (rows), which are equal up to sign.
  const size_t s = out.items.size();
  out.x.assign(s, 0.0);
  out.y.assign(s, 0.0);
  for (int k = 0; k < std::min<int>(2, static_cast<int>(size)); ++k) {
    Eigen::VectorXd u = eig.eigenvectors().col(size - 1 - k);
    FixSign(u);
    std::vector<double>& coordinate = k == 0 ? out.x : out.y;
    const double scale = std::sqrt(std::max(0.0, lambda(size - 1 - k)));
    for (size_t t = 0; t < s; ++t) {
      const int i = out.items[t];
      coordinate[t] = columns ? v.row(i).dot(u) : scale * u(i);
    }
  }

  // K over the heat-map rows.
  const Eigen::Index m = static_cast<Eigen::Index>(out.heatmap_items.size());
  Eigen::MatrixXd rows(m, r);
  for (Eigen::Index t = 0; t < m; ++t) rows.row(t) = v.row(out.heatmap_items[static_cast<size_t>(t)]);
  out.heatmap.noalias() = rows * rows.transpose();
  return out;
}

}  // namespace kls
