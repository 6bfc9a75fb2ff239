// Certificates for tls.mode=self: a CA and serving certificates with explicit validity (so that
// rotation can be tested with an injected clock), PEM bundle handling and the facts the
// rotation plan needs. OpenSSL types never leave the certs module.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "draguard/status.h"

namespace draguard::certs {

/// Wall-clock time of certificate validity (whole seconds are what X.509 stores).
using TimePoint = std::chrono::system_clock::time_point;

/// A PEM certificate and its PEM private key.
struct PemPair {
  std::string cert_pem;  ///< one certificate
  std::string key_pem;   ///< its private key (PKCS#8 PEM)
};

/// What the rotation plan needs to know about one certificate.
struct CertFacts {
  TimePoint not_before;           ///< start of validity
  TimePoint not_after;            ///< end of validity
  bool is_ca = false;             ///< basicConstraints CA:TRUE
  std::vector<std::string> dns;   ///< DNS subjectAltNames
  std::vector<std::string> ips;   ///< IP subjectAltNames, in CanonicalIp form
  std::string fingerprint;        ///< SHA-256 of the DER, lower-case hex
};

/// A self-signed EC P-256 CA valid from `not_before` to `not_after`.
Result<PemPair> GenerateCa(const std::string& common_name, TimePoint not_before, TimePoint not_after);

/// An EC P-256 serving certificate (serverAuth) for `names` signed by `ca`: IP address literals
/// become IP SANs, the others DNS SANs; CN = the first DNS name (else the first name).
Result<PemPair> IssueServing(const PemPair& ca, const std::vector<std::string>& names, TimePoint not_before,
                             TimePoint not_after);

/// The text form of an IPv4 or IPv6 address literal as inet_ntop writes it ("::1",
/// "127.0.0.1"); "" when `name` is not one (a DNS name).
std::string CanonicalIp(const std::string& name);

/// Facts of one PEM certificate. InvalidArgument when it does not parse.
Result<CertFacts> Inspect(const std::string& cert_pem);

/// Splits a PEM bundle into its certificates (each re-encoded as PEM). InvalidArgument when a
/// block does not parse or the bundle holds none.
Result<std::vector<std::string>> SplitBundle(const std::string& bundle_pem);

/// True when `key_pem` is the private key of `cert_pem`.
bool KeyMatches(const std::string& cert_pem, const std::string& key_pem);

/// True when `ca_pem` signed `cert_pem` (issuer name and signature).
bool SignedBy(const std::string& cert_pem, const std::string& ca_pem);

/// Writes `data` to `dir`/`name` (mode 0600) through a fresh mkstemp file in `dir` and a rename,
/// so a planted file or symlink is never written through. `dir` is created 0700 if missing and
/// must be a real directory (not a symlink) owned by this user.
Status WritePrivateFile(const std::string& dir, const std::string& name, const std::string& data);

}  // namespace draguard::certs
