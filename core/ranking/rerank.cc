#include "core/ranking/rerank.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>

namespace kls {

StatusOr<Eigen::SparseMatrix<double, Eigen::RowMajor>> TfIdf(const Eigen::SparseMatrix<double>& tags) {
  return GuardExceptions("TfIdf", [&]() -> StatusOr<Eigen::SparseMatrix<double, Eigen::RowMajor>> {
    const Eigen::Index n = tags.rows(), v = tags.cols();
    if (n == 0 || v == 0) return InvalidArgumentError("tags is empty");
    Eigen::SparseMatrix<double, Eigen::RowMajor> t = tags;
    Eigen::VectorXd df = Eigen::VectorXd::Zero(v);
    for (Eigen::Index i = 0; i < n; ++i)
      for (Eigen::SparseMatrix<double, Eigen::RowMajor>::InnerIterator it(t, i); it; ++it) {
        if (!(it.value() >= 0.0) || !std::isfinite(it.value()))
          return InvalidArgumentError("tags(" + std::to_string(i) + ", " + std::to_string(it.col()) + ") = " +
                                      FormatNumber(it.value()) + " must be finite and >= 0");
        if (it.value() > 0.0) df[it.col()] += 1.0;
      }
    for (Eigen::Index i = 0; i < n; ++i) {
      double norm2 = 0.0;
      for (Eigen::SparseMatrix<double, Eigen::RowMajor>::InnerIterator it(t, i); it; ++it) {
        it.valueRef() = it.value() > 0.0 ? std::log(static_cast<double>(n) / df[it.col()]) : 0.0;
        norm2 += it.value() * it.value();
      }
      if (norm2 > 0.0)
        for (Eigen::SparseMatrix<double, Eigen::RowMajor>::InnerIterator it(t, i); it; ++it)
          it.valueRef() /= std::sqrt(norm2);
    }
    t.prune(0.0);
    return t;
  });
}

StatusOr<Eigen::MatrixXd> TextKernel(const Eigen::MatrixXd& counts) {
  KLS_ASSIGN_OR_RETURN(auto tfidf, TfIdf(counts.sparseView()));
  const Eigen::MatrixXd t = Eigen::MatrixXd(tfidf);
  return Eigen::MatrixXd(t * t.transpose());
}

StatusOr<Eigen::VectorXd> QueryScores(const Eigen::SparseMatrix<double, Eigen::RowMajor>& tfidf, int tag) {
  if (tag < 0 || tag >= tfidf.cols())
    return InvalidArgumentError("query tag = " + std::to_string(tag) + " is outside the vocabulary [0, " +
                                std::to_string(tfidf.cols()) + ")");
  Eigen::VectorXd s = Eigen::VectorXd::Zero(tfidf.rows());
  for (Eigen::Index i = 0; i < tfidf.rows(); ++i) s[i] = tfidf.coeff(i, tag);
  return s;
}

std::vector<int> TopCandidates(const Eigen::VectorXd& scores, int count) {
  std::vector<int> idx;
  for (Eigen::Index i = 0; i < scores.size(); ++i)
    if (scores[i] > 0.0) idx.push_back(static_cast<int>(i));
  std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return scores[a] > scores[b]; });
  if (static_cast<int>(idx.size()) > count) idx.resize(std::max(0, count));
  return idx;
}

StatusOr<Eigen::MatrixXd> ParametricKernelMatrix(const Eigen::MatrixXd& x, ParametricKernel kind, int degree,
                                                 double width) {
  return GuardExceptions("ParametricKernelMatrix", [&]() -> StatusOr<Eigen::MatrixXd> {
    if (x.rows() == 0) return InvalidArgumentError("x is empty");
    if (!x.allFinite()) return InvalidArgumentError("x has a non-finite entry");
    Eigen::MatrixXd g = x * x.transpose();
    switch (kind) {
      case ParametricKernel::kLinear:
        return g;
      case ParametricKernel::kPolynomial:
        if (degree < 1) return InvalidArgumentError("degree = " + std::to_string(degree) + " must be >= 1");
        return Eigen::MatrixXd((g.array() + 1.0).pow(degree));
      case ParametricKernel::kRbf: {
        const Eigen::VectorXd sq = g.diagonal();
        Eigen::MatrixXd d2 = (-2.0 * g).colwise() + sq;
        d2.rowwise() += sq.transpose();
        d2 = d2.cwiseMax(0.0);
        double w = width;
        if (!(w > 0.0)) {
          const double n = static_cast<double>(x.rows());
          w = n > 1 ? d2.sum() / (n * (n - 1)) : 1.0;
          if (!(w > 0.0)) w = 1.0;
        }
        return Eigen::MatrixXd((-d2 / w).array().exp());
      }
    }
    return InvalidArgumentError("unknown kernel kind");
  });
}

