#include "draguard/webhook/reviewer.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <functional>
#include <map>
#include <set>
#include <stdexcept>
#include <utility>

#include "decode_step.h"
#include "draguard/mutation/mutation.h"
#include "draguard/truncate.h"

namespace draguard::webhook {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;
using Outcome = engine::MutationFacts::Outcome;

// Gives a reviewed object back to its decode pool when the review ends, however it ends.
struct RecycleOnExit {
  const admission::DecodePool& pool;
  admission::Json& object;
  std::size_t body_bytes;
  ~RecycleOnExit() { pool.Recycle(object, body_bytes); }
};

// The request kind as a metric label: closed sets only, so request content cannot mint series.
std::string KindLabel(const admission::GroupVersionKind& kind, const policy::Policy& policy) {
  static constexpr std::pair<std::string_view, std::string_view> kKnown[] = {
      {"", "Pod"},
      {"", "PodTemplate"},
      {"", "ReplicationController"},
      {"apps", "Deployment"},
      {"apps", "StatefulSet"},
      {"apps", "DaemonSet"},
      {"apps", "ReplicaSet"},
      {"batch", "Job"},
      {"batch", "CronJob"},
      {"resource.k8s.io", "ResourceClaim"},
      {"resource.k8s.io", "ResourceClaimTemplate"},
  };
  for (const auto& [group, name] : kKnown) {
    if (kind.group == group && kind.kind == name) return kind.kind;
  }
  for (const auto& cr : policy.custom_resources) {
    if (kind.group == cr.group && kind.kind == cr.kind) return kind.kind;
  }
  return "other";
}

// /mutate converts Pods on CREATE only, while the policy enables it.
bool MutationApplies(const admission::AdmissionRequest& req, const policy::Policy& policy) {
  return policy.mutation.enabled && req.kind.group.empty() && req.kind.kind == "Pod" && req.sub_resource.empty() &&
         req.operation == admission::Operation::kCreate;
}

// The pod templates of a workload under review are converted later, in its Pods' /mutate.
bool TemplatesConvertLater(const admission::AdmissionRequest& req, const policy::Policy& policy) {
  return policy.mutation.enabled && !(req.kind.group.empty() && req.kind.kind == "Pod") && req.sub_resource.empty() &&
         (req.operation == admission::Operation::kCreate || req.operation == admission::Operation::kUpdate);
}

engine::MutationFacts FactsOf(const mutation::PodConversion& conv) {
  engine::MutationFacts facts;
  switch (conv.outcome) {
    case mutation::PodConversion::Outcome::kUnchanged: facts.outcome = Outcome::kUnchanged; break;
    case mutation::PodConversion::Outcome::kConverted: facts.outcome = Outcome::kConverted; break;
    case mutation::PodConversion::Outcome::kRefused: facts.outcome = Outcome::kRefused; break;
  }
  facts.reason = conv.reason;
  facts.summary = conv.summary;
  facts.warnings = conv.warnings;
  if (conv.outcome == mutation::PodConversion::Outcome::kConverted) facts.patch = conv.patch.dump();
  return facts;
}

engine::MutationFacts Failure(Outcome outcome, std::string template_name, std::string reason) {
  engine::MutationFacts facts;
  facts.outcome = outcome;
  facts.template_name = std::move(template_name);
  facts.reason = std::move(reason);
  return facts;
}

}  // namespace

