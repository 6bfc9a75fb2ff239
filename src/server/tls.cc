#include "draguard/server/tls.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <memory>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "draguard/read_file.h"
#include "draguard/write_file.h"
#include "tls_internal.h"
#include "x509util.h"

namespace draguard::server {
namespace {

using x509util::BioPtr;
using x509util::OpenSslError;
using x509util::ParseCert;
using x509util::ParseKey;
using x509util::PkeyPtr;

using x509util::UnixOf;

int64_t NotAfterUnix(X509* x) { return UnixOf(X509_get0_notAfter(x)); }

CertificateInfo InfoOf(X509* x) {
  CertificateInfo info;
  char cn[256] = {0};
  if (X509_NAME_get_text_by_NID(X509_get_subject_name(x), NID_commonName, cn, sizeof cn) > 0) {
    info.common_name = cn;
  }
  info.not_before_unix = UnixOf(X509_get0_notBefore(x));
  info.not_after_unix = NotAfterUnix(x);
  auto* names = static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(x, NID_subject_alt_name, nullptr, nullptr));
  if (names != nullptr) {
    for (int i = 0; i < sk_GENERAL_NAME_num(names); ++i) {
      const GENERAL_NAME* gn = sk_GENERAL_NAME_value(names, i);
      if (gn->type == GEN_DNS) {
        const auto* s = ASN1_STRING_get0_data(gn->d.dNSName);
        info.sans.push_back("DNS:" + std::string(reinterpret_cast<const char*>(s),
                                                 ASN1_STRING_length(gn->d.dNSName)));
      } else if (gn->type == GEN_IPADD) {
        const unsigned char* b = ASN1_STRING_get0_data(gn->d.iPAddress);
        int len = ASN1_STRING_length(gn->d.iPAddress);
        char text[INET6_ADDRSTRLEN] = {0};
        if ((len == 4 && inet_ntop(AF_INET, b, text, sizeof text) != nullptr) ||
            (len == 16 && inet_ntop(AF_INET6, b, text, sizeof text) != nullptr)) {
          info.sans.push_back(std::string("IP:") + text);
        }
      }
    }
    GENERAL_NAMES_free(names);
  }
  return info;
}

// "2026-12-01T18:00:00Z".
std::string FormatUnix(int64_t t) {
  const std::time_t tt = static_cast<std::time_t>(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string JoinSans(const std::vector<std::string>& sans) {
  std::string out;
  for (const auto& s : sans) out += (out.empty() ? "" : ", ") + s;
  return out.empty() ? "none" : out;
}

// Whether `cert` (with SANs `sans`) still serves `san` ("DNS:x" / "IP:y") of another certificate:
// the same SAN, or a name its SANs match (the CN never counts).
bool CoversSan(X509* cert, const std::vector<std::string>& sans, const std::string& san) {
  for (const auto& s : sans) {
    if (s.size() == san.size() &&
        std::equal(s.begin(), s.end(), san.begin(), [](char a, char b) { return std::tolower(a) == std::tolower(b); })) {
      return true;
    }
  }
  int ok = 0;
  if (san.rfind("DNS:", 0) == 0 && san.find('*') == std::string::npos) {
    const std::string name = san.substr(4);
    ok = X509_check_host(cert, name.data(), name.size(), X509_CHECK_FLAG_NEVER_CHECK_SUBJECT, nullptr);
  } else if (san.rfind("IP:", 0) == 0) {
    ok = X509_check_ip_asc(cert, san.c_str() + 3, 0);
  }
  ERR_clear_error();
  return ok == 1;
}

}  // namespace

Result<PemPair> CreateCertificateAuthority(const std::string& common_name, int days) {
  const std::time_t now = std::time(nullptr);
  auto ca = x509util::SelfSignedCa(common_name, now - 300, now + static_cast<std::time_t>(days) * 86400);
  if (!ca.ok()) return ca.status();
  return PemPair{std::move(ca->cert_pem), std::move(ca->key_pem)};
}

Result<PemPair> IssueCertificate(const PemPair& ca, const IssueOptions& options) {
  std::string eku;
  if (options.server_auth) eku = "serverAuth";
  if (options.client_auth) eku += std::string(eku.empty() ? "" : ",") + "clientAuth";
  std::vector<std::string> sans;
  for (const auto& d : options.dns) sans.push_back("DNS:" + d);
  for (const auto& ip : options.ips) sans.push_back("IP:" + ip);
  const std::time_t now = std::time(nullptr);
  auto leaf = x509util::IssueLeaf(ca.cert_pem, ca.key_pem, options.common_name, sans, eku, now - 300,
                                  now + static_cast<std::time_t>(options.days) * 86400);
  if (!leaf.ok()) return leaf.status();
  return PemPair{std::move(leaf->cert_pem), std::move(leaf->key_pem)};
}

Status WriteFileAtomic(const std::string& path, const std::string& data, unsigned mode) {
  return draguard::WriteFileAtomic(path, data, mode);
}

namespace {

// True when the state folder's files can be reused as they are.
bool Reusable(const StatePaths& p, const std::vector<std::string>& dns,
              const std::vector<std::string>& ips) {
  auto ca_pem = ReadFile(p.ca_cert);
  auto crt_pem = ReadFile(p.tls_cert);
  auto key_pem = ReadFile(p.tls_key);
  if (!ca_pem.ok() || !crt_pem.ok() || !key_pem.ok() || !ReadFile(p.ca_key).ok()) return false;
  auto ca = ParseCert(*ca_pem);
  auto crt = ParseCert(*crt_pem);
  auto key = ParseKey(*key_pem);
  if (!ca.ok() || !crt.ok() || !key.ok()) return false;
  if (X509_check_private_key(crt->get(), key->get()) != 1) {
    ERR_clear_error();
    return false;
  }
  int64_t min_left = static_cast<int64_t>(std::time(nullptr)) + 30 * 86400;
  if (NotAfterUnix(crt->get()) < min_left || NotAfterUnix(ca->get()) < min_left) return false;
  PkeyPtr ca_pub(X509_get_pubkey(ca->get()));
  if (!ca_pub || X509_verify(crt->get(), ca_pub.get()) != 1) {
    ERR_clear_error();
    return false;
  }
  CertificateInfo info = InfoOf(crt->get());
  auto has = [&](const std::string& s) {
    for (const auto& x : info.sans) {
      if (x == s) return true;
    }
    return false;
  };
  for (const auto& d : dns) {
    if (!has("DNS:" + d)) return false;
  }
  for (const auto& ip : ips) {
    if (!has("IP:" + ip)) return false;
  }
  return true;
}

}  // namespace

Result<StatePaths> EnsureStateCertificates(const std::string& dir,
                                           const std::vector<std::string>& dns,
                                           const std::vector<std::string>& ips) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return Status::Unavailable("cannot create state folder " + dir + ": " + std::strerror(errno));
  }
  // The keys go nowhere else: a real folder (not a symlink) owned by this user, 0700.
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid()) {
    return Status::FailedPrecondition("state folder " + dir + " is not a directory owned by this user");
  }
  if ((st.st_mode & 077) != 0) ::chmod(dir.c_str(), 0700);
  StatePaths p;
  p.ca_cert = dir + "/ca.crt";
  p.ca_key = dir + "/ca.key";
  p.tls_cert = dir + "/tls.crt";
  p.tls_key = dir + "/tls.key";
  if (Reusable(p, dns, ips)) return p;
  auto ca = CreateCertificateAuthority("draguard-ca", 3650);
  if (!ca.ok()) return ca.status();
  IssueOptions opt;
  opt.common_name = dns.empty() ? "draguard" : dns.front();
  opt.dns = dns;
  opt.ips = ips;
  opt.days = 365;
  auto leaf = IssueCertificate(*ca, opt);
  if (!leaf.ok()) return leaf.status();
  DRAGUARD_RETURN_IF_ERROR(WriteFileAtomic(p.ca_key, ca->key_pem));
  DRAGUARD_RETURN_IF_ERROR(WriteFileAtomic(p.ca_cert, ca->cert_pem));
  DRAGUARD_RETURN_IF_ERROR(WriteFileAtomic(p.tls_key, leaf->key_pem));
  DRAGUARD_RETURN_IF_ERROR(WriteFileAtomic(p.tls_cert, leaf->cert_pem));
  p.generated = true;
  return p;
}