double TopNAccuracy(const std::vector<int>& order, const std::vector<char>& relevant, int n) {
  const int m = std::min<int>(n, static_cast<int>(order.size()));
  if (m <= 0) return 0.0;
  int hits = 0;
  for (int t = 0; t < m; ++t) hits += relevant[order[t]] ? 1 : 0;
  return static_cast<double>(hits) / m;
}

StatusOr<std::vector<ScoredItem>> ReRankCandidates(const LearnedKernel& kernel, const std::vector<int>& candidates,
                                                   const Eigen::VectorXd& prior, const VisualRankOptions& options,
                                                   int* iterations, const SolveControl& control) {
  const int c = static_cast<int>(candidates.size());
  if (c == 0) return InvalidArgumentError("candidates is empty");
  std::vector<char> seen(kernel.num_points(), 0);
  for (int t = 0; t < c; ++t) {
    const std::string field = "candidates[" + std::to_string(t) + "]";
    KLS_RETURN_IF_ERROR(kernel.CheckIndex(candidates[t], field.c_str()));
    if (seen[candidates[t]]) {
      return InvalidArgumentError(field + " = " + std::to_string(candidates[t]) + " is listed twice");
    }
    seen[candidates[t]] = 1;
  }
  if (prior.size() != 0 && prior.size() != c) {
    return InvalidArgumentError("prior has " + std::to_string(prior.size()) + " values for " + std::to_string(c) +
                                " candidates");
  }
  LearnedKernel::Embedding v(c, kernel.rank());
  for (int t = 0; t < c; ++t) v.row(t) = kernel.embedding().row(candidates[t]);
  Eigen::MatrixXd k = v * v.transpose();
  const double lo = k.minCoeff();
  if (lo < 0.0) k.array() -= lo;
  KLS_RETURN_IF_ERROR(control.CheckStop("ReRank"));
  KLS_ASSIGN_OR_RETURN(VisualRankResult vr, SolveVisualRank(k, prior, options, control));
  if (vr.stats.termination == Termination::kCancelled || vr.stats.termination == Termination::kTimeLimit) {
    return control.CheckStop("ReRank");  // a stop persists: the same CANCELLED / DEADLINE_EXCEEDED
  }
  if (iterations) *iterations = vr.stats.iterations;
  std::vector<ScoredItem> out;
  out.reserve(c);
  for (int t : RankByScore(vr.scores)) out.push_back({candidates[t], vr.scores[t]});
  return out;
}

StatusOr<QuerySplit> SplitQueries(int num_queries, int num_validation, uint64_t seed) {
  if (num_queries < 2) return InvalidArgumentError("num_queries = " + std::to_string(num_queries) + " must be >= 2");
  if (num_validation < 1 || num_validation > num_queries - 1)
    return InvalidArgumentError("num_validation = " + std::to_string(num_validation) + " must be in [1, " +
                                std::to_string(num_queries - 1) + "]");
  std::vector<int> perm(num_queries);
  std::iota(perm.begin(), perm.end(), 0);
  // Fisher–Yates with an explicit draw (std::shuffle's sequence is not specified across standard libraries).
  std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ULL);
  for (int i = num_queries - 1; i > 0; --i) {
    const int j = static_cast<int>(rng() % static_cast<uint64_t>(i + 1));
    std::swap(perm[i], perm[j]);
  }
  QuerySplit split;
  split.validation.assign(perm.begin(), perm.begin() + num_validation);
  split.test.assign(perm.begin() + num_validation, perm.end());
  std::sort(split.validation.begin(), split.validation.end());
  std::sort(split.test.begin(), split.test.end());
  return split;
}

StatusOr<GridChoice> ChooseOnValidation(int grid_size, const std::vector<int>& validation,
                                        const std::function<StatusOr<double>(int point, int query)>& score) {
  if (grid_size < 1) return InvalidArgumentError("grid_size = " + std::to_string(grid_size) + " must be >= 1");
  if (validation.empty()) return InvalidArgumentError("validation query set is empty");
  GridChoice choice;
  choice.mean_score.assign(grid_size, 0.0);
  for (int p = 0; p < grid_size; ++p) {
    double sum = 0.0;
    for (int q : validation) {
      KLS_ASSIGN_OR_RETURN(double v, score(p, q));
      if (!std::isfinite(v))
        return InvalidArgumentError("score(" + std::to_string(p) + ", " + std::to_string(q) + ") is not finite");
      sum += v;
    }
    choice.mean_score[p] = sum / static_cast<double>(validation.size());
    if (choice.best < 0 || choice.mean_score[p] > choice.mean_score[choice.best]) choice.best = p;
  }
  return choice;
}

}  // namespace kls
