// OpenSSL-facing internals of the server module.
#pragma once

#include <string>
#include <vector>

#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "draguard/server/tls.h"

namespace draguard::server {

/// A certificate, its key and its chain; owns the OpenSSL objects.
struct KeyPair {
  X509* cert = nullptr;
  EVP_PKEY* key = nullptr;
  STACK_OF(X509)* chain = nullptr;
  ~KeyPair();
};

/// Settings of the server-side TLS context.
struct TlsContextOptions {
  const CertificateSource* certificates = nullptr;  ///< consulted on every handshake
  std::string client_ca;                            ///< PEM file; empty = no client certs
  std::vector<std::string> client_cns;              ///< allowed client CNs; empty = any
};

/// True when some subject CN of `leaf`, compared as exact bytes (UTF-8) and length, is in
/// `allowed`. False without a CN, and for any CN with an embedded NUL.
bool ClientCommonNameAllowed(X509* leaf, const std::vector<std::string>& allowed);

/// Configures `ctx`: TLS ≥ 1.2, ECDHE + AEAD only, no compression or renegotiation, the
/// certificate chosen per handshake from `options.certificates`, optional client verification.
/// `options` must outlive the context. Returns false on failure.
bool ConfigureServerContext(SSL_CTX* ctx, const TlsContextOptions* options, std::string* error);

}  // namespace draguard::server
