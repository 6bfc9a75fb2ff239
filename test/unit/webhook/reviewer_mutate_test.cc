// The /mutate path of the Reviewer: provisioning, dry-run, audit, exemptions, reference mode, the
// review's deadline and exceptions after decoding.
#include <mutex>
#include <set>
#include <stdexcept>

#include "draguard/admission/response.h"
#include "draguard/base64.h"
#include "draguard/engine/registry.h"
#include "draguard/mutation/provisioner.h"
#include "draguard/webhook/reviewer.h"
#include "../mutation/testing.h"

namespace draguard::webhook {
namespace {

using mutation::testing::DefaultPolicy;
using mutation::testing::Json;
using mutation::testing::PodWith;

const engine::Registry& Rules() {
  static const engine::Registry registry = engine::DefaultRegistry();
  return registry;
}

using std::chrono::milliseconds;
using std::chrono::steady_clock;

// Records every call and the timeout it was given. `needs` is how long the API exchange would
// take: a call given less answers as the real provisioner does when its timeout expires.
class FakeProvisioner : public mutation::TemplateProvisioner {
 public:
  Status Ensure(std::string_view ns, const mutation::GeneratedTemplate& t, milliseconds timeout) override {
    std::lock_guard<std::mutex> lock(mu);
    calls.push_back(std::string(ns) + "/" + t.name);
    timeouts.push_back(timeout);
    if (throws) throw std::runtime_error("provisioner exploded");
    if (needs > timeout) {
      return Status::Unavailable("creating ResourceClaimTemplate: timeout after " + std::to_string(timeout.count()) +
                                 "ms");
    }
    return result;
  }
  Status EnsureComputeDomain(std::string_view ns, const mutation::GeneratedComputeDomain& cd, milliseconds) override {
    std::lock_guard<std::mutex> lock(mu);
    calls.push_back("ComputeDomain " + std::string(ns) + "/" + cd.name);
    return domain_result;
  }
  std::mutex mu;
  std::vector<std::string> calls;
  Status domain_result = Status::Ok();
  std::vector<milliseconds> timeouts;
  Status result = Status::Ok();
  milliseconds needs{0};
  bool throws = false;
};

std::string Review(Json object, std::string op = "CREATE", bool dry_run = false, std::string ns = "ml") {
  Json kind = {{"group", ""}, {"version", "v1"}, {"kind", object.value("kind", "Pod")}};
  if (object.value("apiVersion", "") == "apps/v1") kind["group"] = "apps";
  Json req = {{"uid", "u-1"}, {"kind", kind}, {"resource", {{"group", ""}, {"version", "v1"}, {"resource", "pods"}}},
              {"namespace", ns}, {"operation", op}, {"userInfo", {{"username", "alice"}}}, {"object", object},
              {"dryRun", dry_run}};
  if (op == "UPDATE") req["oldObject"] = object;
  return Json{{"apiVersion", "admission.k8s.io/v1"}, {"kind", "AdmissionReview"}, {"request", req}}.dump();
}

struct Answer {
  Json response;
  Json patch;  // decoded, or null
  engine::Verdict verdict = engine::Verdict::kError;
  std::vector<std::string> rules;
  ConversionReason conversion = ConversionReason::kNotApplicable;
};

Answer Mutate(const Reviewer& r, const std::string& body, const policy::Policy& pol,
              const topology::Snapshot* topo = nullptr,
              steady_clock::time_point deadline = steady_clock::now() + kDefaultReviewTimeout) {
  auto out = r.Review(body, admission::WebhookKind::kMutating, pol, topo, std::chrono::system_clock::now(), deadline);
  EXPECT_EQ(out.http_status, 200) << out.body;
  Answer a;
  a.response = Json::parse(out.body)["response"];
  a.verdict = out.verdict;
  a.rules = out.rules;
  a.conversion = out.conversion;
  if (a.response.contains("patch")) {
    auto raw = Base64Decode(a.response["patch"].get<std::string>());
    EXPECT_TRUE(raw.ok());
    a.patch = Json::parse(raw.ok() ? *raw : std::string("null"));
  }
  return a;
}

TEST(ReviewerMutate, ConvertsAPodAndEnsuresItsTemplate) {
  FakeProvisioner prov;
  Reviewer r(Rules(), {}, &prov);
  auto a = Mutate(r, Review(PodWith({{"nvidia.com/gpu", 1}})), DefaultPolicy());
  EXPECT_TRUE(a.response["allowed"].get<bool>());
  EXPECT_EQ(a.response["patchType"], "JSONPatch");
  ASSERT_TRUE(a.patch.is_array());
  EXPECT_EQ(a.verdict, engine::Verdict::kMutate);
  ASSERT_EQ(prov.calls.size(), 1u);
  EXPECT_EQ(prov.calls[0].rfind("ml/draguard-", 0), 0u);
  EXPECT_NE(a.response["auditAnnotations"]["mutation"].get<std::string>().find("converted"), std::string::npos);
}

// mutation.computeDomains: the Pod of a multi-node job on a cluster with NVLink cliques has its
// template made, then its unit's ComputeDomain; a dry run writes neither; a ComputeDomain that
// cannot be made (no CRD, no RBAC) is a provisioning failure like a template's.
TEST(ReviewerMutate, EnsuresTheComputeDomainOfAMultiNodeJob) {
  auto base = mutation::testing::Topo(mutation::testing::kG4dn);
  std::vector<std::shared_ptr<const topology::NodeTopology>> nodes;
  for (const char* name : {"tray-a", "tray-b"}) {
    auto n = std::make_shared<topology::NodeTopology>(*base->nodes().front());
    n->name = name;
    n->nvlink_clique = "0c6e5a52-4f7b-4e0a-9d43-3f1b7f2a9c10.1";
    nodes.push_back(std::move(n));
  }
  auto racks = topology::Snapshot::Create(std::move(nodes));
  std::string yaml(policy::DefaultPolicyYaml());
  yaml.insert(yaml.find("\nmutation:\n") + 11, "  computeDomains: auto\n");
  auto pol = policy::ParsePolicy(yaml);
  ASSERT_TRUE(pol.ok()) << pol.status().message();
  Json pod = PodWith({{"nvidia.com/gpu", 2}});
  pod["metadata"]["labels"] = {{"leaderworkerset.sigs.k8s.io/name", "llm"}, {"leaderworkerset.sigs.k8s.io/group-index", "0"}};
  pod["metadata"]["annotations"] = {{"leaderworkerset.sigs.k8s.io/size", "2"}};

  FakeProvisioner prov;
  Reviewer r(Rules(), {}, &prov);
  auto a = Mutate(r, Review(pod), *pol, racks.get());
  EXPECT_EQ(a.verdict, engine::Verdict::kMutate) << a.response.dump();
  ASSERT_EQ(prov.calls.size(), 2u);
  EXPECT_EQ(prov.calls[0].rfind("ml/draguard-", 0), 0u);
  EXPECT_EQ(prov.calls[1].rfind("ComputeDomain ml/draguard-cd-", 0), 0u) << prov.calls[1];
  EXPECT_NE(a.patch.dump().find("draguard-channel"), std::string::npos);

  FakeProvisioner dry;
  Reviewer rd(Rules(), {}, &dry);
  EXPECT_TRUE(Mutate(rd, Review(pod, "CREATE", true), *pol, racks.get()).patch.is_array());
  EXPECT_TRUE(dry.calls.empty());

  FakeProvisioner refused;
  refused.domain_result = Status::NotFound("the server could not find the requested resource");
  Reviewer rr(Rules(), {}, &refused);
  auto f = Mutate(rr, Review(pod), *pol, racks.get());
  EXPECT_FALSE(f.response["allowed"].get<bool>()) << f.response.dump();
  EXPECT_EQ(f.conversion, ConversionReason::kProvisioningFailed);
  EXPECT_NE(f.response["status"]["message"].get<std::string>().find("draguard-cd-"), std::string::npos)
      << f.response.dump();
}

TEST(ReviewerMutate, DryRunWritesNothingButStillPatches) {
  FakeProvisioner prov;
  Reviewer r(Rules(), {}, &prov);
  auto a = Mutate(r, Review(PodWith({{"nvidia.com/gpu", 1}}), "CREATE", true), DefaultPolicy());
  EXPECT_TRUE(a.patch.is_array());
  EXPECT_TRUE(prov.calls.empty());
}

TEST(ReviewerMutate, ApiFailureDeniesWhenEnforcing) {
  FakeProvisioner prov;
  prov.result = Status::Unavailable("connection refused");
  Reviewer r(Rules(), {}, &prov);
  auto a = Mutate(r, Review(PodWith({{"nvidia.com/gpu", 1}})), DefaultPolicy());
  EXPECT_FALSE(a.response["allowed"].get<bool>());
  EXPECT_EQ(a.response["status"]["code"], 403);
  const std::string msg = a.response["status"]["message"];
  EXPECT_NE(msg.find("could not ensure ResourceClaimTemplate ml/draguard-"), std::string::npos) << msg;
  EXPECT_NE(msg.find("connection refused"), std::string::npos) << msg;
  EXPECT_TRUE(a.patch.is_null());
}

TEST(ReviewerMutate, AuditModeAdmitsUnmodifiedWithAWarning) {
  FakeProvisioner prov;
  Reviewer r(Rules(), {}, &prov);
  auto pol = DefaultPolicy();
  pol.mode = policy::Mode::kAudit;
  auto a = Mutate(r, Review(PodWith({{"nvidia.com/gpu", 1}})), pol);
  EXPECT_TRUE(a.response["allowed"].get<bool>());
  EXPECT_TRUE(a.patch.is_null());
  EXPECT_TRUE(prov.calls.empty());
  ASSERT_TRUE(a.response.contains("warnings"));
  EXPECT_NE(a.response["warnings"][0].get<std::string>().find("would have converted"), std::string::npos);
  // A refusal in audit mode is a warning too.
  auto b = Mutate(r, Review(PodWith({{"nvidia.com/gpu.shared", 1}})), pol);
  EXPECT_TRUE(b.response["allowed"].get<bool>());
  EXPECT_EQ(b.verdict, engine::Verdict::kWarn);
}

TEST(ReviewerMutate, RefusalDeniesUnlessDG001IsRelaxed) {
  Reviewer r(Rules());
  auto pol = DefaultPolicy();
  auto a = Mutate(r, Review(PodWith({{"nvidia.com/gpu.shared", 1}})), pol);
  EXPECT_FALSE(a.response["allowed"].get<bool>());
  EXPECT_EQ(a.response["status"]["message"].get<std::string>().rfind("DG001 legacy-gpu-resource:", 0), 0u);
  pol.rules["DG001"].action = policy::Action::kWarn;
  auto b = Mutate(r, Review(PodWith({{"nvidia.com/gpu.shared", 1}})), pol);
  EXPECT_TRUE(b.response["allowed"].get<bool>());
  EXPECT_TRUE(b.patch.is_null());
}

TEST(ReviewerMutate, ExemptNonPodNonCreateAndDisabledAreUntouched) {
  FakeProvisioner prov;
  Reviewer r(Rules(), {}, &prov);
  auto pol = DefaultPolicy();
  pol.exemptions.namespaces = {"legacy-*"};
  auto exempt = Mutate(r, Review(PodWith({{"nvidia.com/gpu", 1}}), "CREATE", false, "legacy-ns"), pol);
  EXPECT_TRUE(exempt.patch.is_null());
  EXPECT_NE(exempt.response["auditAnnotations"]["mutation"].get<std::string>().find("exempt"), std::string::npos);
  Json annotated = PodWith({{"nvidia.com/gpu", 1}}, {{"draguard.io/exempt", "DG001"},
                                                     {"draguard.io/exempt-reason", "vendor chart"}});
  // The annotation counts only where the policy allows it (annotationExceptions).
  auto granted = pol;
  granted.annotation_exceptions = {{{"*"}, {}, {}, {"DG001"}}};
  auto by_annotation = Mutate(r, Review(annotated), granted);
  EXPECT_TRUE(by_annotation.patch.is_null());
  EXPECT_NE(by_annotation.response["auditAnnotations"]["mutation"].get<std::string>().find("annotation: vendor chart"),
            std::string::npos);
  auto excepted = pol;
  policy::PolicyException ex;
  ex.name = "chart";
  ex.rules = {"DG001"};
  ex.namespaces = {"*"};
  ex.object_selector = policy::LabelSelector{};
  ex.reason = "vendor chart";
  excepted.exceptions = {ex};
  EXPECT_TRUE(Mutate(r, Review(PodWith({{"nvidia.com/gpu", 1}})), excepted).patch.is_null());
  EXPECT_TRUE(Mutate(r, Review(PodWith({{"nvidia.com/gpu", 1}}), "UPDATE"), pol).patch.is_null());
  Json deploy = {{"apiVersion", "apps/v1"}, {"kind", "Deployment"}, {"metadata", {{"name", "d"}}},
                 {"spec", {{"template", {{"spec", PodWith({{"nvidia.com/gpu", 1}})["spec"]}}}}}};
  EXPECT_TRUE(Mutate(r, Review(deploy), pol).patch.is_null());
  pol.mutation.enabled = false;
  EXPECT_TRUE(Mutate(r, Review(PodWith({{"nvidia.com/gpu", 1}})), pol).patch.is_null());
  EXPECT_TRUE(prov.calls.empty());
}

TEST(ReviewerMutate, ReferenceModeUsesOnlyTheCatalogue) {
  FakeProvisioner prov;
  Reviewer r(Rules(), {}, &prov);
  auto pol = DefaultPolicy();
  pol.mutation.templates = policy::TemplateMode::kReference;
  // (One GPU: several need a topology to be aligned.)
  auto miss = Mutate(r, Review(PodWith({{"nvidia.com/gpu", 1}})), pol);
  EXPECT_FALSE(miss.response["allowed"].get<bool>());
  EXPECT_NE(miss.response["status"]["message"].get<std::string>().find("catalogue"), std::string::npos);
  policy::CatalogueProfile one;
  one.gpus = 1;
  pol.mutation.catalogue = {one};
  auto hit = Mutate(r, Review(PodWith({{"nvidia.com/gpu", 1}})), pol);
  EXPECT_TRUE(hit.response["allowed"].get<bool>());
  EXPECT_TRUE(hit.patch.is_array());
  EXPECT_TRUE(prov.calls.empty());
}

TEST(ReviewerMutate, EveryOutcomeHasItsConversionReason) {
  FakeProvisioner prov;
  Reviewer r(Rules(), {}, &prov);
  auto pol = DefaultPolicy();
  const std::string gpu = Review(PodWith({{"nvidia.com/gpu", 1}}));
  EXPECT_EQ(Mutate(r, gpu, pol).conversion, ConversionReason::kConverted);
  EXPECT_EQ(Mutate(r, Review(PodWith({{"example.com/fpga", 1}})), pol).conversion, ConversionReason::kUnchanged);
  EXPECT_EQ(Mutate(r, Review(PodWith({{"nvidia.com/gpu.shared", 1}})), pol).conversion,
            ConversionReason::kUnsupportedRequest);
  // Several GPUs need a topology to be aligned: without one no template places them.
  EXPECT_EQ(Mutate(r, Review(PodWith({{"nvidia.com/gpu", 2}})), pol).conversion, ConversionReason::kNotPlaceable);
  EXPECT_EQ(Mutate(r, Review(PodWith({{"nvidia.com/gpu", 1}}), "CREATE", false, "legacy-ns"),
                   [&] { auto p = pol; p.exemptions.namespaces = {"legacy-*"}; return p; }())
                .conversion,
            ConversionReason::kExempt);
  EXPECT_EQ(Mutate(r, Review(PodWith({{"nvidia.com/gpu", 1}}), "UPDATE"), pol).conversion,
            ConversionReason::kNotApplicable);
  auto reference = pol;
  reference.mutation.templates = policy::TemplateMode::kReference;
  EXPECT_EQ(Mutate(r, gpu, reference).conversion, ConversionReason::kTemplateMissing);
  prov.result = Status::Unavailable("connection refused");
  EXPECT_EQ(Mutate(r, gpu, pol).conversion, ConversionReason::kProvisioningFailed);
  // /validate never counts a conversion.
  auto validated = r.Review(gpu, admission::WebhookKind::kValidating, pol, nullptr, std::chrono::system_clock::now(),
                            steady_clock::now() + kDefaultReviewTimeout);
  EXPECT_EQ(validated.conversion, ConversionReason::kNotApplicable);
}

TEST(ConversionReason, NamesAreDistinctLabels) {
  std::set<std::string_view> names;
  for (std::size_t i = 0; i < kConversionReasons; ++i) {
    const std::string_view name = ConversionReasonName(static_cast<ConversionReason>(i));
    EXPECT_FALSE(name.empty());
    EXPECT_EQ(name.find_first_not_of("abcdefghijklmnopqrstuvwxyz-"), std::string_view::npos) << name;
    names.insert(name);
  }
  EXPECT_EQ(names.size(), kConversionReasons);
}

Json TwoContainerPod() {
  Json pod = PodWith({{"nvidia.com/gpu", 1}});
  pod["spec"]["containers"].push_back(
      {{"name", "side"}, {"image", "x"}, {"resources", {{"limits", {{"nvidia.com/mig-1g.10gb", 1}}}}}});
  return pod;
}

TEST(ReviewerMutate, ProvisioningGetsWhatIsLeftOfTheReviewDeadline) {
  FakeProvisioner prov;
  Reviewer r(Rules(), {}, &prov);
  auto pol = DefaultPolicy();
  pol.mutation.api_timeout_ms = 30000;
  const auto deadline = steady_clock::now() + milliseconds(5000);
  auto a = Mutate(r, Review(TwoContainerPod()), pol, nullptr, deadline);
  EXPECT_EQ(a.verdict, engine::Verdict::kMutate);
  ASSERT_EQ(prov.timeouts.size(), 2u);
  EXPECT_GT(prov.timeouts[0], milliseconds(0));
  EXPECT_LE(prov.timeouts[0], milliseconds(5000));
  EXPECT_LE(prov.timeouts[1], prov.timeouts[0]);  // one deadline for all the templates
}

TEST(ReviewerMutate, ApiTimeoutBoundsProvisioningWhenTheDeadlineIsFarther) {
  FakeProvisioner prov;
  Reviewer r(Rules(), {}, &prov);
  auto pol = DefaultPolicy();
  pol.mutation.api_timeout_ms = 1500;
  (void)Mutate(r, Review(PodWith({{"nvidia.com/gpu", 1}})), pol, nullptr, steady_clock::now() + std::chrono::hours(1));
  ASSERT_EQ(prov.timeouts.size(), 1u);
  EXPECT_GT(prov.timeouts[0], milliseconds(0));
  EXPECT_LE(prov.timeouts[0], milliseconds(1500));
}

TEST(ReviewerMutate, AProvisionerNeedingLongerThanTheDeadlineIsCutOffAndTheReviewAnswersInTime) {
  FakeProvisioner prov;
  prov.needs = milliseconds(60000);
  Reviewer r(Rules(), {}, &prov);
  auto pol = DefaultPolicy();
  pol.mutation.api_timeout_ms = 30000;
  const auto deadline = steady_clock::now() + milliseconds(5000);
  auto a = Mutate(r, Review(PodWith({{"nvidia.com/gpu", 1}})), pol, nullptr, deadline);
  EXPECT_LE(steady_clock::now(), deadline);
  ASSERT_EQ(prov.timeouts.size(), 1u);
  EXPECT_LE(prov.timeouts[0], milliseconds(5000));
  EXPECT_FALSE(a.response["allowed"].get<bool>());
  const std::string msg = a.response["status"]["message"];
  EXPECT_EQ(msg.rfind("DG001 legacy-gpu-resource: could not ensure ResourceClaimTemplate ml/draguard-", 0), 0u) << msg;
  EXPECT_NE(msg.find("timeout after"), std::string::npos) << msg;
  EXPECT_EQ(a.verdict, engine::Verdict::kDeny);
  EXPECT_EQ(a.rules, std::vector<std::string>{"DG001"});
  EXPECT_TRUE(a.patch.is_null());
}

TEST(ReviewerMutate, APassedDeadlineProvisionsNothing) {
  FakeProvisioner prov;
  Reviewer r(Rules(), {}, &prov);
  auto a = Mutate(r, Review(PodWith({{"nvidia.com/gpu", 1}})), DefaultPolicy(), nullptr,
                  steady_clock::now() - milliseconds(1));
  EXPECT_TRUE(prov.calls.empty());
  EXPECT_FALSE(a.response["allowed"].get<bool>());
  const std::string msg = a.response["status"]["message"];
  EXPECT_NE(msg.find("the request's deadline has passed"), std::string::npos) << msg;
  EXPECT_TRUE(a.patch.is_null());
}

TEST(ReviewerMutate, AThrowingProvisionerIsAnsweredWithTheUid) {
  FakeProvisioner prov;
  prov.throws = true;
  Reviewer r(Rules(), {}, &prov);
  auto out = r.Review(Review(PodWith({{"nvidia.com/gpu", 1}})), admission::WebhookKind::kMutating, DefaultPolicy(),
                      nullptr, std::chrono::system_clock::now(), steady_clock::now() + kDefaultReviewTimeout);
  EXPECT_EQ(out.http_status, 500);
  EXPECT_EQ(out.verdict, engine::Verdict::kError);
  EXPECT_EQ(out.uid, "u-1");
  EXPECT_NE(out.error.find("provisioner exploded"), std::string::npos) << out.error;
  EXPECT_TRUE(out.rules.empty());
  Json doc = Json::parse(out.body);
  EXPECT_EQ(doc["kind"], "AdmissionReview");
  EXPECT_EQ(doc["response"]["uid"], "u-1");
  EXPECT_FALSE(doc["response"]["allowed"].get<bool>());
  EXPECT_EQ(doc["response"]["status"]["code"], 500);
  const std::string msg = doc["response"]["status"]["message"];
  EXPECT_EQ(msg, "internal error while reviewing the request: provisioner exploded");
  EXPECT_FALSE(doc["response"].contains("patch"));
}

TEST(ReviewerValidate, RuleMetricsCarryTheActionUnderTheGlobalMode) {
  Reviewer r(Rules());
  auto pol = DefaultPolicy();
  pol.mode = policy::Mode::kAudit;
  auto out = r.Review(Review(PodWith({{"nvidia.com/gpu", 1}})), admission::WebhookKind::kValidating, pol, nullptr,
                      std::chrono::system_clock::now(), steady_clock::now() + kDefaultReviewTimeout);
  ASSERT_EQ(out.http_status, 200) << out.body;
  EXPECT_EQ(out.verdict, engine::Verdict::kAudit);
  bool seen = false;
  for (const auto& m : out.rule_metrics) {
    if (m.rule != "DG001") continue;
    seen = true;
    EXPECT_EQ(m.action, "audit");
    EXPECT_EQ(m.result, "fail");
  }
  EXPECT_TRUE(seen);
}

}  // namespace
}  // namespace draguard::webhook
