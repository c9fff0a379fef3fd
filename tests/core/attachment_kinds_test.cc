// AttachmentKinds (core/serving/attachment_kinds.h): an attachment kind that
// core does not know, registered by name with its parser, is parsed by
// ParseAttachments into ModelAttachments' extras and read back typed
// (Extra<T>); names nobody registered are skipped; malformed bytes are
// DATA_LOSS naming the attachment; a name is registered once and never
// shadows a built-in one.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/serving/attachment_kinds.h"
#include "core/serving/kernel_servable.h"

namespace kls {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// A kind of the test's own: a count, stored as 4 raw bytes.
struct Count {
  int32_t n = 0;
};

std::string CountBytes(int32_t n) { return std::string(reinterpret_cast<const char*>(&n), sizeof n); }

StatusOr<Count> ParseCount(const std::string& bytes) {
  if (bytes.size() != sizeof(int32_t)) return DataLossError(std::to_string(bytes.size()) + " bytes; expected 4");
  Count c;
  std::memcpy(&c.n, bytes.data(), sizeof c.n);
  if (c.n < 0) return DataLossError("negative count " + std::to_string(c.n));
  return c;
}

// A kind checked against the kernel it was stored with: one weight per point.
struct Weights {
  std::vector<double> w;
};

StatusOr<Weights> ParseWeights(const std::string& bytes, const LearnedKernel& kernel) {
  if (bytes.size() != sizeof(double) * kernel.num_points()) {
    return DataLossError(std::to_string(bytes.size() / sizeof(double)) + " weights for " +
                         std::to_string(kernel.num_points()) + " points");
  }
  Weights w;
  w.w.resize(kernel.num_points());
  std::memcpy(w.w.data(), bytes.data(), bytes.size());
  return w;
}

LearnedKernel Kernel(int n, int r) {
  auto k = LearnedKernel::FromEmbedding(LearnedKernel::Embedding::Ones(n, r));
  EXPECT_TRUE(k.ok()) << k.status();
  return std::move(k).value();
}

StatusOr<ModelAttachments> Parse(const LearnedKernel& kernel,
                                 const std::vector<std::pair<std::string, std::string>>& stored,
                                 const AttachmentKinds& kinds) {
  std::vector<AttachmentView> views;
  for (const auto& [name, bytes] : stored) views.push_back({name, &bytes});
  return ParseAttachments(kernel, views, kinds);
}

TEST(AttachmentKinds, ARegisteredKindIsParsedAndReadBackTyped) {
  AttachmentKinds kinds;
  ASSERT_TRUE(kinds.Add(AttachmentKind::Of<Count>("count", ParseCount)).ok());
  ASSERT_TRUE(kinds
                  .Add(AttachmentKind::Of<Weights>("weights", ParseWeights,
                                                   [](const Weights& w) { return static_cast<int64_t>(1000 + w.w.size()); }))
                  .ok());
  EXPECT_THAT(kinds.Names(), ElementsAre("count", "weights"));
  ASSERT_NE(kinds.Find("count"), nullptr);
  EXPECT_EQ(kinds.Find("nope"), nullptr);

  const LearnedKernel kernel = Kernel(3, 2);
  const std::vector<double> w = {0.5, 1.5, 2.5};
  const std::string weights(reinterpret_cast<const char*>(w.data()), sizeof(double) * w.size());
  auto parsed = Parse(kernel, {{"count", CountBytes(7)}, {"weights", weights}}, kinds);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_NE(parsed->Extra<Count>("count"), nullptr);
  EXPECT_EQ(parsed->Extra<Count>("count")->n, 7);
  ASSERT_NE(parsed->Extra<Weights>("weights"), nullptr);
  EXPECT_EQ(parsed->Extra<Weights>("weights")->w, w);
  // Another type or another name: null, never a reinterpretation.
  EXPECT_EQ(parsed->Extra<Weights>("count"), nullptr);
  EXPECT_EQ(parsed->Extra<Count>("counts"), nullptr);
  // The memory: the stored size, or what the kind's memory function says.
  EXPECT_EQ(parsed->bytes, 4 + 1003);

  // A servable hands them to the queries.
  const KernelServable servable(std::make_shared<const LearnedKernel>(kernel), nullptr,
                                std::make_shared<const ModelAttachments>(std::move(parsed).value()));
  ASSERT_NE(servable.attachments().Extra<Count>("count"), nullptr);
  EXPECT_EQ(servable.attachments().Extra<Count>("count")->n, 7);
  EXPECT_EQ(KernelServable(std::make_shared<const LearnedKernel>(kernel), nullptr, nullptr)
                .attachments()
                .Extra<Count>("count"),
            nullptr);
}

TEST(AttachmentKinds, NamesNobodyRegisteredAreSkipped) {
  AttachmentKinds kinds;
  ASSERT_TRUE(kinds.Add(AttachmentKind::Of<Count>("count", ParseCount)).ok());
  const LearnedKernel kernel = Kernel(2, 1);
  auto parsed = Parse(kernel, {{"from_a_newer_server", "\x01\x02\x03"}, {"count", CountBytes(2)}}, kinds);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->extras.size(), 1u);
  EXPECT_EQ(parsed->Extra<Count>("from_a_newer_server"), nullptr);
  EXPECT_EQ(parsed->Extra<Count>("count")->n, 2);
  EXPECT_EQ(parsed->bytes, 3 + 4);

