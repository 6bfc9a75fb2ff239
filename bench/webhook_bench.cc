// decode → evaluate → decide → encode of one AdmissionReview, for a non-GPU Pod, a legacy GPU Pod
// and a DRA Pod, at 1 KiB, 8 KiB and 64 KiB bodies (padded with realistic env entries), with the
// fast and the reference decoder; the decode alone; the decision log line.
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <variant>

#include <benchmark/benchmark.h>
#include <simdjson.h>
#include <nlohmann/json.hpp>

#include "draguard/admission/codec.h"
#include "draguard/engine/registry.h"
#include "draguard/logging/logger.h"
#include "draguard/policy/policy.h"
#include "draguard/webhook/reviewer.h"

namespace {

using nlohmann::json;

enum class PodKind { kPlain, kLegacyGpu, kDra };

// Builds a review body of about `target_bytes`.
std::string MakeReview(PodKind kind, std::size_t target_bytes) {
  json container = {{"name", "worker"}, {"image", "nvcr.io/nvidia/pytorch:24.05-py3"},
                    {"resources", {{"limits", {{"cpu", "8"}, {"memory", "64Gi"}}}}}};
  json spec = {{"containers", json::array()}, {"restartPolicy", "Never"}};
  if (kind == PodKind::kLegacyGpu) container["resources"]["limits"]["nvidia.com/gpu"] = 8;
  if (kind == PodKind::kDra) {
    container["resources"]["claims"] = json::array({{{"name", "gpus"}}});
    spec["resourceClaims"] = json::array({{{"name", "gpus"}, {"resourceClaimTemplateName", "eight-gpus"}}});
  }
  json review = {{"apiVersion", "admission.k8s.io/v1"},
                 {"kind", "AdmissionReview"},
                 {"request",
                  {{"uid", "705ab4f5-6393-11e8-b7cc-42010a800002"},
                   {"kind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
                   {"resource", {{"group", ""}, {"version", "v1"}, {"resource", "pods"}}},
                   {"namespace", "team-a"},
                   {"operation", "CREATE"},
                   {"userInfo", {{"username", "system:serviceaccount:kube-system:job-controller"},
                                 {"groups", {"system:serviceaccounts", "system:authenticated"}}}},
                   {"object", {{"apiVersion", "v1"}, {"kind", "Pod"},
                               {"metadata", {{"name", "train-0"}, {"namespace", "team-a"},
                                             {"labels", {{"app", "train"}}}}},
                               {"spec", spec}}},
                   {"dryRun", false}}}};
  json& ctr_list = review["request"]["object"]["spec"]["containers"];
  container["env"] = json::array();
  ctr_list.push_back(container);
  int i = 0;
  while (review.dump().size() < target_bytes) {
    ctr_list[0]["env"].push_back({{"name", "NCCL_SETTING_" + std::to_string(i++)},
                                  {"value", "value-of-a-typical-environment-variable-for-training"}});
  }
  return review.dump();
}

draguard::admission::DecodeLimits WithDecoder(draguard::admission::Decoder d) {
  draguard::admission::DecodeLimits l;
  l.decoder = d;
  return l;
}

// A review body as the server holds it: kBodyPadding bytes of spare capacity past its end.
std::string PaddedReview(PodKind kind, std::size_t target_bytes) {
  std::string body = MakeReview(kind, target_bytes);
  body.reserve(body.size() + draguard::admission::kBodyPadding);
  return body;
}

void BM_Review(benchmark::State& state, PodKind kind, std::size_t bytes,
               draguard::admission::Decoder decoder = draguard::admission::Decoder::kFast) {
  static const draguard::engine::Registry registry = draguard::engine::DefaultRegistry();
  const draguard::webhook::Reviewer reviewer(registry, WithDecoder(decoder));
  static const draguard::policy::Policy policy =
      draguard::policy::ParsePolicy(draguard::policy::DefaultPolicyYaml()).value();
  const std::string body = PaddedReview(kind, bytes);
  for (auto _ : state) {
    auto out = reviewer.Review(body, draguard::admission::WebhookKind::kValidating, policy, nullptr,
                               std::chrono::system_clock::time_point{},
                               std::chrono::steady_clock::now() + draguard::webhook::kDefaultReviewTimeout,
                               body.capacity() - body.size());
    benchmark::DoNotOptimize(out);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * body.size()));
  state.counters["body_bytes"] = static_cast<double>(body.size());
}

// The decode step alone, to separate JSON parsing from the engine: what /validate decodes (rule
// fields), the whole document (what /mutate decodes to compute a patch), and the reference parser.
// `pooled`: with the parser pool a Reviewer decodes with (no parser allocated per decode).
void BM_DecodeOnly(benchmark::State& state, std::size_t bytes, draguard::admission::DecodeScope scope,
                   draguard::admission::Decoder decoder, bool pooled = false) {
  const std::string body = PaddedReview(PodKind::kLegacyGpu, bytes);
  const draguard::admission::DecodePool pool;
  for (auto _ : state) {
    auto r = draguard::admission::DecodeReview(body, WithDecoder(decoder), scope, pooled ? &pool : nullptr,
                                               body.capacity() - body.size());
    benchmark::DoNotOptimize(r);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * body.size()));
}

