// NodeSource: see include/draguard/kubetopo/node_source.h.
#include "draguard/kubetopo/node_source.h"

#include <charconv>
#include <ctime>

#include <nlohmann/json.hpp>

#include "draguard/kubetopo/publisher.h"
#include "draguard/topology/model.h"

namespace draguard::kubetopo {
namespace {

using std::chrono::steady_clock;
using std::chrono::system_clock;

bool EndsWithXml(const std::string& key) { return key.size() >= 4 && key.compare(key.size() - 4, 4, ".xml") == 0; }

int64_t VersionNumber(const std::string& rv) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(rv.data(), rv.data() + rv.size(), v);
  return ec == std::errc() && p == rv.data() + rv.size() ? v : 0;
}

// FNV-1a over the parts of a Node the source reads: a Node update that leaves them alone (a
// status heartbeat) is recognised without parsing anything.
uint64_t PublicationHash(const kube::Object& node) {
  uint64_t h = 0xcbf29ce484222325ull;
  auto feed = [&h](std::string_view s) {
    for (unsigned char c : s) {
      h ^= c;
      h *= 0x100000001b3ull;
    }
    h ^= 0xff;  // separator
    h *= 0x100000001b3ull;
  };
  auto l = node.labels.find(std::string(topology::kShapeLabel));
  feed(l == node.labels.end() ? std::string_view() : std::string_view(l->second));
  auto a = node.annotations.find(kNodeAnnotation);
  feed(a == node.annotations.end() ? std::string_view("-") : std::string_view(a->second));
  return h;
}

// metadata.creationTimestamp ("2026-01-02T03:04:05Z"); nullopt when it is not that form.
std::optional<system_clock::time_point> ParseTimestamp(const std::string& s) {
  std::tm tm{};
  char z = 0;
  if (std::sscanf(s.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%c", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
                  &tm.tm_min, &tm.tm_sec, &z) != 7 ||
      z != 'Z') {
    return std::nullopt;
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  const time_t t = timegm(&tm);
  if (t == static_cast<time_t>(-1)) return std::nullopt;
  return system_clock::from_time_t(t);
}

std::string OriginOf(const kube::Object& cm) { return "configmap " + cm.namespace_name + "/" + cm.name; }

// The key of a shape object: its digest, or (for a name that is not a shape object's) the name
// marked so that it can never equal a digest.
std::string DigestKey(const std::string& name) {
  const std::string_view prefix(kShapeObjectPrefix);
  return name.compare(0, prefix.size(), prefix) == 0 ? name.substr(prefix.size()) : "invalid:" + name;
}

}  // namespace

Result<std::pair<std::string, std::string>> SelectExport(const kube::Object& cm) {
  for (const auto* m : {&cm.data, &cm.binary_data}) {
    if (auto it = m->find(kTopologyKey); it != m->end()) return std::make_pair(it->first, it->second);
  }
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

// One node's publication as the source knows it.
// `built` is what the source serves: the node as its last publication that could be built made
// it (the last good model). The latest publication may be newer: waiting for its shape object, or
// refused; the node keeps its last good model meanwhile, and so never leaves the model while it
// moves to a shape whose object event has not arrived yet.
struct NodeSource::NodeEntry {
  uint64_t hash = 0;           // of its label and annotation (PublicationHash)
  std::string digest;          // the shape object its latest publication names; empty when unreadable
  std::string latest_version;  // resourceVersion of the Node when its publication last changed
  std::string version;         // resourceVersion of the publication `built` was built from
  std::unique_ptr<NodePublication> waiting;  // the latest publication, until its shape object is known
  std::shared_ptr<const topology::NodeTopology> built;  // the last good model; null before the first
  Status problem;              // why the latest publication is refused (OK when built or waiting)
};

// One shape object.
struct NodeSource::ShapeEntry {
  std::string name, uid, fingerprint, resource_version;
  std::optional<system_clock::time_point> created;
  std::optional<topology::ShapeRecord> record;  // set when verified
  Status problem;                               // why it is refused
  std::optional<steady_clock::time_point> unused_since;
};

// One per-node ConfigMap of an earlier release.
struct NodeSource::LegacyEntry {
  std::string node;              // label draguard.io/node ("" = the export's HostName)
  std::string resource_version;
  std::string name;              // ConfigMap name, to GET it again
  std::optional<std::pair<std::string, std::string>> export_bytes;  // (key, bytes) until read
  Status problem;                // no export key
};

// What the source keeps of a per-node ConfigMap of an earlier release.
NodeSource::LegacyEntry NodeSource::LegacyEntryOf(const kube::Object& cm) {
  NodeSource::LegacyEntry l;
  if (auto it = cm.labels.find(kNodeLabel); it != cm.labels.end()) l.node = it->second;
  l.resource_version = cm.resource_version;
  l.name = cm.name;
  Result<std::pair<std::string, std::string>> sel = SelectExport(cm);
  if (sel.ok()) {
    l.export_bytes = std::move(sel).value();
  } else {
    l.problem = sel.status();
  }
  return l;
}

// Adapts one feed's watcher callbacks to the source.
class NodeSource::Handler : public kube::WatchHandler {
 public:
  Handler(NodeSource& source, Feed feed) : source_(source), feed_(feed) {}
  void OnSync(std::vector<kube::Object> all) override { source_.Sync(feed_, std::move(all)); }
  void OnUpsert(const kube::Object& object) override { source_.Upsert(feed_, object); }
  void OnDelete(const kube::Object& object) override { source_.Delete(feed_, object); }
  void OnError(const Status& status) override { source_.Error(status); }

 private:
  NodeSource& source_;
  Feed feed_;
};

NodeSource::NodeSource(const kube::Client& client, NodeSourceOptions options)
    : client_(client), options_(std::move(options)) {
  auto add = [&](Feed feed, kube::WatchOptions w) {
    handlers_.push_back(std::make_unique<Handler>(*this, feed));
    watchers_.push_back(std::make_unique<kube::Watcher>(client_, *handlers_.back(), std::move(w)));
  };
  kube::WatchOptions nodes = options_.watch;
  nodes.resource = "nodes";
  nodes.namespace_name.clear();
  nodes.label_selector = std::string(topology::kShapeLabel);
  nodes.metadata_only = true;
  nodes.page_size = options_.node_page_size;
  nodes.filter = {{std::string(topology::kShapeLabel)}, {kNodeAnnotation}, false};
  add(Feed::kNodes, std::move(nodes));
  kube::WatchOptions shapes = options_.watch;
  shapes.resource = "configmaps";
  shapes.namespace_name = options_.namespace_name;
  shapes.label_selector = std::string(kTopologyLabel) + "=" + kShapeObjectLabelValue;
  shapes.filter = {{kTopologyLabel, std::string(topology::kShapeLabel)}, {}, true};
  add(Feed::kShapes, std::move(shapes));
  if (options_.legacy_configmaps) {
    kube::WatchOptions legacy = options_.watch;
    legacy.resource = "configmaps";
    legacy.namespace_name = options_.namespace_name;
    legacy.label_selector = std::string(kTopologyLabel) + "=hwloc";
    legacy.filter = {{kNodeLabel}, {}, true};
    add(Feed::kLegacy, std::move(legacy));
  } else {
    synced_[static_cast<int>(Feed::kLegacy)] = true;
  }
}

NodeSource::~NodeSource() {
  for (auto& w : watchers_) w->Stop();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (collector_.joinable()) collector_.join();
  StopWatching();
}

void NodeSource::Start() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (started_) return;
    started_ = true;
  }
  for (auto& w : watchers_) w->Start();
  if (options_.collect_after.count() > 0) collector_ = std::thread([this] { CollectLoop(); });
}

