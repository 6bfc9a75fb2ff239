#include "tls_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include <openssl/err.h>
#include <openssl/x509.h>

namespace draguard::testing {

std::string BuildRequest(const std::string& method, const std::string& path, const std::string& body,
                         const std::string& content_type) {
  std::string r = method + " " + path + " HTTP/1.1\r\nHost: localhost\r\n";
  if (!content_type.empty()) r += "Content-Type: " + content_type + "\r\n";
  if (method == "POST") r += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  r += "\r\n" + body;
  return r;
}

std::unique_ptr<TlsConnection> TlsConnection::Connect(int port, const ClientOptions& opt,
                                                      std::string* error) {
  std::unique_ptr<TlsConnection> c(new TlsConnection());
  c->ctx_ = SSL_CTX_new(TLS_client_method());
  SSL_CTX_set_min_proto_version(c->ctx_, opt.min_version);
  if (opt.max_version != 0) SSL_CTX_set_max_proto_version(c->ctx_, opt.max_version);
  if (opt.min_version != 0 && opt.min_version < TLS1_2_VERSION) {
    SSL_CTX_set_security_level(c->ctx_, 0);  // allow offering legacy versions
  }
  if (!opt.ciphers.empty()) SSL_CTX_set_cipher_list(c->ctx_, opt.ciphers.c_str());
  if (!opt.ca_file.empty()) {
    SSL_CTX_load_verify_locations(c->ctx_, opt.ca_file.c_str(), nullptr);
    SSL_CTX_set_verify(c->ctx_, SSL_VERIFY_PEER, nullptr);
  }
  if (!opt.cert_file.empty()) {
    SSL_CTX_use_certificate_chain_file(c->ctx_, opt.cert_file.c_str());
    SSL_CTX_use_PrivateKey_file(c->ctx_, opt.key_file.c_str(), SSL_FILETYPE_PEM);
  }
  c->fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{opt.timeout_ms / 1000, (opt.timeout_ms % 1000) * 1000};
  setsockopt(c->fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(c->fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  int one = 1;
  setsockopt(c->fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (::connect(c->fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    *error = std::string("connect: ") + std::strerror(errno);
    return nullptr;
  }
  c->ssl_ = SSL_new(c->ctx_);
  SSL_set_fd(c->ssl_, c->fd_);
  SSL_set_tlsext_host_name(c->ssl_, opt.server_name.c_str());
  if (!opt.ca_file.empty()) SSL_set1_host(c->ssl_, opt.server_name.c_str());
  if (!opt.alpn.empty()) {
    SSL_set_alpn_protos(c->ssl_, reinterpret_cast<const unsigned char*>(opt.alpn.data()),
                        static_cast<unsigned int>(opt.alpn.size()));
  }
  if (SSL_connect(c->ssl_) != 1) {
    unsigned long e = ERR_get_error();
    char buf[256] = "handshake failed";
    if (e != 0) ERR_error_string_n(e, buf, sizeof buf);
    *error = buf;
    ERR_clear_error();
    return nullptr;
  }
  return c;
}

TlsConnection::~TlsConnection() {
  if (ssl_ != nullptr) {
    SSL_shutdown(ssl_);
    SSL_free(ssl_);
  }
  if (fd_ >= 0) ::close(fd_);
  if (ctx_ != nullptr) SSL_CTX_free(ctx_);
}

bool TlsConnection::Write(const std::string& data) {
  std::size_t off = 0;
  while (off < data.size()) {
    int n = SSL_write(ssl_, data.data() + off, static_cast<int>(data.size() - off));
    if (n <= 0) {
      ERR_clear_error();
      return false;
    }
    off += static_cast<std::size_t>(n);
  }
  return true;
}

bool TlsConnection::Fill() {
  char tmp[16384];
  int n = SSL_read(ssl_, tmp, sizeof tmp);
  if (n <= 0) {
    ERR_clear_error();
    return false;
  }
  buf_.append(tmp, static_cast<std::size_t>(n));
  return true;
}

bool TlsConnection::ReadResponse(HttpResponse* out) {
  std::size_t header_end;
  while ((header_end = buf_.find("\r\n\r\n")) == std::string::npos) {
    if (!Fill()) return false;
  }
  std::string head = buf_.substr(0, header_end);
  buf_.erase(0, header_end + 4);
  *out = HttpResponse{};
  std::size_t line_end = head.find("\r\n");
  std::string status_line = head.substr(0, line_end);
  if (status_line.rfind("HTTP/1.1 ", 0) != 0) return false;
  out->status = std::atoi(status_line.c_str() + 9);
  std::size_t pos = line_end == std::string::npos ? head.size() : line_end + 2;
  while (pos < head.size()) {
    std::size_t e = head.find("\r\n", pos);
    if (e == std::string::npos) e = head.size();
    std::string line = head.substr(pos, e - pos);
    std::size_t colon = line.find(':');
    if (colon != std::string::npos) {
      std::string name = line.substr(0, colon);
      std::transform(name.begin(), name.end(), name.begin(), ::tolower);
      std::string value = line.substr(colon + 1);
      value.erase(0, value.find_first_not_of(' '));
      out->headers[name] = value;
    }
    pos = e + 2;
  }
  std::size_t length = 0;
  if (auto it = out->headers.find("content-length"); it != out->headers.end()) {
    length = std::stoul(it->second);
  }
  while (buf_.size() < length) {
    if (!Fill()) return false;
  }
  out->body = buf_.substr(0, length);
  buf_.erase(0, length);
  return true;
}

bool TlsConnection::Request(const std::string& method, const std::string& path,
                            const std::string& body, HttpResponse* out,
                            const std::string& content_type) {
  return Write(BuildRequest(method, path, body, content_type)) && ReadResponse(out);
}

bool TlsConnection::WaitForClose() {
  for (;;) {
    char tmp[4096];
    int n = SSL_read(ssl_, tmp, sizeof tmp);
    if (n > 0) continue;  // drain whatever the server still sends
    int err = SSL_get_error(ssl_, n);
    ERR_clear_error();
    if (err == SSL_ERROR_ZERO_RETURN || err == SSL_ERROR_SYSCALL || err == SSL_ERROR_SSL) {
      // Closed, unless the syscall error was our own receive timeout.
      return !(err == SSL_ERROR_SYSCALL && (errno == EAGAIN || errno == EWOULDBLOCK));
    }
    return false;
  }
}

std::string TlsConnection::PeerCommonName() const {
  X509* cert = SSL_get1_peer_certificate(ssl_);
  if (cert == nullptr) return "";
  char cn[256] = {0};
  X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, cn, sizeof cn);
  X509_free(cert);
  return cn;
}

std::string TlsConnection::Version() const { return SSL_get_version(ssl_); }

std::string TlsConnection::Alpn() const {
  const unsigned char* p = nullptr;
  unsigned int n = 0;
  SSL_get0_alpn_selected(ssl_, &p, &n);
  return p == nullptr ? "" : std::string(reinterpret_cast<const char*>(p), n);
}

bool TlsConnection::ReadSome(std::string* out) {
  if (!buf_.empty()) {
    out->append(buf_);
    buf_.clear();
    return true;
  }
  char tmp[16384];
  int n = SSL_read(ssl_, tmp, sizeof tmp);
  if (n <= 0) {
    ERR_clear_error();
    return false;
  }
  out->append(tmp, static_cast<std::size_t>(n));
  return true;
}

bool TlsConnection::PeerClosed() const {
  pollfd p{fd_, POLLRDHUP, 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

}  // namespace draguard::testing
