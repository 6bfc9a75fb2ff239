#include "draguard/admission/response.h"
#include "draguard/base64.h"

#include <gtest/gtest.h>

#include <set>

#include "draguard/admission/codec.h"

namespace draguard::admission {
namespace {

TEST(Complete, EchoesUidAndKeepsAllowedClean) {
  AdmissionResponse r = Allowed();
  r.status = ResponseStatus{200, "x", "y"};
  auto c = Complete(r, "uid-1", WebhookKind::kValidating);
  EXPECT_EQ(c.uid, "uid-1");
  EXPECT_TRUE(c.allowed);
  EXPECT_FALSE(c.status.has_value());
}

TEST(Complete, DenyCarriesForbiddenStatus) {
  auto c = Complete(Denied("DG001 legacy-gpu-resource: nope"), "u", WebhookKind::kValidating);
  EXPECT_FALSE(c.allowed);
  ASSERT_TRUE(c.status.has_value());
  EXPECT_EQ(c.status->code, 403);
  EXPECT_EQ(c.status->reason, "Forbidden");
  EXPECT_EQ(c.status->message, "DG001 legacy-gpu-resource: nope");
}

TEST(Complete, DenyCodeBelow400BecomesForbidden) {
  auto c = Complete(Denied("m", 200, ""), "u", WebhookKind::kValidating);
  EXPECT_EQ(c.status->code, 403);
  EXPECT_EQ(c.status->reason, "Forbidden");
}

TEST(Complete, DenyMessageIsCappedAt1KiB) {
  auto c = Complete(Denied(std::string(5000, 'x')), "u", WebhookKind::kValidating);
  EXPECT_LE(c.status->message.size(), kMaxDenyMessageBytes);
  EXPECT_EQ(c.status->message.substr(c.status->message.size() - 3), "...");
}

TEST(Complete, ValidatingWebhookNeverSendsAPatch) {
  AdmissionResponse r = Allowed();
  SetPatch(r, R"([{"op":"add","path":"/metadata/labels","value":{}}])");
  auto c = Complete(r, "u", WebhookKind::kValidating);
  EXPECT_TRUE(c.patch.empty());
  auto j = nlohmann::json::parse(EncodeReview(c, kAdmissionV1));
  EXPECT_FALSE(j["response"].contains("patch"));
  EXPECT_FALSE(j["response"].contains("patchType"));
}

TEST(Complete, MutatingWebhookSendsNonEmptyPatchBase64) {
  const std::string patch = R"([{"op":"remove","path":"/spec/containers/0/resources/limits/nvidia.com~1gpu"}])";
  AdmissionResponse r = Allowed();
  SetPatch(r, patch);
  auto c = Complete(r, "u", WebhookKind::kMutating);
  auto j = nlohmann::json::parse(EncodeReview(c, kAdmissionV1));
  EXPECT_EQ(j["response"]["patchType"], "JSONPatch");
  auto decoded = Base64Decode(j["response"]["patch"].get<std::string>());
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  EXPECT_EQ(*decoded, patch);
}

TEST(Complete, EmptyPatchIsDropped) {
  for (const char* p : {"[]", " [ ] ", ""}) {
    AdmissionResponse r = Allowed();
    SetPatch(r, p);
    auto c = Complete(r, "u", WebhookKind::kMutating);
    EXPECT_TRUE(c.patch.empty()) << p;
    auto j = nlohmann::json::parse(EncodeReview(c, kAdmissionV1));
    EXPECT_FALSE(j["response"].contains("patchType")) << p;
  }
}

TEST(Complete, DeniedResponseCarriesNoPatch) {
  AdmissionResponse r = Denied("no");
  SetPatch(r, R"([{"op":"add","path":"/x","value":1}])");
  EXPECT_TRUE(Complete(r, "u", WebhookKind::kMutating).patch.empty());
}

TEST(LimitWarnings, CutsEachTo120CharsUtf8Safe) {
  std::string w;
  for (int i = 0; i < 100; ++i) w += "\xc3\xa9";  // U+00E9 is two bytes: 200 bytes in all
  auto out = LimitWarnings({w});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_LE(out[0].size(), kMaxWarningChars);
  // Never ends in the middle of a two-byte sequence.
  std::string body = out[0].substr(0, out[0].size() - 3);
  EXPECT_EQ(body.size() % 2, 0u);
}

TEST(LimitWarnings, DropsPastTheTotalBudgetAndDuplicates) {
  std::vector<std::string> many;
  for (int i = 0; i < 100; ++i) many.push_back(std::string(100, 'a') + std::to_string(i));
  many.push_back(many.front());
  auto out = LimitWarnings(many);
  std::size_t total = 0;
  for (const auto& w : out) total += w.size();
  EXPECT_LE(total, kMaxWarningBytesTotal);
  EXPECT_LT(out.size(), many.size());
  EXPECT_EQ(out.front(), many.front());
}

TEST(AuditAnnotations, KeysAreValidatedAndNormalised) {
  EXPECT_TRUE(IsValidAuditAnnotationKey("dg001-legacy-gpu-resource"));
  EXPECT_TRUE(IsValidAuditAnnotationKey("decision"));
  EXPECT_FALSE(IsValidAuditAnnotationKey(""));
  EXPECT_FALSE(IsValidAuditAnnotationKey("draguard.io/decision"));  // the API server adds a prefix
  EXPECT_FALSE(IsValidAuditAnnotationKey("-x"));
  EXPECT_FALSE(IsValidAuditAnnotationKey(std::string(64, 'a')));
  EXPECT_EQ(NormalizeAuditAnnotationKey("Rule DG001/Legacy"), "rule-dg001-legacy");
  EXPECT_EQ(NormalizeAuditAnnotationKey("///"), "annotation");
  AdmissionResponse r = Allowed();
  AddAuditAnnotation(r, "Bad Key!", "v");
  auto c = Complete(r, "u", WebhookKind::kValidating);
  ASSERT_EQ(c.audit_annotations.count("bad-key"), 1u);
  for (const auto& [k, v] : c.audit_annotations) EXPECT_TRUE(IsValidAuditAnnotationKey(k)) << k;
}

TEST(LimitWarnings, KeepsOrderAndDropsEmptiesAndDuplicatesMadeByTheCut) {
  const std::string long_a = std::string(130, 'x') + "a";
  const std::string long_b = std::string(130, 'x') + "b";  // the same as long_a once both are cut
  auto out = LimitWarnings({"first", "", long_a, "second", long_b, "first", "third"});
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0], "first");
  EXPECT_EQ(out[1], std::string(kMaxWarningChars - 3, 'x') + "...");
  EXPECT_EQ(out[2], "second");
  EXPECT_EQ(out[3], "third");
}

