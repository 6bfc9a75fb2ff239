#include "draguard/certs/pki.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <memory>

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "draguard/write_file.h"
#include "x509util.h"

namespace draguard::certs {
namespace {

using x509util::AddExt;
using x509util::BioPtr;
using x509util::OpenSslError;
using x509util::ParseCert;
using x509util::ParseKey;
using x509util::PkeyPtr;
using x509util::X509Ptr;

time_t ToTimeT(TimePoint t) { return std::chrono::system_clock::to_time_t(t); }

TimePoint FromAsn1(const ASN1_TIME* t) {
  std::tm tm{};
  if (t == nullptr || ASN1_TIME_to_tm(t, &tm) != 1) return TimePoint{};
  return std::chrono::system_clock::from_time_t(timegm(&tm));
}

// A certificate with a random serial, subject O=draguard/CN=cn, the given validity and key.
Result<X509Ptr> NewCert(EVP_PKEY* pub, const std::string& cn, TimePoint not_before, TimePoint not_after) {
  if (not_after <= not_before) return Status::InvalidArgument("certificate validity ends before it starts");
  X509Ptr x(X509_new());
  if (!x) return Status::Internal(OpenSslError());
  X509_set_version(x.get(), 2);
  unsigned char serial[16];
  if (RAND_bytes(serial, sizeof serial) != 1) return Status::Internal(OpenSslError());
  serial[0] &= 0x7F;
  BIGNUM* bn = BN_bin2bn(serial, sizeof serial, nullptr);
  ASN1_INTEGER* ai = BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x.get()));
  BN_free(bn);
  if (ai == nullptr) return Status::Internal(OpenSslError());
  if (ASN1_TIME_set(X509_getm_notBefore(x.get()), ToTimeT(not_before)) == nullptr ||
      ASN1_TIME_set(X509_getm_notAfter(x.get()), ToTimeT(not_after)) == nullptr) {
    return Status::Internal(OpenSslError());
  }
  X509_NAME* name = X509_get_subject_name(x.get());
  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8, reinterpret_cast<const unsigned char*>("draguard"), -1, -1,
                             0);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, reinterpret_cast<const unsigned char*>(cn.c_str()), -1,
                             -1, 0);
  if (X509_set_pubkey(x.get(), pub) != 1) return Status::Internal(OpenSslError());
  return x;
}

Result<PemPair> Encode(X509* cert, EVP_PKEY* key) {
  auto c = x509util::CertToPem(cert);
  if (!c.ok()) return c.status();
  auto k = x509util::KeyToPem(key);
  if (!k.ok()) return k.status();
  return PemPair{*c, *k};
}

}  // namespace

Result<PemPair> GenerateCa(const std::string& common_name, TimePoint not_before, TimePoint not_after) {
  PkeyPtr key(EVP_EC_gen("P-256"));
  if (!key) return Status::Internal("EC key generation failed: " + OpenSslError());
  auto x = NewCert(key.get(), common_name, not_before, not_after);
  if (!x.ok()) return x.status();
  X509* cert = x->get();
  X509_set_issuer_name(cert, X509_get_subject_name(cert));
  DRAGUARD_RETURN_IF_ERROR(AddExt(cert, cert, NID_basic_constraints, "critical,CA:TRUE,pathlen:0"));
  DRAGUARD_RETURN_IF_ERROR(AddExt(cert, cert, NID_key_usage, "critical,keyCertSign,cRLSign"));
  DRAGUARD_RETURN_IF_ERROR(AddExt(cert, cert, NID_subject_key_identifier, "hash"));
  if (X509_sign(cert, key.get(), EVP_sha256()) == 0) return Status::Internal(OpenSslError());
  return Encode(cert, key.get());
}

Result<PemPair> IssueServing(const PemPair& ca, const std::vector<std::string>& dns, TimePoint not_before,
                             TimePoint not_after) {
  if (dns.empty()) return Status::InvalidArgument("a serving certificate needs at least one DNS name");
  auto ca_cert = ParseCert(ca.cert_pem);
  if (!ca_cert.ok()) return ca_cert.status();
  auto ca_key = ParseKey(ca.key_pem);
  if (!ca_key.ok()) return ca_key.status();
  PkeyPtr key(EVP_EC_gen("P-256"));
  if (!key) return Status::Internal("EC key generation failed: " + OpenSslError());
  auto x = NewCert(key.get(), dns.front(), not_before, not_after);
  if (!x.ok()) return x.status();
  X509* cert = x->get();
  X509* issuer = ca_cert->get();
  X509_set_issuer_name(cert, X509_get_subject_name(issuer));
  DRAGUARD_RETURN_IF_ERROR(AddExt(cert, issuer, NID_basic_constraints, "critical,CA:FALSE"));
  DRAGUARD_RETURN_IF_ERROR(AddExt(cert, issuer, NID_key_usage, "critical,digitalSignature"));
  DRAGUARD_RETURN_IF_ERROR(AddExt(cert, issuer, NID_ext_key_usage, "serverAuth"));
  std::string san;
  for (const auto& d : dns) san += (san.empty() ? "DNS:" : ",DNS:") + d;
  DRAGUARD_RETURN_IF_ERROR(AddExt(cert, issuer, NID_subject_alt_name, san));
  DRAGUARD_RETURN_IF_ERROR(AddExt(cert, issuer, NID_subject_key_identifier, "hash"));
  DRAGUARD_RETURN_IF_ERROR(AddExt(cert, issuer, NID_authority_key_identifier, "keyid:always"));
  if (X509_sign(cert, ca_key->get(), EVP_sha256()) == 0) return Status::Internal(OpenSslError());
  return Encode(cert, key.get());
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
