// Internal: the HTTPS transport behind Client and Watcher. Only src/kube sees httplib.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <sys/types.h>

#include "draguard/kube/client.h"

namespace httplib {
class SSLClient;
}

namespace draguard::kube {

/// The bearer token, re-read when the file's mtime/size/inode change, every `interval`, or on
/// demand (after a 401). Thread-safe.
class TokenSource {
 public:
  TokenSource(std::string path, std::chrono::seconds interval, Clock clock);
  /// The current token ("" when no file is configured).
  Result<std::string> Get();
  /// Re-reads now; true when the token changed.
  bool Refresh();

 private:
  Status ReadLocked(std::chrono::steady_clock::time_point now);

  std::string path_;
  std::chrono::seconds interval_;
  Clock clock_;
  std::mutex mu_;
  std::string token_;
  std::string fingerprint_;
  bool loaded_ = false;
  std::chrono::steady_clock::time_point read_at_{};
};

/// One HTTPS connection; Stop() may be called from another thread to abort blocking I/O.
class HttpConnection {
 public:
  explicit HttpConnection(std::unique_ptr<httplib::SSLClient> client);
  ~HttpConnection();
  /// Shuts the socket down so that an in-flight request fails promptly.
  void Stop();
  /// The underlying client.
  httplib::SSLClient& client() { return *client_; }

 private:
  std::unique_ptr<httplib::SSLClient> client_;
};

/// One request.
struct HttpRequest {
  std::string method = "GET";                ///< GET, POST, PUT, PATCH or DELETE
  std::string path;                          ///< path + encoded query
  std::string body;                          ///< request body (JSON)
  std::string content_type = "application/json";  ///< Content-Type of the body
  std::string accept = "application/json";   ///< Accept header (e.g. PartialObjectMetadata forms)
  std::chrono::milliseconds deadline{10000};  ///< whole-call bound
  std::chrono::milliseconds read_timeout{0};  ///< per-read bound; 0 = config.read_timeout
  /// When set and the status is 200, body bytes go here instead of HttpResponse::body;
  /// returning false cancels the call.
  std::function<bool(const char*, std::size_t)> on_data;
  /// Called with the connection before it is used (so that another thread can Stop() it).
  std::function<void(std::shared_ptr<HttpConnection>)> on_connection;
};

/// One response; status 0 means no HTTP response (error holds the transport failure).
struct HttpResponse {
  int status = 0;
  std::string body;  ///< the body unless streamed to on_data (capped)
  ApiError error;    ///< filled for status 0 and for non-2xx (from the Status object)
};

/// Shared transport state behind Client.
class ClientImpl {
 public:
  explicit ClientImpl(ClientConfig config);
  /// Performs `request`; after a 401 re-reads the token and, if it changed, tries once more.
  HttpResponse Do(const HttpRequest& request);
  /// The configuration.
  const ClientConfig& config() const { return config_; }

 private:
  HttpResponse DoOnce(const HttpRequest& request, const std::string& token);

  ClientConfig config_;
  TokenSource tokens_;
};

/// Percent-encodes a query value or path segment (RFC 3986 unreserved characters kept).
std::string UrlEncode(std::string_view s);

/// Fills an ApiError from a Kubernetes Status body (or the raw body when it is not one).
ApiError ParseApiError(int http_status, std::string_view body);


}  // namespace draguard::kube
