#include "draguard/kube/client.h"

#include <arpa/inet.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include <httplib.h>
#include <nlohmann/json.hpp>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "transport.h"

#include "draguard/base64.h"
#include "draguard/read_file.h"
#include "draguard/trim.h"

namespace draguard::kube {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

constexpr std::size_t kMaxErrorBody = 1 << 20;     // error bodies are Status objects: small
constexpr std::size_t kMaxBody = 256u << 20;       // a LIST page of up to page_size 1 MiB objects
constexpr std::size_t kMaxTokenBytes = 64 << 10;

std::string StripBrackets(std::string host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') return host.substr(1, host.size() - 2);
  return host;
}

template <typename Rep, typename Period>
void SplitDuration(std::chrono::duration<Rep, Period> d, time_t& sec, time_t& usec) {
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(d).count();
  if (us < 1000) us = 1000;  // never 0: httplib treats it as "no wait"
  sec = static_cast<time_t>(us / 1000000);
  usec = static_cast<time_t>(us % 1000000);
}

const char* HttpReason(int code) {
  switch (code) {
    case 400: return "BadRequest";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "NotFound";
    case 405: return "MethodNotAllowed";
    case 409: return "Conflict";
    case 410: return "Expired";
    case 422: return "Invalid";
    case 429: return "TooManyRequests";
    case 500: return "InternalError";
    case 503: return "ServiceUnavailable";
    case 504: return "Timeout";
    default: return "Unknown";
  }
}

bool IsIpLiteral(const std::string& host) {
  unsigned char buf[sizeof(struct in6_addr)];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

// Server verification is done by OpenSSL during the handshake, not by httplib: httplib 0.11.4's
// own SAN check (SSLClient::verify_host_with_subject_alt_name) memcmp()s `sizeof(in6_addr)` bytes
// of every IP SAN, even 4-byte IPv4 ones, and compares an uninitialised in6_addr for IPv4 hosts
// (heap over-read found by ASan). So httplib's check stays off and the context verifies the
// chain against the CA file and the host/IP with X509_check_host / X509_check_ip semantics.
Status ConfigureTls(SSL_CTX* ctx, const ClientConfig& config) {
  if (ctx == nullptr) return Status::Internal("no TLS context");
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  if (!config.ca_file.empty()) {
    if (SSL_CTX_load_verify_locations(ctx, config.ca_file.c_str(), nullptr) != 1) {
      ERR_clear_error();
      return Status::FailedPrecondition("cannot load CA file " + config.ca_file);
    }
  } else if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
    ERR_clear_error();
    return Status::FailedPrecondition("cannot load the system CA store");
  }
  X509_VERIFY_PARAM* param = SSL_CTX_get0_param(ctx);
  int ok = IsIpLiteral(config.host) ? X509_VERIFY_PARAM_set1_ip_asc(param, config.host.c_str())
                                    : X509_VERIFY_PARAM_set1_host(param, config.host.c_str(), 0);
  if (ok != 1) return Status::InvalidArgument("bad API server host '" + config.host + "'");
  X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  return Status::Ok();
}

}  // namespace

// ---- configuration ----------------------------------------------------------------------------

std::string ServerUrl(const ClientConfig& config) {
  std::string host = StripBrackets(config.host);
  if (host.find(':') != std::string::npos) host = "[" + host + "]";
  return "https://" + host + ":" + std::to_string(config.port);
}

