// OpenSSL helpers shared by the server and certs modules (internal; OpenSSL types stay there).
#pragma once

#include <cstdint>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

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

/// A version-3 certificate with a random positive 128-bit serial, subject O=draguard/CN=cn,
/// valid from `not_before` to `not_after` (Unix seconds) for public key `pub`; not signed yet.
Result<X509Ptr> NewCert(EVP_PKEY* pub, const std::string& cn, std::time_t not_before, std::time_t not_after);

/// Unix seconds of an ASN.1 time (0 when null or unreadable).
int64_t UnixOf(const ASN1_TIME* t);

/// A certificate and its new private key, as PEM text.
struct IssuedPem {
  std::string cert_pem;
  std::string key_pem;
};

/// A new EC P-256 key and a self-signed CA certificate for it (CA:TRUE, pathlen 0, keyCertSign
/// and cRLSign) with subject O=draguard/CN=cn, valid from `not_before` to `not_after`.
Result<IssuedPem> SelfSignedCa(const std::string& cn, std::time_t not_before, std::time_t not_after);

/// A new EC P-256 key and a leaf certificate for it signed by the CA of PEM `ca_cert_pem` /
/// `ca_key_pem`: CA:FALSE, digitalSignature, extended key usage `eku` (OpenSSL syntax, e.g.
/// "serverAuth,clientAuth"; "" = none), subjectAltName `sans` ("DNS:x" / "IP:y"; none = no SAN
/// extension).
Result<IssuedPem> IssueLeaf(const std::string& ca_cert_pem, const std::string& ca_key_pem, const std::string& cn,
                            const std::vector<std::string>& sans, const std::string& eku, std::time_t not_before,
                            std::time_t not_after);

/// Adds the X.509v3 extension `nid` = `value` (OpenSSL config syntax) to `cert`, issued by `issuer`.
Status AddExt(X509* cert, X509* issuer, int nid, const std::string& value);

}  // namespace draguard::x509util