bool NodeSource::WaitForSync(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return synced_[0] && synced_[1] && synced_[2]; });
}

bool NodeSource::synced() const {
  std::lock_guard<std::mutex> lock(mu_);
  return synced_[0] && synced_[1] && synced_[2];
}

Status NodeSource::last_error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_error_;
}

NodeSourceCounts NodeSource::counts() const {
  std::lock_guard<std::mutex> lock(mu_);
  NodeSourceCounts c;
  for (const auto& [name, n] : nodes_) {
    if (n.waiting != nullptr) {
      ++c.nodes_waiting;
    } else if (!n.problem.ok()) {
      ++c.nodes_refused;
    } else if (n.built != nullptr) {
      ++c.nodes_built;
    }
  }
  for (const auto& [digest, s] : shapes_) (s.record.has_value() ? c.shape_objects : c.shape_objects_refused)++;
  c.legacy_configmaps = legacy_.size();
  c.collected_total = collected_;
  return c;
}

std::string NodeSource::Describe() const {
  return "node publications (label " + std::string(topology::kShapeLabel) + ", annotation " + kNodeAnnotation +
         ") with shape objects in " + options_.namespace_name +
         (options_.legacy_configmaps ? ", and per-node topology ConfigMaps of earlier releases" : "");
}

Result<std::vector<topology::SourceEntry>> NodeSource::List() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<topology::SourceEntry> out;
  out.reserve(nodes_.size() + legacy_.size());
  for (const auto& [name, n] : nodes_) {
    if (n.built == nullptr) continue;
    topology::SourceEntry e;
    e.node = name;
    e.version = n.version;
    e.origin = n.built->source;
    e.modified_ns = VersionNumber(n.version);
    e.built = n.built;
    out.push_back(std::move(e));
  }
  for (const auto& [origin, l] : legacy_) {
    // A node published the current way takes that over its ConfigMap of an earlier release.
    if (auto it = nodes_.find(l.node); !l.node.empty() && it != nodes_.end() && it->second.built != nullptr) continue;
    topology::SourceEntry e;
    e.node = l.node;
    e.version = l.resource_version;
    e.origin = origin;
    e.modified_ns = VersionNumber(l.resource_version);
    out.push_back(std::move(e));
  }
  return out;
}

