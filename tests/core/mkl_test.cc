// MKL (thesis ch. 4–5, §7.3): the kernel bank, the exact nonnegative QP of
// two-stage KTA against support enumeration, KTA's alignment optimality, and
// the KernelClassifier model against the SVM it was built from.
#include <gtest/gtest.h>

#include <Eigen/Dense>
#include <cmath>
#include <random>
#include <string>

#include "core/data/csv_reader.h"
#include "core/mkl/kernel_bank.h"
#include "core/mkl/kernel_classifier.h"
#include "core/mkl/kta.h"
#include "core/mkl/svm.h"

namespace kls {
namespace {

TEST(KernelBank, ThesisBankHasThirteenKernelsPerViewWithUnitTrace) {
  auto data = ReadCsvFile(std::string(KLS_TEST_DATA_DIR) + "/wine.csv");
  ASSERT_TRUE(data.ok());
  const Eigen::MatrixXd x = Standardizer::Fit(data->features).Apply(data->features);
  std::vector<BaseKernelSpec> bank = StandardKernelBank(data->dim());
  EXPECT_EQ(bank.size(), 13u * (data->dim() + 1));
  ASSERT_TRUE(NormalizeToUnitTrace(&bank, x).ok());
  for (const auto& s : bank) {
    const Eigen::MatrixXd k = EvaluateKernel(s, x, x);
    EXPECT_NEAR(k.trace(), 1.0, 1e-12) << s.Name();
    EXPECT_LE((k - k.transpose()).cwiseAbs().maxCoeff(), 1e-15);
  }
  // Width σ means exp(−‖x − z‖²/(2σ²)).
  const BaseKernelSpec g = GaussianWidthKernel(2.0);
  const Eigen::MatrixXd k = EvaluateKernel(g, x.topRows(2), x.topRows(2));
  EXPECT_NEAR(k(0, 1), std::exp(-(x.row(0) - x.row(1)).squaredNorm() / 8.0), 1e-14);
  BaseKernelSpec bad;
  bad.feature = 99;
  EXPECT_FALSE(bad.Validate(13).ok());
}

// Global minimizer of ½θᵀMθ − aᵀθ over θ >= 0 by enumerating supports S:
// θ_S = M_SS⁻¹ a_S must be > 0 and the gradient on the complement >= 0 (KKT
// of a convex QP, so that point is optimal).
Eigen::VectorXd NnqpByEnumeration(const Eigen::MatrixXd& m, const Eigen::VectorXd& a) {
  const int k = static_cast<int>(a.size());
  for (int mask = 0; mask < (1 << k); ++mask) {
    std::vector<int> s;
    for (int j = 0; j < k; ++j)
      if (mask >> j & 1) s.push_back(j);
    Eigen::VectorXd theta = Eigen::VectorXd::Zero(k);
    if (!s.empty()) {
      Eigen::MatrixXd ms(s.size(), s.size());
      Eigen::VectorXd as(s.size());
      for (std::size_t p = 0; p < s.size(); ++p) {
        as[p] = a[s[p]];
        for (std::size_t q = 0; q < s.size(); ++q) ms(p, q) = m(s[p], s[q]);
      }
      const Eigen::VectorXd ts = ms.ldlt().solve(as);
      bool pos = true;
      for (std::size_t p = 0; p < s.size(); ++p) {
        pos = pos && ts[p] > 0;
        theta[s[p]] = ts[p];
      }
      if (!pos) continue;
    }
    const Eigen::VectorXd g = m * theta - a;
    if (g.minCoeff() >= -1e-9) return theta;
  }
  return Eigen::VectorXd();
}

TEST(Kta, NonnegativeQpMatchesSupportEnumeration) {
  std::mt19937_64 rng(2);
  std::normal_distribution<double> gauss;
  for (int trial = 0; trial < 200; ++trial) {
    const int k = 1 + trial % 8;
    Eigen::MatrixXd b(k + 3, k);
    for (int i = 0; i < b.rows(); ++i)
      for (int j = 0; j < k; ++j) b(i, j) = gauss(rng);
    const Eigen::MatrixXd m = b.transpose() * b;
    Eigen::VectorXd a(k);
    for (int j = 0; j < k; ++j) a[j] = gauss(rng);
    auto theta = SolveNonnegativeQp(m, a, 0.0);
    ASSERT_TRUE(theta.ok());
    const Eigen::VectorXd ref = NnqpByEnumeration(m, a);
    ASSERT_EQ(ref.size(), k);
    EXPECT_LE((*theta - ref).cwiseAbs().maxCoeff(), 1e-9 * (1 + ref.cwiseAbs().maxCoeff())) << "trial " << trial;
    EXPECT_GE(theta->minCoeff(), 0.0);
  }
  EXPECT_FALSE(SolveNonnegativeQp(Eigen::MatrixXd::Identity(2, 2), Eigen::VectorXd::Ones(3)).ok());
}

TEST(Kta, AlignmentIsAtLeastThatOfEveryBaseKernelAndModelPredicts) {
  auto data = ReadCsvFile(std::string(KLS_TEST_DATA_DIR) + "/ionosphere.csv");
  ASSERT_TRUE(data.ok());
  const Eigen::VectorXd y_all = SignLabels(data->labels, 1);
  auto split = RandomSplit(y_all, 0.5, 3);
  ASSERT_TRUE(split.ok());
  const Eigen::MatrixXd xtr_raw = SubRows(data->features, split->train);
  const Standardizer st = Standardizer::Fit(xtr_raw);
  const Eigen::MatrixXd xtr = st.Apply(xtr_raw);
  const Eigen::VectorXd ytr = SubVector(y_all, split->train), yte = SubVector(y_all, split->test);
  std::vector<BaseKernelSpec> bank = StandardKernelBank(data->dim(), /*single_features=*/false);
  ASSERT_TRUE(NormalizeToUnitTrace(&bank, xtr).ok());
  auto kta = LearnKtaWeights(xtr, ytr, bank);
  ASSERT_TRUE(kta.ok()) << kta.status();
  EXPECT_NEAR(kta->weights.norm(), 1.0, 1e-12);
  EXPECT_GE(kta->weights.minCoeff(), 0.0);
  // θ* maximizes the centered alignment over θ >= 0 (Theorem 7.35), so it
  // beats every single base kernel.
  const int n = static_cast<int>(ytr.size());
  const Eigen::MatrixXd h = Eigen::MatrixXd::Identity(n, n) - Eigen::MatrixXd::Constant(n, n, 1.0 / n);
  const Eigen::MatrixXd yy = ytr * ytr.transpose();
  for (const auto& s : bank) {
    const Eigen::MatrixXd kc = h * EvaluateKernel(s, xtr, xtr) * h;
    const double single = (kc.cwiseProduct(yy)).sum() / (kc.norm() * yy.norm());
    EXPECT_LE(single, kta->alignment + 1e-9) << s.Name();
  }
  // The model reproduces the SVM it was built from and classifies held-out points.
  const Eigen::MatrixXd ktr = CombinedKernel(kta->kernels, kta->weights, KernelCombination::kLinear, xtr, xtr);
  SvmOptions so;
  so.c = 10;
  auto svm = TrainSvm(ktr, ytr, so);
  ASSERT_TRUE(svm.ok());
  const KernelClassifier model =
      MakeKernelClassifier(kta->kernels, kta->weights, KernelCombination::kLinear, st, xtr, ytr, *svm);
  auto f_train = model.DecisionValues(xtr_raw);
  ASSERT_TRUE(f_train.ok());
  EXPECT_LE((*f_train - SvmDecision(ktr, ytr, *svm)).cwiseAbs().maxCoeff(), 1e-9);
  auto pred = model.Predict(SubRows(data->features, split->test));
  ASSERT_TRUE(pred.ok());
  int correct = 0;
  for (std::size_t i = 0; i < pred->size(); ++i) correct += ((*pred)[i] == 1 ? 1.0 : -1.0) == yte[i];
  EXPECT_GE(static_cast<double>(correct) / pred->size(), 0.8);  // sanity: all-feature bank, fixed C
  EXPECT_FALSE(model.DecisionValues(Eigen::MatrixXd::Zero(2, 3)).ok());
}

}  // namespace
}  // namespace kls
