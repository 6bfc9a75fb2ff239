// Snapshot construction, lookups and shape interning.
#include "draguard/topology/snapshot.h"

#include <algorithm>
#include <map>

namespace draguard::topology {

std::shared_ptr<const void> Snapshot::Memo(const std::string& key,
                                           const std::function<std::shared_ptr<const void>()>& compute) const {
  {
    std::lock_guard<std::mutex> lock(memo_mu_);
    auto it = memo_.find(key);
    if (it != memo_.end()) return it->second;
  }
  // Computed without the lock, so a computation may memoize its own parts; when two threads race,
  // the first value stored wins and both return it.
  std::shared_ptr<const void> value = compute();
  std::lock_guard<std::mutex> lock(memo_mu_);
  return memo_.emplace(key, std::move(value)).first->second;
}

std::shared_ptr<const Snapshot> Snapshot::Create(std::vector<std::shared_ptr<const NodeTopology>> nodes,
                                                  uint64_t generation) {
  std::shared_ptr<Snapshot> s(new Snapshot());
  s->generation_ = generation;
  std::sort(nodes.begin(), nodes.end(), [](const auto& a, const auto& b) { return a->name < b->name; });
  s->nodes_ = std::move(nodes);
  std::map<std::string, ShapeGroup> groups;
  for (const auto& n : s->nodes_) {
    ShapeGroup& g = groups[n->shape->fingerprint];
    // Equal fingerprints with different hardware (a 64-bit collision) get separate groups.
    if (g.shape != nullptr && g.shape != n->shape && !g.shape->SameHardware(*n->shape)) {
      ShapeGroup& alt = groups[n->shape->fingerprint + "#" + n->name];
      alt.shape = n->shape;
      alt.nodes.push_back(n->name);
      continue;
    }
    if (g.shape == nullptr) g.shape = n->shape;
    g.nodes.push_back(n->name);
  }
  for (auto& [fp, g] : groups) s->shapes_.push_back(std::move(g));
  return s;
}

const NodeTopology* Snapshot::Find(std::string_view name) const {
  auto it = std::lower_bound(nodes_.begin(), nodes_.end(), name,
                             [](const std::shared_ptr<const NodeTopology>& n, std::string_view v) { return n->name < v; });
  if (it == nodes_.end() || (*it)->name != name) return nullptr;
  return it->get();
}

const ShapeGroup* Snapshot::FindShape(std::string_view fingerprint) const {
  for (const ShapeGroup& g : shapes_) {
    if (g.shape->fingerprint == fingerprint) return &g;
  }
  return nullptr;
}

std::shared_ptr<const Shape> ShapeInterner::Intern(Shape shape) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& bucket = by_fingerprint_[shape.fingerprint];
  for (const auto& w : bucket) {
    if (auto s = w.lock(); s != nullptr && s->SameHardware(shape)) return s;
  }
  auto s = std::make_shared<const Shape>(std::move(shape));
  bucket.push_back(s);
  return s;
}

std::shared_ptr<const CpuList> ShapeInterner::InternCpus(CpuList cpus) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a over every field
  auto feed = [&](uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 0x100000001b3ull;
    }
  };
  for (const LogicalCpu& c : cpus) {
    for (uint64_t v : {uint64_t{c.os_index}, uint64_t{c.core}, uint64_t{c.core_group}, uint64_t{c.package},
                       uint64_t{c.numa_node}, uint64_t{c.l3_cache}, static_cast<uint64_t>(c.kind)}) {
      feed(v);
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto& bucket = cpus_by_hash_[h];
  for (const auto& w : bucket) {
    if (auto s = w.lock(); s != nullptr && *s == cpus) return s;
  }
  auto s = std::make_shared<const CpuList>(std::move(cpus));
  bucket.push_back(s);
  return s;
}

size_t ShapeInterner::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const auto& [fp, bucket] : by_fingerprint_) {
    for (const auto& w : bucket) n += w.expired() ? 0 : 1;
  }
  return n;
}

void ShapeInterner::Prune() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = by_fingerprint_.begin(); it != by_fingerprint_.end();) {
    auto& bucket = it->second;
    bucket.erase(std::remove_if(bucket.begin(), bucket.end(), [](const auto& w) { return w.expired(); }), bucket.end());
    it = bucket.empty() ? by_fingerprint_.erase(it) : std::next(it);
  }
  for (auto it = cpus_by_hash_.begin(); it != cpus_by_hash_.end();) {
    auto& bucket = it->second;
    bucket.erase(std::remove_if(bucket.begin(), bucket.end(), [](const auto& w) { return w.expired(); }), bucket.end());
    it = bucket.empty() ? cpus_by_hash_.erase(it) : std::next(it);
  }
}

std::shared_ptr<const NodeTopology> MakeNodeTopology(ParsedExport parsed, std::string name, std::string source,
                                                     std::string version, ShapeInterner& interner) {
  auto n = std::make_shared<NodeTopology>();
  n->name = std::move(name);
  n->source = std::move(source);
  n->version = std::move(version);
  n->hwloc_version = std::move(parsed.hwloc_version);
  n->host_name = std::move(parsed.host_name);
  n->xml_format = std::move(parsed.xml_format);
  n->gpu_uuids = std::move(parsed.gpu_uuids);
  n->nvlink_clique = std::move(parsed.nvlink_clique);
  // Keep the per-node UUID vector small when the export has none.
  if (std::all_of(n->gpu_uuids.begin(), n->gpu_uuids.end(), [](const std::string& u) { return u.empty(); })) {
    n->gpu_uuids.clear();
  }
  n->gpu_uuids.shrink_to_fit();
  n->numa_packages = std::move(parsed.numa_packages);
  n->cpus = interner.InternCpus(std::move(parsed.cpus));
  n->shape = interner.Intern(std::move(parsed.shape));
  return n;
}

}  // namespace draguard::topology