Result<std::string> NodeSource::Read(const topology::SourceEntry& entry, size_t max_bytes) {
  std::pair<std::string, std::string> selected;
  std::string name;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = legacy_.find(entry.origin);
    if (it == legacy_.end()) return Status::NotFound(entry.origin + ": no longer present");
    LegacyEntry& l = it->second;
    if (!l.problem.ok()) return l.problem;
    if (l.export_bytes.has_value() && l.resource_version == entry.version) {
      selected = std::move(*l.export_bytes);  // handed over once: no raw export stays in memory
      l.export_bytes.reset();
    }
    name = l.name;
  }
  if (selected.first.empty()) {
    // Read once already (or a newer version is listed): fetch it again.
    const std::string path = "/api/v1/namespaces/" + kube::PathEscape(options_.namespace_name) + "/configmaps/" +
                             kube::PathEscape(name);
    kube::ApiCall call("GET", path);
    call.deadline = options_.api_deadline;
    kube::ApiResult got = client_.Call(call);
    if (!got.ok()) return Status(got.error.ToStatus().code(), entry.origin + ": " + got.error.ToStatus().message());
    Result<kube::Object> cm = kube::ParseObject(got.body);
    if (!cm.ok()) return Status(cm.status().code(), entry.origin + ": " + cm.status().message());
    Result<std::pair<std::string, std::string>> sel = SelectExport(*cm);
    if (!sel.ok()) return sel.status();
    selected = std::move(sel).value();
  }
  if (selected.first == kCompressedTopologyKey) {
    Result<std::string> xml = Gunzip(selected.second, max_bytes);
    if (!xml.ok()) return Status(xml.status().code(), entry.origin + " key " + selected.first + ": " + xml.status().message());
    return xml;
  }
  if (selected.second.size() > max_bytes) {
    return Status::ResourceExhausted(entry.origin + " key " + selected.first + ": export is " +
                                     std::to_string(selected.second.size()) + " bytes, over the " +
                                     std::to_string(max_bytes) + "-byte limit");
  }
  return std::move(selected.second);
}

Status NodeSource::Watch(std::function<void()> on_change) {
  std::lock_guard<std::mutex> wl(watch_mu_);
  StopNotifier();
  {
    std::lock_guard<std::mutex> lock(mu_);
    on_change_ = std::move(on_change);
    stop_notify_ = false;  // a change seen before Watch() stays pending (dirty_ is kept)
  }
  notifier_ = std::thread([this] { Notify(); });
  return Status::Ok();
}