namespace {

std::optional<std::string> Getenv(const InClusterOptions& options, const char* name) {
  if (options.getenv) return options.getenv(name);
  const char* v = std::getenv(name);
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

// `path` when given, else `name` in the service-account directory.
std::string ServiceAccountFile(const InClusterOptions& options, const std::string& path, const char* name) {
  return path.empty() ? ServiceAccountDir(options) + "/" + name : path;
}

}  // namespace

std::string ServiceAccountDir(const InClusterOptions& options) {
  auto dir = Getenv(options, kServiceAccountDirEnv);
  if (!dir || dir->empty()) return kDefaultServiceAccountDir;
  while (dir->size() > 1 && dir->back() == '/') dir->pop_back();
  return *dir;
}

std::string ServiceAccountNamespace(const InClusterOptions& options) {
  auto ns = ReadFile(ServiceAccountFile(options, options.namespace_file, "namespace"), 4096);
  return ns.ok() ? std::string(Trim(*ns)) : std::string();
}

Result<ClientConfig> InClusterConfig(const InClusterOptions& options) {
  auto host = Getenv(options, "KUBERNETES_SERVICE_HOST");
  auto port = Getenv(options, "KUBERNETES_SERVICE_PORT");
  if (!host || host->empty() || !port || port->empty()) {
    return Status::FailedPrecondition(
        "not running in a cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set");
  }
  ClientConfig config;
  config.host = StripBrackets(Trim(*host));
  char* end = nullptr;
  long p = std::strtol(port->c_str(), &end, 10);
  if (end == port->c_str() || *end != '\0' || p <= 0 || p > 65535) {
    return Status::InvalidArgument("KUBERNETES_SERVICE_PORT is not a port: '" + *port + "'");
  }
  config.port = static_cast<int>(p);
  const std::string token_file = ServiceAccountFile(options, options.token_file, "token");
  const std::string ca_file = ServiceAccountFile(options, options.ca_file, "ca.crt");
  struct stat st {};
  if (::stat(token_file.c_str(), &st) != 0) {
    return Status::NotFound("service account token not found: " + token_file);
  }
  if (::stat(ca_file.c_str(), &st) != 0) {
    return Status::NotFound("service account CA not found: " + ca_file);
  }
  config.token_file = token_file;
  config.ca_file = ca_file;
  config.namespace_name = ServiceAccountNamespace(options);
  return config;
}

// ---- errors -----------------------------------------------------------------------------------

Status ApiError::ToStatus() const {
  std::string text = code == 0 ? "API request failed (" + reason + "): " + message
                               : "API request failed: " + std::to_string(code) + " " + reason + ": " +
                                     message;
  if (code == 0 || code >= 500 || code == 429) return Status::Unavailable(std::move(text));
  if (code == 404) return Status::NotFound(std::move(text));
  if (code == 400 || code == 422) return Status::InvalidArgument(std::move(text));
  if (code == 401 || code == 403 || code == 409 || code == 410) {
    return Status::FailedPrecondition(std::move(text));
  }
  return Status::Internal(std::move(text));
}

ApiError ParseApiError(int http_status, std::string_view body) {
  ApiError e;
  e.code = http_status;
  auto j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_discarded() && j.is_object() && j.value("kind", "") == "Status") {
    if (auto it = j.find("reason"); it != j.end() && it->is_string()) e.reason = it->get<std::string>();
    if (auto it = j.find("message"); it != j.end() && it->is_string()) e.message = it->get<std::string>();
    if (auto it = j.find("code"); it != j.end() && it->is_number_integer()) {
      int c = it->get<int>();
      if (c > 0) e.code = c;
    }
  } else {
    e.message = std::string(body.substr(0, 512));
  }
  if (e.reason.empty()) e.reason = HttpReason(e.code);
  if (e.message.empty()) e.message = "HTTP " + std::to_string(http_status);
  return e;
}

std::string UrlEncode(std::string_view s) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}


// ---- token ------------------------------------------------------------------------------------

TokenSource::TokenSource(std::string path, std::chrono::seconds interval, Clock clock)
    : path_(std::move(path)), interval_(interval), clock_(std::move(clock)) {
  if (!clock_) clock_ = [] { return steady_clock::now(); };
}

Status TokenSource::ReadLocked(steady_clock::time_point now) {
  struct stat st {};
  std::string fp;
  if (::stat(path_.c_str(), &st) == 0) {
    fp = std::to_string(st.st_ino) + ":" + std::to_string(st.st_size) + ":" +
         std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec);
  }
  auto data = ReadFile(path_, kMaxTokenBytes);
  if (!data.ok()) return data.status();
  token_ = Trim(*data);
  fingerprint_ = fp;
  loaded_ = true;
  read_at_ = now;
  return Status::Ok();
}

Result<std::string> TokenSource::Get() {
  if (path_.empty()) return std::string();
  std::lock_guard<std::mutex> lock(mu_);
  auto now = clock_();
  bool reread = !loaded_ || now - read_at_ >= interval_;
  if (!reread) {
    struct stat st {};
    if (::stat(path_.c_str(), &st) == 0) {
      std::string fp = std::to_string(st.st_ino) + ":" + std::to_string(st.st_size) + ":" +
                       std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec);
      reread = fp != fingerprint_;
    }
  }
  if (reread) {
    Status st = ReadLocked(now);
    if (!st.ok() && !loaded_) return st;  // else keep serving the last good token
  }
  return token_;
}

