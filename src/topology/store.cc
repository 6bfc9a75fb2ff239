// Store: reload orchestration, last-good retention, conflicts, metrics; in-memory and file sources.
#include "draguard/topology/store.h"

#include "draguard/k8s/names.h"
#include "draguard/read_file.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <set>
#include <thread>

namespace draguard::topology {

// Per-origin state kept between reloads.
struct Store::Cached {
  std::string version;
  int64_t modified_ns = 0;
  std::shared_ptr<const NodeTopology> last_good;  // may be null: never loaded successfully
  LoadErrorReason last_reason = LoadErrorReason::kNone;
  Status last_status;
};

namespace {

std::string BaseName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Reads a regular file, refusing it before reading when it is over max_bytes.
class FileSource : public Source {
 public:
  explicit FileSource(std::string path) : path_(std::move(path)) {}
  std::string Describe() const override { return "file " + path_; }
  Result<std::vector<SourceEntry>> List() override {
    struct stat st {};
    if (::stat(path_.c_str(), &st) != 0) return Status::NotFound(path_ + ": " + std::strerror(errno));
    SourceEntry e;
    e.node = NodeNameFromFileName(BaseName(path_));
    e.origin = path_;
    e.modified_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    e.version = std::to_string(e.modified_ns) + ":" + std::to_string(st.st_size) + ":" + std::to_string(st.st_ino);
    return std::vector<SourceEntry>{e};
  }
  Result<std::string> Read(const SourceEntry& entry, size_t max_bytes) override {
    return ReadFile(entry.origin, max_bytes);
  }

 private:
  std::string path_;
};

}  // namespace

// ---- InMemorySource ----

InMemorySource::InMemorySource(std::vector<InMemoryExport> exports) : exports_(std::move(exports)) {}

std::string InMemorySource::Describe() const { return "in-memory exports"; }

Result<std::vector<SourceEntry>> InMemorySource::List() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<SourceEntry> out;
  for (size_t i = 0; i < exports_.size(); ++i) {
    const InMemoryExport& e = exports_[i];
    SourceEntry s;
    s.node = e.node;
    s.version = e.version;
    s.origin = e.origin.empty() ? "memory:" + e.node : e.origin;
    s.modified_ns = e.modified_ns != 0 ? e.modified_ns : static_cast<int64_t>(i) + 1;
    out.push_back(std::move(s));
  }
  return out;
}

Result<std::string> InMemorySource::Read(const SourceEntry& entry, size_t max_bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const InMemoryExport& e : exports_) {
    const std::string origin = e.origin.empty() ? "memory:" + e.node : e.origin;
    if (origin == entry.origin) {
      if (e.bytes.size() > max_bytes) {
        return Status::ResourceExhausted(origin + ": export is " + std::to_string(e.bytes.size()) +
                                         " bytes, over the " + std::to_string(max_bytes) + "-byte limit");
      }
      return e.bytes;
    }
  }
  return Status::NotFound(entry.origin + ": no longer present");
}

Status InMemorySource::Watch(std::function<void()> on_change) {
  std::lock_guard<std::mutex> lock(mu_);
  on_change_ = std::move(on_change);
  return Status::Ok();
}

void InMemorySource::StopWatching() {
  std::lock_guard<std::mutex> lock(mu_);
  on_change_ = nullptr;
}

void InMemorySource::Replace(std::vector<InMemoryExport> exports) {
  std::function<void()> cb;
  {
    std::lock_guard<std::mutex> lock(mu_);
    exports_ = std::move(exports);
    cb = on_change_;
  }
  if (cb) cb();
}

std::unique_ptr<Source> MakeFileSource(std::string path) { return std::make_unique<FileSource>(std::move(path)); }

// ---- Store ----

Store::Store(StoreOptions options)
    : options_(std::move(options)),
      pool_(std::make_unique<ImportPool>(options_.parse_threads != 0 ? options_.parse_threads
                                                                     : std::max(1u, std::thread::hardware_concurrency()))) {
  current_.store(Snapshot::Create({}, 0));
}