void NodeSource::StopWatching() {
  std::lock_guard<std::mutex> wl(watch_mu_);
  StopNotifier();
  std::lock_guard<std::mutex> lock(mu_);
  on_change_ = nullptr;
}

// Ends the notifier thread (caller holds watch_mu_).
void NodeSource::StopNotifier() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_notify_ = true;
  }
  cv_.notify_all();
  if (notifier_.joinable()) notifier_.join();
}

// Notifier thread: one on_change per burst of changes.
void NodeSource::Notify() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_notify_ || dirty_; });
    if (stop_notify_) return;
    if (options_.settle.count() > 0) {
      // Quiet period: restart it while changes keep arriving, up to 10 periods in all.
      const auto cap = steady_clock::now() + options_.settle * 10;
      for (;;) {
        dirty_ = false;
        const auto until = std::min(cap, steady_clock::now() + options_.settle);
        if (!cv_.wait_until(lock, until, [&] { return stop_notify_ || dirty_; })) break;
        if (stop_notify_) return;
        if (steady_clock::now() >= cap) break;
      }
    }
    dirty_ = false;
    std::function<void()> cb = on_change_;
    lock.unlock();
    if (cb) cb();
    lock.lock();
  }
}

void NodeSource::MarkDirtyLocked() { dirty_ = true; }

void NodeSource::Error(const Status& status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    last_error_ = status;
  }
  if (options_.on_error) options_.on_error(status);
}

// Builds a node whose shape object is known, or records why it cannot be.
void NodeSource::BuildNodeLocked(const std::string& name, NodeEntry& n) {
  auto s = shapes_.find(n.digest);
  if (s == shapes_.end() || n.waiting == nullptr) return;
  NodePublication pub = std::move(*n.waiting);
  n.waiting.reset();
  auto refuse = [&](const std::string& why) {
    n.problem = Status::FailedPrecondition("node " + name + ": " + why +
                                           (n.built != nullptr ? "; the node keeps its last good model" : ""));
    reports_.push_back(n.problem);
  };
  if (!s->second.record.has_value()) {
    refuse("its shape object " + s->second.name + " is refused: " + s->second.problem.message());
    return;
  }
  const topology::ShapeRecord& record = *s->second.record;
  if (record.shape->fingerprint != pub.fingerprint) {
    refuse("label " + std::string(topology::kShapeLabel) + "=" + pub.fingerprint + " disagrees with its shape object " +
           s->second.name + " (shape " + record.shape->fingerprint + ")");
    return;
  }
  auto built = topology::MakeNodeTopology(record, std::move(pub.facts), name, "node " + name, n.latest_version);
  if (!built.ok()) {
    refuse(built.status().message());
    return;
  }
  n.built = std::move(built).value();
  n.version = n.latest_version;
  n.problem = Status::Ok();
}

// Applies one Node; true when what the source delivers may have changed.
bool NodeSource::UpsertNodeLocked(const kube::Object& node) {
  const uint64_t hash = PublicationHash(node);
  auto it = nodes_.find(node.name);
  if (it != nodes_.end() && it->second.hash == hash) return false;  // its publication is unchanged
  Result<NodePublication> pub = ReadNodePublication(node);
  if (!pub.ok() && pub.status().code() == StatusCode::kNotFound) {
    // Nothing published the current way (a node of an earlier release's exporter).
    if (it == nodes_.end()) return false;
    nodes_.erase(it);
    return true;
  }
  NodeEntry& n = nodes_[node.name];  // its last good model, if any, stays
  n.hash = hash;
  n.latest_version = node.resource_version;
  n.waiting.reset();
  n.problem = Status::Ok();
  n.digest.clear();
  if (!pub.ok()) {
    n.problem = Status(pub.status().code(), pub.status().message() +
                                                (n.built != nullptr ? "; the node keeps its last good model" : ""));
    reports_.push_back(n.problem);
    return true;
  }
  n.digest = pub->shape_object;
  n.waiting = std::make_unique<NodePublication>(std::move(pub).value());
  BuildNodeLocked(node.name, n);
  return true;
}