// simdjson's validating parse of the same body alone (stage 1 and 2 into a reused parser, as the
// pooled decode does): the floor of any review that validates the whole body, as draguard's does.
void BM_ValidateOnly(benchmark::State& state, std::size_t bytes) {
  const std::string body = PaddedReview(PodKind::kLegacyGpu, bytes);
  simdjson::dom::parser parser;
  for (auto _ : state) {
    auto doc = parser.parse(body.data(), body.size(), body.capacity() - body.size() < simdjson::SIMDJSON_PADDING);
    if (doc.error() != simdjson::SUCCESS) {
      state.SkipWithError("the body is not valid JSON");
      break;
    }
    benchmark::DoNotOptimize(doc.value_unsafe());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * body.size()));
}

// simdjson's On-Demand reading request.uid of the same body and nothing else: stage 1 (the
// structure and UTF-8 of the whole body) without stage 2, so the values it skips are not validated.
// The floor of a review that would give up validating what it does not read; draguard does not.
void BM_UidOnDemand(benchmark::State& state, std::size_t bytes) {
  const std::string body = PaddedReview(PodKind::kLegacyGpu, bytes);
  simdjson::ondemand::parser parser;
  const simdjson::padded_string_view text(body.data(), body.size(), body.capacity());
  for (auto _ : state) {
    auto doc = parser.iterate(text);
    std::string_view uid;
    if (doc["request"]["uid"].get(uid) != simdjson::SUCCESS) {
      state.SkipWithError("no request.uid");
      break;
    }
    benchmark::DoNotOptimize(uid);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * body.size()));
}

// A /proc/self/status value in KiB ("VmHWM", "VmRSS").
double StatusKiB(const char* key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) return std::atof(line.c_str() + std::strlen(key) + 1);
  }
  return 0;
}

void BM_ArgsPodPeakRss(benchmark::State& state, draguard::admission::WebhookKind webhook,
                       draguard::admission::Decoder decoder) {
  static const draguard::engine::Registry registry = draguard::engine::DefaultRegistry();
  static const draguard::policy::Policy policy =
      draguard::policy::ParsePolicy(draguard::policy::DefaultPolicyYaml()).value();
  const draguard::webhook::Reviewer reviewer(registry, WithDecoder(decoder));
  // Written as text: building it as a document first would raise the peak being measured.
  std::string body =
      R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u-1",)"
      R"("kind":{"group":"","version":"v1","kind":"Pod"},"resource":{"group":"","version":"v1","resource":"pods"},)"
      R"("namespace":"team-a","operation":"CREATE","userInfo":{"username":"alice"},"object":{"apiVersion":"v1",)"
      R"("kind":"Pod","metadata":{"name":"args","namespace":"team-a"},"spec":{"containers":[{"name":"c",)"
      R"("image":"busybox","args":[)";
  for (int i = 0; i < 950000; ++i) body += i ? R"(,"")" : R"("")";
  body += "]}]}}}}";
  const double before = StatusKiB("VmRSS:");
  for (auto _ : state) {
    auto out = reviewer.Review(body, webhook, policy, nullptr, std::chrono::system_clock::time_point{},
                               std::chrono::steady_clock::now() + draguard::webhook::kDefaultReviewTimeout);
    if (out.http_status != 200) state.SkipWithError(out.error.c_str());
    benchmark::DoNotOptimize(out);
  }
  state.counters["body_mib"] = static_cast<double>(body.size()) / (1 << 20);
  state.counters["peak_growth_mib"] = (StatusKiB("VmHWM:") - before) / 1024;
}

// The decision log line of one review (formatting only; the sink write is not included).
void BM_DecisionLogLine(benchmark::State& state, bool reference) {
  const draguard::logging::Fields fields = {{"webhook", std::string("validate")},
                                            {"uid", std::string("705ab4f5-6393-11e8-b7cc-42010a800002")},
                                            {"kind", std::string("Pod")},
                                            {"namespace", std::string("team-a")},
                                            {"name", std::string("train-0")},
                                            {"operation", std::string("CREATE")},
                                            {"user", std::string("system:serviceaccount:kube-system:job-controller")},
                                            {"dryRun", false},
                                            {"decision", std::string("deny")},
                                            {"rules", std::vector<std::string>{"DG001"}},
                                            {"latency_us", int64_t{42}}};
  for (auto _ : state) {
    if (reference) {
      // How the line was formatted before: an ordered document, then dump.
      nlohmann::ordered_json j;
      j["ts"] = "2026-01-01T00:00:00.000000Z";
      j["level"] = "info";
      j["msg"] = "admission";
      for (const auto& [key, value] : fields) std::visit([&](const auto& x) { j[key] = x; }, value);
      auto line = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      benchmark::DoNotOptimize(line);
    } else {
      auto line = draguard::logging::FormatLine("2026-01-01T00:00:00.000000Z", draguard::logging::Level::kInfo,
                                                "admission", fields);
      benchmark::DoNotOptimize(line);
    }
  }
}

