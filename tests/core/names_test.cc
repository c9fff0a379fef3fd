// The naming rule of data sets, kernels and aliases (core/common/names.h).
#include "core/common/names.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kls {
namespace {

using ::testing::HasSubstr;

TEST(Names, TheRuleAcceptsIdentifiersAndRefusesEverythingElse) {
  for (const std::string& ok : std::vector<std::string>{"a", "Z", "0", "iris.csv", "kl_admm-2", "A.b_c-9", std::string(128, 'x')}) {
    EXPECT_TRUE(IsValidName(ok)) << ok;
  }
  for (const std::string& bad : std::vector<std::string>{"", ".x", "_x", "-x", "a/b", "../../etc/passwd", "k:1", "k@prod", "a b", "a\tb",
                                "é", std::string("a\0b", 3), std::string(129, 'x')}) {
    EXPECT_FALSE(IsValidName(bad)) << bad;
  }
}

TEST(Names, ErrorsNameTheFieldQuoteTheValueAndSayTheRule) {
  const Status s = ValidateName("kernel_name", "../x");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("kernel_name = \"../x\" is not a valid name"));
  EXPECT_THAT(s.message(), HasSubstr("1 to 128 characters"));
  EXPECT_THAT(ValidateName("alias", "").message(), HasSubstr("alias = \"\" must not be empty"));
  EXPECT_THAT(ValidateName("alias", std::string(200, 'a')).message(), HasSubstr("is 200 characters long"));
  EXPECT_THAT(ValidateName("f", std::string("a\n\"b", 4)).message(), HasSubstr("\"a\\x0a\\x22b\""));
  EXPECT_TRUE(ValidateName("f", "fine").ok());
}

TEST(Names, SanitizeMakesAValidNameFromAFileName) {
  EXPECT_EQ(SanitizeName("my data (v2).csv"), "my_data__v2_.csv");
  EXPECT_EQ(SanitizeName(".hidden"), "n.hidden");
  EXPECT_EQ(SanitizeName(""), "");
  EXPECT_EQ(SanitizeName(std::string(300, 'q')).size(), kMaxNameLength);
  for (const std::string& in : std::vector<std::string>{"a b", "..", "ü.csv", "x:y@z"}) EXPECT_TRUE(IsValidName(SanitizeName(in))) << in;
}

}  // namespace
}  // namespace kls