std::optional<engine::MutationFacts> Reviewer::EnsureTemplates(
    const admission::AdmissionRequest& req, const mutation::PodConversion& conv,
    const policy::Policy& policy, const topology::Snapshot* topology, steady_clock::time_point deadline) const {
  const std::vector<mutation::GeneratedTemplate>& templates = conv.templates;
  if (policy.mutation.templates == policy::TemplateMode::kReference) {
    std::set<std::string> catalogue;
    for (const auto& t : mutation::RenderCatalogue(policy, topology, req.namespace_)) catalogue.insert(t.name);
    for (const auto& t : templates) {
      if (catalogue.count(t.name)) continue;
      engine::MutationFacts facts = Failure(Outcome::kTemplateMissing, t.name, "");
      facts.template_description = t.description;
      return facts;
    }
    return std::nullopt;
  }
  if (req.dry_run || provisioner_ == nullptr) return std::nullopt;
  // Every call gets what is left of the review's deadline and of mutation.apiTimeoutMs, shared by
  // all the templates of this review.
  const milliseconds budget(policy.mutation.api_timeout_ms);
  const auto api_deadline = steady_clock::now() + budget;
  const auto until = std::min(deadline, api_deadline);
  // Each object gets what is left: a call that fails, or finds no time, ends the provisioning.
  auto ensure = [&](const std::string& object, auto&& call) -> std::optional<engine::MutationFacts> {
    const std::string name = req.namespace_ + "/" + object;
    const auto left = std::chrono::duration_cast<milliseconds>(until - steady_clock::now());
    if (left <= milliseconds(0)) {
      return Failure(Outcome::kProvisioningFailed, name,
                     deadline < api_deadline ? "timeout: the request's deadline has passed"
                                             : "timeout after " + std::to_string(budget.count()) +
                                                   "ms (mutation.apiTimeoutMs)");
    }
    if (Status s = call(left); !s.ok()) return Failure(Outcome::kProvisioningFailed, name, s.message());
    return std::nullopt;
  };
  for (const auto& t : templates) {
    if (auto failure = ensure(t.name, [&](milliseconds left) { return provisioner_->Ensure(req.namespace_, t, left); })) {
      return failure;
    }
  }
  // The ComputeDomain of a multi-node job unit (mutation.computeDomains): the NVIDIA driver's
  // controller makes its channel template, which the Pod's claim waits for.
  for (const auto& cd : conv.compute_domains) {
    if (auto failure = ensure(cd.name, [&](milliseconds left) {
          return provisioner_->EnsureComputeDomain(req.namespace_, cd, left);
        })) {
      return failure;
    }
  }
  return std::nullopt;
}

engine::Decision Reviewer::Mutate(const admission::AdmissionRequest& req, const policy::Policy& policy,
                                  const topology::Snapshot* topology, std::chrono::system_clock::time_point now, steady_clock::time_point deadline,
                                  engine::MutationFacts& facts, ConversionReason& conversion) const {
  facts = {};
  conversion = ConversionReason::kNotApplicable;
  const engine::Rule* rule = engine::MutationRule(registry_);
  if (rule == nullptr || !MutationApplies(req, policy)) return engine::DecideMutation(facts, registry_, policy);
  using Refusal = mutation::PodConversion::Refusal;
  engine::RuleInput input{req, policy, topology, now};
  if (std::string why = engine::ExemptionFrom(input, registry_, rule->id()); !why.empty()) {
    facts.outcome = Outcome::kExempt;
    facts.reason = std::move(why);
    conversion = ConversionReasonOf(facts, Refusal::kNone);
    return engine::DecideMutation(facts, registry_, policy);
  }
  // `req` may hold the rule fields only: the conversion edits only fields that decode keeps, so its
  // patch (a diff) is the same as against the whole Pod, which is never decoded.
  mutation::PodConversion conv = mutation::ConvertPod(req.object, req.namespace_, policy, topology);
  facts = FactsOf(conv);
  conversion = ConversionReasonOf(facts, conv.refusal);
  engine::Decision decision = engine::DecideMutation(facts, registry_, policy);
  if (decision.verdict != engine::Verdict::kMutate) return decision;
  // Carrying out the patch needs its templates; a failure is judged like a refusal.
  if (auto failure = EnsureTemplates(req, conv, policy, topology, deadline)) {
    facts = std::move(*failure);
    conversion = ConversionReasonOf(facts, Refusal::kNone);
    return engine::DecideMutation(facts, registry_, policy);
  }
  return decision;
}

