#include "draguard/admission/codec.h"

#include "draguard/base64.h"

#include <fstream>
#include <sstream>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace draguard::admission {
namespace {

std::string ReadData(const std::string& rel) {
  std::ifstream in(std::string(DRAGUARD_TEST_DATA) + "/" + rel);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(DecodeReview, DecodesEveryFieldOfARealReview) {
  auto r = DecodeReview(ReadData("reviews/DG001/legacy-limit/request.json"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->api_version, "admission.k8s.io/v1");
  EXPECT_EQ(r->uid, "705ab4f5-6393-11e8-b7cc-42010a800002");
  EXPECT_EQ(r->kind.group, "");
  EXPECT_EQ(r->kind.version, "v1");
  EXPECT_EQ(r->kind.kind, "Pod");
  EXPECT_EQ(r->resource.resource, "pods");
  ASSERT_TRUE(r->request_kind.has_value());
  EXPECT_EQ(r->request_kind->kind, "Pod");
  ASSERT_TRUE(r->request_resource.has_value());
  EXPECT_EQ(r->request_resource->resource, "pods");
  EXPECT_EQ(r->namespace_, "team-a");
  EXPECT_EQ(r->name, "cuda-vectoradd");
  EXPECT_EQ(r->operation, Operation::kCreate);
  EXPECT_EQ(r->user_info.username, "alice");
  ASSERT_EQ(r->user_info.groups.size(), 2u);
  EXPECT_EQ(r->user_info.groups[1], "system:authenticated");
  ASSERT_EQ(r->user_info.extra.count("scopes"), 1u);
  EXPECT_FALSE(r->dry_run);
  EXPECT_TRUE(r->object.is_object());
  EXPECT_TRUE(r->old_object.is_null());
  EXPECT_EQ(r->options["kind"], "CreateOptions");
}

TEST(DecodeReview, AcceptsV1beta1Envelope) {
  std::string body = R"({"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview",
    "request":{"uid":"u","kind":{"group":"","version":"v1","kind":"Pod"},"operation":"DELETE",
    "oldObject":{"kind":"Pod"},"dryRun":true}})";
  auto r = DecodeReview(body);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->api_version, "admission.k8s.io/v1beta1");
  EXPECT_EQ(r->operation, Operation::kDelete);
  EXPECT_TRUE(r->dry_run);
  EXPECT_TRUE(r->object.is_null());
}

struct BadCase {
  const char* name;
  std::string body;
  const char* expect_in_message;
};

class DecodeBad : public ::testing::TestWithParam<BadCase> {};

TEST_P(DecodeBad, IsRejectedWithAClearMessage) {
  auto r = DecodeReview(GetParam().body);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(GetParam().expect_in_message), std::string::npos)
      << r.status().message();
}

std::string Deep(int n) { return std::string(n, '[') + std::string(n, ']'); }

INSTANTIATE_TEST_SUITE_P(
    All, DecodeBad,
    ::testing::Values(
        BadCase{"empty", "", "empty body"},
        BadCase{"not_json", "hello", "not valid JSON"},
        BadCase{"truncated", R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionRev)", "not valid JSON"},
        BadCase{"array", "[1,2]", "not a JSON object"},
        BadCase{"wrong_kind", R"({"apiVersion":"admission.k8s.io/v1","kind":"Pod","request":{}})", "expected \"AdmissionReview\""},
        BadCase{"wrong_version", R"({"apiVersion":"admission.k8s.io/v2","kind":"AdmissionReview","request":{}})", "not supported"},
        BadCase{"no_request", R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"})", "has no request"},
        BadCase{"request_not_object", R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":3})", "request must be an object"},
        BadCase{"no_uid", R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"kind":{"kind":"Pod"},"operation":"CREATE","object":{}}})", "uid is missing"},
        BadCase{"uid_number", R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":5}})", "uid must be a string"},
        BadCase{"kind_not_object", R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":"Pod"}})", "request.kind must be an object"},
        BadCase{"request_resource_group_number", R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"kind":"Pod"},"requestResource":{"group":1}}})", "request.requestResource.group must be a string"},
        BadCase{"bad_operation", R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"kind":"Pod"},"operation":"PATCH"}})", "not one of CREATE"},
        BadCase{"create_without_object", R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"kind":"Pod"},"operation":"CREATE"}})", "object is missing"},
        BadCase{"deep_nesting", R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":)" + Deep(100000) + "}", "nesting deeper"},
        BadCase{"groups_not_list", R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"kind":"Pod"},"operation":"DELETE","userInfo":{"groups":"x"}}})", "groups must be a list"}),
    [](const ::testing::TestParamInfo<BadCase>& i) { return std::string(i.param.name); });

