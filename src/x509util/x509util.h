// OpenSSL helpers shared by the server and certs modules (internal; OpenSSL types stay there).
#pragma once

#include <memory>
#include <string>

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/x509.h>

#include "draguard/status.h"

namespace draguard::x509util {

/// Frees an OpenSSL object with its free function.
template <typename T, void (*F)(T*)>
struct Deleter {
  void operator()(T* p) const { F(p); }
};
using BioPtr = std::unique_ptr<BIO, Deleter<BIO, BIO_free_all>>;
using X509Ptr = std::unique_ptr<X509, Deleter<X509, X509_free>>;
using PkeyPtr = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY, EVP_PKEY_free>>;

/// The first queued OpenSSL error as text ("unknown OpenSSL error" when none); clears the queue.
std::string OpenSslError();

/// PEM text of a certificate.
Result<std::string> CertToPem(X509* cert);
/// PEM text (PKCS#8, unencrypted) of a private key.
Result<std::string> KeyToPem(EVP_PKEY* key);

/// The first certificate of PEM text (at most 1 MiB).
Result<X509Ptr> ParseCert(const std::string& pem);
/// The private key of PEM text (at most 1 MiB).
Result<PkeyPtr> ParseKey(const std::string& pem);

/// Adds the X.509v3 extension `nid` = `value` (OpenSSL config syntax) to `cert`, issued by `issuer`.
Status AddExt(X509* cert, X509* issuer, int nid, const std::string& value);

}  // namespace draguard::x509util