// The memory of one review of the 2.85 MB Pod whose container has `args: [""] * 950000`: the
// growth of the peak RSS (VmHWM) over the RSS before the first review, in MiB. Run each case in a
// process of its own (--benchmark_filter), since the peak is the process's.
BENCHMARK_CAPTURE(BM_ArgsPodPeakRss, validate, draguard::admission::WebhookKind::kValidating,
                  draguard::admission::Decoder::kFast)->Iterations(3);
BENCHMARK_CAPTURE(BM_ArgsPodPeakRss, mutate, draguard::admission::WebhookKind::kMutating,
                  draguard::admission::Decoder::kFast)->Iterations(3);
BENCHMARK_CAPTURE(BM_ArgsPodPeakRss, validate_reference, draguard::admission::WebhookKind::kValidating,
                  draguard::admission::Decoder::kReference)->Iterations(3);
BENCHMARK_CAPTURE(BM_ArgsPodPeakRss, mutate_reference, draguard::admission::WebhookKind::kMutating,
                  draguard::admission::Decoder::kReference)->Iterations(3);
BENCHMARK_CAPTURE(BM_Review, plain_pod_1k, PodKind::kPlain, 1024);
BENCHMARK_CAPTURE(BM_Review, plain_pod_8k, PodKind::kPlain, 8 * 1024);
BENCHMARK_CAPTURE(BM_Review, legacy_gpu_pod_8k, PodKind::kLegacyGpu, 8 * 1024);
BENCHMARK_CAPTURE(BM_Review, dra_pod_8k, PodKind::kDra, 8 * 1024);
BENCHMARK_CAPTURE(BM_Review, plain_pod_64k, PodKind::kPlain, 64 * 1024);
BENCHMARK_CAPTURE(BM_Review, legacy_gpu_pod_64k, PodKind::kLegacyGpu, 64 * 1024);
BENCHMARK_CAPTURE(BM_Review, dra_pod_64k, PodKind::kDra, 64 * 1024);
// The same reviews through the reference decoder (nlohmann_json's parser, every field): the
// decode this project used before the fast path.
BENCHMARK_CAPTURE(BM_Review, plain_pod_1k_reference, PodKind::kPlain, 1024, draguard::admission::Decoder::kReference);
BENCHMARK_CAPTURE(BM_Review, legacy_gpu_pod_8k_reference, PodKind::kLegacyGpu, 8 * 1024,
                  draguard::admission::Decoder::kReference);
BENCHMARK_CAPTURE(BM_Review, legacy_gpu_pod_64k_reference, PodKind::kLegacyGpu, 64 * 1024,
                  draguard::admission::Decoder::kReference);
BENCHMARK_CAPTURE(BM_DecodeOnly, legacy_gpu_pod_8k, 8 * 1024, draguard::admission::DecodeScope::kRuleFields,
                  draguard::admission::Decoder::kFast);
BENCHMARK_CAPTURE(BM_DecodeOnly, legacy_gpu_pod_8k_pooled, 8 * 1024, draguard::admission::DecodeScope::kRuleFields,
                  draguard::admission::Decoder::kFast, true);
BENCHMARK_CAPTURE(BM_DecodeOnly, legacy_gpu_pod_8k_full, 8 * 1024, draguard::admission::DecodeScope::kFull,
                  draguard::admission::Decoder::kFast);
BENCHMARK_CAPTURE(BM_DecodeOnly, legacy_gpu_pod_8k_reference, 8 * 1024, draguard::admission::DecodeScope::kFull,
                  draguard::admission::Decoder::kReference);
BENCHMARK_CAPTURE(BM_DecodeOnly, legacy_gpu_pod_64k, 64 * 1024, draguard::admission::DecodeScope::kRuleFields,
                  draguard::admission::Decoder::kFast);
BENCHMARK_CAPTURE(BM_DecodeOnly, legacy_gpu_pod_64k_pooled, 64 * 1024, draguard::admission::DecodeScope::kRuleFields,
                  draguard::admission::Decoder::kFast, true);
BENCHMARK_CAPTURE(BM_DecodeOnly, legacy_gpu_pod_64k_full, 64 * 1024, draguard::admission::DecodeScope::kFull,
                  draguard::admission::Decoder::kFast);
BENCHMARK_CAPTURE(BM_DecodeOnly, legacy_gpu_pod_64k_reference, 64 * 1024, draguard::admission::DecodeScope::kFull,
                  draguard::admission::Decoder::kReference);
BENCHMARK_CAPTURE(BM_ValidateOnly, legacy_gpu_pod_8k, 8 * 1024);
BENCHMARK_CAPTURE(BM_ValidateOnly, legacy_gpu_pod_64k, 64 * 1024);
BENCHMARK_CAPTURE(BM_UidOnDemand, legacy_gpu_pod_8k, 8 * 1024);
BENCHMARK_CAPTURE(BM_UidOnDemand, legacy_gpu_pod_64k, 64 * 1024);
BENCHMARK_CAPTURE(BM_DecisionLogLine, direct, false);
BENCHMARK_CAPTURE(BM_DecisionLogLine, ordered_document, true);

}  // namespace

BENCHMARK_MAIN();
