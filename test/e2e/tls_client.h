// A raw TLS client for end-to-end tests: full control over versions, ciphers, client
// certificates and partial writes, with every read bounded by a timeout.
#pragma once

#include <map>
#include <memory>
#include <string>

#include <openssl/ssl.h>

namespace draguard::testing {

/// Client settings.
struct ClientOptions {
  std::string ca_file;              ///< verify the server against this CA ("" = no verification)
  std::string cert_file, key_file;  ///< client certificate (optional)
  int min_version = TLS1_2_VERSION;
  int max_version = 0;              ///< 0 = highest
  std::string ciphers;              ///< TLS ≤1.2 cipher list ("" = OpenSSL default)
  std::string server_name = "localhost";
  int timeout_ms = 10000;           ///< bound on every read and write
  std::string alpn;                 ///< ALPN protocols offered, wire format ("\x02h2\x08http/1.1"); "" = none
};

/// A parsed HTTP/1.1 response.
struct HttpResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  ///< lower-case names
  std::string body;
};

/// One TLS connection.
class TlsConnection {
 public:
  /// Connects and completes the handshake; returns null and sets `error` on failure.
  static std::unique_ptr<TlsConnection> Connect(int port, const ClientOptions& opt, std::string* error);
  ~TlsConnection();

  /// Writes all of `data`.
  bool Write(const std::string& data);
  /// Reads one response; returns false on timeout, close or garbage.
  bool ReadResponse(HttpResponse* out);
  /// Sends a request and reads the response.
  bool Request(const std::string& method, const std::string& path, const std::string& body,
               HttpResponse* out, const std::string& content_type = "application/json");
  /// Waits (bounded by the timeout) until the server closes the connection; returns true if it did.
  bool WaitForClose();
  /// CN of the server's certificate.
  std::string PeerCommonName() const;
  /// Negotiated protocol, e.g. "TLSv1.3".
  std::string Version() const;
  /// The protocol ALPN chose ("" = none).
  std::string Alpn() const;
  /// Reads what has arrived (at least one byte, bounded by the timeout) and appends it; false on
  /// close, timeout or error.
  bool ReadSome(std::string* out);
  /// True once the server has closed its side, seen without reading (POLLRDHUP).
  bool PeerClosed() const;

 private:
  TlsConnection() = default;
  bool Fill();
  SSL_CTX* ctx_ = nullptr;
  SSL* ssl_ = nullptr;
  int fd_ = -1;
  std::string buf_;
};

/// Builds an HTTP/1.1 request text.
std::string BuildRequest(const std::string& method, const std::string& path, const std::string& body,
                         const std::string& content_type = "application/json");

}  // namespace draguard::testing
