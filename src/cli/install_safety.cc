// `draguard uninstall-webhooks` (the chart's pre-delete hook) and `draguard selftest` (the
// chart's `helm test` Pod). Both talk HTTPS through kube::Client, which verifies the server
// against a CA file and its host name.
#include <nlohmann/json.hpp>

#include "commands.h"
#include "draguard/kube/client.h"
#include "flags.h"

namespace draguard::cli {
namespace {

std::vector<std::string> Values(const Flags& f, const char* flag) {
  auto it = f.values.find(flag);
  return it == f.values.end() ? std::vector<std::string>{} : it->second;
}

// "https://HOST[:PORT]" (IPv6 in brackets) → host, port (default 443).
Status ParseHttpsUrl(const std::string& url, std::string* host, int* port) {
  const std::string scheme = "https://";
  if (url.rfind(scheme, 0) != 0) return Status::InvalidArgument("--url must start with https://");
  std::string rest = url.substr(scheme.size());
  if (auto slash = rest.find('/'); slash != std::string::npos) {
    if (rest.substr(slash) != "/") return Status::InvalidArgument("--url takes no path (/validate is added)");
    rest = rest.substr(0, slash);
  }
  *port = 443;
  std::string port_text;
  if (!rest.empty() && rest.front() == '[') {
    auto close = rest.find(']');
    if (close == std::string::npos) return Status::InvalidArgument("--url: unterminated IPv6 address");
    *host = rest.substr(1, close - 1);
    if (close + 1 < rest.size()) {
      if (rest[close + 1] != ':') return Status::InvalidArgument("--url: bad port");
      port_text = rest.substr(close + 2);
    }
  } else if (auto colon = rest.rfind(':'); colon != std::string::npos) {
    *host = rest.substr(0, colon);
    port_text = rest.substr(colon + 1);
  } else {
    *host = rest;
  }
  if (host->empty()) return Status::InvalidArgument("--url has no host");
  if (!port_text.empty()) {
    if (port_text.size() > 5 || port_text.find_first_not_of("0123456789") != std::string::npos) {
      return Status::InvalidArgument("--url: bad port");
    }
    *port = std::stoi(port_text);
    if (*port < 1 || *port > 65535) return Status::InvalidArgument("--url: port out of range");
  }
  return Status::Ok();
}

// The review the self-test sends: a Pod with one legacy GPU, created in `ns`.
std::string SelftestReview(const std::string& ns) {
  nlohmann::json pod = {{"apiVersion", "v1"},
                        {"kind", "Pod"},
                        {"metadata", {{"name", "draguard-selftest"}, {"namespace", ns}}},
                        {"spec",
                         {{"containers",
                           {{{"name", "cuda"},
                             {"image", "nvidia/cuda"},
                             {"resources", {{"limits", {{"nvidia.com/gpu", "1"}}}}}}}}}}};
  nlohmann::json review = {
      {"apiVersion", "admission.k8s.io/v1"},
      {"kind", "AdmissionReview"},
      {"request",
       {{"uid", "draguard-selftest"},
        {"kind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
        {"resource", {{"group", ""}, {"version", "v1"}, {"resource", "pods"}}},
        {"operation", "CREATE"},
        {"namespace", ns},
        {"name", "draguard-selftest"},
        {"userInfo", {{"username", "draguard-selftest"}}},
        {"object", pod},
        {"dryRun", true}}}};
  return review.dump();
}

}  // namespace

Status DeleteWebhookConfigurations(const kube::Client& client, const std::vector<std::string>& validating,
                                   const std::vector<std::string>& mutating, const std::string& secret_namespace,
                                   const std::string& secret, std::ostream& out) {
  std::vector<std::pair<std::string, std::string>> targets;  // (what, path)
  for (const auto& n : validating) {
    targets.emplace_back("ValidatingWebhookConfiguration " + n,
                         "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/" + kube::PathEscape(n));
  }
  for (const auto& n : mutating) {
    targets.emplace_back("MutatingWebhookConfiguration " + n,
                         "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/" + kube::PathEscape(n));
  }
  if (!secret.empty()) {
    targets.emplace_back("Secret " + secret_namespace + "/" + secret, "/api/v1/namespaces/" +
                                                                          kube::PathEscape(secret_namespace) + "/secrets/" +
                                                                          kube::PathEscape(secret));
  }
  Status first = Status::Ok();
  for (const auto& [what, path] : targets) {
    kube::ApiResult r = client.Call(kube::ApiCall("DELETE", path));
    if (r.ok()) {
      out << "deleted " << what << "\n";
    } else if (r.status == 404) {
      out << what << " already gone\n";
    } else {
      Status st = r.error.ToStatus();
      out << "cannot delete " << what << ": " << st.message() << "\n";
      if (first.ok()) first = Status(st.code(), what + ": " + st.message());
    }
  }
  return first;
}

int UninstallWebhooks(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  Flags f = ParseFlags(args, {"--validating", "--mutating", "--secret", "--namespace", "--kube-timeout"}, {});
  auto usage = [&](const std::string& why) {
    err << "draguard uninstall-webhooks: " << why
        << "\nusage: draguard uninstall-webhooks [--validating NAME]... [--mutating NAME]... "
           "[--secret NAME --namespace NS] [--kube-timeout SECONDS]\n";
    return kExitUsage;
  };
  if (!f.error.empty() || !f.positional.empty()) {
    return usage(f.error.empty() ? "unexpected argument " + f.positional.front() : f.error);
  }
  const auto validating = Values(f, "--validating");
  const auto mutating = Values(f, "--mutating");
  for (const auto& n : validating) if (n.empty()) return usage("--validating needs a name");
  for (const auto& n : mutating) if (n.empty()) return usage("--mutating needs a name");
  if (validating.empty() && mutating.empty()) return usage("name at least one --validating or --mutating configuration");
  if (f.Has("--secret") && (f.Get("--secret").empty() || f.Get("--namespace").empty())) {
    return usage("--secret needs a name and --namespace");
  }
  auto config = kube::InClusterConfig();
  if (!config.ok()) {
    err << "draguard uninstall-webhooks: no in-cluster Kubernetes configuration: " << config.status().message() << "\n";
    return kExitRuntime;
  }
  if (f.Has("--kube-timeout")) {
    char* end = nullptr;
    const std::string t = f.Get("--kube-timeout");
    double secs = std::strtod(t.c_str(), &end);
    if (t.empty() || end != t.c_str() + t.size() || secs <= 0 || secs > 600) {
      return usage("--kube-timeout must be a positive number of seconds (at most 600)");
    }
    config->request_timeout = std::chrono::milliseconds(static_cast<int64_t>(secs * 1000));
  }
  kube::Client client(*config);
  Status st = DeleteWebhookConfigurations(client, validating, mutating, f.Get("--namespace"), f.Get("--secret"), out);
  if (!st.ok()) {
    err << "draguard uninstall-webhooks: " << st.message() << "\n";
    return kExitRuntime;
  }
  return kExitOk;
}

int Selftest(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  Flags f = ParseFlags(args, {"--url", "--ca-file", "--expect", "--namespace", "--timeout"}, {});
  auto usage = [&](const std::string& why) {
    err << "draguard selftest: " << why
        << "\nusage: draguard selftest --url https://SERVICE.NAMESPACE.svc[:PORT] --ca-file FILE "
           "[--expect deny|audit] [--namespace NS] [--timeout SECONDS]\n";
    return kExitUsage;
  };
  if (!f.error.empty() || !f.positional.empty()) {
    return usage(f.error.empty() ? "unexpected argument " + f.positional.front() : f.error);
  }
  std::string host;
  int port = 0;
  if (!f.Has("--url")) return usage("--url is required");
  if (Status st = ParseHttpsUrl(f.Get("--url"), &host, &port); !st.ok()) return usage(st.message());
  const std::string ca = f.Get("--ca-file");
  if (ca.empty()) return usage("--ca-file is required (the CA that signed the serving certificate)");
  const std::string expect = f.Get("--expect", "deny");
  if (expect != "deny" && expect != "audit") return usage("--expect must be deny or audit");
  const std::string ns = f.Get("--namespace", "draguard-selftest");
  if (ns.empty()) return usage("--namespace needs a name");
  double secs = 10;
  if (f.Has("--timeout")) {
    char* end = nullptr;
    const std::string t = f.Get("--timeout");
    secs = std::strtod(t.c_str(), &end);
    if (t.empty() || end != t.c_str() + t.size() || secs <= 0 || secs > 600) {
      return usage("--timeout must be a positive number of seconds (at most 600)");
    }
  }
  kube::ClientConfig cfg;
  cfg.host = host;
  cfg.port = port;
  cfg.ca_file = ca;
  cfg.request_timeout = std::chrono::milliseconds(static_cast<int64_t>(secs * 1000));
  cfg.connect_timeout = std::min(cfg.connect_timeout, cfg.request_timeout);
  kube::Client client(cfg);
  kube::ApiResult r = client.Call(kube::ApiCall("POST", "/validate", SelftestReview(ns)));
  auto fail = [&](const std::string& why) {
    err << "draguard selftest: FAIL: " << why << "\n";
    return kExitRuntime;
  };
  if (r.status == 0) return fail("no answer from " + f.Get("--url") + ": " + r.error.message);
  if (!r.ok()) return fail("HTTP " + std::to_string(r.status) + ": " + r.body.substr(0, 300));
  auto body = nlohmann::json::parse(r.body, nullptr, false);
  if (!body.is_object() || !body.contains("response") || !body["response"].is_object()) {
    return fail("the answer is not an AdmissionReview");
  }
  const auto& resp = body["response"];
  if (resp.value("uid", "") != "draguard-selftest") return fail("the answer does not echo the review's uid");
  const bool allowed = resp.value("allowed", true);
  if (expect == "deny") {
    std::string message;
    if (resp.contains("status") && resp["status"].is_object()) message = resp["status"].value("message", "");
    if (allowed) return fail("a Pod with a legacy GPU request was allowed (expected the DG001 denial)");
    if (message.rfind("DG001", 0) != 0) return fail("denied, but not by DG001: " + message.substr(0, 300));
    out << "ok: " << f.Get("--url") << " (certificate verified) denied a legacy GPU Pod: " << message.substr(0, 200)
        << "\n";
    return kExitOk;
  }
  const auto ann = resp.contains("auditAnnotations") && resp["auditAnnotations"].is_object() ? resp["auditAnnotations"]
                                                                                             : nlohmann::json::object();
  if (!allowed) return fail("audit mode denied the Pod");
  if (!ann.contains("dg001-legacy-gpu-resource")) return fail("no DG001 audit annotation in the answer");
  out << "ok: " << f.Get("--url") << " (certificate verified) audited a legacy GPU Pod: "
      << ann["dg001-legacy-gpu-resource"].get<std::string>().substr(0, 200) << "\n";
  return kExitOk;
}

}  // namespace draguard::cli
