#include "draguard/certs/plan.h"

#include <algorithm>

namespace draguard::certs {
namespace {

// The time at which a certificate valid from nb to na is due for renewal.
TimePoint RenewAt(const CertFacts& f, double fraction) {
  auto life = f.not_after - f.not_before;
  return f.not_before + std::chrono::duration_cast<TimePoint::duration>(life * fraction);
}

Decision D(Action a, std::string why) { return Decision{a, std::move(why)}; }

}  // namespace

const char* ActionName(Action a) {
  switch (a) {
    case Action::kNone: return "none";
    case Action::kCreate: return "create";
    case Action::kReplace: return "replace";
    case Action::kRotateCa: return "rotate-ca";
    case Action::kRenewLeaf: return "renew-leaf";
    case Action::kDropExpiredCa: return "drop-expired-ca";
  }
  return "unknown";
}

std::vector<std::string> ServiceDnsNames(const std::string& service, const std::string& ns) {
  return {service, service + "." + ns, service + "." + ns + ".svc", service + "." + ns + ".svc.cluster.local"};
}

Decision Decide(const Material& m, const std::vector<std::string>& dns, TimePoint now, const RotationPolicy& p) {
  if (!m.exists) return D(Action::kCreate, "no Secret");
  auto bundle = SplitBundle(m.ca_crt);
  if (!bundle.ok()) return D(Action::kReplace, "ca.crt: " + bundle.status().message());
  const std::string& signing = bundle->front();
  if (!KeyMatches(signing, m.ca_key)) return D(Action::kReplace, "ca.key does not match the first certificate of ca.crt");
  auto ca = Inspect(signing);
  if (!ca.ok()) return D(Action::kReplace, "ca.crt: " + ca.status().message());
  if (!ca->is_ca) return D(Action::kReplace, "the first certificate of ca.crt is not a CA");
  if (now >= ca->not_after) return D(Action::kReplace, "the signing CA has expired");
  if (now >= RenewAt(*ca, p.renew_fraction)) return D(Action::kRotateCa, "the signing CA is due for renewal");

  auto leaf = Inspect(m.tls_crt);
  if (!leaf.ok()) return D(Action::kRenewLeaf, "tls.crt: " + leaf.status().message());
  if (!KeyMatches(m.tls_crt, m.tls_key)) return D(Action::kRenewLeaf, "tls.key does not match tls.crt");
  for (const auto& name : dns) {
    const std::string ip = CanonicalIp(name);
    const auto& have = ip.empty() ? leaf->dns : leaf->ips;
    if (std::find(have.begin(), have.end(), ip.empty() ? name : ip) == have.end()) {
      return D(Action::kRenewLeaf, "tls.crt does not cover " + name);
    }
  }
  if (now >= leaf->not_after) return D(Action::kRenewLeaf, "the serving certificate has expired");
  if (now >= RenewAt(*leaf, p.renew_fraction)) return D(Action::kRenewLeaf, "the serving certificate is due for renewal");
  if (!SignedBy(m.tls_crt, signing)) {
    bool trusted = std::any_of(bundle->begin() + 1, bundle->end(),
                               [&](const std::string& c) { return SignedBy(m.tls_crt, c); });
    if (!trusted) return D(Action::kRenewLeaf, "tls.crt is not signed by a CA of ca.crt");
    if (now >= ca->not_before + p.backdate + p.propagation) {
      return D(Action::kRenewLeaf, "the new CA's bundle has had time to propagate: serve a certificate it signed");
    }
  }
  for (std::size_t i = 1; i < bundle->size(); ++i) {
    auto old = Inspect((*bundle)[i]);
    if (old.ok() && now >= old->not_after) return D(Action::kDropExpiredCa, "an old CA in ca.crt has expired");
  }
  return D(Action::kNone, "");
}

Result<Material> Apply(Action action, const Material& m, const std::vector<std::string>& dns, TimePoint now,
                       const RotationPolicy& p) {
  const TimePoint nb = now - p.backdate;
  Material out = m;
  out.exists = true;
  auto issue_leaf = [&](Material& x) -> Status {
    auto signing = SplitBundle(x.ca_crt);
    if (!signing.ok()) return signing.status();
    auto ca = Inspect(signing->front());
    if (!ca.ok()) return ca.status();
    TimePoint na = std::min(now + p.leaf_validity, ca->not_after);
    auto leaf = IssueServing(PemPair{signing->front(), x.ca_key}, dns, nb, na);
    if (!leaf.ok()) return leaf.status();
    x.tls_crt = leaf->cert_pem;
    x.tls_key = leaf->key_pem;
    return Status::Ok();
  };
  switch (action) {
    case Action::kNone: return out;
    case Action::kCreate:
    case Action::kReplace: {
      auto ca = GenerateCa("draguard-webhook-ca", nb, now + p.ca_validity);
      if (!ca.ok()) return ca.status();
      out.ca_crt = ca->cert_pem;
      out.ca_key = ca->key_pem;
      DRAGUARD_RETURN_IF_ERROR(issue_leaf(out));
      return out;
    }
    case Action::kRotateCa: {
      auto ca = GenerateCa("draguard-webhook-ca", nb, now + p.ca_validity);
      if (!ca.ok()) return ca.status();
      auto bundle = SplitBundle(m.ca_crt);
      if (!bundle.ok()) return bundle.status();
      out.ca_crt = ca->cert_pem;
      for (const auto& c : *bundle) {
        auto f = Inspect(c);
        if (f.ok() && now < f->not_after) out.ca_crt += c;
      }
      out.ca_key = ca->key_pem;  // the serving certificate stays until the bundle propagated
      return out;
    }
    case Action::kRenewLeaf:
      DRAGUARD_RETURN_IF_ERROR(issue_leaf(out));
      return out;
    case Action::kDropExpiredCa: {
      auto bundle = SplitBundle(m.ca_crt);
      if (!bundle.ok()) return bundle.status();
      out.ca_crt = bundle->front();
      for (std::size_t i = 1; i < bundle->size(); ++i) {
        auto f = Inspect((*bundle)[i]);
        if (f.ok() && now < f->not_after) out.ca_crt += (*bundle)[i];
      }
      return out;
    }
  }
  return Status::Internal("unknown action");
}

Result<Material> Converge(const Material& m, const std::vector<std::string>& dns, TimePoint now,
                          const RotationPolicy& p, std::vector<Decision>* steps) {
  Material cur = m;
  for (int i = 0; i < 6; ++i) {
    Decision d = Decide(cur, dns, now, p);
    if (d.action == Action::kNone) return cur;
    if (steps != nullptr) steps->push_back(d);
    auto next = Apply(d.action, cur, dns, now, p);
    if (!next.ok()) return next.status();
    cur = std::move(next).value();
  }
  return Status::Internal("certificate plan did not converge");
}

}  // namespace draguard::certs
