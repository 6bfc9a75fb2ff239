#include "draguard/kubeclaims/claim_cache.h"

#include <mutex>
#include <utility>

namespace draguard::kubeclaims {
namespace {

// "namespace/name": neither part can hold a '/'.
std::string KeyOf(std::string_view namespace_, std::string_view name) {
  std::string key;
  key.reserve(namespace_.size() + 1 + name.size());
  key.append(namespace_).append(1, '/').append(name);
  return key;
}

}  // namespace

ClaimStore::ClaimStore(std::string kind, std::string object_kind, std::size_t max_objects,
                       std::function<void(const Status&)> on_error)
    : kind_(std::move(kind)),
      object_kind_(std::move(object_kind)),
      max_objects_(max_objects),
      on_error_(std::move(on_error)) {}

std::shared_ptr<const dra::ClaimSummary> ClaimStore::Summarise(const kube::Object& object) const {
  auto spec = object.fields.find("spec");
  if (spec == object.fields.end()) return nullptr;
  admission::Json json = {{"apiVersion", std::string(kGroupVersion)},
                          {"kind", object_kind_},
                          {"metadata", {{"name", object.name}, {"namespace", object.namespace_name}}},
                          {"spec", admission::Json::parse(spec->second, nullptr, /*allow_exceptions=*/false)}};
  if (!json["spec"].is_object()) return nullptr;  // also what did not parse
  try {
    auto summary = dra::SummarizeClaimObject(json);
    if (!summary) return nullptr;
    return std::make_shared<const dra::ClaimSummary>(std::move(*summary));
  } catch (const std::exception&) {  // a spec of unexpected types is not a claim spec
    return nullptr;
  }
}

dra::ClaimLookup ClaimStore::Find(std::string_view namespace_, std::string_view name) const {
  dra::ClaimLookup out;
  std::shared_lock lock(mu_);
  if (closed_) {
    out.why = "the " + kind_ + " watch has stopped";
    return out;
  }
  if (over_bound_) {
    out.why = "the cache of " + kind_ + " is over its bound of " + std::to_string(max_objects_) + " objects";
    return out;
  }
  if (!synced_) {
    out.why = "the " + kind_ + " are not listed yet";
    return out;
  }
  auto it = objects_.find(KeyOf(namespace_, name));
  if (it == objects_.end()) {
    out.state = dra::ClaimLookup::State::kAbsent;
    return out;
  }
  out.state = dra::ClaimLookup::State::kFound;
  out.summary = it->second;
  return out;
}

std::size_t ClaimStore::size() const {
  std::shared_lock lock(mu_);
  return objects_.size();
}

std::size_t ClaimStore::bytes() const {
  std::shared_lock lock(mu_);
  return bytes_;
}

bool ClaimStore::synced() const {
  std::shared_lock lock(mu_);
  return synced_ && !over_bound_ && !closed_;
}

void ClaimStore::Close() {
  std::unique_lock lock(mu_);
  closed_ = true;
  objects_.clear();
  bytes_ = 0;
}

void ClaimStore::OnSync(std::vector<kube::Object> all) {
  std::map<Key, std::shared_ptr<const dra::ClaimSummary>, std::less<>> fresh;
  std::size_t bytes = 0;
  bool over = all.size() > max_objects_;
  for (std::size_t i = 0; i < all.size() && !over; ++i) {
    auto summary = Summarise(all[i]);
    if (summary == nullptr) continue;
    bytes += summary->Bytes();
    fresh[KeyOf(all[i].namespace_name, all[i].name)] = std::move(summary);
    all[i] = kube::Object{};  // the raw text is not needed any more
  }
  std::unique_lock lock(mu_);
  if (closed_) return;
  over_bound_ = over;
  objects_ = over ? decltype(objects_){} : std::move(fresh);
  bytes_ = over ? 0 : bytes;
  synced_ = true;
}

void ClaimStore::OnUpsert(const kube::Object& object) {
  auto summary = Summarise(object);
  std::unique_lock lock(mu_);
  if (closed_ || over_bound_) return;
  auto it = objects_.find(KeyOf(object.namespace_name, object.name));
  if (it != objects_.end()) {
    bytes_ -= it->second->Bytes();
    objects_.erase(it);
  }
  if (summary == nullptr) return;
  if (objects_.size() >= max_objects_) {
    // Past the bound the kind stops answering (until a relist finds it within the bound again).
    over_bound_ = true;
    objects_.clear();
    bytes_ = 0;
    return;
  }
  bytes_ += summary->Bytes();
  objects_[KeyOf(object.namespace_name, object.name)] = std::move(summary);
}

void ClaimStore::OnDelete(const kube::Object& object) {
  std::unique_lock lock(mu_);
  auto it = objects_.find(KeyOf(object.namespace_name, object.name));
  if (it == objects_.end()) return;
  bytes_ -= it->second->Bytes();
  objects_.erase(it);
}

void ClaimStore::OnError(const Status& status) {
  if (on_error_) on_error_(status);
}

ClaimCache::ClaimCache(const kube::Client& client, ClaimCacheOptions options)
    : templates_("ResourceClaimTemplates", "ResourceClaimTemplate", options.max_objects, options.on_error),
      claims_("ResourceClaims", "ResourceClaim", options.max_objects, options.on_error) {
  kube::WatchOptions w = options.watch;
  w.group_version = std::string(kGroupVersion);
  w.namespace_name.clear();
  w.label_selector.clear();
  w.metadata_only = false;
  w.filter = kube::ObjectFilter{};
  w.filter.metadata_maps = false;  // a summary reads the spec only
  w.filter.data = false;
  w.filter.fields = {"spec"};
  w.resource = "resourceclaimtemplates";
  template_watcher_ = std::make_unique<kube::Watcher>(client, templates_, w);
  w.resource = "resourceclaims";
  claim_watcher_ = std::make_unique<kube::Watcher>(client, claims_, w);
}

ClaimCache::~ClaimCache() { Stop(); }

void ClaimCache::Start() {
  template_watcher_->Start();
  claim_watcher_->Start();
}

void ClaimCache::Stop() {
  template_watcher_->Stop();
  claim_watcher_->Stop();
  templates_.Close();
  claims_.Close();
}

dra::ClaimLookup ClaimCache::Template(std::string_view namespace_, std::string_view name) const {
  return templates_.Find(namespace_, name);
}

dra::ClaimLookup ClaimCache::Claim(std::string_view namespace_, std::string_view name) const {
  return claims_.Find(namespace_, name);
}

}  // namespace draguard::kubeclaims