TEST(LimitWarnings, FindsDuplicatesPastTheFirstSixteenKeptOnes) {
  // The rule the limits follow, written plainly: cut each, drop empties and repeats, stop at the budget.
  const auto reference = [](const std::vector<std::string>& in) {
    std::vector<std::string> out;
    std::set<std::string> seen;
    std::size_t total = 0;
    for (const auto& w : in) {
      if (w.empty()) continue;
      std::string cut = TruncateUtf8(w, kMaxWarningChars);
      if (!seen.insert(cut).second) continue;
      if (total + cut.size() > kMaxWarningBytesTotal) break;
      total += cut.size();
      out.push_back(std::move(cut));
    }
    return out;
  };
  for (std::size_t distinct : {1u, 15u, 16u, 17u, 18u, 40u, 200u}) {
    std::vector<std::string> in;
    for (std::size_t i = 0; i < 3 * distinct; ++i) {
      // Every warning three times, the repeats spread out; a few empty and a few cut to a repeat.
      const std::size_t n = (i * 7) % distinct;
      in.push_back(n % 5 == 4 ? "" : "w" + std::to_string(n) + (n % 3 == 0 ? std::string(150, 'x') + std::to_string(i) : ""));
    }
    EXPECT_EQ(LimitWarnings(in), reference(in)) << distinct << " distinct";
  }
}

TEST(TruncateUtf8InPlace, CutsLikeTruncateUtf8AtEveryLength) {
  const std::string text = "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80bc\xc3\xa9d";  // 1-, 2-, 3- and 4-byte characters
  for (std::size_t max = 0; max <= text.size() + 2; ++max) {
    std::string cut = text;
    TruncateUtf8InPlace(cut, max);
    EXPECT_EQ(cut, TruncateUtf8(text, max)) << "max " << max;
    EXPECT_LE(cut.size(), max) << "max " << max;
  }
}

TEST(AuditAnnotations, LongValuesAreCutWhetherOrNotAKeyIsNormalised) {
  for (bool bad_key : {false, true}) {
    AdmissionResponse r = Allowed();
    AddAuditAnnotation(r, "long", std::string(kMaxAuditAnnotationValueBytes + 10, 'v'));
    AddAuditAnnotation(r, "short", "s");
    if (bad_key) AddAuditAnnotation(r, "Bad Key!", "b");
    auto c = Complete(r, "u", WebhookKind::kValidating);
    ASSERT_EQ(c.audit_annotations.count("long"), 1u);
    EXPECT_EQ(c.audit_annotations["long"], std::string(kMaxAuditAnnotationValueBytes - 3, 'v') + "...");
    EXPECT_EQ(c.audit_annotations["short"], "s");
    EXPECT_EQ(c.audit_annotations.size(), bad_key ? 3u : 2u);
    if (bad_key) EXPECT_EQ(c.audit_annotations["bad-key"], "b");
  }
}

}  // namespace
}  // namespace draguard::admission
