#include "draguard/certs/self_tls.h"

#include <algorithm>
#include <random>

#include <nlohmann/json.hpp>

#include "draguard/base64.h"

namespace draguard::certs {
namespace {

using nlohmann::json;

constexpr int kAttempts = 5;  // conflicts tolerated per object and sync

std::string SecretsPath(const std::string& ns) { return "/api/v1/namespaces/" + kube::PathEscape(ns) + "/secrets"; }

std::string WebhookPath(const std::string& kind, const std::string& name) {
  return "/apis/admissionregistration.k8s.io/v1/" + kind + "/" + kube::PathEscape(name);
}

Status CallError(const std::string& what, const kube::ApiResult& r) {
  Status st = r.error.ToStatus();
  return Status(st.code(), what + ": " + st.message());
}

// The four keys of a Secret's data; a key that is missing or not base64 is left empty (the plan
// then replaces or renews what it needs).
Material FromSecret(const json& secret) {
  Material m;
  m.exists = true;
  const json* data = secret.contains("data") && secret["data"].is_object() ? &secret["data"] : nullptr;
  auto get = [&](const char* key) -> std::string {
    if (data == nullptr || !data->contains(key) || !(*data)[key].is_string()) return "";
    auto d = Base64Decode((*data)[key].get<std::string>());
    return d.ok() ? *d : "";
  };
  m.tls_crt = get("tls.crt");
  m.tls_key = get("tls.key");
  m.ca_crt = get("ca.crt");
  m.ca_key = get("ca.key");
  return m;
}

json DataOf(const Material& m) {
  return json{{"tls.crt", Base64Encode(m.tls_crt)},
              {"tls.key", Base64Encode(m.tls_key)},
              {"ca.crt", Base64Encode(m.ca_crt)},
              {"ca.key", Base64Encode(m.ca_key)}};
}

}  // namespace

SelfTls::SelfTls(const kube::Client& client, SelfTlsOptions options, ServingCallback on_serving,
                 std::shared_ptr<logging::Logger> logger)
    : client_(client),
      options_(std::move(options)),
      dns_(ServiceDnsNames(options_.service_name, options_.namespace_name)),
      on_serving_(std::move(on_serving)),
      logger_(logger ? std::move(logger) : logging::Logger::Null()) {
  dns_.insert(dns_.end(), options_.extra_names.begin(), options_.extra_names.end());
}

SelfTls::~SelfTls() { Stop(); }

TimePoint SelfTls::Now() const { return options_.clock ? options_.clock() : std::chrono::system_clock::now(); }

Result<SyncResult> SelfTls::SyncSecret() {
  const std::string collection = SecretsPath(options_.namespace_name);
  const std::string path = collection + "/" + kube::PathEscape(options_.secret_name);
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    kube::ApiResult got = client_.Call(kube::ApiCall("GET", path));
    json secret;
    Material current;
    if (got.ok()) {
      secret = json::parse(got.body, nullptr, false);
      if (!secret.is_object()) return Status::Unavailable("GET " + path + ": the answer is not a JSON object");
      current = FromSecret(secret);
    } else if (got.status != 404) {
      return CallError("GET Secret " + options_.secret_name, got);
    }
    SyncResult result;
    const TimePoint now = Now();
    Material start = current;
    if (!current.exists && in_service_) {
      // Deleted while serving: recreate it with the material in service (a new CA would fail every
      // call until each webhook configuration and every replica had caught up).
      start = *in_service_;
      start.exists = true;
      result.steps.push_back(Decision{Action::kCreate, "the Secret was deleted; recreated with the CA in service"});
    }
    auto next = Converge(start, dns_, now, options_.rotation, &result.steps);
    if (!next.ok()) return next.status();
    result.material = *next;
    if (result.steps.empty()) {
      in_service_ = result.material;
      return result;
    }

    kube::ApiResult wrote;
    if (!current.exists) {
      json obj = {{"apiVersion", "v1"},
                  {"kind", "Secret"},
                  {"type", "kubernetes.io/tls"},
                  {"metadata",
                   {{"name", options_.secret_name},
                    {"namespace", options_.namespace_name},
                    {"labels", {{"app.kubernetes.io/managed-by", "draguard"}}}}},
                  {"data", DataOf(*next)}};
      wrote = client_.Call(kube::ApiCall("POST", collection, obj.dump()));
    } else {
      secret["data"] = DataOf(*next);  // metadata.resourceVersion makes this a precondition
      wrote = client_.Call(kube::ApiCall("PUT", path, secret.dump()));
    }
    if (wrote.ok()) {
      result.wrote_secret = true;
      in_service_ = result.material;
      for (const auto& s : result.steps) {
        logger_->Info("TLS Secret updated",
                      {{"secret", options_.secret_name}, {"action", std::string(ActionName(s.action))}, {"reason", s.reason}});
      }
      return result;
    }
    if (wrote.status == 409) {
      logger_->Debug("TLS Secret changed concurrently; re-reading", {{"secret", options_.secret_name}});
      continue;  // another replica wrote first (AlreadyExists or Conflict): use its version
    }
    return CallError(std::string(current.exists ? "PUT" : "POST") + " Secret " + options_.secret_name, wrote);
  }
  return Status::Unavailable("Secret " + options_.secret_name + ": still conflicting after " +
                             std::to_string(kAttempts) + " attempts");
}