  // Without the registration, "count" is one of those names.
  auto plain = Parse(kernel, {{"count", CountBytes(2)}}, AttachmentKinds());
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_TRUE(plain->extras.empty());
}

TEST(AttachmentKinds, MalformedBytesAreDataLossNamingTheAttachment) {
  AttachmentKinds kinds;
  ASSERT_TRUE(kinds.Add(AttachmentKind::Of<Count>("count", ParseCount)).ok());
  ASSERT_TRUE(kinds.Add(AttachmentKind::Of<Weights>("weights", ParseWeights)).ok());
  ASSERT_TRUE(kinds
                  .Add(AttachmentKind::Of<Count>("thrower",
                                                 [](const std::string&) -> StatusOr<Count> {
                                                   throw std::runtime_error("bad things");
                                                 }))
                  .ok());
  const LearnedKernel kernel = Kernel(3, 1);

  auto s = Parse(kernel, {{"count", "abc"}}, kinds).status();
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_EQ(s.message(), "count: 3 bytes; expected 4");
  s = Parse(kernel, {{"count", CountBytes(-1)}}, kinds).status();
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_EQ(s.message(), "count: negative count -1");
  // The parser's own error code becomes DATA_LOSS too.
  s = Parse(kernel, {{"weights", std::string(16, '\0')}}, kinds).status();
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_EQ(s.message(), "weights: 2 weights for 3 points");
  s = Parse(kernel, {{"thrower", ""}}, kinds).status();
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_EQ(s.message(), "thrower: bad things");
}

TEST(AttachmentKinds, ANameIsRegisteredOnceAndNeverShadowsABuiltInOne) {
  AttachmentKinds kinds;
  ASSERT_TRUE(kinds.Add(AttachmentKind::Of<Count>("count", ParseCount)).ok());
  Status s = kinds.Add(AttachmentKind::Of<Count>("count", ParseCount));
  EXPECT_EQ(s.code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(s.message(), "attachment kind count is registered already");

  for (const char* builtin : {kClassifierAttachment, kSocialGraphAttachment, kSocialKlrAttachment,
                              kFeatureScalingAttachment, kLinearMapAttachment}) {
    EXPECT_TRUE(IsBuiltinAttachment(builtin)) << builtin;
    s = kinds.Add(AttachmentKind::Of<Count>(builtin, ParseCount));
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << builtin;
    EXPECT_THAT(s.message(), HasSubstr("the name of a built-in attachment")) << builtin;
  }
  EXPECT_EQ(kinds.Add(AttachmentKind::Of<Count>("", ParseCount)).code(), StatusCode::kInvalidArgument);
  AttachmentKind no_parser;
  no_parser.name = "empty";
  EXPECT_EQ(kinds.Add(no_parser).code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(kinds.Names(), ElementsAre("count"));
}

}  // namespace

// The macro registers into the global registry at static initialization,
// which ParseAttachments reads by default.
KLS_REGISTER_ATTACHMENT_KIND(Count, "attachment_kinds_test.count", ParseCount);

namespace {

TEST(AttachmentKindsGlobal, TheMacroRegistersAtStartUpAndTwiceAborts) {
  EXPECT_THAT(AttachmentKinds::Global().Names(), Contains("attachment_kinds_test.count"));
  const LearnedKernel kernel = Kernel(2, 1);
  const std::string bytes = CountBytes(11);
  auto parsed = ParseAttachments(kernel, {{"attachment_kinds_test.count", &bytes}});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_NE(parsed->Extra<Count>("attachment_kinds_test.count"), nullptr);
  EXPECT_EQ(parsed->Extra<Count>("attachment_kinds_test.count")->n, 11);

  EXPECT_EQ(AttachmentKinds::Global().Add(AttachmentKind::Of<Count>("attachment_kinds_test.count", ParseCount)).code(),
            StatusCode::kAlreadyExists);
  EXPECT_DEATH(AttachmentKinds::Global().AddOrDie(AttachmentKind::Of<Count>("attachment_kinds_test.count", ParseCount)),
               "attachment kind attachment_kinds_test.count is registered already");
  EXPECT_DEATH(AttachmentKinds::Global().AddOrDie(AttachmentKind::Of<Count>(kLinearMapAttachment, ParseCount)),
               "the name of a built-in attachment");
}

}  // namespace
}  // namespace kls