// An envelope around the raw JSON text of an object.
std::string ReviewAround(const std::string& object_text, const std::string& extra_request_members = "") {
  return R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u1",)"
         R"("kind":{"group":"","version":"v1","kind":"Pod"},"operation":"CREATE",)" +
         extra_request_members + R"("object":)" + object_text + "}}";
}

DecodeLimits Reference() {
  DecodeLimits l;
  l.decoder = Decoder::kReference;
  return l;
}

// `body` followed by kBodyPadding bytes that would change the text if a parser took them for
// part of it (quotes, brackets, digits, escapes).
std::string WithHostilePadding(const std::string& body) {
  std::string out = body;
  constexpr std::string_view kJunk = "\"{[\\1 ,]}e";
  for (std::size_t i = 0; i < kBodyPadding; ++i) out.push_back(kJunk[i % kJunk.size()]);
  return out;
}

// The fast decode (both scopes, the body copied or read where it lies with junk past its end)
// answers exactly as the reference decode: same error message, or the same request with the same
// document (number types included).
void ExpectSameAsReference(const std::string& body, bool compare_rule_scope = true) {
  auto ref = DecodeReview(body, Reference());
  const std::string padded = WithHostilePadding(body);
  for (int variant = 0; variant < 4; ++variant) {
    const DecodeScope scope = variant % 2 ? DecodeScope::kRuleFields : DecodeScope::kFull;
    const bool in_place = variant >= 2;
    if (scope == DecodeScope::kRuleFields && !compare_rule_scope) continue;
    SCOPED_TRACE(std::string(in_place ? "in place, " : "copied, ") + (variant % 2 ? "rule fields" : "full"));
    auto fast = in_place ? DecodeReview(std::string_view(padded).substr(0, body.size()), {}, scope, nullptr,
                                        kBodyPadding)
                         : DecodeReview(body, {}, scope);
    ASSERT_EQ(fast.ok(), ref.ok()) << body.substr(0, 200) << "\n" << (fast.ok() ? ref : fast).status().message();
    if (!ref.ok()) {
      EXPECT_EQ(fast.status().code(), ref.status().code());
      EXPECT_EQ(fast.status().message(), ref.status().message());
      continue;
    }
    EXPECT_EQ(fast->uid, ref->uid);
    EXPECT_EQ(fast->options, ref->options);
    EXPECT_EQ(fast->user_info.extra, ref->user_info.extra);
    EXPECT_EQ(fast->object, ref->object);
    EXPECT_EQ(fast->object.dump(), ref->object.dump());
  }
}