Status SelfTls::InjectBundle(const std::string& kind, const std::string& name, const std::string& bundle_b64,
                             SyncResult& result) {
  const std::string path = WebhookPath(kind, name);
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    kube::ApiResult got = client_.Call(kube::ApiCall("GET", path));
    if (got.status == 404) {
      result.missing_configurations.push_back(name);
      logger_->Warn("webhook configuration not found; caBundle not injected", {{"kind", kind}, {"name", name}});
      return Status::Ok();
    }
    if (!got.ok()) return CallError("GET " + kind + " " + name, got);
    json obj = json::parse(got.body, nullptr, false);
    if (!obj.is_object()) return Status::Unavailable("GET " + path + ": the answer is not a JSON object");
    bool changed = false;
    if (obj.contains("webhooks") && obj["webhooks"].is_array()) {
      for (auto& wh : obj["webhooks"]) {
        if (!wh.is_object()) continue;
        json& cc = wh["clientConfig"];
        if (!cc.is_object()) cc = json::object();
        if (!cc.contains("caBundle") || cc["caBundle"] != bundle_b64) {
          cc["caBundle"] = bundle_b64;
          changed = true;
        }
      }
    }
    if (!changed) return Status::Ok();
    kube::ApiResult put = client_.Call(kube::ApiCall("PUT", path, obj.dump()));
    if (put.ok()) {
      ++result.configurations_updated;
      logger_->Info("caBundle injected", {{"kind", kind}, {"name", name}});
      return Status::Ok();
    }
    if (put.status != 409) return CallError("PUT " + kind + " " + name, put);
  }
  return Status::Unavailable(kind + " " + name + ": still conflicting after " + std::to_string(kAttempts) +
                             " attempts");
}

Result<SyncResult> SelfTls::SyncOnce() {
  std::lock_guard<std::mutex> lock(sync_mu_);
  auto synced = SyncSecret();
  if (!synced.ok()) return synced.status();
  SyncResult result = std::move(synced).value();
  const Material& m = result.material;
  auto facts = Inspect(m.tls_crt);
  if (!facts.ok()) return facts.status();
  if (facts->fingerprint != served_fingerprint_) {
    if (on_serving_) {
      Status st = on_serving_(PemPair{m.tls_crt, m.tls_key}, m.ca_crt);
      if (!st.ok()) return st;
    }
    served_fingerprint_ = facts->fingerprint;
    logger_->Info("serving certificate from Secret", {{"secret", options_.secret_name}, {"sha256", facts->fingerprint}});
  }
  const std::string bundle_b64 = Base64Encode(m.ca_crt);
  Status first_error = Status::Ok();
  for (const auto& name : options_.validating_webhooks) {
    Status st = InjectBundle("validatingwebhookconfigurations", name, bundle_b64, result);
    if (!st.ok() && first_error.ok()) first_error = st;
  }
  for (const auto& name : options_.mutating_webhooks) {
    Status st = InjectBundle("mutatingwebhookconfigurations", name, bundle_b64, result);
    if (!st.ok() && first_error.ok()) first_error = st;
  }
  if (!first_error.ok()) return first_error;
  return result;
}

void SelfTls::Start(std::chrono::milliseconds period) {
  Stop();
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = false;
  }
  thread_ = std::thread([this, period] {
    std::mt19937_64 rng(std::random_device{}());
    const auto base = std::max(period, std::chrono::milliseconds(1000));
    std::uniform_int_distribution<int64_t> jitter(0, base.count() / 10);
    std::unique_lock<std::mutex> l(mu_);
    while (!stop_) {
      auto wait = base + std::chrono::milliseconds(jitter(rng));
      if (cv_.wait_for(l, wait, [this] { return stop_; })) break;
      l.unlock();
      auto r = SyncOnce();
      if (!r.ok()) logger_->Warn("TLS resync failed; retrying", {{"error", r.status().message()}});
      l.lock();
    }
  });
}

void SelfTls::Stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace draguard::certs
