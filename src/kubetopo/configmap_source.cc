// ConfigMapSource: see include/draguard/kubetopo/configmap_source.h.
#include "draguard/kubetopo/configmap_source.h"

#include <charconv>

#include "draguard/kubetopo/publisher.h"

namespace draguard::kubetopo {
namespace {

std::string OriginOf(const kube::ConfigMap& cm) { return "configmap " + cm.namespace_name + "/" + cm.name; }

bool EndsWithXml(const std::string& key) {
  return key.size() >= 4 && key.compare(key.size() - 4, 4, ".xml") == 0;
}

int64_t VersionNumber(const std::string& rv) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(rv.data(), rv.data() + rv.size(), v);
  return ec == std::errc() && p == rv.data() + rv.size() ? v : 0;
}

}  // namespace

Result<std::pair<std::string, std::string>> SelectExport(const kube::ConfigMap& cm) {
  for (const auto* m : {&cm.data, &cm.binary_data}) {
    if (auto it = m->find(kTopologyKey); it != m->end()) return std::make_pair(it->first, it->second);
  }
  // What `topology export --publish` writes for exports over the ConfigMap size limit.
  if (auto it = cm.binary_data.find(kCompressedTopologyKey); it != cm.binary_data.end()) {
    return std::make_pair(it->first, it->second);
  }
  for (const auto* m : {&cm.data, &cm.binary_data}) {
    for (const auto& [k, v] : *m) {
      if (EndsWithXml(k)) return std::make_pair(k, v);
    }
  }
  return Status::NotFound(OriginOf(cm) + ": no key topology.xml, topology.xml.gz or *.xml in data or binaryData");
}

ConfigMapSource::ConfigMapSource(const kube::Client& client, ConfigMapSourceOptions options)
    : options_(std::move(options)), watcher_(client, *this, options_.watch) {}

ConfigMapSource::~ConfigMapSource() {
  watcher_.Stop();
  StopWatching();
}

void ConfigMapSource::Start() { watcher_.Start(); }

bool ConfigMapSource::WaitForSync(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return synced_; });
}

bool ConfigMapSource::synced() const {
  std::lock_guard<std::mutex> lock(mu_);
  return synced_;
}

Status ConfigMapSource::last_error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_error_;
}

std::string ConfigMapSource::Describe() const {
  const auto& w = options_.watch;
  return "configmaps " + (w.namespace_name.empty() ? std::string("(all namespaces)") : "in " + w.namespace_name) +
         " labelled " + w.label_selector;
}

Result<std::vector<topology::SourceEntry>> ConfigMapSource::List() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<topology::SourceEntry> out;
  out.reserve(maps_.size());
  for (const auto& [origin, cm] : maps_) {
    topology::SourceEntry e;
    if (auto it = cm.labels.find(kNodeLabel); it != cm.labels.end()) e.node = it->second;
    e.version = cm.resource_version;
    e.origin = origin;
    e.modified_ns = VersionNumber(cm.resource_version);
    out.push_back(std::move(e));
  }
  return out;
}

Result<std::string> ConfigMapSource::Read(const topology::SourceEntry& entry, size_t max_bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = maps_.find(entry.origin);
  if (it == maps_.end()) return Status::NotFound(entry.origin + ": no longer present");
  auto selected = SelectExport(it->second);
  if (!selected.ok()) return selected.status();
  if (selected->first == kCompressedTopologyKey) {
    Result<std::string> xml = Gunzip(selected->second, max_bytes);
    if (!xml.ok()) return Status(xml.status().code(), entry.origin + " key " + selected->first + ": " + xml.status().message());
    return xml;
  }
  const std::string& bytes = selected->second;
  if (bytes.size() > max_bytes) {
    return Status::ResourceExhausted(entry.origin + " key " + selected->first + ": export is " +
                                     std::to_string(bytes.size()) + " bytes, over the " +
                                     std::to_string(max_bytes) + "-byte limit");
  }
  return bytes;
}

Status ConfigMapSource::Watch(std::function<void()> on_change) {
  std::lock_guard<std::mutex> wl(watch_mu_);
  if (notifier_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_notify_ = true;
    }
    cv_.notify_all();
    notifier_.join();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    on_change_ = std::move(on_change);
    stop_notify_ = false;  // a change seen before Watch() stays pending (dirty_ is kept)
  }
  notifier_ = std::thread([this] { Notify(); });
  return Status::Ok();
}

void ConfigMapSource::StopWatching() {
  std::lock_guard<std::mutex> wl(watch_mu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_notify_ = true;
  }
  cv_.notify_all();
  if (notifier_.joinable()) notifier_.join();
  std::lock_guard<std::mutex> lock(mu_);
  on_change_ = nullptr;
}

// Notifier thread: one on_change per burst of changes.
void ConfigMapSource::Notify() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_notify_ || dirty_; });
    if (stop_notify_) return;
    if (options_.settle.count() > 0) {
      // Quiet period: restart it while changes keep arriving, up to 10 periods in all.
      const auto cap = std::chrono::steady_clock::now() + options_.settle * 10;
      for (;;) {
        dirty_ = false;
        const auto until = std::min(cap, std::chrono::steady_clock::now() + options_.settle);
        if (!cv_.wait_until(lock, until, [&] { return stop_notify_ || dirty_; })) break;
        if (stop_notify_) return;
        if (std::chrono::steady_clock::now() >= cap) break;
      }
    }
    dirty_ = false;
    std::function<void()> cb = on_change_;
    lock.unlock();
    if (cb) cb();
    lock.lock();
  }
}

void ConfigMapSource::MarkDirty() {
  // Caller holds mu_.
  dirty_ = true;
}

void ConfigMapSource::OnSync(std::vector<kube::ConfigMap> all) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    maps_.clear();
    for (auto& cm : all) {
      std::string origin = OriginOf(cm);
      maps_[origin] = std::move(cm);
    }
    synced_ = true;
    last_error_ = Status::Ok();
    MarkDirty();
  }
  cv_.notify_all();
}

void ConfigMapSource::OnUpsert(const kube::ConfigMap& cm) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    maps_[OriginOf(cm)] = cm;
    MarkDirty();
  }
  cv_.notify_all();
}

void ConfigMapSource::OnDelete(const kube::ConfigMap& cm) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    maps_.erase(OriginOf(cm));
    MarkDirty();
  }
  cv_.notify_all();
}

void ConfigMapSource::OnError(const Status& status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    last_error_ = status;
  }
  if (options_.on_error) options_.on_error(status);
}

}  // namespace draguard::kubetopo