TEST(FastDecode, AnswersEdgeCasesLikeTheReference) {
  const std::vector<std::string> objects = {
      R"({"a":1,"a":2,"spec":{"x":[1],"x":{"y":true}}})",  // duplicate keys: the last value
      R"({"n":[0,-0,1,-1,9223372036854775807,-9223372036854775808,9223372036854775808,18446744073709551615]})",
      R"({"n":[18446744073709551616,-9223372036854775809,123456789012345678901234567890]})",  // past 64 bits
      R"({"d":[0.0,-0.0,1e308,-1e308,1.7976931348623157e308,4.9e-324,2.2250738585072014e-308,1e-400,0.1,1E5,1e2]})",
      R"({"d":[1e400]})",  // out of double range
      R"({"s":"\u0000\u001f\ud83d\ude00 é ✓ \"\\\/\b\f\n\r\t"})",
      R"({"s":"\ud800"})", R"({"s":"\udc00"})", R"({"s":"\ud800\u0041"})",  // lone surrogates
      "{\"s\":\"\xff\"}", "{\"s\":\"\xc0\xaf\"}", "{\"s\":\"\xed\xa0\x80\"}", "{\"s\":\"\xf4\x90\x80\x80\"}",  // invalid UTF-8
      "{\"s\":\"a\x01\"}",  // unescaped control character
      R"({"x":[1.]})", R"({"x":[01]})", R"({"x":[+1]})", R"({"x":[.5]})", R"({"x":NaN})", R"({"x":[1,]})",
      R"({"x":tru})", R"({"x":nul})", R"({"x":"open)", "{}", "[]", "null", "3", R"("str")"};
  for (const auto& o : objects) ExpectSameAsReference(ReviewAround(o));
  // Outside the object: envelope duplicates, a byte order mark, trailing text, whitespace.
  ExpectSameAsReference(ReviewAround("{}", R"("uid":"first","uid":"second",)"));
  ExpectSameAsReference("\xEF\xBB\xBF" + ReviewAround("{}"));
  ExpectSameAsReference(ReviewAround("{}") + " x");
  ExpectSameAsReference(ReviewAround("{}") + " {}");
  ExpectSameAsReference(" \t\r\n" + ReviewAround("{}") + " \n");
  ExpectSameAsReference(ReviewAround("{}", R"("options":{"n":[-0,1e-7,18446744073709551615]},"userInfo":{"extra":{"k":["a","b"],"k":["c"]}},)"));
}

TEST(FastDecode, HugeStringsAndListsDecodeLikeTheReference) {
  ExpectSameAsReference(ReviewAround(R"({"metadata":{"annotations":{"big":")" + std::string(3 << 20, 'x') + R"("}}})"));
  std::string args = R"({"spec":{"containers":[{"name":"c","args":[)";
  for (int i = 0; i < 200000; ++i) args += i ? ",\"\"" : "\"\"";
  args += "]}]}}";
  ExpectSameAsReference(ReviewAround(args), /*compare_rule_scope=*/false);
  auto trimmed = DecodeReview(ReviewAround(args), {}, DecodeScope::kRuleFields);
  ASSERT_TRUE(trimmed.ok());
  EXPECT_EQ(trimmed->object, nlohmann::json::parse(R"({"spec":{"containers":[{"name":"c"}]}})"));
}

TEST(FastDecode, NestingAtTheLimitIsAcceptedAndPastItRefused) {
  // The envelope and the request take two levels, the object one: 125 more make 128.
  for (int extra : {124, 125, 126, 127, 100000}) {
    std::string o = R"({"x":)" + std::string(extra, '[') + std::string(extra, ']') + "}";
    ExpectSameAsReference(ReviewAround(o));
    auto r = DecodeReview(ReviewAround(o));
    EXPECT_EQ(r.ok(), extra <= 125) << extra;
    if (!r.ok()) {
      EXPECT_EQ(r.status().message(), "JSON nesting deeper than 128 levels");
      EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
    }
  }
  // Past the limit inside a subtree the rule-fields decode leaves out: still refused.
  std::string deep_env = R"({"spec":{"containers":[{"name":"c","env":)" + std::string(200, '[') +
                         std::string(200, ']') + "}]}}";
  auto r = DecodeReview(ReviewAround(deep_env), {}, DecodeScope::kRuleFields);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "JSON nesting deeper than 128 levels");
  // So is malformed or invalid UTF-8 text there.
  for (std::string bad : {std::string(R"("env":[{"name":"A","value":"\x"}])"), std::string("\"env\":[\"\xff\"]"),
                          std::string(R"("env":[1,])")}) {
    auto b = DecodeReview(ReviewAround(R"({"spec":{"containers":[{"name":"c",)" + bad + "}]}}"), {},
                          DecodeScope::kRuleFields);
    ASSERT_FALSE(b.ok()) << bad;
    EXPECT_EQ(b.status().message(), "body is not valid JSON (malformed or truncated)");
  }
}