bool TokenSource::Refresh() {
  if (path_.empty()) return false;
  std::lock_guard<std::mutex> lock(mu_);
  std::string before = token_;
  if (!ReadLocked(clock_()).ok()) return false;
  return token_ != before;
}

// ---- transport --------------------------------------------------------------------------------

HttpConnection::HttpConnection(std::unique_ptr<httplib::SSLClient> client) : client_(std::move(client)) {}
HttpConnection::~HttpConnection() = default;
void HttpConnection::Stop() { client_->stop(); }

ClientImpl::ClientImpl(ClientConfig config)
    : config_(std::move(config)),
      tokens_(config_.token_file, config_.token_reread_interval, config_.clock) {
  config_.host = StripBrackets(config_.host);
}

HttpResponse ClientImpl::Do(const HttpRequest& request) {
  auto token = tokens_.Get();
  if (!token.ok()) {
    HttpResponse r;
    r.error = ApiError{0, "Token", token.status().message()};
    return r;
  }
  HttpResponse r = DoOnce(request, *token);
  if (r.status == 401 && tokens_.Refresh()) {
    auto again = tokens_.Get();
    if (again.ok()) r = DoOnce(request, *again);
  }
  return r;
}

HttpResponse ClientImpl::DoOnce(const HttpRequest& request, const std::string& token) {
  HttpResponse out;
  auto start = steady_clock::now();
  auto deadline_at = start + request.deadline;
  try {
    auto cli = std::make_unique<httplib::SSLClient>(config_.host, config_.port);
    cli->enable_server_certificate_verification(false);  // httplib's check; OpenSSL's is on below
    if (Status st = ConfigureTls(cli->ssl_context(), config_); !st.ok()) {
      out.error = ApiError{0, "TLS", st.message()};
      return out;
    }
    cli->set_keep_alive(false);
    cli->set_follow_location(false);
    cli->set_url_encode(false);
    cli->set_compress(false);
    cli->set_decompress(false);
    time_t s = 0, us = 0;
    SplitDuration(std::min<milliseconds>(config_.connect_timeout, request.deadline), s, us);
    cli->set_connection_timeout(s, us);
    milliseconds read = request.read_timeout.count() > 0 ? request.read_timeout : config_.read_timeout;
    SplitDuration(std::min<milliseconds>(read, request.deadline), s, us);
    cli->set_read_timeout(s, us);
    SplitDuration(std::min<milliseconds>(config_.write_timeout, request.deadline), s, us);
    cli->set_write_timeout(s, us);
    if (!token.empty()) cli->set_bearer_token_auth(token);

    auto conn = std::make_shared<HttpConnection>(std::move(cli));
    if (request.on_connection) request.on_connection(conn);

    httplib::Headers headers = {{"Accept", request.accept.empty() ? "application/json" : request.accept},
                                {"User-Agent", "draguard/0.1 (kube-client)"}};
    int status = 0;
    bool too_large = false;
    bool timed_out = false;
    auto on_response = [&](const httplib::Response& res) {
      status = res.status;
      return true;
    };
    auto on_body = [&](const char* data, std::size_t n) {
      if (steady_clock::now() > deadline_at) {
        timed_out = true;
        return false;
      }
      if (status == 200 && request.on_data) return request.on_data(data, n);
      std::size_t cap = (status >= 200 && status < 300) ? kMaxBody : kMaxErrorBody;
      if (out.body.size() + n > cap) {
        too_large = true;
        return false;
      }
      out.body.append(data, n);
      return true;
    };
    httplib::Request req;
    req.method = request.method;
    req.path = request.path;
    req.headers = headers;
    if (request.method == "POST" || request.method == "PUT" || request.method == "PATCH" ||
        (request.method == "DELETE" && !request.body.empty())) {
      req.body = request.body;
      req.headers.emplace("Content-Type",
                          request.content_type.empty() ? "application/json" : request.content_type);
    }
    req.response_handler = on_response;
    req.content_receiver = [&](const char* data, std::size_t n, uint64_t, uint64_t) {
      return on_body(data, n);
    };
    auto res = conn->client().send(req);
    bool expired = steady_clock::now() >= deadline_at || timed_out;
    if (!res) {
      auto err = res.error();
      if (too_large) {
        out.error = ApiError{0, "TooLarge", "response body exceeds the client limit"};
      } else if (err == httplib::Error::ConnectionTimeout || expired ||
                 (err == httplib::Error::Read && steady_clock::now() - start >= read)) {
        out.error = ApiError{0, "Timeout", "no answer from " + ServerUrl(config_) + " within the deadline (" +
                                               httplib::to_string(err) + ")"};
      } else if (err == httplib::Error::SSLConnection || err == httplib::Error::SSLServerVerification ||
                 err == httplib::Error::SSLLoadingCerts) {
        out.error = ApiError{0, "TLS", "TLS with " + ServerUrl(config_) + " failed: " + httplib::to_string(err)};
      } else if (err == httplib::Error::Canceled) {
        out.error = ApiError{0, "Canceled", "request canceled"};
      } else {
        out.error = ApiError{0, "Connection",
                             "cannot talk to " + ServerUrl(config_) + ": " + httplib::to_string(err)};
      }
      out.status = 0;
      // A streamed 200 that was cut (Stop, idle timeout) still reports its status.
      if (status == 200 && request.on_data) out.status = 200;
      return out;
    }
    out.status = res->status;
    if (out.status < 200 || out.status >= 300) out.error = ParseApiError(out.status, out.body);
  } catch (const std::exception& e) {
    out.status = 0;
    out.error = ApiError{0, "Internal", e.what()};
  }
  return out;
}

