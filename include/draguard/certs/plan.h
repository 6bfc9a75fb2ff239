// The rotation plan of tls.mode=self: what to do with the Secret's certificates at a given time.
// Decide is a pure function of the Secret's contents, the wanted DNS names, the time and the
// lifetimes; Apply performs one decided step in memory (it generates keys, never does I/O).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "draguard/certs/pki.h"
#include "draguard/status.h"

namespace draguard::certs {

/// The four keys of the Secret (PEM text, already base64-decoded).
struct Material {
  bool exists = false;  ///< false = there is no Secret yet
  std::string tls_crt;  ///< the serving certificate
  std::string tls_key;  ///< its key
  std::string ca_crt;   ///< the CA bundle: the signing CA first, then older CAs still trusted
  std::string ca_key;   ///< the key of the signing CA (the bundle's first certificate)
};

/// Lifetimes and thresholds.
struct RotationPolicy {
  std::chrono::seconds ca_validity{std::chrono::hours(24 * 3650)};   ///< a new CA's lifetime
  std::chrono::seconds leaf_validity{std::chrono::hours(24 * 365)};  ///< a new serving cert's lifetime
  /// Renew a certificate once this fraction of its lifetime has passed (the CA likewise: the
  /// rest of the old CA's lifetime is the overlap during which both CAs are in the bundle).
  double renew_fraction = 2.0 / 3.0;
  /// After a CA rotation the serving certificate keeps coming from the old CA for this long, so
  /// that the new bundle reaches every API server before a certificate of the new CA is served.
  std::chrono::seconds propagation{std::chrono::minutes(10)};
  /// notBefore is set this far in the past to tolerate clock skew.
  std::chrono::seconds backdate{std::chrono::minutes(5)};
};

/// One step of the plan.
enum class Action {
  kNone,           ///< the Secret is fine as it is
  kCreate,         ///< no Secret: a new CA and serving certificate
  kReplace,        ///< unusable Secret (bad PEM, wrong key, expired CA): start over
  kRotateCa,       ///< the signing CA passed its renewal point: a new CA, the old one stays in the bundle
  kRenewLeaf,      ///< a new serving certificate from the signing CA
  kDropExpiredCa,  ///< remove expired CAs from the bundle
};

/// The action's name for logs ("create", "renew-leaf", ...).
const char* ActionName(Action a);

/// An action and why.
struct Decision {
  Action action = Action::kNone;  ///< what to do
  std::string reason;             ///< why, for logs
};

/// Decides the next step for `m` at `now` for a serving certificate covering `dns` (DNS names
/// and IP address literals; see IssueServing). Pure.
Decision Decide(const Material& m, const std::vector<std::string>& dns, TimePoint now, const RotationPolicy& p);

/// Performs `action` on `m` (validity relative to `now`) and returns the new contents.
Result<Material> Apply(Action action, const Material& m, const std::vector<std::string>& dns, TimePoint now,
                       const RotationPolicy& p);

/// Decide/Apply until kNone (at most a few steps). `steps` receives the actions taken.
Result<Material> Converge(const Material& m, const std::vector<std::string>& dns, TimePoint now,
                          const RotationPolicy& p, std::vector<Decision>* steps = nullptr);

/// The four service DNS names: svc, svc.ns, svc.ns.svc, svc.ns.svc.cluster.local.
std::vector<std::string> ServiceDnsNames(const std::string& service, const std::string& namespace_name);

}  // namespace draguard::certs
