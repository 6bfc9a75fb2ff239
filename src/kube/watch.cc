#include "draguard/kube/watch.h"

#include <algorithm>
#include <cmath>
#include <random>

#include <nlohmann/json.hpp>

#include "draguard/base64.h"
#include "transport.h"

namespace draguard::kube {

using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

namespace {

constexpr std::size_t kMaxEventLine = 16u << 20;  // one watch event: a ConfigMap is ≤ 1 MiB + JSON

// Copies the string members of obj[key] into out; with a non-empty `keep`, only those keys.
void StringMap(const json& obj, const char* key, const std::vector<std::string>& keep,
               std::map<std::string, std::string>& out) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_object()) return;
  if (!keep.empty()) {
    for (const std::string& k : keep) {
      auto v = it->find(k);
      if (v != it->end() && v->is_string()) out[k] = v->get<std::string>();
    }
    return;
  }
  for (auto& [k, v] : it->items()) {
    if (v.is_string()) out[k] = v.get<std::string>();
  }
}

std::string StringAt(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
}

Result<Object> FromJson(const json& j, const ObjectFilter& filter) {
  if (!j.is_object()) return Status::InvalidArgument("object: not a JSON object");
  auto meta = j.find("metadata");
  if (meta == j.end() || !meta->is_object()) return Status::InvalidArgument("object: no metadata");
  Object o;
  o.namespace_name = StringAt(*meta, "namespace");
  o.name = StringAt(*meta, "name");
  o.uid = StringAt(*meta, "uid");
  o.resource_version = StringAt(*meta, "resourceVersion");
  o.creation_timestamp = StringAt(*meta, "creationTimestamp");
  if (o.name.empty()) return Status::InvalidArgument("object: no metadata.name");
  if (filter.metadata_maps) {
    StringMap(*meta, "labels", filter.labels, o.labels);
    StringMap(*meta, "annotations", filter.annotations, o.annotations);
  }
  for (const std::string& field : filter.fields) {
    if (auto f = j.find(field); f != j.end()) o.fields[field] = f->dump();
  }
  if (!filter.data) return o;
  if (auto im = j.find("immutable"); im != j.end() && im->is_boolean()) o.immutable = im->get<bool>();
  StringMap(j, "data", {}, o.data);
  std::map<std::string, std::string> encoded;
  StringMap(j, "binaryData", {}, encoded);
  for (auto& [k, v] : encoded) {
    auto decoded = Base64Decode(v, /*require_padding=*/false);
    if (!decoded.ok()) {
      return Status::InvalidArgument("object " + o.namespace_name + "/" + o.name + ": binaryData." + k + ": " +
                                     decoded.status().message());
    }
    o.binary_data[k] = std::move(decoded).value();
  }
  return o;
}

}  // namespace

Result<Object> ParseObject(std::string_view text, const ObjectFilter& filter) {
  auto j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::InvalidArgument("object: invalid JSON");
  return FromJson(j, filter);
}

// ---- backoff ----------------------------------------------------------------------------------

Backoff::Backoff(BackoffPolicy policy, std::function<double()> random)
    : policy_(policy), random_(std::move(random)) {
  if (!random_) {
    auto gen = std::make_shared<std::mt19937_64>(std::random_device{}());
    random_ = [gen] { return std::uniform_real_distribution<double>(0.0, 1.0)(*gen); };
  }
}

milliseconds Backoff::Next() {
  double base = static_cast<double>(policy_.initial.count()) * std::pow(policy_.factor, failures_);
  double cap = static_cast<double>(policy_.max.count());
  base = std::min(base, cap);
  double r = std::clamp(random_(), 0.0, 1.0);
  double d = std::min(base * (1.0 + policy_.jitter * r), cap);
  if (failures_ < 64) ++failures_;
  return milliseconds(static_cast<int64_t>(d));
}

// ---- watcher ----------------------------------------------------------------------------------

enum class Watcher::WatchEnd {
  kEnded,    // the stream ended or went idle: re-watch from the last resourceVersion
  kGone,     // 410: relist
  kFailed,   // error: back off, then re-watch
  kStopped,  // Stop()
};

Watcher::Watcher(const Client& client, WatchHandler& handler, WatchOptions options)
    : client_(client), handler_(handler), options_(std::move(options)),
      backoff_(options_.backoff, options_.random) {}

Watcher::~Watcher() { Stop(); }

void Watcher::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (thread_.joinable() || stopping_) return;
  thread_ = std::thread([this] { Run(); });
}

void Watcher::Stop() {
  std::lock_guard<std::mutex> serial(stop_mu_);
  stopping_ = true;
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (!thread_.joinable()) return;
    // The connection may be between "created" and "connected"; keep shutting it until the
    // thread has left (each call is cheap and safe). HttpConnection::Stop() waits while httplib
    // connects, so it runs without mu_, which the watcher thread needs for its bookkeeping.
    while (!done_) {
      std::shared_ptr<HttpConnection> conn = active_;
      cv_.notify_all();
      lock.unlock();
      if (conn) conn->Stop();
      lock.lock();
      cv_.wait_for(lock, milliseconds(20), [this] { return done_.load(); });
    }
  }
  thread_.join();
}