// Applies one shape object; true when what the source delivers may have changed.
bool NodeSource::UpsertShapeLocked(const kube::Object& cm) {
  const std::string digest = DigestKey(cm.name);
  auto it = shapes_.find(digest);
  if (it != shapes_.end() && it->second.resource_version == cm.resource_version) return false;
  ShapeEntry s;
  s.name = cm.name;
  s.uid = cm.uid;
  s.resource_version = cm.resource_version;
  s.created = ParseTimestamp(cm.creation_timestamp);
  if (auto l = cm.labels.find(std::string(topology::kShapeLabel)); l != cm.labels.end()) s.fingerprint = l->second;
  if (it != shapes_.end() && it->second.record.has_value() && it->second.uid == cm.uid) {
    s.record = it->second.record;  // the same immutable object, metadata changed: nothing to decode
  } else {
    Result<topology::ShapeRecord> record = VerifyShapeObject(cm, interner_, options_.limits);
    if (record.ok()) {
      s.record = std::move(record).value();
    } else {
      s.problem = record.status();
      reports_.push_back(s.problem);
    }
  }
  if (it != shapes_.end()) s.unused_since = it->second.unused_since;
  shapes_[digest] = std::move(s);
  // Nodes waiting for it can be built now.
  for (auto& [name, n] : nodes_) {
    if (n.digest == digest && n.waiting != nullptr) BuildNodeLocked(name, n);
  }
  return true;
}

void NodeSource::Sync(Feed feed, std::vector<kube::Object> all) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    switch (feed) {
      case Feed::kNodes: {
        std::map<std::string, NodeEntry> old;
        old.swap(nodes_);
        for (const kube::Object& node : all) {
          // A node still listed keeps its entry (an unchanged publication its built node, a changed
          // one its last good model).
          if (auto o = old.find(node.name); o != old.end()) nodes_.emplace(node.name, std::move(o->second));
          UpsertNodeLocked(node);
        }
        break;
      }
      case Feed::kShapes: {
        std::map<std::string, ShapeEntry> old;
        old.swap(shapes_);
        for (const kube::Object& cm : all) {
          const std::string digest = DigestKey(cm.name);
          if (auto o = old.find(digest); o != old.end() && o->second.resource_version == cm.resource_version) {
            shapes_.emplace(digest, std::move(o->second));
            continue;
          }
          UpsertShapeLocked(cm);
        }
        // Nodes built from an object that is gone keep their model (the record is immutable);
        // waiting nodes keep waiting.
        for (auto& [name, n] : nodes_) {
          if (n.waiting != nullptr) BuildNodeLocked(name, n);
        }
        break;
      }
      case Feed::kLegacy:
        legacy_.clear();
        for (const kube::Object& cm : all) legacy_[OriginOf(cm)] = LegacyEntryOf(cm);
        break;
    }
    last_error_ = Status::Ok();
  }
  // What was refused is reported before the list counts as synced (WaitForSync).
  FlushReports();
  {
    std::lock_guard<std::mutex> lock(mu_);
    synced_[static_cast<int>(feed)] = true;
    MarkDirtyLocked();
  }
  cv_.notify_all();
}

// Reports what the last change refused, outside the lock.
void NodeSource::FlushReports() {
  std::vector<Status> reports;
  {
    std::lock_guard<std::mutex> lock(mu_);
    reports.swap(reports_);
  }
  if (options_.on_error) {
    for (const Status& r : reports) options_.on_error(r);
  }
}

void NodeSource::Upsert(Feed feed, const kube::Object& object) {
  bool changed = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    switch (feed) {
      case Feed::kNodes: changed = UpsertNodeLocked(object); break;
      case Feed::kShapes: changed = UpsertShapeLocked(object); break;
      case Feed::kLegacy:
        legacy_[OriginOf(object)] = LegacyEntryOf(object);
        changed = true;
        break;
    }
    if (changed) MarkDirtyLocked();
  }
  FlushReports();
  if (changed) cv_.notify_all();
}

void NodeSource::Delete(Feed feed, const kube::Object& object) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    switch (feed) {
      case Feed::kNodes: nodes_.erase(object.name); break;
      case Feed::kShapes:
        // Nodes already built keep their model; new nodes wait until it is created again.
        shapes_.erase(DigestKey(object.name));
        break;
      case Feed::kLegacy: legacy_.erase(OriginOf(object)); break;
    }
    MarkDirtyLocked();
  }
  cv_.notify_all();
}