KeyPair::~KeyPair() {
  if (cert != nullptr) X509_free(cert);
  if (key != nullptr) EVP_PKEY_free(key);
  if (chain != nullptr) sk_X509_pop_free(chain, X509_free);
}

CertificateSource::CertificateSource(std::string cert_path, std::string key_path,
                                     ReloadCallback on_reload,
                                     std::optional<std::vector<std::string>> required_names)
    : cert_path_(std::move(cert_path)),
      key_path_(std::move(key_path)),
      on_reload_(std::move(on_reload)),
      required_names_(std::move(required_names)) {}

CertificateSource::~CertificateSource() = default;

Status CertificateSource::Reload() {
  auto fail = [&](Status s) {
    if (on_reload_) on_reload_(s, Info());
    return s;
  };
  auto cert_pem = ReadFile(cert_path_);
  if (!cert_pem.ok()) return fail(cert_pem.status());
  auto key_pem = ReadFile(key_path_);
  if (!key_pem.ok()) return fail(key_pem.status());

  auto pair = std::make_shared<KeyPair>();
  {
    BioPtr bio(BIO_new_mem_buf(cert_pem->data(), static_cast<int>(cert_pem->size())));
    pair->cert = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr);
    if (pair->cert == nullptr) {
      return fail(Status::InvalidArgument(cert_path_ + ": no PEM certificate: " + OpenSslError()));
    }
    pair->chain = sk_X509_new_null();
    while (X509* extra = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
      sk_X509_push(pair->chain, extra);
    }
    ERR_clear_error();  // end of PEM stream
  }
  auto key = ParseKey(*key_pem);
  if (!key.ok()) return fail(Status::InvalidArgument(key_path_ + ": " + key.status().message()));
  pair->key = key->release();
  if (X509_check_private_key(pair->cert, pair->key) != 1) {
    ERR_clear_error();
    return fail(Status::InvalidArgument("private key " + key_path_ +
                                        " does not match certificate " + cert_path_));
  }
  CertificateInfo info = InfoOf(pair->cert);
  if (X509_cmp_current_time(X509_get0_notAfter(pair->cert)) <= 0) {
    return fail(Status::FailedPrecondition("certificate " + cert_path_ + " has expired (notAfter " +
                                           FormatUnix(info.not_after_unix) + ")"));
  }
  if (X509_cmp_current_time(X509_get0_notBefore(pair->cert)) > 0) {
    return fail(Status::FailedPrecondition("certificate " + cert_path_ + " is not valid yet (notBefore " +
                                           FormatUnix(info.not_before_unix) + ")"));
  }
  for (const auto& name : required_names_.value_or(std::vector<std::string>{})) {
    // The API server verifies the service name against the DNS SANs only (never the CN).
    if (X509_check_host(pair->cert, name.data(), name.size(), X509_CHECK_FLAG_NEVER_CHECK_SUBJECT, nullptr) != 1) {
      ERR_clear_error();
      return fail(Status::FailedPrecondition("certificate " + cert_path_ + " does not cover " + name +
                                             " (its SANs: " + JoinSans(info.sans) + ")"));
    }
  }
  if (!required_names_) {
    // No names configured: the names clients verify today are those of the pair in service.
    const CertificateInfo serving = Info();
    for (const auto& san : serving.sans) {
      if (!CoversSan(pair->cert, info.sans, san)) {
        return fail(Status::FailedPrecondition(
            "certificate " + cert_path_ + " drops " + san + " of the certificate in service (its SANs: " +
            JoinSans(info.sans) + "; set --tls-required-names to change the names served)"));
      }
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    current_ = std::move(pair);
    info_ = info;
    ++generation_;
  }
  if (on_reload_) on_reload_(Status::Ok(), info);
  return Status::Ok();
}

std::shared_ptr<const KeyPair> CertificateSource::Current() const {
  std::lock_guard<std::mutex> lock(mu_);
  return current_;
}

CertificateInfo CertificateSource::Info() const {
  std::lock_guard<std::mutex> lock(mu_);
  return info_;
}

bool CertificateSource::Usable(std::chrono::system_clock::time_point now) const {
  const int64_t t = std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
  std::lock_guard<std::mutex> lock(mu_);
  return current_ != nullptr && info_.not_before_unix <= t && t < info_.not_after_unix;
}

uint64_t CertificateSource::generation() const {
  std::lock_guard<std::mutex> lock(mu_);
  return generation_;
}

}  // namespace draguard::server
