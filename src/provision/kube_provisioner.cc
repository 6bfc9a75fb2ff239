// KubeTemplateProvisioner: see include/draguard/provision/kube_provisioner.h.
#include "draguard/provision/kube_provisioner.h"

#include <algorithm>
#include <thread>

#include "draguard/metrics/metrics.h"

namespace draguard::provision {

using admission::Json;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

namespace {

// A field only the server has is acceptable when it is one of the defaults the API server fills
// in (resource.k8s.io/v1) or carries no information.
bool IsKnownDefault(const std::string& key, const Json& value) {
  if (value.is_null()) return true;
  if ((value.is_object() || value.is_array()) && value.empty()) return true;
  if (key == "allocationMode") return value == "ExactCount";
  if (key == "count") return value.is_number_integer() && value.get<int64_t>() == 1;
  if (key == "operator") return value == "Equal";
  return false;
}

bool ValuesEqual(const Json& a, const Json& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_number_float() || b.is_number_float()) return a.get<double>() == b.get<double>();
    if (a.is_number_unsigned() && b.is_number_unsigned()) return a.get<uint64_t>() == b.get<uint64_t>();
    return a.get<int64_t>() == b.get<int64_t>();
  }
  return a == b;
}

std::string Key(std::string_view ns, std::string_view name) {
  std::string k(ns);
  k += '/';
  k += name;
  return k;
}

std::string ReasonOf(const kube::ApiError& e) {
  if (!e.reason.empty()) return e.reason;
  return e.code == 0 ? "Transport" : std::to_string(e.code);
}

Status ErrorStatus(const char* verb, const std::string& kind, const std::string& key, const kube::ApiError& e,
                   milliseconds deadline) {
  if (e.code == 0 && e.reason == "Timeout") {
    return Status::Unavailable(std::string(verb) + " " + kind + " " + key + ": timeout after " +
                               std::to_string(deadline.count()) + "ms");
  }
  Status s = e.ToStatus();
  return Status(s.code(), std::string(verb) + " " + kind + " " + key + ": " + s.message());
}

// The first pause after a transient error; doubled after each retry, at most kMaxPause.
constexpr milliseconds kFirstPause{100};
constexpr milliseconds kMaxPause{1000};

}  // namespace

bool IsTransient(const kube::ApiError& e, bool after_outage) {
  if (e.code == 0) return e.reason != "Timeout" && e.reason != "Canceled";
  if (e.code == 401 || e.code == 403) return after_outage;
  return e.code == 429 || e.code >= 500;
}

bool SpecMatches(const Json& ours, const Json& theirs) {
  if (ours.is_object()) {
    if (!theirs.is_object()) return false;
    for (auto it = ours.begin(); it != ours.end(); ++it) {
      auto t = theirs.find(it.key());
      if (t == theirs.end()) {
        // We set an empty value the server may drop (e.g. "selectors": []).
        if (IsKnownDefault("", it.value())) continue;
        return false;
      }
      if (!SpecMatches(it.value(), *t)) return false;
    }
    for (auto it = theirs.begin(); it != theirs.end(); ++it) {
      if (ours.contains(it.key())) continue;
      if (!IsKnownDefault(it.key(), it.value())) return false;
    }
    return true;
  }
  if (ours.is_array()) {
    if (!theirs.is_array() || ours.size() != theirs.size()) return false;
    for (std::size_t i = 0; i < ours.size(); ++i) {
      if (!SpecMatches(ours[i], theirs[i])) return false;
    }
    return true;
  }
  return ValuesEqual(ours, theirs);
}

// One API exchange shared by concurrent callers of the same key.
struct KubeTemplateProvisioner::Flight {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  Status result;
};

KubeTemplateProvisioner::KubeTemplateProvisioner(const kube::Client& client, ProvisionerOptions options)
    : client_(client), options_(std::move(options)) {
  if (options_.cache_capacity == 0) options_.cache_capacity = 1;
}

KubeTemplateProvisioner::~KubeTemplateProvisioner() = default;

steady_clock::time_point KubeTemplateProvisioner::Now() const {
  return options_.clock ? options_.clock() : steady_clock::now();
}

bool KubeTemplateProvisioner::CacheLookup(const std::string& key) {
  auto it = cache_.find(key);
  if (it == cache_.end()) return false;
  if (Now() >= it->second.expires) {
    order_.erase(it->second.order);
    cache_.erase(it);
    return false;
  }
  return true;
}