// ---- collection ---------------------------------------------------------------------------------

void NodeSource::CollectLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, options_.collect_interval, [&] { return stop_; });
    if (stop_) return;
    lock.unlock();
    CollectNow();
    lock.lock();
  }
}

// A fresh (not cached) list of the Nodes labelled with `fingerprint` confirms that none uses the
// shape object `digest`. False also when the list fails.
bool NodeSource::StillUnused(const std::string& digest, const std::string& fingerprint) {
  std::string cont;
  do {
    std::string path = "/api/v1/nodes?limit=500&labelSelector=" +
                       kube::PathEscape(std::string(topology::kShapeLabel) + "=" + fingerprint);
    if (!cont.empty()) path += "&continue=" + kube::PathEscape(cont);
    kube::ApiCall call("GET", path);
    call.accept = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
    call.deadline = options_.api_deadline;
    kube::ApiResult got = client_.Call(call);
    if (!got.ok()) {
      Error(Status(got.error.ToStatus().code(), "collecting shape objects: LIST nodes: " + got.error.ToStatus().message()));
      return false;
    }
    const nlohmann::json list = nlohmann::json::parse(got.body, nullptr, false);
    if (list.is_discarded() || !list.is_object() || !list.contains("items") || !list["items"].is_array()) return false;
    for (const auto& item : list["items"]) {
      Result<kube::Object> node = kube::ParseObject(item.dump(), {{std::string(topology::kShapeLabel)}, {kNodeAnnotation}, false});
      if (!node.ok()) return false;
      Result<NodePublication> pub = ReadNodePublication(*node);
      if (pub.ok() && pub->shape_object == digest) return false;
    }
    cont = list.contains("metadata") && list["metadata"].is_object() ? list["metadata"].value("continue", "") : "";
  } while (!cont.empty());
  return true;
}

void NodeSource::CollectNow() {
  struct Candidate {
    std::string digest, name, uid, fingerprint;
  };
  std::vector<Candidate> candidates;
  const auto now = steady_clock::now();
  const auto wall = options_.wall_clock ? options_.wall_clock() : system_clock::now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Only with a complete view of the Nodes and the objects.
    if (!synced_[0] || !synced_[1]) return;
    std::map<std::string, bool> used;
    for (const auto& [name, n] : nodes_) {
      if (!n.digest.empty()) used[n.digest] = true;
    }
    for (auto& [digest, s] : shapes_) {
      if (used.count(digest) != 0) {
        s.unused_since.reset();
        continue;
      }
      if (!s.unused_since.has_value()) s.unused_since = now;
      const bool long_unused = now - *s.unused_since >= options_.collect_after;
      const bool old = s.created.has_value() && wall - *s.created >= options_.collect_after;
      if (long_unused && old) candidates.push_back({digest, s.name, s.uid, s.fingerprint});
    }
  }
  for (const Candidate& c : candidates) {
    // An object that failed verification is used by no valid publication: no need to ask.
    const bool verified = [&] {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = shapes_.find(c.digest);
      return it != shapes_.end() && it->second.record.has_value();
    }();
    if (verified && !StillUnused(c.digest, c.fingerprint)) continue;
    const std::string path = "/api/v1/namespaces/" + kube::PathEscape(options_.namespace_name) + "/configmaps/" +
                             kube::PathEscape(c.name);
    const nlohmann::json opts = {{"apiVersion", "v1"}, {"kind", "DeleteOptions"}, {"preconditions", {{"uid", c.uid}}}};
    kube::ApiCall call("DELETE", path, opts.dump());
    call.deadline = options_.api_deadline;
    kube::ApiResult deleted = client_.Call(call);
    if (deleted.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      ++collected_;
    } else if (deleted.status != 404 && deleted.status != 409) {  // another replica was first
      Error(Status(deleted.error.ToStatus().code(),
                   "collecting shape object " + c.name + ": " + deleted.error.ToStatus().message()));
    }
  }
}

}  // namespace draguard::kubetopo