// ---- client -----------------------------------------------------------------------------------

Client::Client(ClientConfig config) : impl_(std::make_unique<ClientImpl>(std::move(config))) {}

Client::Client(std::string host, int port, std::string ca_file, std::string token_file) {
  ClientConfig c;
  c.host = std::move(host);
  c.port = port;
  c.ca_file = std::move(ca_file);
  c.token_file = std::move(token_file);
  impl_ = std::make_unique<ClientImpl>(std::move(c));
}

Client::~Client() = default;

const ClientConfig& Client::config() const { return impl_->config(); }

std::string PathEscape(std::string_view s) { return UrlEncode(s); }

ApiResult Client::Call(const ApiCall& call) const {
  HttpRequest req;
  req.method = call.method;
  req.path = call.path;
  req.body = call.body;
  req.content_type = call.content_type;
  req.accept = call.accept;
  req.deadline = call.deadline.value_or(config().request_timeout);
  HttpResponse res = impl_->Do(req);
  ApiResult out;
  out.status = res.status;
  out.body = std::move(res.body);
  out.error = std::move(res.error);
  return out;
}

CreateResult Client::CreateObject(std::string_view collection_path, std::string_view object_json,
                                  std::optional<milliseconds> deadline) const {
  CreateResult r;
  HttpRequest req;
  req.method = "POST";
  req.path = std::string(collection_path);
  req.body = std::string(object_json);
  req.deadline = deadline.value_or(config().request_timeout);
  HttpResponse res = impl_->Do(req);
  if (res.status == 201 || res.status == 200) {
    r.outcome = CreateResult::Outcome::kCreated;
  } else if (res.status == 409 && res.error.reason == "AlreadyExists") {
    r.outcome = CreateResult::Outcome::kAlreadyExists;
  } else {
    r.outcome = CreateResult::Outcome::kError;
    r.error = res.error;
  }
  return r;
}

GetResult Client::GetObject(std::string_view object_path, std::optional<milliseconds> deadline) const {
  GetResult r;
  HttpRequest req;
  req.path = std::string(object_path);
  req.deadline = deadline.value_or(config().request_timeout);
  HttpResponse res = impl_->Do(req);
  if (res.status == 200) {
    r.outcome = GetResult::Outcome::kFound;
    r.object_json = std::move(res.body);
  } else if (res.status == 404) {
    r.outcome = GetResult::Outcome::kNotFound;
    r.error = res.error;
  } else {
    r.outcome = GetResult::Outcome::kError;
    r.error = res.error;
  }
  return r;
}

}  // namespace draguard::kube