Store::~Store() { Stop(); }

void Store::Log(LogLevel level, const std::string& msg) const {
  if (options_.log) options_.log(level, msg);
}

std::shared_ptr<const Snapshot> Store::Current() const { return current_.load(std::memory_order_acquire); }

StoreMetrics Store::Metrics() const {
  std::lock_guard<std::mutex> lock(stats_mu_);
  return metrics_;
}

std::vector<StoreProblem> Store::problems() const {
  std::lock_guard<std::mutex> lock(stats_mu_);
  return problems_;
}

void Store::SetOnReloadForTest(std::function<void(uint64_t)> fn) {
  std::lock_guard<std::mutex> lock(stats_mu_);
  on_reload_ = std::move(fn);
}

Status Store::Start(std::unique_ptr<Source> source, bool watch) {
  Stop();
  Source* raw = source.get();
  {
    std::lock_guard<std::mutex> lock(reload_mu_);
    source_ = std::move(source);
    cache_.clear();
  }
  if (Status s = Reload(); !s.ok()) return s;
  if (watch) {
    Status s = raw->Watch([this] {
      if (Status r = Reload(); !r.ok()) Log(LogLevel::kWarn, "topology reload failed: " + r.ToString());
    });
    if (!s.ok()) return s;
  }
  return Status::Ok();
}

void Store::Stop() {
  Source* raw = nullptr;
  {
    std::lock_guard<std::mutex> lock(reload_mu_);
    raw = source_.get();
  }
  // Not under reload_mu_: the watcher thread may be waiting for it inside Reload().
  if (raw != nullptr) raw->StopWatching();
}

// The result of parsing one changed entry: a node, or why there is none.
struct Store::Outcome {
  std::shared_ptr<const NodeTopology> node;
  LoadErrorReason reason = LoadErrorReason::kNone;
  Status status;
};

void Store::ParseRange(const std::vector<SourceEntry>& entries, const std::vector<size_t>& todo, size_t begin,
                       size_t end, std::vector<Outcome>& outcomes) {
  std::vector<std::string> bytes;
  std::vector<size_t> which;
  for (size_t k = begin; k < end; ++k) {
    const SourceEntry& e = entries[todo[k]];
    Result<std::string> b = source_->Read(e, options_.limits.max_bytes);
    if (!b.ok()) {
      outcomes[k].reason = b.status().code() == StatusCode::kResourceExhausted ? LoadErrorReason::kTooLarge
                                                                               : LoadErrorReason::kIo;
      outcomes[k].status = b.status();
      continue;
    }
    bytes.push_back(std::move(b).value());
    which.push_back(k);
  }
  std::vector<std::string_view> views(bytes.begin(), bytes.end());
  std::vector<LoadErrorReason> reasons;
  std::vector<Result<ParsedExport>> parsed = pool_->ParseBatch(views, options_.limits, &reasons);
  for (size_t j = 0; j < which.size(); ++j) {
    const size_t k = which[j];
    const SourceEntry& e = entries[todo[k]];
    Outcome& out = outcomes[k];
    if (!parsed[j].ok()) {
      out.reason = reasons[j];
      out.status = Status(parsed[j].status().code(), e.origin + ": " + parsed[j].status().message());
      continue;
    }
    std::string name = e.node;
    if (name.empty()) name = k8s::NodeNameFrom(parsed[j].value().host_name);
    if (name.empty()) name = k8s::NodeNameFrom(BaseName(e.origin));
    if (name.empty()) name = BaseName(e.origin);
    out.node = MakeNodeTopology(std::move(parsed[j]).value(), std::move(name), e.origin, e.version, interner_);
  }
}