std::string_view ConversionReasonName(ConversionReason reason) {
  switch (reason) {
    case ConversionReason::kNotApplicable: return "not-applicable";
    case ConversionReason::kUnchanged: return "unchanged";
    case ConversionReason::kExempt: return "exempt";
    case ConversionReason::kConverted: return "converted";
    case ConversionReason::kUnsupportedRequest: return "unsupported-request";
    case ConversionReason::kNotPlaceable: return "not-placeable";
    case ConversionReason::kTemplateMissing: return "template-missing";
    case ConversionReason::kProvisioningFailed: return "provisioning-failed";
  }
  return "not-applicable";
}

ConversionReason ConversionReasonOf(const engine::MutationFacts& facts, mutation::PodConversion::Refusal refusal) {
  switch (facts.outcome) {
    case Outcome::kUnchanged: return ConversionReason::kUnchanged;
    case Outcome::kExempt: return ConversionReason::kExempt;
    case Outcome::kConverted: return ConversionReason::kConverted;
    case Outcome::kRefused:
      return refusal == mutation::PodConversion::Refusal::kUnsupportedRequest ? ConversionReason::kUnsupportedRequest
                                                                              : ConversionReason::kNotPlaceable;
    case Outcome::kTemplateMissing: return ConversionReason::kTemplateMissing;
    case Outcome::kProvisioningFailed: return ConversionReason::kProvisioningFailed;
  }
  return ConversionReason::kNotApplicable;
}

Judgement Reviewer::Judge(const admission::AdmissionRequest& req, admission::WebhookKind webhook,
                          const policy::Policy& policy, const topology::Snapshot* topology,
                          std::chrono::system_clock::time_point now, steady_clock::time_point deadline) const {
  Judgement j;
  if (webhook == admission::WebhookKind::kValidating) {
    engine::RuleInput input{req, policy, topology, now};
    input.deadline = deadline;
    input.claims = claims_;
    // A workload whose Pods /mutate would refuse is judged at its own CREATE (or UPDATE).
    std::map<std::string, std::string> refusals;
    if (TemplatesConvertLater(req, policy)) {
      refusals = mutation::TemplateRefusals(req, policy, topology);
      input.template_refusals = &refusals;
    }
    j.result = engine::Evaluate(input, registry_);
    j.decision = engine::Decide(j.result, policy);
  } else {
    j.decision = Mutate(req, policy, topology, now, deadline, j.mutation, j.conversion);
  }
  return j;
}

bool MayEvaluateCel(std::string_view body) {
  // Every claim rule starts from dra::FindClaim, which knows these two kinds only. The name's
  // rare capital first is found with memchr (an order of magnitude faster than memmem on real
  // bodies; searching from '"', JSON's commonest byte, is slower still); after kMaxFalseHits
  // capitals that start no match, memmem's linear bound takes the rest of a hostile body.
  static constexpr std::string_view kName = "ResourceClaim";
  static constexpr int kMaxFalseHits = 64;
  const char* p = body.data();
  const char* end = body.data() + body.size();
  auto quoted = [&](const char* at) { return at > body.data() && at[-1] == '"'; };
  for (int misses = 0; misses < kMaxFalseHits && end - p >= static_cast<std::ptrdiff_t>(kName.size()); ++misses) {
    const void* r = std::memchr(p, kName[0], static_cast<std::size_t>(end - p) - kName.size() + 1);
    if (r == nullptr) return false;
    const char* at = static_cast<const char*>(r);
    if (std::memcmp(at, kName.data(), kName.size()) == 0 && quoted(at)) return true;
    p = at + 1;
  }
  while (const void* hit = ::memmem(p, static_cast<std::size_t>(end - p), kName.data(), kName.size())) {
    const char* at = static_cast<const char*>(hit);
    if (quoted(at)) return true;
    p = at + 1;
  }
  return false;
}

Reviewer::Reviewer(const engine::Registry& registry, admission::DecodeLimits limits,
                   mutation::TemplateProvisioner* provisioner, const dra::ClaimCatalog* claims)
    : registry_(registry), limits_(limits), provisioner_(provisioner), claims_(claims) {}

