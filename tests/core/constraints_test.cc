// Pairwise constraints: validation and the papers' seeded protocols.
#include "core/data/constraint_generators.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "core/data/constraints.h"

namespace kls {
namespace {

using ::testing::HasSubstr;

std::vector<int> ThreeClasses(int n) {
  std::vector<int> y(n);
  for (int i = 0; i < n; ++i) y[i] = i % 3;
  return y;
}

TEST(Constraints, ValidateRangeDuplicatesContradictions) {
  PairwiseConstraints c;
  c.pairs = {{0, 1, PairKind::kMustLink}, {2, 2, PairKind::kMustLink}};
  EXPECT_TRUE(c.Validate(3).ok());

  c.pairs.push_back({1, 2040, PairKind::kCannotLink});
  Status s = c.Validate(3000);
  EXPECT_TRUE(s.ok()) << s;
  s = c.Validate(2000);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("constraints[2]: j = 2040 is out of range for 2000 points"));

  c.pairs = {{0, 1, PairKind::kMustLink}, {1, 0, PairKind::kMustLink}};
  EXPECT_THAT(c.Validate(3).message(), HasSubstr("constraints[1]: pair (1, 0) duplicates constraints[0]"));
  // The earliest repeat is named, with the first of its pairs, whatever the runs' order.
  c.pairs = {{0, 1, PairKind::kMustLink}, {2, 3, PairKind::kMustLink}, {3, 2, PairKind::kCannotLink},
             {1, 0, PairKind::kMustLink}, {0, 1, PairKind::kMustLink}};
  EXPECT_THAT(c.Validate(4).message(),
              HasSubstr("constraints[2]: pair (3, 2) contradicts constraints[1]: the same pair is both"));
  c.pairs.erase(c.pairs.begin() + 2);
  EXPECT_THAT(c.Validate(4).message(), HasSubstr("constraints[2]: pair (1, 0) duplicates constraints[0]"));
  // Errors come in the pairs' order: a repeat before a bad index, a bad index before a repeat.
  c.pairs = {{0, 1, PairKind::kMustLink}, {0, 1, PairKind::kMustLink}, {9, 1, PairKind::kMustLink}};
  EXPECT_THAT(c.Validate(3).message(), HasSubstr("constraints[1]: pair (0, 1) duplicates constraints[0]"));
  c.pairs = {{0, 1, PairKind::kMustLink}, {7, 1, PairKind::kMustLink}, {0, 1, PairKind::kMustLink}};
  EXPECT_THAT(c.Validate(3).message(), HasSubstr("constraints[1]: i = 7 is out of range"));
  c.pairs = {{0, 1, PairKind::kMustLink}, {1, 0, PairKind::kCannotLink}};
  EXPECT_THAT(c.Validate(3).message(), HasSubstr("both must-link and cannot-link"));
  c.pairs = {{2, 2, PairKind::kCannotLink}};
  EXPECT_THAT(c.Validate(3).message(), HasSubstr("joins a point to itself"));
  c.pairs = {{-1, 2, PairKind::kMustLink}};
  EXPECT_THAT(c.Validate(3).message(), HasSubstr("i = -1 is out of range"));
}

TEST(Constraints, RankBoundMatchesPapers) {
  // KL-ADMM Table 1: m (symmetric count) → r.
  EXPECT_EQ(RankBound(340), 25);
  EXPECT_EQ(RankBound(510), 31);
  EXPECT_EQ(RankBound(606), 34);
  EXPECT_EQ(RankBound(38148), 275);
  EXPECT_EQ(RankBound(161), 17);
  EXPECT_EQ(RankBound(1), 1);
  EXPECT_EQ(RankBound(3), 2);
  EXPECT_EQ(RankBound(0), 1);
}

void ExpectConsistentWithLabels(const PairwiseConstraints& c, const std::vector<int>& y) {
  ASSERT_TRUE(c.Validate(static_cast<int>(y.size())).ok()) << c.Validate(static_cast<int>(y.size()));
  for (const Pair& p : c.pairs) {
    EXPECT_EQ(p.kind == PairKind::kMustLink, y[p.i] == y[p.j]) << p.i << "," << p.j;
  }
}

TEST(ConstraintGenerators, BcdProtocolCountsAndBalance) {
  const auto y = ThreeClasses(150);
  auto c = GenerateBcdProtocol(y, 0.3, 7);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->size(), 180);  // 4 · 150 · 0.3
  EXPECT_EQ(c->CountMustLinks(), 90);
  EXPECT_EQ(c->CountCannotLinks(), 90);
  ExpectConsistentWithLabels(*c, y);
  for (const Pair& p : c->pairs) EXPECT_NE(p.i, p.j);
}

TEST(ConstraintGenerators, AdmmProtocolCounts) {
  const auto y = ThreeClasses(150);
  auto c = GenerateAdmmProtocol(y, 3);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->size(), 90 + 90 + 150);
  EXPECT_EQ(c->CountMustLinks(), 240);
  int self = 0;
  for (const Pair& p : c->pairs) self += p.i == p.j;
  EXPECT_EQ(self, 150);
  ExpectConsistentWithLabels(*c, y);
}

TEST(ConstraintGenerators, ComponentProtocolReachesSeventyPercent) {
  const auto y = ThreeClasses(200);
  auto c = GenerateComponentProtocol(y, 0.7, 11);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(CountConstraintComponents(*c, 200), 140);
  EXPECT_GT(c->CountCannotLinks(), 0);
  ExpectConsistentWithLabels(*c, y);
}

TEST(ConstraintGenerators, DeterministicForSeedAndDifferentAcrossSeeds) {
  const auto y = ThreeClasses(90);
  auto a = GenerateBcdProtocol(y, 0.3, 5), b = GenerateBcdProtocol(y, 0.3, 5), c = GenerateBcdProtocol(y, 0.3, 6);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  auto key = [](const PairwiseConstraints& p) {
    std::vector<std::tuple<int, int, int>> v;
    for (auto& q : p.pairs) v.emplace_back(q.i, q.j, static_cast<int>(q.kind));
    return v;
  };
  EXPECT_EQ(key(*a), key(*b));
  EXPECT_NE(key(*a), key(*c));
}

TEST(ConstraintGenerators, ImpossibleRequestsAreErrors) {
  std::vector<int> one_class(10, 0);
  auto c = GenerateBcdProtocol(one_class, 0.3, 1);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("cannot-link pairs requested but only 0"));
  EXPECT_THAT(GenerateBcdProtocol({0}, 0.3, 1).status().message(), HasSubstr("at least 2"));
  EXPECT_THAT(GenerateBcdProtocol({0, 1, -1}, 0.3, 1).status().message(), HasSubstr("labels[2] = -1"));
  EXPECT_THAT(GenerateComponentProtocol({0, 1}, 1.5, 1).status().message(), HasSubstr("component_ratio = 1.5"));
}

}  // namespace
}  // namespace kls