std::vector<Store::Outcome> Store::ParseChanged(const std::vector<SourceEntry>& entries,
                                                const std::vector<size_t>& todo) {
  std::vector<Outcome> outcomes(todo.size());
  if (todo.empty()) return outcomes;
  // Exports are read and parsed in batches by up to parse_threads threads, each importing on its
  // own worker of the import pool; a batch bounds the bytes held in memory at once.
  constexpr size_t kBatch = 32;
  const size_t batches = (todo.size() + kBatch - 1) / kBatch;
  unsigned threads = options_.parse_threads != 0 ? options_.parse_threads : std::thread::hardware_concurrency();
  threads = std::max(1u, std::min<unsigned>(threads, static_cast<unsigned>(batches)));
  // Spread work evenly: with few exports, batches shrink so every thread gets some.
  const size_t batch = std::max<size_t>(1, std::min(kBatch, (todo.size() + threads - 1) / threads));
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t b = next.fetch_add(batch); b < todo.size(); b = next.fetch_add(batch)) {
      ParseRange(entries, todo, b, std::min(todo.size(), b + batch), outcomes);
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& th : pool) th.join();
  return outcomes;
}

void Store::Record(const std::vector<SourceEntry>& entries, const std::vector<size_t>& todo,
                   std::vector<Outcome>& outcomes, ReloadCounts& counts) {
  for (size_t k = 0; k < todo.size(); ++k) {
    const SourceEntry& e = entries[todo[k]];
    auto& slot = cache_[e.origin];
    if (slot == nullptr) slot = std::make_shared<Cached>();
    slot->version = e.version;
    slot->modified_ns = e.modified_ns;
    Outcome& out = outcomes[k];
    if (out.node != nullptr) {
      if (e.built == nullptr) ++counts.parsed_ok;
      slot->last_good = std::move(out.node);
      slot->last_reason = LoadErrorReason::kNone;
      slot->last_status = Status::Ok();
    } else {
      ++counts.errors[static_cast<size_t>(out.reason)];
      slot->last_reason = out.reason;
      slot->last_status = out.status;
      Log(LogLevel::kWarn, "topology: refused export (" + std::string(LoadErrorReasonName(out.reason)) +
                               "): " + out.status.message() +
                               (slot->last_good != nullptr ? "; node " + slot->last_good->name + " keeps its last good model"
                                                           : std::string()));
    }
  }
  // Entries that disappeared remove their nodes.
  std::map<std::string, bool> listed_origins;
  for (const SourceEntry& e : entries) listed_origins[e.origin] = true;
  for (auto it = cache_.begin(); it != cache_.end();) {
    it = listed_origins.count(it->first) != 0 ? std::next(it) : cache_.erase(it);
  }
}

std::vector<std::shared_ptr<const NodeTopology>> Store::PickNodes(std::vector<StoreProblem>& problems,
                                                                   ReloadCounts& counts) {
  for (const auto& [origin, c] : cache_) {
    if (c->last_reason != LoadErrorReason::kNone) {
      problems.push_back({origin, c->last_good != nullptr ? c->last_good->name : "", c->last_reason, c->last_status});
    }
  }
  // One node per name: the most recently modified export wins.
  std::map<std::string, std::pair<const Cached*, std::string>> winners;  // name -> (cached, origin)
  std::set<std::string> conflicts;  // "loser\nwinner" origins
  for (const auto& [origin, c] : cache_) {
    if (c->last_good == nullptr) continue;
    const std::string& name = c->last_good->name;
    auto [it, inserted] = winners.emplace(name, std::make_pair(c.get(), origin));
    if (inserted) continue;
    const Cached* other = it->second.first;
    const bool newer = c->modified_ns > other->modified_ns ||
                       (c->modified_ns == other->modified_ns && origin > it->second.second);
    const std::string loser = newer ? it->second.second : origin;
    const std::string winner = newer ? origin : it->second.second;
    if (newer) it->second = {c.get(), origin};
    problems.push_back({loser, name, LoadErrorReason::kConflict,
                        Status::FailedPrecondition("exports " + loser + " and " + winner + " both claim node " + name +
                                                   "; using the newer " + winner)});
    conflicts.insert(loser + "\n" + winner);
    if (conflicts_.count(loser + "\n" + winner) == 0) {  // log and count each conflict once
      ++counts.errors[static_cast<size_t>(LoadErrorReason::kConflict)];
      Log(LogLevel::kWarn, "topology: exports " + loser + " and " + winner + " both claim node " + name +
                               "; using the newer " + winner);
    }
  }
  conflicts_ = std::move(conflicts);
  std::vector<std::shared_ptr<const NodeTopology>> nodes;
  nodes.reserve(winners.size());
  for (const auto& [name, w] : winners) nodes.push_back(w.first->last_good);
  return nodes;
}