TEST(FastDecode, RuleFieldsLeaveOutOnlyTheUnreadSubtrees) {
  const std::string pod = R"({"apiVersion":"v1","kind":"Pod",
    "metadata":{"name":"p","labels":{"env":"prod"},"annotations":{"a":"b"},
                "managedFields":[{"manager":"kubectl","fieldsV1":{"f:spec":{}}}]},
    "spec":{"containers":[{"name":"c","image":"i","env":[{"name":"A","value":"1"}],"envFrom":[],
                           "args":["x"],"command":["y"],"livenessProbe":{},"readinessProbe":{},
                           "startupProbe":{},"lifecycle":{},"ports":[{"containerPort":80}],
                           "volumeMounts":[{"name":"v","mountPath":"/v"}],"volumeDevices":[],
                           "resources":{"limits":{"nvidia.com/gpu":1},"claims":[{"name":"g"}]}}],
            "initContainers":[{"name":"i","env":[],"restartPolicy":"Always"}],
            "ephemeralContainers":[{"name":"e","command":["sh"],"targetContainerName":"c"}],
            "volumes":[{"name":"v","emptyDir":{}}],
            "template":{"spec":{"containers":[{"name":"t","env":[]}]}},
            "devices":{"config":[{"opaque":{"parameters":{"env":[1],"args":[2],"managedFields":[3]}}}]}},
    "env":["top-level env is not a container field"]})";
  const std::string body = ReviewAround(pod, R"("options":{"env":["kept"],"metadata":{"managedFields":[]}},)");
  auto full = DecodeReview(body);
  auto rules = DecodeReview(body, {}, DecodeScope::kRuleFields);
  ASSERT_TRUE(full.ok() && rules.ok());
  EXPECT_EQ(full->object, nlohmann::json::parse(pod));
  const auto want = nlohmann::json::parse(R"({"apiVersion":"v1","kind":"Pod",
    "metadata":{"name":"p","labels":{"env":"prod"},"annotations":{"a":"b"}},
    "spec":{"containers":[{"name":"c","image":"i",
                           "resources":{"limits":{"nvidia.com/gpu":1},"claims":[{"name":"g"}]}}],
            "initContainers":[{"name":"i","restartPolicy":"Always"}],
            "ephemeralContainers":[{"name":"e","targetContainerName":"c"}],
            "volumes":[{"name":"v","emptyDir":{}}],
            "template":{"spec":{"containers":[{"name":"t"}]}},
            "devices":{"config":[{"opaque":{"parameters":{"env":[1],"args":[2],"managedFields":[3]}}}]}},
    "env":["top-level env is not a container field"]})");
  EXPECT_EQ(rules->object, want) << rules->object.dump(1);
  // With an oldObject (rules compare the two), nothing is left out.
  auto update = DecodeReview(ReviewAround(pod, R"("oldObject":)" + pod + ","), {}, DecodeScope::kRuleFields);
  ASSERT_TRUE(update.ok());
  EXPECT_EQ(update->object, nlohmann::json::parse(pod));
  EXPECT_EQ(update->old_object, nlohmann::json::parse(pod));
  auto null_old = DecodeReview(ReviewAround(pod, R"("oldObject":null,)"), {}, DecodeScope::kRuleFields);
  ASSERT_TRUE(null_old.ok());
  EXPECT_EQ(null_old->object, want);
  // The envelope is never trimmed.
  EXPECT_EQ(rules->options, nlohmann::json::parse(R"({"env":["kept"],"metadata":{"managedFields":[]}})"));
}

// Whether `a` and `b` are the same document, number types included (nlohmann's == takes 1 and
// 1u for equal).
bool SameDocument(const nlohmann::json& a, const nlohmann::json& b) {
  if (a.type() != b.type()) return false;
  if (a.is_object()) {
    if (a.size() != b.size()) return false;
    for (auto it = a.begin(), jt = b.begin(); it != a.end(); ++it, ++jt) {
      if (it.key() != jt.key() || !SameDocument(*it, *jt)) return false;
    }
    return true;
  }
  if (a.is_array()) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (!SameDocument(a[i], b[i])) return false;
    }
    return true;
  }
  return a == b && a.dump() == b.dump();
}