ReviewOutcome Reviewer::Review(std::string_view body, admission::WebhookKind webhook,
                               const policy::Policy& policy, const topology::Snapshot* topology,
                               std::chrono::system_clock::time_point now,
                               steady_clock::time_point deadline, std::size_t readable_past_end) const {
  ReviewOutcome out;
  // The rules read a small part of the objects: decode only that (the whole body is validated).
  std::optional<admission::AdmissionRequest> decoded = internal::DecodeStep(
      body, limits_, admission::DecodeScope::kRuleFields, decode_pool_.get(), readable_past_end, out);
  if (!decoded) return out;
  const admission::AdmissionRequest& req = *decoded;
  // When the review ends, its object goes back to the pool, for the next decode to rebuild.
  const RecycleOnExit recycle{*decode_pool_, decoded->object, body.size()};
  out.kind_label = KindLabel(req.kind, policy);

  // From here on the uid is known: an exception is answered with it, not by the transport.
  std::string failure;
  try {
    Judgement judgement = Judge(req, webhook, policy, topology, now, deadline);
    engine::Decision& decision = judgement.decision;
    out.rule_metrics.reserve(judgement.result.outcomes.size());
    const auto& rules = registry_.rules();
    std::size_t position = 0;  // outcomes follow the registry's order
    for (const auto& o : judgement.result.outcomes) {
      while (position < rules.size() && rules[position].get() != o.rule) ++position;
      const policy::Action action = engine::ModeAction(o.action, policy);
      const std::size_t key = position < rules.size() ? position * kRuleMetricKeysPerRule +
                                                            static_cast<std::size_t>(action) * 4 +
                                                            static_cast<std::size_t>(o.result.status)
                                                      : kNoRuleMetricKey;
      out.rule_metrics.push_back(
          {o.rule->id(), policy::ActionName(action), engine::RuleStatusName(o.result.status), key});
    }
    out.verdict = decision.verdict;
    out.conversion = judgement.conversion;
    out.scheduler_claim = judgement.result.scheduler_claim;
    for (const auto* list : {&decision.denied_rules, &decision.warned_rules, &decision.audited_rules}) {
      out.rules.insert(out.rules.end(), list->begin(), list->end());
    }
    admission::AdmissionResponse response = admission::Complete(std::move(decision.response), req.uid, webhook);
    out.body = admission::EncodeReview(response, req.api_version);
    return out;
  } catch (const std::exception& e) {
    failure = e.what();
  } catch (...) {
    failure = "unknown exception";
  }
  out.http_status = 500;
  failure = Truncate(failure, 1024);
  out.error = "internal error: " + failure;
  out.verdict = engine::Verdict::kError;
  out.rules.clear();
  out.rule_metrics.clear();
  out.body = admission::EncodeHttpError(500, "internal error while reviewing the request: " + failure, req.uid);
  return out;
}

namespace internal {

std::optional<admission::AdmissionRequest> DecodeStep(std::string_view body, const admission::DecodeLimits& limits,
                                                      admission::DecodeScope scope, const admission::DecodePool* pool,
                                                      std::size_t readable_past_end, ReviewOutcome& out) {
  auto decoded = admission::DecodeReview(body, limits, scope, pool, readable_past_end);
  Status st = decoded.ok() ? admission::CheckRequestBounds(*decoded) : decoded.status();
  if (!st.ok()) {
    out.http_status =
        !decoded.ok() && st.code() == StatusCode::kResourceExhausted && body.size() > limits.max_bytes ? 413 : 400;
    out.error = Truncate(st.message(), 1024);
    out.verdict = engine::Verdict::kError;
    out.body = admission::EncodeHttpError(out.http_status, "invalid AdmissionReview: " + st.message());
    return std::nullopt;
  }
  const admission::AdmissionRequest& req = *decoded;
  out.uid = req.uid;
  out.kind = Truncate(req.kind.kind);
  out.namespace_ = Truncate(req.namespace_);
  out.name = Truncate(req.name);
  out.operation = admission::OperationName(req.operation);
  out.user = Truncate(req.user_info.username);
  out.dry_run = req.dry_run;
  return std::move(decoded).value();
}

}  // namespace internal

}  // namespace draguard::webhook