Status Store::Reload() {
  std::lock_guard<std::mutex> lock(reload_mu_);
  const auto t0 = std::chrono::steady_clock::now();
  if (source_ == nullptr) return Status::FailedPrecondition("topology store has no source");
  Result<std::vector<SourceEntry>> listed = source_->List();
  if (!listed.ok()) {
    Log(LogLevel::kError, "topology: cannot list " + source_->Describe() + ": " + listed.status().message() +
                              "; keeping the current snapshot");
    std::lock_guard<std::mutex> s(stats_mu_);
    ++metrics_.reload_failures_total;
    return listed.status();
  }
  const std::vector<SourceEntry>& entries = listed.value();

  // Which entries changed; those that come built are taken as they are, the others parsed.
  std::vector<size_t> todo, to_parse;
  for (size_t i = 0; i < entries.size(); ++i) {
    auto it = cache_.find(entries[i].origin);
    if (it != cache_.end() && it->second->version == entries[i].version) continue;
    todo.push_back(i);
    if (entries[i].built == nullptr) to_parse.push_back(i);
  }
  std::vector<Outcome> parsed = ParseChanged(entries, to_parse);
  std::vector<Outcome> outcomes(todo.size());
  for (size_t k = 0, p = 0; k < todo.size(); ++k) {
    if (entries[todo[k]].built != nullptr) {
      outcomes[k].node = entries[todo[k]].built;
    } else {
      outcomes[k] = std::move(parsed[p++]);
    }
  }
  ReloadCounts counts;
  Record(entries, todo, outcomes, counts);
  std::vector<StoreProblem> problems;
  auto snap = Snapshot::Create(PickNodes(problems, counts), ++generation_);
  const uint64_t generation = snap->generation();
  const uint64_t node_count = snap->node_count();
  const uint64_t shape_count = snap->shape_count();
  current_.store(std::move(snap), std::memory_order_release);
  interner_.Prune();

  const auto dur = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0);
  std::function<void(uint64_t)> cb;
  {
    std::lock_guard<std::mutex> s(stats_mu_);
    metrics_.nodes = node_count;
    metrics_.shapes = shape_count;
    ++metrics_.reloads_total;
    metrics_.last_reload_unix_ms = NowUnixMs();
    metrics_.last_reload_duration_us = static_cast<uint64_t>(dur.count());
    metrics_.exports_parsed_total += counts.parsed_ok;
    for (size_t i = 0; i < kLoadErrorReasonCount; ++i) metrics_.load_errors_total[i] += counts.errors[i];
    problems_ = std::move(problems);
    cb = on_reload_;
  }
  Log(LogLevel::kInfo, "topology: loaded " + std::to_string(node_count) + " nodes, " + std::to_string(shape_count) +
                           " shapes from " + source_->Describe() + " (" + std::to_string(to_parse.size()) +
                           " exports parsed, " + std::to_string(todo.size() - to_parse.size()) +
                           " nodes built from shape records) in " + std::to_string(dur.count() / 1000) + " ms");
  if (cb) cb(generation);
  return Status::Ok();
}

}  // namespace draguard::topology