void KubeTemplateProvisioner::CacheInsert(const std::string& key) {
  auto it = cache_.find(key);
  if (it != cache_.end()) {
    order_.erase(it->second.order);
    cache_.erase(it);
  }
  while (cache_.size() >= options_.cache_capacity && !order_.empty()) {
    cache_.erase(order_.front());
    order_.pop_front();
  }
  order_.push_back(key);
  cache_[key] = CacheEntry{Now() + options_.cache_ttl, std::prev(order_.end())};
}

void KubeTemplateProvisioner::CountError(const std::string& reason) {
  ++counters_.errors;
  ++counters_.errors_by_reason[reason];
}

void KubeTemplateProvisioner::Forget(std::string_view namespace_name, std::string_view name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = cache_.find(Key(namespace_name, name));
  if (it == cache_.end()) return;
  order_.erase(it->second.order);
  cache_.erase(it);
}

std::size_t KubeTemplateProvisioner::cache_size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cache_.size();
}

ProvisionerCounters KubeTemplateProvisioner::Counters() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counters_;
}

Status KubeTemplateProvisioner::Ensure(std::string_view namespace_name, const mutation::GeneratedTemplate& tmpl,
                                       milliseconds deadline) {
  return EnsureObject({"ResourceClaimTemplate",
                       "/apis/resource.k8s.io/v1/namespaces/" + kube::PathEscape(namespace_name) + "/resourceclaimtemplates",
                       tmpl.name, &tmpl.object, Key(namespace_name, tmpl.name)},
                      Key(namespace_name, tmpl.name), deadline);
}

Status KubeTemplateProvisioner::EnsureComputeDomain(std::string_view namespace_name,
                                                    const mutation::GeneratedComputeDomain& cd, milliseconds deadline) {
  return EnsureObject({"ComputeDomain",
                       "/apis/resource.nvidia.com/v1beta1/namespaces/" + kube::PathEscape(namespace_name) +
                           "/computedomains",
                       cd.name, &cd.object, Key(namespace_name, cd.name)},
                      "ComputeDomain/" + Key(namespace_name, cd.name), deadline);
}

Status KubeTemplateProvisioner::EnsureObject(const Target& target, const std::string& key, milliseconds deadline) {
  if (target.name.empty()) return Status::InvalidArgument(target.kind + " without a name");
  const auto start = steady_clock::now();
  std::shared_ptr<Flight> flight;
  bool leader = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (CacheLookup(key)) {
      ++counters_.cache_hits;
      return Status::Ok();
    }
    auto it = flights_.find(key);
    if (it == flights_.end()) {
      flight = std::make_shared<Flight>();
      flights_.emplace(key, flight);
      leader = true;
    } else {
      flight = it->second;
      ++counters_.shared;
    }
  }

  if (!leader) {
    std::unique_lock<std::mutex> l(flight->mu);
    if (!flight->cv.wait_until(l, start + deadline, [&] { return flight->done; })) {
      std::lock_guard<std::mutex> lock(mu_);
      CountError("Timeout");
      return Status::Unavailable("creating " + target.kind + " " + target.where + ": timeout after " +
                                 std::to_string(deadline.count()) + "ms (waiting for a concurrent request)");
    }
    return flight->result;
  }

  std::string outcome, reason;
  Status result = Exchange(target, key, deadline, &outcome, &reason);
  const double seconds = std::chrono::duration<double>(steady_clock::now() - start).count();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (result.ok()) {
      CacheInsert(key);
      if (outcome == "created") {
        ++counters_.created;
      } else {
        ++counters_.already_exists;
      }
    } else {
      CountError(reason);
    }
    flights_.erase(key);
  }
  if (latency_ != nullptr) latency_->Observe({result.ok() ? outcome : "error"}, seconds);
  {
    std::lock_guard<std::mutex> l(flight->mu);
    flight->done = true;
    flight->result = result;
  }
  flight->cv.notify_all();
  return result;
}

