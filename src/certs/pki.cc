#include "draguard/certs/pki.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <memory>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "draguard/write_file.h"
#include "x509util.h"

namespace draguard::certs {
namespace {

using x509util::OpenSslError;
using x509util::ParseCert;
using x509util::ParseKey;
using x509util::PkeyPtr;

time_t ToTimeT(TimePoint t) { return std::chrono::system_clock::to_time_t(t); }

TimePoint FromAsn1(const ASN1_TIME* t) { return std::chrono::system_clock::from_time_t(x509util::UnixOf(t)); }

}  // namespace

Result<PemPair> GenerateCa(const std::string& common_name, TimePoint not_before, TimePoint not_after) {
  auto ca = x509util::SelfSignedCa(common_name, ToTimeT(not_before), ToTimeT(not_after));
  if (!ca.ok()) return ca.status();
  return PemPair{std::move(ca->cert_pem), std::move(ca->key_pem)};
}

std::string CanonicalIp(const std::string& name) {
  unsigned char addr[sizeof(struct in6_addr)];
  char text[INET6_ADDRSTRLEN];
  for (int family : {AF_INET, AF_INET6}) {
    if (inet_pton(family, name.c_str(), addr) == 1 && inet_ntop(family, addr, text, sizeof text) != nullptr) {
      return text;
    }
  }
  return "";
}

Result<PemPair> IssueServing(const PemPair& ca, const std::vector<std::string>& names, TimePoint not_before,
                             TimePoint not_after) {
  if (names.empty()) return Status::InvalidArgument("a serving certificate needs at least one name");
  std::vector<std::string> sans;
  std::string cn;
  for (const auto& n : names) {
    const std::string ip = CanonicalIp(n);
    sans.push_back(ip.empty() ? "DNS:" + n : "IP:" + ip);
    if (ip.empty() && cn.empty()) cn = n;
  }
  auto leaf = x509util::IssueLeaf(ca.cert_pem, ca.key_pem, cn.empty() ? names.front() : cn, sans, "serverAuth",
                                  ToTimeT(not_before), ToTimeT(not_after));
  if (!leaf.ok()) return leaf.status();
  return PemPair{std::move(leaf->cert_pem), std::move(leaf->key_pem)};
}

Result<CertFacts> Inspect(const std::string& cert_pem) {
  auto x = ParseCert(cert_pem);
  if (!x.ok()) return x.status();
  CertFacts f;
  f.not_before = FromAsn1(X509_get0_notBefore(x->get()));
  f.not_after = FromAsn1(X509_get0_notAfter(x->get()));
  f.is_ca = X509_check_ca(x->get()) != 0;
  auto* names = static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(x->get(), NID_subject_alt_name, nullptr, nullptr));
  if (names != nullptr) {
    for (int i = 0; i < sk_GENERAL_NAME_num(names); ++i) {
      const GENERAL_NAME* gn = sk_GENERAL_NAME_value(names, i);
      if (gn->type == GEN_IPADD) {
        const int len = ASN1_STRING_length(gn->d.iPAddress);
        char text[INET6_ADDRSTRLEN];
        if ((len == 4 || len == 16) &&
            inet_ntop(len == 4 ? AF_INET : AF_INET6, ASN1_STRING_get0_data(gn->d.iPAddress), text, sizeof text) != nullptr) {
          f.ips.emplace_back(text);
        }
        continue;
      }
      if (gn->type != GEN_DNS) continue;
      const auto* s = ASN1_STRING_get0_data(gn->d.dNSName);
      f.dns.emplace_back(reinterpret_cast<const char*>(s), static_cast<std::size_t>(ASN1_STRING_length(gn->d.dNSName)));
    }
    GENERAL_NAMES_free(names);
  }
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (X509_digest(x->get(), EVP_sha256(), md, &n) != 1) return Status::Internal(OpenSslError());
  static const char* kHex = "0123456789abcdef";
  for (unsigned i = 0; i < n; ++i) {
    f.fingerprint += kHex[md[i] >> 4];
    f.fingerprint += kHex[md[i] & 15];
  }
  ERR_clear_error();
  return f;
}

Result<std::vector<std::string>> SplitBundle(const std::string& bundle_pem) {
  static constexpr std::string_view kBegin = "-----BEGIN CERTIFICATE-----";
  static constexpr std::string_view kEnd = "-----END CERTIFICATE-----";
  std::vector<std::string> out;
  std::size_t pos = 0;
  while ((pos = bundle_pem.find(kBegin, pos)) != std::string::npos) {
    std::size_t end = bundle_pem.find(kEnd, pos);
    if (end == std::string::npos) return Status::InvalidArgument("unterminated PEM certificate in bundle");
    end += kEnd.size();
    auto x = ParseCert(bundle_pem.substr(pos, end - pos) + "\n");
    if (!x.ok()) return x.status();
    auto pem = x509util::CertToPem(x->get());
    if (!pem.ok()) return pem.status();
    out.push_back(*pem);
    if (out.size() > 64) return Status::InvalidArgument("CA bundle holds more than 64 certificates");
    pos = end;
  }
  if (out.empty()) return Status::InvalidArgument("no PEM certificate in bundle");
  return out;
}

bool KeyMatches(const std::string& cert_pem, const std::string& key_pem) {
  auto x = ParseCert(cert_pem);
  auto k = ParseKey(key_pem);
  bool ok = x.ok() && k.ok() && X509_check_private_key(x->get(), k->get()) == 1;
  ERR_clear_error();
  return ok;
}

bool SignedBy(const std::string& cert_pem, const std::string& ca_pem) {
  auto x = ParseCert(cert_pem);
  auto ca = ParseCert(ca_pem);
  if (!x.ok() || !ca.ok()) return false;
  if (X509_NAME_cmp(X509_get_issuer_name(x->get()), X509_get_subject_name(ca->get())) != 0) return false;
  PkeyPtr pub(X509_get_pubkey(ca->get()));
  bool ok = pub && X509_verify(x->get(), pub.get()) == 1;
  ERR_clear_error();
  return ok;
}

Status WritePrivateFile(const std::string& dir, const std::string& name, const std::string& data) {
  if (name.empty() || name.find('/') != std::string::npos) return Status::InvalidArgument("bad file name " + name);
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return Status::Unavailable("cannot create " + dir + ": " + std::strerror(errno));
  }
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid()) {
    return Status::FailedPrecondition(dir + " is not a directory owned by this user");
  }
  if ((st.st_mode & 077) != 0) ::chmod(dir.c_str(), 0700);
  return WriteFileAtomic(dir + "/" + name, data, 0600);
}

}  // namespace draguard::certs
