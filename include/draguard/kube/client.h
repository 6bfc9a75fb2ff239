// Kubernetes API client: a minimal, in-cluster HTTPS client for the few calls draguard makes.
//
// It creates and reads resource.k8s.io/v1 ResourceClaimTemplates, makes any other call through
// Call(), and (through Watcher, watch.h) lists and watches ConfigMaps and Nodes. Every call verifies the API server against the CA file,
// sends the service-account bearer token (re-read when the file changes, every
// `token_reread_interval`, and once more after a 401), and is bounded by a deadline.
// Errors are values (Status / ApiError); nothing throws across this interface. No httplib or
// OpenSSL type appears here.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "draguard/status.h"

namespace draguard::kube {

/// Monotonic clock used for token re-reads and watch timing; injectable for tests.
using Clock = std::function<std::chrono::steady_clock::time_point()>;

/// Where the API server is and how to authenticate to it.
struct ClientConfig {
  std::string host;                   ///< DNS name or IP literal; IPv6 with or without brackets
  int port = 443;                     ///< TCP port
  std::string ca_file;                ///< PEM CA bundle that must have signed the server certificate
  std::string token_file;             ///< bearer token file; empty = send no token
  std::string namespace_name;         ///< the pod's own namespace (informational; may be empty)
  std::chrono::milliseconds connect_timeout{5000};  ///< TCP + TLS connect limit per attempt
  std::chrono::milliseconds read_timeout{10000};    ///< limit for one read (non-watch calls)
  std::chrono::milliseconds write_timeout{10000};   ///< limit for one write
  std::chrono::milliseconds request_timeout{10000}; ///< default per-call deadline (Create/Get/List)
  std::chrono::seconds token_reread_interval{60};   ///< re-read the token at least this often
  Clock clock;                        ///< null = std::chrono::steady_clock::now
};

/// The service-account directory kubelet mounts into every pod.
inline constexpr const char* kDefaultServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount";
/// Environment variable naming another directory holding `token`, `ca.crt` and `namespace`
/// (a process outside the cluster using a ServiceAccount's token, e.g. a local `draguard serve`).
inline constexpr const char* kServiceAccountDirEnv = "DRAGUARD_SERVICEACCOUNT_DIR";

/// File locations and environment lookup for InClusterConfig; all overridable for tests.
/// An empty file path means that file in the service-account directory (ServiceAccountDir()).
struct InClusterOptions {
  std::string token_file;      ///< empty = <ServiceAccountDir()>/token
  std::string ca_file;         ///< empty = <ServiceAccountDir()>/ca.crt
  std::string namespace_file;  ///< empty = <ServiceAccountDir()>/namespace
  /// Returns an environment variable or nullopt; null = ::getenv.
  std::function<std::optional<std::string>(const char* name)> getenv;
};

/// $DRAGUARD_SERVICEACCOUNT_DIR when set and not empty (looked up through options.getenv),
/// else kDefaultServiceAccountDir.
std::string ServiceAccountDir(const InClusterOptions& options = {});

/// The namespace in the service account's `namespace` file (options.namespace_file, else the one
/// in ServiceAccountDir()), trimmed; empty when the file is missing or unreadable.
std::string ServiceAccountNamespace(const InClusterOptions& options = {});

/// Builds the configuration from KUBERNETES_SERVICE_HOST / KUBERNETES_SERVICE_PORT and the
/// service-account files (see InClusterOptions and ServiceAccountDir). FailedPrecondition when not
/// running in a cluster (variables unset), NotFound when the token or CA file is missing,
/// InvalidArgument for a bad port.
Result<ClientConfig> InClusterConfig(const InClusterOptions& options = {});

/// "https://host:port" with IPv6 literals bracketed, for messages and logs.
std::string ServerUrl(const ClientConfig& config);

/// A failed API call: the fields of the Kubernetes Status object, or a transport failure.
struct ApiError {
  int code = 0;         ///< HTTP status (== Status.code); 0 when no response arrived
  std::string reason;   ///< Status.reason ("Forbidden", "AlreadyExists", ...) or, for
                        ///< transport failures, "Timeout", "TLS", "Connection", "Canceled"
  std::string message;  ///< Status.message or a description of the transport failure
  /// The error as a Status: 0/5xx/429 → Unavailable, 404 → NotFound, 400/422 → InvalidArgument,
  /// 401/403/409 → FailedPrecondition, else Internal. The message names code and reason.
  Status ToStatus() const;
};

/// Result of Client::CreateObject.
struct CreateResult {
  /// What happened; kAlreadyExists is a success (another replica created it first).
  enum class Outcome { kCreated, kAlreadyExists, kError };
  Outcome outcome = Outcome::kError;  ///< see Outcome
  ApiError error;                     ///< set when outcome == kError
  /// True for kCreated and kAlreadyExists.
  bool ok() const { return outcome != Outcome::kError; }
};

/// Result of Client::GetObject.
struct GetResult {
  /// What happened.
  enum class Outcome { kFound, kNotFound, kError };
  Outcome outcome = Outcome::kError;  ///< see Outcome
  std::string object_json;            ///< the object when kFound
  ApiError error;                     ///< set when kError (and the 404 Status when kNotFound)
};

/// One API call for Client::Call: any verb on any path.
struct ApiCall {
  /// An empty GET.
  ApiCall() = default;
  /// `method` on `path` with an optional body of `content_type`.
  ApiCall(std::string method_name, std::string path_and_query, std::string request_body = {},
          std::string body_type = "application/json")
      : method(std::move(method_name)),
        path(std::move(path_and_query)),
        body(std::move(request_body)),
        content_type(std::move(body_type)) {}

