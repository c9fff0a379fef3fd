// LearnedKernel: factored kernel queries against the dense matrix.
#include "core/model/learned_kernel.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <Eigen/Dense>
#include <algorithm>
#include <numeric>

namespace kls {
namespace {

using ::testing::HasSubstr;

TEST(LearnedKernel, ValueRowTopKMatchDenseKernel) {
  std::srand(3);
  LearnedKernel::Embedding v = LearnedKernel::Embedding::Random(60, 5);
  auto k = LearnedKernel::FromEmbedding(v);
  ASSERT_TRUE(k.ok());
  const Eigen::MatrixXd dense = v * v.transpose();
  EXPECT_NEAR(k->value(3, 7), dense(3, 7), 1e-14);
  EXPECT_LT((k->row(11) - dense.col(11)).cwiseAbs().maxCoeff(), 1e-14);
  for (int i : {0, 17, 59}) {
    std::vector<int> order(60);
    std::iota(order.begin(), order.end(), 0);
    order.erase(order.begin() + i);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return dense(i, a) > dense(i, b); });
    auto top = k->TopK(i, 8);
    ASSERT_EQ(top.size(), 8u);
    for (int t = 0; t < 8; ++t) {
      EXPECT_EQ(top[t].index, order[t]);
      EXPECT_NEAR(top[t].score, dense(i, order[t]), 1e-14);
    }
    auto with_self = k->TopK(i, 60, /*exclude_self=*/false);
    EXPECT_EQ(with_self.size(), 60u);
  }
  EXPECT_EQ(k->TopK(0, 1000).size(), 59u);
}

TEST(LearnedKernel, FromDenseKernelReproducesPsdKernel) {
  Eigen::MatrixXd a = Eigen::MatrixXd::Random(20, 4);
  const Eigen::MatrixXd kmat = a * a.transpose();
  auto k = LearnedKernel::FromDenseKernel(kmat);
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(k->rank(), 4);
  EXPECT_LT((k->Dense() - kmat).cwiseAbs().maxCoeff(), 1e-12);
}

TEST(LearnedKernel, Errors) {
  EXPECT_THAT(LearnedKernel::FromEmbedding(LearnedKernel::Embedding(0, 3)).status().message(), HasSubstr("empty"));
  Eigen::MatrixXd asym = Eigen::MatrixXd::Identity(3, 3);
  asym(0, 1) = 1;
  EXPECT_THAT(LearnedKernel::FromDenseKernel(asym).status().message(), HasSubstr("not symmetric"));
  auto k = LearnedKernel::FromEmbedding(LearnedKernel::Embedding::Ones(4, 2));
  ASSERT_TRUE(k.ok());
  EXPECT_THAT(k->CheckIndex(4, "item").message(), HasSubstr("item = 4 is out of range for a kernel over 4 points"));
  EXPECT_TRUE(k->CheckIndex(3, "item").ok());
}

}  // namespace
}  // namespace kls
