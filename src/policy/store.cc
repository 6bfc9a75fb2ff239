#include "draguard/policy/store.h"

#include <algorithm>
#include <utility>

namespace draguard::policy {

PolicyStore::PolicyStore(std::vector<std::string> extra_exempt_namespaces,
                         ReloadCallback on_reload)
    : extra_namespaces_(std::move(extra_exempt_namespaces)), on_reload_(std::move(on_reload)) {}

PolicyStore::~PolicyStore() { StopWatching(); }

Status PolicyStore::Install(Result<Policy> parsed) {
  if (!parsed.ok()) {
    if (on_reload_) on_reload_(parsed.status());
    return parsed.status();
  }
  Policy pol = std::move(parsed).value();
  for (const auto& ns : extra_namespaces_) {
    auto& list = pol.exemptions.namespaces;
    if (!ns.empty() && std::find(list.begin(), list.end(), ns) == list.end()) list.push_back(ns);
  }
  Set(std::move(pol));
  if (on_reload_) on_reload_(Status::Ok());
  return Status::Ok();
}

Status PolicyStore::LoadDefault() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    path_.clear();
  }
  return Install(ParsePolicy(DefaultPolicyYaml(), "default-policy.yaml"));
}

Status PolicyStore::LoadFile(const std::string& path) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    path_ = path;
  }
  return Install(LoadPolicyFile(path));
}

Status PolicyStore::Reload() {
  std::string p = path();
  if (p.empty()) return LoadDefault();
  return Install(LoadPolicyFile(p));
}

void PolicyStore::Set(Policy policy) {
  auto snap = std::make_shared<const Policy>(std::move(policy));
  std::lock_guard<std::mutex> lock(mu_);
  current_ = std::move(snap);
}

void PolicyStore::Watch(std::chrono::milliseconds interval) {
  std::string p = path();
  std::unique_ptr<FileWatcher> watcher;
  if (!p.empty()) {
    watcher = std::make_unique<FileWatcher>(std::vector<std::string>{p}, interval, [this] { (void)Reload(); });
    watcher->Start();
  }
  std::lock_guard<std::mutex> lock(watch_mu_);
  std::swap(watcher_, watcher);  // the previous watcher stops when `watcher` goes out of scope
}

void PolicyStore::StopWatching() {
  std::unique_ptr<FileWatcher> old;
  {
    std::lock_guard<std::mutex> lock(watch_mu_);
    old = std::move(watcher_);
  }
  // The destructor stops and joins the thread outside the lock.
}

bool PolicyStore::PollNow() {
  std::lock_guard<std::mutex> lock(watch_mu_);
  return watcher_ != nullptr && watcher_->CheckNow();
}

std::shared_ptr<const Policy> PolicyStore::Current() const {
  std::lock_guard<std::mutex> lock(mu_);
  return current_;
}

std::string PolicyStore::path() const {
  std::lock_guard<std::mutex> lock(mu_);
  return path_;
}

}  // namespace draguard::policy
