#include "core/mkl/svm.h"

#include <libsvm/svm.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <mutex>
#include <numeric>
#include <random>
#include <string>

#include "core/mkl/box_projection.h"

namespace kls {
namespace {

void SilentPrint(const char*) {}

void SilenceLibsvmOnce() {
  static std::once_flag once;
  std::call_once(once, [] { svm_set_print_string_function(&SilentPrint); });
}

struct ModelDeleter {
  void operator()(svm_model* m) const { svm_free_and_destroy_model(&m); }
};

}  // namespace

Status SvmOptions::Validate() const {
  if (!(c > 0 && std::isfinite(c))) return InvalidArgumentError("svm c = " + FormatNumber(c) + ": must be finite and > 0");
  if (!(tolerance > 0 && tolerance < 1))
    return InvalidArgumentError("svm tolerance = " + FormatNumber(tolerance) + ": must be in (0, 1)");
  if (!(cache_mb > 0)) return InvalidArgumentError("svm cache_mb = " + FormatNumber(cache_mb) + ": must be > 0");
  return OkStatus();
}

StatusOr<SvmSolution> TrainSvm(const Eigen::MatrixXd& kernel, const Eigen::VectorXd& y, const SvmOptions& options) {
  return GuardExceptions("TrainSvm", [&]() -> StatusOr<SvmSolution> {
    KLS_RETURN_IF_ERROR(options.Validate());
    const int n = static_cast<int>(y.size());
    if (kernel.rows() != n || kernel.cols() != n) {
      return InvalidArgumentError("svm kernel is " + std::to_string(kernel.rows()) + "x" +
                                  std::to_string(kernel.cols()) + " but there are " + std::to_string(n) + " labels");
    }
    KLS_RETURN_IF_ERROR(ValidateSignLabels(y, "svm labels"));
    int npos = 0;
    for (int i = 0; i < n; ++i) npos += y[i] > 0;
    if (npos == 0 || npos == n) return InvalidArgumentError("svm labels: both classes (+1 and -1) must be present");
    if (!kernel.allFinite()) return InvalidArgumentError("svm kernel has a non-finite entry");
    SilenceLibsvmOnce();

    // Precomputed-kernel format: node 0 holds the 1-based sample id, then
    // indices 1..n hold K(i, ·), then the terminator.
    std::vector<svm_node> nodes(static_cast<std::size_t>(n) * (n + 2));
    std::vector<svm_node*> rows(n);
    std::vector<double> labels(n);
    for (int i = 0; i < n; ++i) {
      svm_node* r = &nodes[static_cast<std::size_t>(i) * (n + 2)];
      rows[i] = r;
      r[0].index = 0;
      r[0].value = i + 1;
      for (int j = 0; j < n; ++j) {
        r[j + 1].index = j + 1;
        r[j + 1].value = kernel(i, j);
      }
      r[n + 1].index = -1;
      r[n + 1].value = 0;
      labels[i] = y[i];
    }
    svm_problem prob;
    prob.l = n;
    prob.y = labels.data();
    prob.x = rows.data();
    svm_parameter param{};
    param.svm_type = C_SVC;
    param.kernel_type = PRECOMPUTED;
    param.cache_size = options.cache_mb;
    param.eps = options.tolerance;
    param.C = options.c;
    param.nr_weight = 0;
    param.shrinking = 1;
    param.probability = 0;
    if (const char* err = svm_check_parameter(&prob, &param)) return InvalidArgumentError(std::string("libsvm: ") + err);
    std::unique_ptr<svm_model, ModelDeleter> model(svm_train(&prob, &param));
    if (!model) return InternalError("libsvm returned no model");
    // libsvm's decision is Σ coef_i K(x_i, x) − rho, positive for label[0].
    const double sign = model->label[0] == 1 ? 1.0 : -1.0;
    SvmSolution out;
    out.alpha = Eigen::VectorXd::Zero(n);
    for (int s = 0; s < model->l; ++s) {
      const int i = model->sv_indices[s] - 1;
      out.alpha[i] = sign * model->sv_coef[0][s] * y[i];  // coef = α_i y_i in the "+ = label[0]" frame
    }
    out.alpha = out.alpha.cwiseMax(0.0).cwiseMin(options.c);
    out.bias = -sign * model->rho[0];
    out.num_support = model->l;
    const Eigen::VectorXd u = out.alpha.cwiseProduct(y);
    out.dual_objective = out.alpha.sum() - 0.5 * u.dot(kernel * u);
    return out;
  });
}

Eigen::VectorXd SvmDecision(const Eigen::MatrixXd& test_train_kernel, const Eigen::VectorXd& y_train,
                            const SvmSolution& svm) {
  const Eigen::VectorXd u = svm.alpha.cwiseProduct(y_train);
  return (test_train_kernel * u).array() + svm.bias;
}

double SignAccuracy(const Eigen::VectorXd& decision, const Eigen::VectorXd& y) {
  if (y.size() == 0) return 0.0;
  int correct = 0;
  for (Eigen::Index i = 0; i < y.size(); ++i) correct += (decision[i] > 0 ? 1.0 : -1.0) == y[i];
  return static_cast<double>(correct) / static_cast<double>(y.size());
}

std::vector<std::vector<int>> StratifiedFolds(const Eigen::VectorXd& y, int folds, uint64_t seed) {
  std::vector<int> pos, neg;
  for (Eigen::Index i = 0; i < y.size(); ++i) (y[i] > 0 ? pos : neg).push_back(static_cast<int>(i));
  std::mt19937_64 rng(seed);
  std::shuffle(pos.begin(), pos.end(), rng);
  std::shuffle(neg.begin(), neg.end(), rng);
  std::vector<std::vector<int>> out(folds);
  int k = 0;
  for (int i : pos) out[k++ % folds].push_back(i);
  for (int i : neg) out[k++ % folds].push_back(i);
  for (auto& f : out) std::sort(f.begin(), f.end());
  return out;
}

std::vector<int> Complement(const std::vector<int>& fold, int n) {
  std::vector<char> in(n, 0);
  for (int i : fold) in[i] = 1;
  std::vector<int> out;
  for (int i = 0; i < n; ++i)
    if (!in[i]) out.push_back(i);
  return out;
}

Eigen::MatrixXd SubMatrix(const Eigen::MatrixXd& m, const std::vector<int>& rows, const std::vector<int>& cols) {
  Eigen::MatrixXd out(rows.size(), cols.size());
  for (std::size_t j = 0; j < cols.size(); ++j)
    for (std::size_t i = 0; i < rows.size(); ++i) out(i, j) = m(rows[i], cols[j]);
  return out;
}

Eigen::VectorXd SubVector(const Eigen::VectorXd& v, const std::vector<int>& idx) {
  Eigen::VectorXd out(idx.size());
  for (std::size_t i = 0; i < idx.size(); ++i) out[i] = v[idx[i]];
  return out;
}

StatusOr<double> CrossValidateSvm(const Eigen::MatrixXd& kernel, const Eigen::VectorXd& y, double c, int folds,
                                  uint64_t seed) {
  if (folds < 2) return InvalidArgumentError("folds = " + std::to_string(folds) + ": must be >= 2");
  const int n = static_cast<int>(y.size());
  const auto split = StratifiedFolds(y, folds, seed);
  double correct = 0;
  SvmOptions opt;
  opt.c = c;
  for (const auto& test : split) {
    if (test.empty()) continue;
    const std::vector<int> train = Complement(test, n);
    const Eigen::VectorXd ytr = SubVector(y, train);
    KLS_ASSIGN_OR_RETURN(SvmSolution svm, TrainSvm(SubMatrix(kernel, train, train), ytr, opt));
    const Eigen::VectorXd dec = SvmDecision(SubMatrix(kernel, test, train), ytr, svm);
    correct += SignAccuracy(dec, SubVector(y, test)) * static_cast<double>(test.size());
  }
  return correct / n;
}

StatusOr<double> SelectCByCrossValidation(const Eigen::MatrixXd& kernel, const Eigen::VectorXd& y,
                                          const std::vector<double>& grid, int folds, uint64_t seed) {
  if (grid.empty()) return InvalidArgumentError("C grid is empty");
  double best_c = grid[0], best = -1;
  for (double c : grid) {
    KLS_ASSIGN_OR_RETURN(double acc, CrossValidateSvm(kernel, y, c, folds, seed));
    if (acc > best + 1e-12) {
      best = acc;
      best_c = c;
    }
  }
  return best_c;
}

Eigen::VectorXd SignLabels(const std::vector<int>& labels, int positive_class) {
  Eigen::VectorXd y(labels.size());
  for (std::size_t i = 0; i < labels.size(); ++i) y[i] = labels[i] == positive_class ? 1.0 : -1.0;
  return y;
}

StatusOr<TrainTestSplit> RandomSplit(const Eigen::VectorXd& y, double train_fraction, uint64_t seed) {
  const int n = static_cast<int>(y.size());
  const int ntr = static_cast<int>(std::lround(train_fraction * n));
  if (!(train_fraction > 0 && train_fraction < 1) || ntr < 2 || ntr > n - 2) {
    return InvalidArgumentError("train fraction = " + FormatNumber(train_fraction) + " leaves " +
                                std::to_string(ntr) + " of " + std::to_string(n) + " points for training");
  }
  std::mt19937_64 rng(seed);
  std::vector<int> perm(n);
  for (int attempt = 0; attempt < 1000; ++attempt) {
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    TrainTestSplit s;
    s.train.assign(perm.begin(), perm.begin() + ntr);
    s.test.assign(perm.begin() + ntr, perm.end());
    std::sort(s.train.begin(), s.train.end());
    std::sort(s.test.begin(), s.test.end());
    auto both = [&](const std::vector<int>& idx) {
      bool p = false, m = false;
      for (int i : idx) (y[i] > 0 ? p : m) = true;
      return p && m;
    };
    if (both(s.train) && both(s.test)) return s;
  }
  return InvalidArgumentError("labels: cannot draw a split with both classes in each part");
}

Eigen::MatrixXd SubRows(const Eigen::MatrixXd& x, const std::vector<int>& idx) {
  Eigen::MatrixXd out(idx.size(), x.cols());
  for (std::size_t i = 0; i < idx.size(); ++i) out.row(i) = x.row(idx[i]);
  return out;
}

std::vector<double> ThesisCGrid() { return {1e-2, 1e-1, 1.0, 1e1, 1e2}; }

}  // namespace kls
