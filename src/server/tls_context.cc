#include <algorithm>
#include <cstring>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "tls_internal.h"
#include "x509util.h"

namespace draguard::server {
namespace {

// TLS 1.2: forward-secret ECDHE key exchange with AEAD ciphers only.
constexpr const char* kTls12Ciphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";
// TLS 1.3 suites are all AEAD with (EC)DHE.
constexpr const char* kTls13Suites =
    "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256";

// Picks the current serving pair for each handshake, so a reload affects new handshakes only.
int CertCallback(SSL* ssl, void* arg) {
  const auto* source = static_cast<const CertificateSource*>(arg);
  auto pair = source->Current();
  if (!pair) return 0;
  if (SSL_use_certificate(ssl, pair->cert) != 1) return 0;
  if (SSL_use_PrivateKey(ssl, pair->key) != 1) return 0;
  if (pair->chain != nullptr && sk_X509_num(pair->chain) > 0 &&
      SSL_set1_chain(ssl, pair->chain) != 1) {
    return 0;
  }
  return 1;
}

}  // namespace

bool ClientCommonNameAllowed(X509* leaf, const std::vector<std::string>& allowed) {
  if (leaf == nullptr) return false;
  X509_NAME* subject = X509_get_subject_name(leaf);
  bool match = false;
  bool any = false;
  for (int i = X509_NAME_get_index_by_NID(subject, NID_commonName, -1); i >= 0;
       i = X509_NAME_get_index_by_NID(subject, NID_commonName, i)) {
    const ASN1_STRING* value = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, i));
    // The exact bytes as UTF-8 (whatever the ASN.1 string type), with their length: never a C string.
    unsigned char* utf8 = nullptr;
    const int len = ASN1_STRING_to_UTF8(&utf8, value);
    if (len < 0) {
      ERR_clear_error();
      return false;
    }
    const std::string cn(reinterpret_cast<const char*>(utf8), static_cast<std::size_t>(len));
    OPENSSL_free(utf8);
    // An embedded NUL is a forgery aimed at C-string comparisons: the certificate is refused.
    if (cn.find('\0') != std::string::npos) return false;
    any = true;
    if (std::find(allowed.begin(), allowed.end(), cn) != allowed.end()) match = true;
  }
  return any && match;
}

namespace {

// Enforces the client CN allow-list on the leaf certificate.
int VerifyCallback(int preverify_ok, X509_STORE_CTX* store) {
  if (preverify_ok != 1) return preverify_ok;
  if (X509_STORE_CTX_get_error_depth(store) != 0) return 1;
  auto* ssl = static_cast<SSL*>(
      X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx()));
  if (ssl == nullptr) return 0;
  const auto* options =
      static_cast<const TlsContextOptions*>(SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl)));
  if (options == nullptr || options->client_cns.empty()) return 1;
  if (!ClientCommonNameAllowed(X509_STORE_CTX_get_current_cert(store), options->client_cns)) {
    X509_STORE_CTX_set_error(store, X509_V_ERR_APPLICATION_VERIFICATION);
    return 0;
  }
  return 1;
}


}  // namespace

bool ConfigureServerContext(SSL_CTX* ctx, const TlsContextOptions* options, std::string* error) {
  SSL_CTX_set_app_data(ctx, const_cast<TlsContextOptions*>(options));
  if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1 ||
      SSL_CTX_set_cipher_list(ctx, kTls12Ciphers) != 1 ||
      SSL_CTX_set_ciphersuites(ctx, kTls13Suites) != 1 ||
      SSL_CTX_set1_groups_list(ctx, "X25519:P-256:P-384") != 1) {
    *error = "TLS context: " + x509util::OpenSslError();
    return false;
  }
  SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION |
                               SSL_OP_CIPHER_SERVER_PREFERENCE);
  static const unsigned char kSessionContext[] = "draguard";
  SSL_CTX_set_session_id_context(ctx, kSessionContext, sizeof kSessionContext - 1);
  if (options->certificates == nullptr || !options->certificates->Current()) {
    *error = "TLS context: no serving certificate loaded";
    return false;
  }
  SSL_CTX_set_cert_cb(ctx, CertCallback, const_cast<CertificateSource*>(options->certificates));
  if (!options->client_ca.empty()) {
    if (SSL_CTX_load_verify_locations(ctx, options->client_ca.c_str(), nullptr) != 1) {
      *error = "client CA " + options->client_ca + ": " + x509util::OpenSslError();
      return false;
    }
    STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(options->client_ca.c_str());
    if (names == nullptr) {
      *error = "client CA " + options->client_ca + ": no certificates";
      return false;
    }
    SSL_CTX_set_client_CA_list(ctx, names);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, VerifyCallback);
    SSL_CTX_set_verify_depth(ctx, 4);
  } else {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nullptr);
  }
  return true;
}

}  // namespace draguard::server
