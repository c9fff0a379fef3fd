#include "core/npkl/baseline_guard.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <optional>

#include "core/common/json_text.h"
#include "core/eval/baselines.h"
#include "core/model/learned_kernel.h"
#include "core/npkl/cross_validation.h"

namespace kls {
namespace {

double Mean(const std::vector<double>& v) {
  double sum = 0.0;
  for (double x : v) sum += x;
  return v.empty() ? 0.0 : sum / static_cast<double>(v.size());
}

// The width multiple whose threshold rule is most accurate on `train`; ties
// go to the multiple nearest 1 in log scale (the median itself), then the wider.
double ThresholdWidth(const Eigen::MatrixXd& x, const PairwiseConstraints& train, double median,
                      const std::vector<double>& multiples) {
  double best_width = median, best_score = -1.0, best_distance = 0.0;
  for (double m : multiples) {
    const double width = m * median;
    const double score = HeldOutPairAccuracy(
        [&](int i, int j) { return std::exp(-(x.row(i) - x.row(j)).squaredNorm() / width); }, train, train);
    const double distance = std::abs(std::log(m));
    if (score > best_score || (score == best_score && (distance < best_distance ||
                                                       (distance == best_distance && width > best_width)))) {
      best_score = score;
      best_width = width;
      best_distance = distance;
    }
  }
  return best_width;
}

}  // namespace

double PlainKernelMargin(int held_out_pairs, double floor) {
  return std::max(floor, held_out_pairs > 0 ? 1.0 / std::sqrt(static_cast<double>(held_out_pairs)) : 1.0);
}

Status BaselineGuardOptions::Validate() const {
  if (clusters != 0 && clusters < 2) {
    return InvalidArgumentError("baseline_guard.clusters = " + std::to_string(clusters) + " must be 0 or >= 2");
  }
  if (rbf_multiples.empty()) return InvalidArgumentError("baseline_guard.rbf_multiples is empty");
  for (double m : rbf_multiples) {
    if (!(m > 0) || !std::isfinite(m)) {
      return InvalidArgumentError("baseline_guard.rbf_multiples: " + JsonNumber(m) + " must be positive and finite");
    }
  }
  if (max_exact_points < 2) {
    return InvalidArgumentError("baseline_guard.max_exact_points = " + std::to_string(max_exact_points) +
                                " must be >= 2");
  }
  for (double m : diffusion_multiples) {
    if (!(m > 0) || !std::isfinite(m)) {
      return InvalidArgumentError("baseline_guard.diffusion_multiples: " + JsonNumber(m) +
                                  " must be positive and finite");
    }
  }
  if (laplacian != nullptr && diffusion_multiples.empty()) {
    return InvalidArgumentError("baseline_guard.diffusion_multiples is empty");
  }
  if (diffusion_rank < 1) {
    return InvalidArgumentError("baseline_guard.diffusion_rank = " + std::to_string(diffusion_rank) + " must be >= 1");
  }
  if (!(margin >= 0) || !std::isfinite(margin)) {
    return InvalidArgumentError("baseline_guard.margin = " + JsonNumber(margin) + " must be >= 0 and finite");
  }
  return OkStatus();
}

std::string BaselineGuardResult::Json() const {
  std::string out = "{\"score\":\"" + std::string(clusters ? "kmeans" : "threshold") + "\"";
  if (clusters) out += ",\"clusters\":" + std::to_string(clusters);
  out += ",\"folds\":" + std::to_string(folds) + ",\"evaluated\":[";
  for (size_t i = 0; i < evaluated.size(); ++i) out += (i ? "," : "") + std::to_string(evaluated[i]);
  out += "],\"candidates\":[";
  for (size_t c = 0; c < candidates.size(); ++c) {
    const GuardCandidate& k = candidates[c];
    out += (c ? ",{" : "{") + std::string("\"name\":\"") + k.name + "\"";
    if (!k.widths.empty()) out += ",\"widths\":" + JsonArray(k.widths);
    if (!k.betas.empty()) out += ",\"betas\":" + JsonArray(k.betas);
    out += ",\"fold_scores\":" + JsonArray(k.fold_scores) + ",\"mean\":" + JsonNumber(k.mean) + "}";
  }
  out += "]";
  if (best_baseline >= 0) out += ",\"best_baseline\":\"" + candidates[best_baseline].name + "\"";
  out += ",\"held_out_pairs\":" + std::to_string(held_out_pairs) + ",\"margin\":" + JsonNumber(margin);
  out += std::string(",\"baseline_better\":") + (baseline_better ? "true" : "false");
  out += ",\"seconds\":" + JsonNumber(seconds) + "}";
  return out;
}

StatusOr<BaselineGuardResult> RunBaselineGuard(const Eigen::MatrixXd& features, const PairwiseConstraints& constraints,
                                               const std::vector<int>& fold, int folds,
                                               const std::vector<int>& evaluated,
                                               const std::vector<double>& learned_fold_scores,
                                               const BaselineGuardOptions& options, const SolveControl& control) {
  KLS_RETURN_IF_ERROR(options.Validate());
  Stopwatch watch;
  const int n = static_cast<int>(features.rows());
  if (fold.size() != constraints.pairs.size()) {
    return InvalidArgumentError("baseline guard: " + std::to_string(fold.size()) + " fold ids for " +
                                std::to_string(constraints.pairs.size()) + " pairs");
  }
  if (evaluated.empty() || evaluated.size() != learned_fold_scores.size()) {
    return InvalidArgumentError("baseline guard: " + std::to_string(learned_fold_scores.size()) +
                                " learned scores for " + std::to_string(evaluated.size()) + " evaluated folds");
  }
  for (int f : evaluated) {
    if (f < 0 || f >= folds) return InvalidArgumentError("baseline guard: fold " + std::to_string(f) + " out of range");
  }
  if (options.clusters > n) {
    return InvalidArgumentError("baseline guard: clusters = " + std::to_string(options.clusters) + " exceeds the " +
                                std::to_string(n) + " points");
  }
  KLS_ASSIGN_OR_RETURN(double median, MedianSquaredDistance(features));
  if (!(median > 0)) median = 1.0;  // every point identical: any width gives the same kernel

  BaselineGuardResult r;
  r.folds = folds;
  r.evaluated = evaluated;
  r.clusters = options.clusters;
  GuardCandidate learned{"learned", {}, {}, learned_fold_scores, Mean(learned_fold_scores)};
  GuardCandidate linear{"linear", {}, {}, {}, 0.0}, rbf{"rbf", {}, {}, {}, 0.0};
  GuardCandidate diffusion{"diffusion", {}, {}, {}, 0.0};
  if (options.laplacian != nullptr && options.laplacian->rows() != n) {
    return InvalidArgumentError("baseline guard: the Laplacian has " + std::to_string(options.laplacian->rows()) +
                                " rows for " + std::to_string(n) + " points");
  }
  // Diffusion: one factor per β multiple (the kernel does not depend on the pairs).
  std::vector<LearnedKernel> diffusion_kernels;
  if (options.laplacian != nullptr && n <= kDiffusionMaxPoints) {
    KLS_RETURN_IF_ERROR(control.CheckStop("baseline guard"));
    KLS_ASSIGN_OR_RETURN(LaplacianDiffusionBasis basis, DiffusionBasis(*options.laplacian, options.diffusion_rank));
    for (double m : options.diffusion_multiples) {
      KLS_ASSIGN_OR_RETURN(Eigen::MatrixXd v, DiffusionKernelFactor(basis, m));
      KLS_ASSIGN_OR_RETURN(LearnedKernel k, LearnedKernel::FromEmbedding(std::move(v)));
      diffusion_kernels.push_back(std::move(k));
    }
  }

  // Clustering score: the linear factor serves every fold.
  std::optional<LearnedKernel> linear_kernel;
  if (options.clusters) {
    KLS_ASSIGN_OR_RETURN(Eigen::MatrixXd v, LinearKernelFactor(features));
    KLS_ASSIGN_OR_RETURN(LearnedKernel k, LearnedKernel::FromEmbedding(std::move(v)));
    linear_kernel = std::move(k);
  }
  for (int f : evaluated) {
    KLS_RETURN_IF_ERROR(control.CheckStop("baseline guard"));
    PairwiseConstraints train, test;
    for (size_t t = 0; t < fold.size(); ++t) (fold[t] == f ? test : train).pairs.push_back(constraints.pairs[t]);
    for (const Pair& p : test.pairs) r.held_out_pairs += p.i != p.j ? 1 : 0;
    if (!diffusion_kernels.empty()) {  // β on the fold's training pairs, then its held-out score
      int best = 0;
      double best_score = -1.0;
      for (size_t b = 0; b < diffusion_kernels.size(); ++b) {
        double score = 0.0;
        if (options.clusters == 0) {
          score = HeldOutPairAccuracy(diffusion_kernels[b], train, train);
        } else {
          KLS_ASSIGN_OR_RETURN(score, HeldOutClusterPairAccuracy(diffusion_kernels[b], train, options.clusters, control));
        }
        if (score > best_score) {
          best_score = score;
          best = static_cast<int>(b);
        }
      }
      diffusion.betas.push_back(options.diffusion_multiples[best]);
      if (options.clusters == 0) {
        diffusion.fold_scores.push_back(HeldOutPairAccuracy(diffusion_kernels[best], train, test));
      } else {
        KLS_ASSIGN_OR_RETURN(double s, HeldOutClusterPairAccuracy(diffusion_kernels[best], test, options.clusters, control));
        diffusion.fold_scores.push_back(s);
      }
    }
    if (options.clusters == 0) {
      linear.fold_scores.push_back(HeldOutPairAccuracy(
          [&](int i, int j) { return features.row(i).dot(features.row(j)); }, train, test));
      const double width = ThresholdWidth(features, train, median, options.rbf_multiples);
      rbf.widths.push_back(width);
      rbf.fold_scores.push_back(HeldOutPairAccuracy(
          [&](int i, int j) { return std::exp(-(features.row(i) - features.row(j)).squaredNorm() / width); }, train,
          test));
      continue;
    }
    KLS_ASSIGN_OR_RETURN(double lin, HeldOutClusterPairAccuracy(*linear_kernel, test, options.clusters, control));
    linear.fold_scores.push_back(lin);
    RbfWidthOptions width_options;
    width_options.multiples = options.rbf_multiples;
    width_options.clusters = options.clusters;
    width_options.rbf.max_exact_points = options.max_exact_points;
    KLS_ASSIGN_OR_RETURN(RbfWidthSelection chosen, SelectRbfWidth(features, train, width_options));
    rbf.widths.push_back(chosen.width);
    KLS_ASSIGN_OR_RETURN(Eigen::MatrixXd v, RbfKernelFactor(features, chosen.width, width_options.rbf));
    KLS_ASSIGN_OR_RETURN(LearnedKernel k, LearnedKernel::FromEmbedding(std::move(v)));
    KLS_ASSIGN_OR_RETURN(double s, HeldOutClusterPairAccuracy(k, test, options.clusters, control));
    rbf.fold_scores.push_back(s);
  }
  linear.mean = Mean(linear.fold_scores);
  rbf.mean = Mean(rbf.fold_scores);
  diffusion.mean = Mean(diffusion.fold_scores);
  r.candidates = {learned, linear, rbf};
  if (!diffusion_kernels.empty()) r.candidates.push_back(diffusion);
  r.best_baseline = 1;  // the best mean; ties to the one listed first
  for (int c = 2; c < static_cast<int>(r.candidates.size()); ++c)
    if (r.candidates[c].mean > r.candidates[r.best_baseline].mean) r.best_baseline = c;
  const GuardCandidate& best = r.candidates[r.best_baseline];
  r.margin = PlainKernelMargin(r.held_out_pairs, options.margin);
  r.baseline_better = best.mean >= learned.mean + r.margin;
  const std::string plain =
      best.name == "rbf"         ? "the plain RBF kernel (width " + JsonNumber(best.widths.front()) +
                                       (best.widths.size() > 1 ? " on fold 0" : "") + ")"
      : best.name == "diffusion" ? "the graph's diffusion kernel (beta " + JsonNumber(best.betas.front()) +
                                       " x 1/lambda" + (best.betas.size() > 1 ? " on fold 0" : "") + ")"
                                 : "the plain linear kernel";
  const std::string scores = "plain " + JsonNumber(best.mean) + ", learned " + JsonNumber(learned.mean);
  const std::string how = " on " + std::to_string(r.held_out_pairs) + " held-out pairs (" +
                          (options.clusters ? "k-means" : "threshold") + " score, " + std::to_string(evaluated.size()) +
                          (evaluated.size() > 1 ? " folds" : " fold") + ")";
  if (!r.baseline_better && best.mean > learned.mean) {
    r.note = plain + " scores higher than the learned kernel, by less than the noise of " +
             std::to_string(r.held_out_pairs) + " pairs (" + JsonNumber(r.margin) + "): " + scores + how;
  } else if (r.baseline_better) {
    r.note = plain + " predicts held-out pairs better than the learned kernel: " + scores + how +
             "; the learned kernel is stored, but consider the plain one (or more pairs, another family or "
             "cross-validation of C)";
  } else {
    r.note = "the learned kernel predicts held-out pairs at least as well as " + plain + ": " + scores + how;
  }
  r.seconds = watch.Seconds();
  return r;
}

}  // namespace kls
