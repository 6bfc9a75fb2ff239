#include "x509util.h"

#include <openssl/err.h>
#include <openssl/pem.h>
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