TEST(FastDecode, ARecycledObjectIsRebuiltToWhatAFreshDecodeGives) {
  std::string many = "{";  // past the members merged in place: built anew
  for (int i = 0; i < 40; ++i) many += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":" + std::to_string(i);
  many += "}";
  std::string deep;  // objects nested to the limit: one merge per level
  for (int i = 0; i < 124; ++i) deep += R"({"a":1,"b":)";
  deep += "{}" + std::string(124, '}');
  const std::vector<std::string> objects = {
      R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":{"app":"a","tier":"x"}},
          "spec":{"containers":[{"name":"c","image":"registry.example/long/image/name:tag",
                                 "env":[{"name":"A","value":"1"}],
                                 "resources":{"limits":{"nvidia.com/gpu":8,"cpu":"8"}}}],
                  "restartPolicy":"Never"}})",
      R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"q","labels":{"tier":"y"},"annotations":{"a":"b"}},
          "spec":{"containers":[{"name":"c1","image":"i"},{"name":"c2","image":"j",
                                 "resources":{"claims":[{"name":"g"}]}}],
                  "resourceClaims":[{"name":"g","resourceClaimTemplateName":"t"}]}})",
      R"({"kind":{"nested":"object"},"metadata":"a string","spec":[1,"two",{"three":3}],"z":null})",
      R"({"a":1,"a":"dup","b":{"x":[1],"x":{"y":true}},"c":[[],[[]],{}],"d":-1,"e":1.5,"f":18446744073709551615})",
      R"({"n":[0,-0,1,-1,0.0,-0.0,1e2],"s":"\u0000é\ud83d\ude00","t":true,"u":false})",
      R"({"spec":{"containers":[{"name":"c","args":["x"],"command":["y"],"ports":[],"image":"i"}]},"kind":"Pod"})",
      many,
      deep,
      "{}",
  };
  for (const auto& first : objects) {
    for (const auto& second : objects) {
      for (const std::string& extra : {std::string(), R"("oldObject":)" + first + ","}) {
        for (DecodeScope scope : {DecodeScope::kRuleFields, DecodeScope::kFull}) {
          SCOPED_TRACE(first + " then " + second + (extra.empty() ? "" : " with an oldObject") +
                       (scope == DecodeScope::kFull ? " (full)" : " (rule fields)"));
          const DecodePool pool;
          auto a = DecodeReview(ReviewAround(first), {}, scope, &pool);
          ASSERT_TRUE(a.ok());
          pool.Recycle(a->object, ReviewAround(first).size());
          ASSERT_TRUE(a->object.is_null());  // kept by the pool
          auto rebuilt = DecodeReview(ReviewAround(second, extra), {}, scope, &pool);
          auto fresh = DecodeReview(ReviewAround(second, extra), {}, scope);
          ASSERT_TRUE(rebuilt.ok() && fresh.ok());
          EXPECT_TRUE(SameDocument(rebuilt->object, fresh->object))
              << rebuilt->object.dump() << "\n" << fresh->object.dump();
          EXPECT_TRUE(SameDocument(rebuilt->old_object, fresh->old_object));
          EXPECT_EQ(rebuilt->uid, fresh->uid);
        }
      }
    }
  }
}

TEST(DecodePool, KeepsAtMostItsShareOfSmallObjects) {
  const DecodePool pool;
  nlohmann::json big = nlohmann::json::object({{"k", "v"}});
  pool.Recycle(big, DecodePool::kRecycledBodyBytes + 1);
  EXPECT_FALSE(big.is_null());  // from a body past the bound: left to its owner
  nlohmann::json not_object = nlohmann::json::array({1});
  pool.Recycle(not_object, 10);
  EXPECT_FALSE(not_object.is_null());
  for (std::size_t i = 0; i < DecodePool::kMaxPooledParsers; ++i) {
    nlohmann::json o = nlohmann::json::object({{"i", i}});
    pool.Recycle(o, DecodePool::kRecycledBodyBytes);
    EXPECT_TRUE(o.is_null()) << i;
  }
  nlohmann::json one_more = nlohmann::json::object({{"k", "v"}});
  pool.Recycle(one_more, 10);
  EXPECT_FALSE(one_more.is_null());  // the pool is full
}

TEST(DecodeReview, RejectsBodiesOverTheLimit) {
  DecodeLimits limits;
  limits.max_bytes = 64;
  auto r = DecodeReview(std::string(65, ' '), limits);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
}

