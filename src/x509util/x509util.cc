#include "x509util.h"

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>

namespace draguard::x509util {
namespace {

constexpr std::size_t kMaxPemBytes = std::size_t{1} << 20;

std::string BioToString(BIO* bio) {
  char* data = nullptr;
  long n = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<std::size_t>(n));
}

}  // namespace

std::string OpenSslError() {
  unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "unknown OpenSSL error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  return buf;
}

Result<X509Ptr> NewCert(EVP_PKEY* pub, const std::string& cn, std::time_t not_before, std::time_t not_after) {
  if (not_after <= not_before) return Status::InvalidArgument("certificate validity ends before it starts");
  X509Ptr x(X509_new());
  if (!x) return Status::Internal(OpenSslError());
  X509_set_version(x.get(), 2);
  unsigned char serial[16];
  if (RAND_bytes(serial, sizeof serial) != 1) return Status::Internal(OpenSslError());
  serial[0] &= 0x7F;  // positive
  BIGNUM* bn = BN_bin2bn(serial, sizeof serial, nullptr);
  ASN1_INTEGER* ai = BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x.get()));
  BN_free(bn);
  if (ai == nullptr) return Status::Internal(OpenSslError());
  if (ASN1_TIME_set(X509_getm_notBefore(x.get()), not_before) == nullptr ||
      ASN1_TIME_set(X509_getm_notAfter(x.get()), not_after) == nullptr) {
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

namespace {

Result<IssuedPem> SignAndEncode(X509* cert, EVP_PKEY* key, EVP_PKEY* signer) {
  if (X509_sign(cert, signer, EVP_sha256()) == 0) return Status::Internal(OpenSslError());
  auto c = CertToPem(cert);
  if (!c.ok()) return c.status();
  auto k = KeyToPem(key);
  if (!k.ok()) return k.status();
  return IssuedPem{*c, *k};
}

}  // namespace

Result<IssuedPem> SelfSignedCa(const std::string& cn, std::time_t not_before, std::time_t not_after) {
  PkeyPtr key(EVP_EC_gen("P-256"));
  if (!key) return Status::Internal("EC key generation failed: " + OpenSslError());
  auto x = NewCert(key.get(), cn, not_before, not_after);
  if (!x.ok()) return x.status();
  X509* cert = x->get();
  X509_set_issuer_name(cert, X509_get_subject_name(cert));
  DRAGUARD_RETURN_IF_ERROR(AddExt(cert, cert, NID_basic_constraints, "critical,CA:TRUE,pathlen:0"));
  DRAGUARD_RETURN_IF_ERROR(AddExt(cert, cert, NID_key_usage, "critical,keyCertSign,cRLSign"));
  DRAGUARD_RETURN_IF_ERROR(AddExt(cert, cert, NID_subject_key_identifier, "hash"));
  return SignAndEncode(cert, key.get(), key.get());
}

Result<IssuedPem> IssueLeaf(const std::string& ca_cert_pem, const std::string& ca_key_pem, const std::string& cn,
                            const std::vector<std::string>& sans, const std::string& eku, std::time_t not_before,
                            std::time_t not_after) {
  auto ca_cert = ParseCert(ca_cert_pem);
  if (!ca_cert.ok()) return ca_cert.status();
  auto ca_key = ParseKey(ca_key_pem);
  if (!ca_key.ok()) return ca_key.status();
  PkeyPtr key(EVP_EC_gen("P-256"));
  if (!key) return Status::Internal("EC key generation failed: " + OpenSslError());
  auto x = NewCert(key.get(), cn, not_before, not_after);
  if (!x.ok()) return x.status();
  X509* cert = x->get();
  X509* issuer = ca_cert->get();
  X509_set_issuer_name(cert, X509_get_subject_name(issuer));
  DRAGUARD_RETURN_IF_ERROR(AddExt(cert, issuer, NID_basic_constraints, "critical,CA:FALSE"));
  DRAGUARD_RETURN_IF_ERROR(AddExt(cert, issuer, NID_key_usage, "critical,digitalSignature"));
  if (!eku.empty()) DRAGUARD_RETURN_IF_ERROR(AddExt(cert, issuer, NID_ext_key_usage, eku));
  std::string san;
  for (const auto& s : sans) san += (san.empty() ? "" : ",") + s;
  if (!san.empty()) DRAGUARD_RETURN_IF_ERROR(AddExt(cert, issuer, NID_subject_alt_name, san));
  DRAGUARD_RETURN_IF_ERROR(AddExt(cert, issuer, NID_subject_key_identifier, "hash"));
  DRAGUARD_RETURN_IF_ERROR(AddExt(cert, issuer, NID_authority_key_identifier, "keyid:always"));
  return SignAndEncode(cert, key.get(), ca_key->get());
}

int64_t UnixOf(const ASN1_TIME* t) {
  std::tm tm{};
  if (t == nullptr || ASN1_TIME_to_tm(t, &tm) != 1) return 0;
  return static_cast<int64_t>(timegm(&tm));
}

Result<std::string> CertToPem(X509* cert) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_X509(bio.get(), cert) != 1) return Status::Internal(OpenSslError());
  return BioToString(bio.get());
}

Result<std::string> KeyToPem(EVP_PKEY* key) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return Status::Internal(OpenSslError());
  }
  return BioToString(bio.get());
}

Result<X509Ptr> ParseCert(const std::string& pem) {
  if (pem.size() > kMaxPemBytes) return Status::InvalidArgument("certificate larger than 1 MiB");
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  X509Ptr x(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  if (!x) return Status::InvalidArgument("not a PEM certificate: " + OpenSslError());
  return x;
}

Result<PkeyPtr> ParseKey(const std::string& pem) {
  if (pem.size() > kMaxPemBytes) return Status::InvalidArgument("key larger than 1 MiB");
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  PkeyPtr k(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  if (!k) return Status::InvalidArgument("not a PEM private key: " + OpenSslError());
  return k;
}

Status AddExt(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (ext == nullptr) return Status::Internal("extension " + value + ": " + OpenSslError());
  int ok = X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  if (ok != 1) return Status::Internal(OpenSslError());
  return Status::Ok();
}

}  // namespace draguard::x509util
