// TLS material: a small PKI for the embedded defaults and tests, and the hot-reloading source
// of the serving certificate. OpenSSL types never leave the server module.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "draguard/status.h"

namespace draguard::server {

/// A PEM-encoded certificate (possibly followed by its chain) and private key.
struct PemPair {
  std::string cert_pem;
  std::string key_pem;
};

/// What to put in an issued certificate.
struct IssueOptions {
  std::string common_name;         ///< subject CN
  std::vector<std::string> dns;    ///< DNS SANs
  std::vector<std::string> ips;    ///< IP SANs (IPv4/IPv6 text)
  bool server_auth = true;         ///< extendedKeyUsage serverAuth
  bool client_auth = false;        ///< extendedKeyUsage clientAuth
  int days = 365;                  ///< validity from now (may be negative for tests)
};

/// Creates a self-signed EC P-256 / SHA-256 CA certificate and key.
Result<PemPair> CreateCertificateAuthority(const std::string& common_name, int days);

/// Issues an EC P-256 leaf certificate signed by `ca` (SHA-256).
Result<PemPair> IssueCertificate(const PemPair& ca, const IssueOptions& options);

/// Files of the generated default PKI in the state folder.
struct StatePaths {
  std::string ca_cert;   ///< <dir>/ca.crt — give this to clients (curl --cacert)
  std::string ca_key;    ///< <dir>/ca.key
  std::string tls_cert;  ///< <dir>/tls.crt
  std::string tls_key;   ///< <dir>/tls.key
  bool generated = false;  ///< false when existing files were reused
};

/// Ensures `dir` holds a CA and a serving certificate valid for `dns` and `ips` for at least 30
/// more days; reuses valid files, else (re)generates them. Files are written 0600, the folder 0700.
Result<StatePaths> EnsureStateCertificates(const std::string& dir,
                                           const std::vector<std::string>& dns,
                                           const std::vector<std::string>& ips);

/// Writes `data` to `path` atomically with mode `mode` (draguard::WriteFileAtomic: an exclusive,
/// never-followed temporary file, fsync, rename).
Status WriteFileAtomic(const std::string& path, const std::string& data, unsigned mode = 0600);

/// Facts about a loaded certificate.
struct CertificateInfo {
  std::string common_name;
  std::vector<std::string> sans;  ///< "DNS:x" / "IP:y"
  int64_t not_before_unix = 0;
  int64_t not_after_unix = 0;
};

struct KeyPair;  // opaque: X509 + EVP_PKEY + chain, defined in tls.cc

/// The serving certificate, loaded from files and replaceable at run time. A new pair is
/// installed only if it parses, the key matches the certificate, it is valid now (not before
/// notBefore, not after notAfter) and its SANs cover every required name; otherwise the old
/// pair keeps serving. Thread-safe.
class CertificateSource {
 public:
  /// Called after every (re)load attempt.
  using ReloadCallback = std::function<void(const Status&, const CertificateInfo&)>;

  /// `required_names`: DNS names the certificate's SANs must cover (RFC 6125 matching, wildcards
  /// included, the subject CN never counts); empty = no SAN check. Not given: every SAN (DNS
  /// and IP) of the certificate being replaced, so that a reload never drops a name that
  /// clients verify (the first load has no such names).
  CertificateSource(std::string cert_path, std::string key_path, ReloadCallback on_reload = nullptr,
                    std::optional<std::vector<std::string>> required_names = std::nullopt);
  ~CertificateSource();

  /// (Re)loads the files. On failure the previous pair is kept and the error returned.
  Status Reload();
  /// The pair handshakes use now (null before the first successful load).
  std::shared_ptr<const KeyPair> Current() const;
  /// Facts about the current certificate.
  CertificateInfo Info() const;
  /// True when a pair is loaded and `now` lies within its validity (readiness: an expired
  /// current certificate fails every verified handshake).
  bool Usable(std::chrono::system_clock::time_point now) const;
  /// Number of successful loads so far.
  uint64_t generation() const;
  /// Paths being served.
  const std::string& cert_path() const { return cert_path_; }
  const std::string& key_path() const { return key_path_; }

 private:
  std::string cert_path_, key_path_;
  ReloadCallback on_reload_;
  std::optional<std::vector<std::string>> required_names_;
  mutable std::mutex mu_;
  std::shared_ptr<const KeyPair> current_;
  CertificateInfo info_;
  uint64_t generation_ = 0;
};

}  // namespace draguard::server