TEST(JsonNestingDepth, IgnoresBracketsInsideStrings) {
  EXPECT_EQ(JsonNestingDepth(R"({"a":"[[[[{{{{\"[["})", 100), 1u);
  EXPECT_EQ(JsonNestingDepth(R"([[[]],[]])", 100), 3u);
}

TEST(EncodeReview, EchoesTheEnvelopeVersion) {
  AdmissionResponse r;
  r.uid = "abc";
  auto j = nlohmann::json::parse(EncodeReview(r, "admission.k8s.io/v1beta1"));
  EXPECT_EQ(j["apiVersion"], "admission.k8s.io/v1beta1");
  EXPECT_EQ(j["kind"], "AdmissionReview");
  EXPECT_EQ(j["response"]["uid"], "abc");
  EXPECT_EQ(j["response"]["allowed"], true);
  EXPECT_FALSE(j["response"].contains("patch"));
  EXPECT_FALSE(j["response"].contains("patchType"));
  EXPECT_FALSE(j["response"].contains("status"));
}

// The encoding before it was written directly: a sorted nlohmann document, dumped. The direct
// encoder must produce the same bytes for every shape of response.
std::string ReferenceEncode(const AdmissionResponse& response, std::string_view api_version) {
  nlohmann::json r = nlohmann::json::object();
  r["uid"] = response.uid;
  r["allowed"] = response.allowed;
  if (response.status) {
    nlohmann::json st = nlohmann::json::object();
    st["code"] = response.status->code;
    if (!response.status->reason.empty()) st["reason"] = response.status->reason;
    if (!response.status->message.empty()) st["message"] = response.status->message;
    r["status"] = std::move(st);
  }
  if (!response.warnings.empty()) r["warnings"] = response.warnings;
  if (!response.audit_annotations.empty()) r["auditAnnotations"] = response.audit_annotations;
  if (!response.patch.empty()) {
    r["patchType"] = "JSONPatch";
    r["patch"] = draguard::Base64Encode(response.patch);
  }
  nlohmann::json doc = nlohmann::json::object();
  doc["apiVersion"] = api_version.empty() ? std::string(kAdmissionV1) : std::string(api_version);
  doc["kind"] = "AdmissionReview";
  doc["response"] = std::move(r);
  return doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

TEST(EncodeReview, WritesWhatTheSortedDocumentWrote) {
  const std::vector<std::string> texts = {
      "", "plain", "quote \" backslash \\ slash /", "tab\tnewline\ncr\rbs\bff\f", std::string("nul\0x", 5),
      "\x01\x1f\x7f", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "bad \xff byte", "cut \xe2\x82",
      "overlong \xc0\xaf", "surrogate \xed\xa0\x80", "DG001: legacy nvidia.com/gpu in container \"main\""};
  int cases = 0;
  for (const std::string& api : {std::string(), std::string(kAdmissionV1), std::string(kAdmissionV1beta1),
                                 std::string("odd\xfe")}) {
    for (std::size_t t = 0; t < texts.size(); ++t) {
      for (int shape = 0; shape < 16; ++shape) {
        AdmissionResponse r;
        r.uid = texts[(t + 1) % texts.size()];
        r.allowed = (shape & 1) == 0;
        if (shape & 2) r.status = ResponseStatus{403 + shape, (shape & 4) ? "" : texts[t], texts[t]};
        if (shape & 4) r.warnings = {texts[t], "second", texts[(t + 2) % texts.size()]};
        if (shape & 8) {
          r.audit_annotations = {{"draguard-rule", texts[t]}, {"a-first", "x"}, {texts[(t + 3) % texts.size()], "k"}};
          r.patch = R"([{"op":"add","path":"/x","value":")" + texts[t] + "\"}]";
        }
        ASSERT_EQ(EncodeReview(r, api), ReferenceEncode(r, api)) << "text " << t << " shape " << shape;
        ++cases;
      }
    }
  }
  EXPECT_EQ(cases, 4 * 12 * 16);
}

TEST(EncodeHttpError, SaysWhatWasWrong) {
  auto j = nlohmann::json::parse(EncodeHttpError(400, "body is not valid JSON", "u1"));
  EXPECT_EQ(j["error"], "body is not valid JSON");
  EXPECT_EQ(j["response"]["status"]["code"], 400);
  EXPECT_EQ(j["response"]["uid"], "u1");
  EXPECT_EQ(j["response"]["allowed"], false);
}

}  // namespace
}  // namespace draguard::admission