Status KubeTemplateProvisioner::Exchange(const Target& target, const std::string& key, milliseconds deadline,
                                         std::string* outcome, std::string* error_reason) {
  const Json& object = *target.object;
  const auto start = steady_clock::now();
  auto remaining = [&]() -> milliseconds {
    auto left = std::chrono::duration_cast<milliseconds>(start + deadline - steady_clock::now());
    return std::max(left, milliseconds(1));
  };
  const std::string body = object.dump();
  const std::string object_path = target.collection + "/" + kube::PathEscape(target.name);
  auto create = [&] { return client_.CreateObject(target.collection, body, remaining()); };
  auto get = [&] { return client_.GetObject(object_path, remaining()); };
  // After a transient error: pause and return true while the deadline leaves room for another try.
  milliseconds pause = kFirstPause;
  bool outage = false;  // an API call of this exchange got no answer at all
  auto retry = [&](const kube::ApiError& e) {
    outage = outage || e.code == 0;
    if (!IsTransient(e, outage) || remaining() <= pause + milliseconds(50)) return false;
    std::this_thread::sleep_for(pause);  // a backoff between API calls, not synchronisation
    pause = std::min(pause * 2, kMaxPause);
    std::lock_guard<std::mutex> lock(mu_);
    ++counters_.retries;
    return true;
  };
  for (int attempt = 0; attempt < 2; ++attempt) {
    kube::CreateResult created = create();
    while (created.outcome == kube::CreateResult::Outcome::kError && retry(created.error)) created = create();
    if (created.outcome == kube::CreateResult::Outcome::kCreated) {
      *outcome = "created";
      return Status::Ok();
    }
    if (created.outcome == kube::CreateResult::Outcome::kError) {
      *error_reason = ReasonOf(created.error);
      return ErrorStatus("creating", target.kind, target.where, created.error, deadline);
    }
    // 409: someone (another replica, or someone else) holds the name. Compare.
    kube::GetResult got = get();
    while (got.outcome == kube::GetResult::Outcome::kError && retry(got.error)) got = get();
    if (got.outcome == kube::GetResult::Outcome::kNotFound) continue;  // deleted in between: POST again
    if (got.outcome == kube::GetResult::Outcome::kError) {
      *error_reason = ReasonOf(got.error);
      return ErrorStatus("reading existing", target.kind, target.where, got.error, deadline);
    }
    Json theirs = Json::parse(got.object_json, nullptr, false);
    if (theirs.is_discarded() || !theirs.is_object()) {
      *error_reason = "BadResponse";
      return Status::Internal("reading existing " + target.kind + " " + target.where + ": the answer is not a JSON object");
    }
    static const Json kNull;
    const Json& our_spec = object.contains("spec") ? object["spec"] : kNull;
    const Json& their_spec = theirs.contains("spec") ? theirs["spec"] : kNull;
    bool same = SpecMatches(our_spec, their_spec);
    const std::string label(kManagedByLabel);
    const Json* our_label = nullptr;
    if (auto m = object.find("metadata"); m != object.end() && m->is_object()) {
      if (auto l = m->find("labels"); l != m->end() && l->is_object()) {
        if (auto v = l->find(label); v != l->end()) our_label = &*v;
      }
    }
    if (same && our_label != nullptr) {
      const Json* their_label = nullptr;
      if (auto m = theirs.find("metadata"); m != theirs.end() && m->is_object()) {
        if (auto l = m->find("labels"); l != m->end() && l->is_object()) {
          if (auto v = l->find(label); v != l->end()) their_label = &*v;
        }
      }
      same = their_label != nullptr && *their_label == *our_label;
    }
    if (!same) {
      *error_reason = "Conflict";
      return Status::FailedPrecondition(target.kind + " " + target.where +
                                        " exists with different content (not generated by draguard?)");
    }
    *outcome = "exists";
    return Status::Ok();
  }
  *error_reason = "Conflict";
  return Status::Unavailable("creating " + target.kind + " " + target.where +
                             ": it exists, then did not, twice in a row; try again");
}

void KubeTemplateProvisioner::RegisterMetrics(metrics::Registry& registry) {
  auto& total = registry.Counter("draguard_template_provision_total",
                                 "Ensure calls for generated ResourceClaimTemplates by outcome.", {"outcome"});
  auto& errors = registry.Counter("draguard_template_provision_errors_total",
                                  "Failed template provisioning by reason.", {"reason"});
  auto& retries = registry.Counter("draguard_template_provision_retries_total",
                                   "Template API calls repeated after a transient error (no answer, 429, 5xx).", {});
  latency_ = &registry.Histogram("draguard_template_provision_duration_seconds",
                                 "Duration of template provisioning API exchanges (cache hits excluded).",
                                 {"outcome"}, {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10});
  registry.AddCollector([this, &total, &errors, &retries] {
    ProvisionerCounters c = Counters();
    total.SetTotal({"created"}, static_cast<double>(c.created));
    total.SetTotal({"exists"}, static_cast<double>(c.already_exists));
    total.SetTotal({"cached"}, static_cast<double>(c.cache_hits));
    total.SetTotal({"error"}, static_cast<double>(c.errors));
    retries.SetTotal({}, static_cast<double>(c.retries));
    for (const auto& [reason, n] : c.errors_by_reason) errors.SetTotal({reason}, static_cast<double>(n));
  });
}

}  // namespace draguard::provision