std::string Watcher::resource_version() const {
  std::lock_guard<std::mutex> lock(mu_);
  return resource_version_;
}

void Watcher::SetResourceVersion(std::string rv) {
  std::lock_guard<std::mutex> lock(mu_);
  resource_version_ = std::move(rv);
}

steady_clock::time_point Watcher::Now() const {
  return options_.clock ? options_.clock() : steady_clock::now();
}

void Watcher::SleepBackoff() {
  milliseconds d = backoff_.Next();
  if (options_.sleep) {
    options_.sleep(d);
    return;
  }
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, d, [this] { return stopping_.load(); });
}

void Watcher::Run() {
  bool need_list = true;
  while (!stopping_) {
    try {
      Step(need_list);
    } catch (const std::exception& e) {
      ReportHandlerException(e.what());
      need_list = true;
    } catch (...) {
      ReportHandlerException("unknown exception");
      need_list = true;
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  active_.reset();
  done_ = true;
  cv_.notify_all();
}

void Watcher::ReportHandlerException(const char* what) {
  try {
    handler_.OnError(Status::Internal(What() + " handler threw: " + what));
  } catch (...) {
  }
  if (!stopping_) SleepBackoff();
}

void Watcher::Step(bool& need_list) {
  if (need_list) {
    if (!ListAll()) {
      if (!stopping_) SleepBackoff();
      return;
    }
    need_list = false;
    backoff_.Reset();
  }
  switch (WatchOnce()) {
    case WatchEnd::kEnded: break;
    case WatchEnd::kGone: need_list = true; break;
    case WatchEnd::kFailed:
      if (!stopping_) SleepBackoff();
      break;
    case WatchEnd::kStopped: break;
  }
}

std::string Watcher::BasePath() const {
  const std::string& gv = options_.group_version;
  const std::string root = gv.empty() || gv == "v1" ? "/api/v1/" : "/apis/" + gv + "/";
  const std::string resource = UrlEncode(options_.resource);
  if (options_.namespace_name.empty()) return root + resource;
  return root + "namespaces/" + UrlEncode(options_.namespace_name) + "/" + resource;
}

// "configmaps", for messages.
std::string Watcher::What() const { return options_.resource; }

namespace {
// The Accept headers of client-go's metadata client (JSON forms only), with plain JSON last.
constexpr const char* kMetadataListAccept =
    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
constexpr const char* kMetadataWatchAccept =
    "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";
}  // namespace

bool Watcher::ListAll() {
  std::vector<Object> all;
  std::string cont;
  std::string rv;
  do {
    std::string path = BasePath() + "?labelSelector=" + UrlEncode(options_.label_selector);
    if (options_.page_size > 0) path += "&limit=" + std::to_string(options_.page_size);
    if (!cont.empty()) path += "&continue=" + UrlEncode(cont);
    HttpRequest req;
    req.path = path;
    if (options_.metadata_only) req.accept = kMetadataListAccept;
    req.deadline = options_.list_timeout;
    req.read_timeout = options_.list_timeout;
    req.on_connection = [this](std::shared_ptr<HttpConnection> c) {
      std::lock_guard<std::mutex> lock(mu_);
      active_ = std::move(c);
      if (stopping_) active_->Stop();
    };
    HttpResponse res = client_.impl().Do(req);
    if (stopping_) return false;
    if (res.status != 200) {
      handler_.OnError(Status(res.error.ToStatus().code(), "LIST " + What() + ": " + res.error.ToStatus().message()));
      return false;
    }
    auto j = json::parse(res.body, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object() || !j.contains("items") || !j["items"].is_array()) {
      handler_.OnError(Status::InvalidArgument("LIST " + What() + ": response is not a list"));
      return false;
    }
    for (const auto& item : j["items"]) {
      auto object = FromJson(item, options_.filter);
      if (!object.ok()) {
        handler_.OnError(object.status());  // skip a malformed object, keep the rest
        continue;
      }
      all.push_back(std::move(object).value());
    }
    const json& meta = j.contains("metadata") && j["metadata"].is_object() ? j["metadata"] : json::object();
    rv = meta.value("resourceVersion", "");
    cont = meta.value("continue", "");
  } while (!cont.empty() && !stopping_);
  if (stopping_) return false;
  SetResourceVersion(rv);
  ++lists_;
  handler_.OnSync(std::move(all));
  return true;
}

Watcher::WatchEnd Watcher::WatchOnce() {
  std::string rv = resource_version();
  std::string path = BasePath() + "?watch=true&allowWatchBookmarks=true&labelSelector=" +
                     UrlEncode(options_.label_selector) +
                     "&timeoutSeconds=" + std::to_string(options_.watch_timeout.count());
  if (!rv.empty()) path += "&resourceVersion=" + UrlEncode(rv);

  std::string buffer;
  bool gone = false;
  bool failed = false;
  std::string handler_error;  // a handler threw: its state may be partial, so relist
  int events = 0;
  auto handle_line = [&](std::string_view line) -> bool {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
    if (line.empty()) return true;
    auto ev = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (ev.is_discarded() || !ev.is_object() || !ev.contains("type") || !ev["type"].is_string() ||
        !ev.contains("object")) {
      handler_.OnError(Status::InvalidArgument("watch " + What() + ": undecodable event"));
      failed = true;
      return false;
    }
    std::string type = ev["type"].get<std::string>();
    const json& obj = ev["object"];
    if (type == "ERROR") {
      ApiError e = ParseApiError(500, obj.dump());
      if (e.code == 410) {
        gone = true;
      } else {
        handler_.OnError(Status(e.ToStatus().code(), "watch " + What() + ": " + e.ToStatus().message()));
        failed = true;
      }
      return false;
    }
    if (type == "BOOKMARK") {
      std::string brv;
      if (obj.is_object() && obj.contains("metadata") && obj["metadata"].is_object()) {
        brv = obj["metadata"].value("resourceVersion", "");
      }
      if (!brv.empty()) SetResourceVersion(brv);
      ++events;
      return true;
    }
    if (type != "ADDED" && type != "MODIFIED" && type != "DELETED") {
      handler_.OnError(Status::InvalidArgument("watch " + What() + ": unknown event type " + type));
      failed = true;
      return false;
    }
    auto object = FromJson(obj, options_.filter);
    if (!object.ok()) {
      handler_.OnError(object.status());
      failed = true;
      return false;
    }
    if (stopping_) return false;
    if (!object->resource_version.empty()) SetResourceVersion(object->resource_version);
    ++events;
    if (type == "DELETED") {
      handler_.OnDelete(*object);
    } else {
      handler_.OnUpsert(*object);
    }
    return true;
  };

  HttpRequest req;
  req.path = path;
  if (options_.metadata_only) req.accept = kMetadataWatchAccept;
  // The server ends the watch after timeoutSeconds; the deadline is a backstop beyond it.
  req.deadline = std::chrono::duration_cast<milliseconds>(options_.watch_timeout) + options_.idle_timeout;
  req.read_timeout = options_.idle_timeout;
  req.on_connection = [this](std::shared_ptr<HttpConnection> c) {
    std::lock_guard<std::mutex> lock(mu_);
    active_ = std::move(c);
    if (stopping_) active_->Stop();
  };
  req.on_data = [&](const char* data, std::size_t n) -> bool {
    if (stopping_) return false;
    buffer.append(data, n);
    std::size_t start = 0;
    for (;;) {
      std::size_t nl = buffer.find('\n', start);
      if (nl == std::string::npos) break;
      try {
        if (!handle_line(std::string_view(buffer).substr(start, nl - start))) return false;
      } catch (const std::exception& e) {
        handler_error = e.what();
        return false;
      } catch (...) {
        handler_error = "unknown exception";
        return false;
      }
      start = nl + 1;
    }
    buffer.erase(0, start);
    if (buffer.size() > kMaxEventLine) {
      handler_.OnError(Status::ResourceExhausted("watch " + What() + ": event larger than 16 MiB"));
      failed = true;
      return false;
    }
    return true;
  };

  auto started = Now();
  HttpResponse res = client_.impl().Do(req);
  if (stopping_) return WatchEnd::kStopped;
  if (!handler_error.empty()) {
    ReportHandlerException(handler_error.c_str());
    return WatchEnd::kGone;
  }
  if (!failed && !gone && res.status == 200 && !buffer.empty()) {
    // A last event without a trailing newline.
    std::string last = std::move(buffer);
    handle_line(last);
  }
  if (gone) return WatchEnd::kGone;
  if (failed) return WatchEnd::kFailed;
  if (res.status == 410) return WatchEnd::kGone;
  if (res.status != 200) {
    handler_.OnError(Status(res.error.ToStatus().code(), "watch " + What() + ": " + res.error.ToStatus().message()));
    return WatchEnd::kFailed;
  }
  if (events > 0) {
    backoff_.Reset();
    return WatchEnd::kEnded;
  }
  // An empty watch: normal if it lasted (timeoutSeconds, idle), a failure if it ended at once —
  // otherwise a server that closes every watch immediately would be hammered.
  if (Now() - started >= options_.min_watch_duration) return WatchEnd::kEnded;
  handler_.OnError(Status::Unavailable("watch " + What() + ": stream ended immediately without events"));
  return WatchEnd::kFailed;
}

}  // namespace draguard::kube