  std::string method = "GET";  ///< GET, POST, PUT, PATCH or DELETE
  /// Absolute path with an already encoded query ("/api/v1/namespaces/ns/secrets/x?limit=5");
  /// build segments and query values with PathEscape.
  std::string path;
  std::string body;                                ///< request body (POST, PUT, PATCH)
  std::string content_type = "application/json";  ///< e.g. application/merge-patch+json for PATCH
  /// Accept header, e.g. "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1" for
  /// the metadata of a list only.
  std::string accept = "application/json";
  std::optional<std::chrono::milliseconds> deadline;  ///< whole-call bound; unset = request_timeout
};

/// What Client::Call got back.
struct ApiResult {
  int status = 0;     ///< HTTP status; 0 when no response arrived (see error)
  std::string body;   ///< the response body (2xx: the object or list; capped at 256 MiB)
  ApiError error;     ///< set for status 0 and for every non-2xx answer (from its Status object)
  /// True for a 2xx answer.
  bool ok() const { return status >= 200 && status < 300; }
};

/// Percent-encodes a path segment or query value (RFC 3986 unreserved characters kept).
std::string PathEscape(std::string_view s);

class ClientImpl;        // internal (src/kube/transport.h)
class Watcher;  // watch.h

/// The API client. Thread-safe: calls may run concurrently; each uses its own connection.
class Client {
 public:
  /// A client for `config` (typically from InClusterConfig()).
  explicit Client(ClientConfig config);
  /// A client for an explicit server, CA and token file (tests, out-of-cluster tools).
  Client(std::string host, int port, std::string ca_file, std::string token_file);
  /// Releases the client; no call may be in flight.
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  /// POST `object_json` (a complete object) to the collection `collection_path`
  /// ("/apis/resource.k8s.io/v1/namespaces/team-a/resourceclaimtemplates"). 201 → kCreated, 409
  /// AlreadyExists → kAlreadyExists, anything else → kError with the Status fields. `deadline`
  /// overrides request_timeout.
  CreateResult CreateObject(std::string_view collection_path, std::string_view object_json,
                            std::optional<std::chrono::milliseconds> deadline = std::nullopt) const;

  /// GET one object by its path: 200 → kFound, 404 → kNotFound, else kError.
  GetResult GetObject(std::string_view object_path,
                      std::optional<std::chrono::milliseconds> deadline = std::nullopt) const;

  /// Performs one call with the client's TLS, token (re-read after a 401) and deadline rules.
  /// Never throws; a transport failure is status 0 with error.reason saying which.
  ApiResult Call(const ApiCall& call) const;

  /// The configuration in use.
  const ClientConfig& config() const;

 private:
  friend class Watcher;  // streams watches through the same transport
  ClientImpl& impl() const { return *impl_; }

  std::unique_ptr<ClientImpl> impl_;
};

}  // namespace draguard::kube
