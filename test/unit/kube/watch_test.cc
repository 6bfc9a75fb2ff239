// Watcher against the scripted HTTPS fake API server: list + watch in order, bookmarks,
// 410 Gone (status and ERROR event) → relist, stream end → re-watch from the last
// resourceVersion, backoff with jitter and reset (injected sleeper and random source), Stop().
#include "draguard/kube/watch.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>

#include "fake_apiserver.h"

namespace draguard::kube {
namespace {

using kubetest::Bookmark;
using kubetest::ConfigMapJson;
using kubetest::Event;
using kubetest::FakeApiServer;
using kubetest::json;
using kubetest::ListBody;
using kubetest::Reply;
using kubetest::Seen;
using kubetest::StatusBody;
using kubetest::WriteFile;
using std::chrono::milliseconds;

// Records every callback as a line ("sync a,b", "upsert ns/c@13", "delete ns/b@15").
class Recorder : public WatchHandler {
 public:
  void OnSync(std::vector<Object> all) override {
    std::string line = "sync";
    for (const auto& cm : all) line += " " + cm.namespace_name + "/" + cm.name + "@" + cm.resource_version;
    Add(line);
    std::lock_guard<std::mutex> l(mu_);
    last_sync_ = std::move(all);
  }
  void OnUpsert(const Object& cm) override {
    Add("upsert " + cm.namespace_name + "/" + cm.name + "@" + cm.resource_version);
  }
  void OnDelete(const Object& cm) override {
    Add("delete " + cm.namespace_name + "/" + cm.name + "@" + cm.resource_version);
  }
  void OnError(const Status& st) override {
    std::lock_guard<std::mutex> l(mu_);
    errors_.push_back(st.ToString());
  }
  bool WaitFor(std::size_t n, std::chrono::seconds timeout = std::chrono::seconds(30)) {
    std::unique_lock<std::mutex> l(mu_);
    return cv_.wait_for(l, timeout, [&] { return log_.size() >= n; });
  }
  std::vector<std::string> log() {
    std::lock_guard<std::mutex> l(mu_);
    return log_;
  }
  std::vector<Object> last_sync() {
    std::lock_guard<std::mutex> l(mu_);
    return last_sync_;
  }
  std::vector<std::string> errors() {
    std::lock_guard<std::mutex> l(mu_);
    return errors_;
  }

 private:
  void Add(std::string line) {
    {
      std::lock_guard<std::mutex> l(mu_);
      log_.push_back(std::move(line));
    }
    cv_.notify_all();
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> log_, errors_;
  std::vector<Object> last_sync_;
};

// Deterministic sleeper + clock: records requested delays and advances a fake clock.
struct FakeTime {
  std::mutex mu;
  std::vector<milliseconds> sleeps;
  std::atomic<int64_t> now_ms{0};
  void Install(WatchOptions& o) {
    o.clock = [this] { return std::chrono::steady_clock::time_point(milliseconds(now_ms.load())); };
    o.sleep = [this](milliseconds d) {
      std::lock_guard<std::mutex> l(mu);
      sleeps.push_back(d);
      now_ms += d.count();
    };
    o.random = [] { return 0.5; };
  }
  std::vector<milliseconds> Sleeps() {
    std::lock_guard<std::mutex> l(mu);
    return sleeps;
  }
};

class WatchTest : public kubetest::FakeApiServerTest {
 protected:
  WatchTest() : FakeApiServerTest("watch-token") {}

  WatchOptions Options() {
    WatchOptions o;
    o.label_selector = "draguard.io/topology=hwloc";
    time_.Install(o);
    o.min_watch_duration = milliseconds(0);  // the fake clock does not move during a watch
    return o;
  }

  // The watch requests seen so far.
  std::vector<Seen> WatchRequests() {
    std::vector<Seen> out;
    for (auto& s : server_->seen()) {
      if (s.param("watch") == "true") out.push_back(s);
    }
    return out;
  }

  Recorder rec_;
  FakeTime time_;
};

TEST_F(WatchTest, ListThenWatchDeliversEventsInOrderAndRewatchesFromLastVersion) {
  server_->ScriptList({200, ListBody({ConfigMapJson("topo", "a", "10", "node-a"), ConfigMapJson("topo", "b", "11")}, "12")});
  server_->ScriptWatch({200, "",
                        {Event("ADDED", ConfigMapJson("topo", "c", "13")),
                         // one event split across two chunks
                         Event("MODIFIED", ConfigMapJson("topo", "a", "14", "node-a")).substr(0, 20),
                         Event("MODIFIED", ConfigMapJson("topo", "a", "14", "node-a")).substr(20),
                         Event("DELETED", ConfigMapJson("topo", "b", "15"))},
                        false});
  Watcher w(*client_, rec_, Options());
  w.Start();
  ASSERT_TRUE(rec_.WaitFor(4));
  ASSERT_TRUE(server_->WaitSeen([](const auto& s) { return FakeApiServer::Watches(s) >= 2; }));
  w.Stop();

  EXPECT_EQ(rec_.log(), (std::vector<std::string>{"sync topo/a@10 topo/b@11", "upsert topo/c@13",
                                                   "upsert topo/a@14", "delete topo/b@15"}));
  auto sync = rec_.last_sync();
  ASSERT_EQ(sync.size(), 2u);
  EXPECT_EQ(sync[0].labels.at("draguard.io/node"), "node-a");
  EXPECT_EQ(sync[0].data.at("topology.xml"), "<topology/>");

  auto seen = server_->seen();
  ASSERT_GE(seen.size(), 3u);
  EXPECT_EQ(seen[0].path, "/api/v1/configmaps");
  EXPECT_EQ(seen[0].param("labelSelector"), "draguard.io/topology=hwloc");
  EXPECT_EQ(seen[0].param("limit"), "100");
  EXPECT_EQ(seen[0].authorization, "Bearer watch-token");
  auto watches = WatchRequests();
  ASSERT_GE(watches.size(), 2u);
  EXPECT_EQ(watches[0].param("resourceVersion"), "12");
  EXPECT_EQ(watches[0].param("allowWatchBookmarks"), "true");
  EXPECT_EQ(watches[0].param("labelSelector"), "draguard.io/topology=hwloc");
  EXPECT_EQ(watches[1].param("resourceVersion"), "15");  // re-watch, no relist
  EXPECT_EQ(w.list_count(), 1u);
  EXPECT_TRUE(time_.Sleeps().empty());  // a clean stream end is not a failure
}

TEST_F(WatchTest, OneNamespaceAndPaginatedList) {
  server_->ScriptList({200, ListBody({ConfigMapJson("topo", "a", "5")}, "7", "token-1")});
  server_->ScriptList({200, ListBody({ConfigMapJson("topo", "b", "6")}, "7")});
  WatchOptions o = Options();
  o.namespace_name = "topo";
  o.page_size = 1;
  Watcher w(*client_, rec_, o);
  w.Start();
  ASSERT_TRUE(rec_.WaitFor(1));
  ASSERT_TRUE(server_->WaitSeen([](const auto& s) { return FakeApiServer::Watches(s) >= 1; }));
  w.Stop();
  EXPECT_EQ(rec_.log()[0], "sync topo/a@5 topo/b@6");
  auto seen = server_->seen();
  EXPECT_EQ(seen[0].path, "/api/v1/namespaces/topo/configmaps");
  EXPECT_EQ(seen[0].param("continue"), "");
  EXPECT_EQ(seen[1].param("continue"), "token-1");
  EXPECT_EQ(seen[1].param("limit"), "1");
  EXPECT_EQ(WatchRequests()[0].path, "/api/v1/namespaces/topo/configmaps");
  EXPECT_EQ(WatchRequests()[0].param("resourceVersion"), "7");
}

TEST_F(WatchTest, BookmarkAdvancesResourceVersion) {
  server_->ScriptList({200, ListBody({}, "100")});
  server_->ScriptWatch({200, "", {Bookmark("150")}, false});
  Watcher w(*client_, rec_, Options());
  w.Start();
  ASSERT_TRUE(server_->WaitSeen([](const auto& s) { return FakeApiServer::Watches(s) >= 2; }));
  EXPECT_EQ(w.resource_version(), "150");
  w.Stop();
  auto watches = WatchRequests();
  EXPECT_EQ(watches[0].param("resourceVersion"), "100");
  EXPECT_EQ(watches[1].param("resourceVersion"), "150");
  EXPECT_EQ(rec_.log(), (std::vector<std::string>{"sync"}));  // bookmarks are not delivered
}

TEST_F(WatchTest, GoneAsHttpStatusRelists) {
  server_->ScriptList({200, ListBody({ConfigMapJson("topo", "a", "10")}, "10")});
  server_->ScriptWatch({410, StatusBody(410, "Expired", "too old resource version: 10 (50)"), {}, false});
  server_->ScriptList({200, ListBody({ConfigMapJson("topo", "a", "60"), ConfigMapJson("topo", "z", "61")}, "62")});
  Watcher w(*client_, rec_, Options());
  w.Start();
  ASSERT_TRUE(rec_.WaitFor(2));
  ASSERT_TRUE(server_->WaitSeen([](const auto& s) { return FakeApiServer::Watches(s) >= 2; }));
  w.Stop();
  EXPECT_EQ(rec_.log(), (std::vector<std::string>{"sync topo/a@10", "sync topo/a@60 topo/z@61"}));
  EXPECT_EQ(w.list_count(), 2u);
  EXPECT_EQ(WatchRequests()[1].param("resourceVersion"), "62");
  EXPECT_TRUE(time_.Sleeps().empty());  // 410 is expected, not a failure
}

TEST_F(WatchTest, GoneAsErrorEventRelists) {
  server_->ScriptList({200, ListBody({}, "10")});
  server_->ScriptWatch({200, "",
                        {Event("ADDED", ConfigMapJson("topo", "a", "11")),
                         Event("ERROR", json::parse(StatusBody(410, "Expired", "too old resource version: 11 (90)")))},
                        true});
  server_->ScriptList({200, ListBody({ConfigMapJson("topo", "a", "95")}, "96")});
  Watcher w(*client_, rec_, Options());
  w.Start();
  ASSERT_TRUE(rec_.WaitFor(3));
  ASSERT_TRUE(server_->WaitSeen([](const auto& s) { return FakeApiServer::Watches(s) >= 2; }));
  w.Stop();
  EXPECT_EQ(rec_.log(), (std::vector<std::string>{"sync", "upsert topo/a@11", "sync topo/a@95"}));
  EXPECT_EQ(WatchRequests()[1].param("resourceVersion"), "96");
}

TEST_F(WatchTest, BackoffGrowsWithJitterAndResetsAfterSuccess) {
  // Three failed lists, a good one, then two failed watches, then a healthy watch.
  for (int i = 0; i < 3; ++i) server_->ScriptList({500, StatusBody(500, "InternalError", "boom"), {}, false});
  server_->ScriptList({200, ListBody({}, "5")});
  server_->ScriptWatch({503, StatusBody(503, "ServiceUnavailable", "apiserver is shutting down"), {}, false});
  server_->ScriptWatch({500, StatusBody(500, "InternalError", "boom"), {}, false});
  WatchOptions o = Options();
  o.backoff.initial = milliseconds(100);
  o.backoff.max = milliseconds(1000);
  o.backoff.factor = 2.0;
  o.backoff.jitter = 0.5;  // random() == 0.5 → +25 %
  Watcher w(*client_, rec_, o);
  w.Start();
  ASSERT_TRUE(server_->WaitSeen([](const auto& s) { return FakeApiServer::Watches(s) >= 3; }));
  w.Stop();
  EXPECT_EQ(time_.Sleeps(), (std::vector<milliseconds>{milliseconds(125), milliseconds(250), milliseconds(500),
                                                       // the list succeeded: back to the start
                                                       milliseconds(125), milliseconds(250)}));
  EXPECT_EQ(rec_.errors().size(), 5u);
  EXPECT_NE(rec_.errors()[0].find("500 InternalError: boom"), std::string::npos);

  // The cap holds.
  Backoff b({milliseconds(100), milliseconds(1000), 2.0, 0.5}, [] { return 0.999; });
  std::vector<int64_t> got;
  for (int i = 0; i < 6; ++i) got.push_back(b.Next().count());
  EXPECT_EQ(got, (std::vector<int64_t>{149, 299, 599, 1000, 1000, 1000}));
  b.Reset();
  EXPECT_EQ(b.Next().count(), 149);
}

TEST_F(WatchTest, StreamThatEndsAtOnceWithoutEventsBacksOff) {
  server_->ScriptList({200, ListBody({}, "5")});
  server_->ScriptWatch({200, "", {}, false});  // closes immediately, nothing sent
  WatchOptions o = Options();
  o.min_watch_duration = milliseconds(1000);
  o.backoff.initial = milliseconds(100);
  o.backoff.jitter = 0;
  Watcher w(*client_, rec_, o);
  w.Start();
  ASSERT_TRUE(server_->WaitSeen([](const auto& s) { return FakeApiServer::Watches(s) >= 2; }));
  w.Stop();
  EXPECT_EQ(time_.Sleeps(), (std::vector<milliseconds>{milliseconds(100)}));
  EXPECT_EQ(WatchRequests()[1].param("resourceVersion"), "5");
}

TEST_F(WatchTest, StopEndsAnOpenWatchPromptly) {
  server_->ScriptList({200, ListBody({}, "5")});
  WatchOptions o;
  o.idle_timeout = milliseconds(120000);  // only Stop() can end the silent watch
  Watcher w(*client_, rec_, o);
  w.Start();
  ASSERT_TRUE(server_->WaitSeen([](const auto& s) { return FakeApiServer::Watches(s) >= 1; }));
  auto start = std::chrono::steady_clock::now();
  w.Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  w.Stop();  // idempotent
}

TEST_F(WatchTest, StopInterruptsTheDefaultBackoffWait) {
  server_->SetDefaultList(StatusBody(500, "InternalError", "down"));
  server_->ScriptList({500, StatusBody(500, "InternalError", "down"), {}, false});
  WatchOptions o;
  o.backoff.initial = milliseconds(60000);  // a real wait of a minute
  Watcher w(*client_, rec_, o);
  w.Start();
  ASSERT_TRUE(server_->WaitSeen([](const auto& s) { return FakeApiServer::Lists(s) >= 1; }));
  auto start = std::chrono::steady_clock::now();
  w.Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST_F(WatchTest, RotatedTokenIsReReadAfterA401AndRetried) {
  std::string token = (dir_.path() / "token").string();
  // The client has loaded "watch-token" (a GET that finds nothing).
  ASSERT_EQ(client_->GetObject("/apis/resource.k8s.io/v1/namespaces/x/resourceclaimtemplates/y").outcome, GetResult::Outcome::kNotFound);
  // Rewrite in place, same size and mtime: only the 401 can reveal the change.
  struct stat st {};
  ASSERT_EQ(::stat(token.c_str(), &st), 0);
  WriteFile(token, "watch-tok2N");
  struct timespec times[2] = {st.st_mtim, st.st_mtim};
  ASSERT_EQ(::utimensat(AT_FDCWD, token.c_str(), times, 0), 0);
  server_->AcceptTokens({"watch-tok2N"});
  server_->ScriptList({200, ListBody({}, "5")});
  server_->ScriptWatch({200, "", {Event("ADDED", ConfigMapJson("topo", "a", "6"))}, true});
  Watcher w(*client_, rec_, Options());
  w.Start();
  ASSERT_TRUE(rec_.WaitFor(2));
  w.Stop();
  auto seen = server_->seen();
  ASSERT_EQ(seen.size(), 4u);  // GET, LIST (401), LIST again, WATCH
  EXPECT_EQ(seen[1].authorization, "Bearer watch-token");
  EXPECT_EQ(seen[2].authorization, "Bearer watch-tok2N");
  EXPECT_EQ(seen[3].authorization, "Bearer watch-tok2N");
  EXPECT_EQ(rec_.log(), (std::vector<std::string>{"sync", "upsert topo/a@6"}));
  EXPECT_TRUE(rec_.errors().empty());
}

TEST_F(WatchTest, OtherErrorEventBacksOffAndRewatchesWithoutRelist) {
  server_->ScriptList({200, ListBody({}, "10")});
  server_->ScriptWatch({200, "",
                        {Event("ADDED", ConfigMapJson("topo", "a", "11")),
                         Event("ERROR", json::parse(StatusBody(500, "InternalError", "etcd leader changed")))},
                        true});
  WatchOptions o = Options();
  o.backoff.jitter = 0;
  Watcher w(*client_, rec_, o);
  w.Start();
  ASSERT_TRUE(server_->WaitSeen([](const auto& s) { return FakeApiServer::Watches(s) >= 2; }));
  w.Stop();
  EXPECT_EQ(w.list_count(), 1u);
  EXPECT_EQ(WatchRequests()[1].param("resourceVersion"), "11");
  EXPECT_EQ(time_.Sleeps(), (std::vector<milliseconds>{milliseconds(500)}));
  ASSERT_EQ(rec_.errors().size(), 1u);
  EXPECT_NE(rec_.errors()[0].find("etcd leader changed"), std::string::npos);
}

TEST_F(WatchTest, UndecodableEventIsAFailure) {
  server_->ScriptList({200, ListBody({}, "10")});
  server_->ScriptWatch({200, "", {"{not json\n"}, true});
  Watcher w(*client_, rec_, Options());
  w.Start();
  ASSERT_TRUE(server_->WaitSeen([](const auto& s) { return FakeApiServer::Watches(s) >= 2; }));
  w.Stop();
  EXPECT_EQ(time_.Sleeps().size(), 1u);
  EXPECT_EQ(WatchRequests()[1].param("resourceVersion"), "10");
  ASSERT_FALSE(rec_.errors().empty());
  EXPECT_NE(rec_.errors()[0].find("undecodable event"), std::string::npos);
}

TEST_F(WatchTest, SilentWatchIsReopenedAfterTheIdleTimeout) {
  server_->ScriptList({200, ListBody({}, "10")});
  server_->ScriptWatch({200, "", {Event("ADDED", ConfigMapJson("topo", "a", "11"))}, true});  // then silence
  WatchOptions o = Options();
  o.idle_timeout = milliseconds(300);
  Watcher w(*client_, rec_, o);
  w.Start();
  ASSERT_TRUE(server_->WaitSeen([](const auto& s) { return FakeApiServer::Watches(s) >= 2; }));
  w.Stop();
  EXPECT_EQ(WatchRequests()[1].param("resourceVersion"), "11");
  EXPECT_EQ(w.list_count(), 1u);
  EXPECT_TRUE(time_.Sleeps().empty());
}

// A handler that throws once on its first upsert.
class ThrowingRecorder : public Recorder {
 public:
  void OnUpsert(const Object& cm) override {
    if (!thrown_.exchange(true)) throw std::runtime_error("consumer bug");
    Recorder::OnUpsert(cm);
  }

 private:
  std::atomic<bool> thrown_{false};
};

TEST_F(WatchTest, HandlerExceptionIsReportedAndAnsweredWithARelist) {
  server_->ScriptList({200, ListBody({}, "5")});
  server_->ScriptWatch({200, "", {Event("ADDED", ConfigMapJson("topo", "a", "6"))}, true});
  server_->ScriptList({200, ListBody({ConfigMapJson("topo", "a", "6")}, "7")});
  ThrowingRecorder rec;
  Watcher w(*client_, rec, Options());
  w.Start();
  ASSERT_TRUE(rec.WaitFor(2));
  w.Stop();
  EXPECT_EQ(rec.log(), (std::vector<std::string>{"sync", "sync topo/a@6"}));
  ASSERT_EQ(rec.errors().size(), 1u);
  EXPECT_NE(rec.errors()[0].find("consumer bug"), std::string::npos);
  EXPECT_EQ(time_.Sleeps().size(), 1u);
}

TEST_F(WatchTest, MetadataOnlyNodesKeepOnlyTheKeysAsked) {
  json node = {{"apiVersion", "v1"},
               {"kind", "Node"},
               {"metadata",
                {{"name", "gpu-1"},
                 {"labels", {{"draguard.io/topology-shape", "00ff"}, {"kubernetes.io/hostname", "gpu-1"}}},
                 {"annotations", {{"draguard.io/topology", "{}"}, {"node.alpha.kubernetes.io/ttl", "0"}}}}},
               {"status", {{"capacity", {{"cpu", "8"}}}}}};
  server_->PutObject("/api/v1/nodes/gpu-1", node);
  server_->PutObject("/api/v1/nodes/cpu-1", {{"metadata", {{"name", "cpu-1"}}}});  // not selected
  WatchOptions o = Options();
  o.resource = "nodes";
  o.label_selector = "draguard.io/topology-shape";
  o.metadata_only = true;
  o.filter = {{"draguard.io/topology-shape"}, {"draguard.io/topology"}, false};
  Watcher w(*client_, rec_, o);
  w.Start();
  ASSERT_TRUE(rec_.WaitFor(1));
  ASSERT_TRUE(server_->WaitSeen([](const auto& s) { return FakeApiServer::Watches(s) >= 1; }));
  node["metadata"]["annotations"]["draguard.io/topology"] = R"({"x":1})";
  const std::string rv = server_->PutObject("/api/v1/nodes/gpu-1", node)["metadata"]["resourceVersion"];
  server_->RemoveObject("/api/v1/nodes/gpu-1");
  ASSERT_TRUE(rec_.WaitFor(3));
  w.Stop();
  auto log = rec_.log();
  ASSERT_EQ(log.size(), 3u);
  EXPECT_EQ(log[0].rfind("sync /gpu-1@", 0), 0u) << log[0];
  EXPECT_EQ(log[1], "upsert /gpu-1@" + rv);
  EXPECT_EQ(log[2].rfind("delete /gpu-1@", 0), 0u) << log[2];
  auto sync = rec_.last_sync();
  ASSERT_EQ(sync.size(), 1u);
  EXPECT_FALSE(sync[0].uid.empty());
  EXPECT_EQ(sync[0].labels, (std::map<std::string, std::string>{{"draguard.io/topology-shape", "00ff"}}));
  EXPECT_EQ(sync[0].annotations, (std::map<std::string, std::string>{{"draguard.io/topology", "{}"}}));
  auto seen = server_->seen();
  ASSERT_GE(seen.size(), 2u);
  EXPECT_EQ(seen[0].path, "/api/v1/nodes");
  EXPECT_EQ(seen[0].param("labelSelector"), "draguard.io/topology-shape");
  EXPECT_EQ(seen[0].accept, "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json");
  EXPECT_EQ(WatchRequests()[0].path, "/api/v1/nodes");
  EXPECT_EQ(WatchRequests()[0].accept, "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json");
}

TEST(ObjectTest, ParsesMetadataAndTheFilterKeepsWhatItNames) {
  json j = ConfigMapJson("topo", "s", "3");
  j["metadata"]["uid"] = "u-9";
  j["metadata"]["creationTimestamp"] = "2026-01-02T03:04:05Z";
  j["metadata"]["annotations"] = {{"a", "1"}, {"b", "2"}};
  j["immutable"] = true;
  auto all = ParseObject(j.dump());
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ(all->uid, "u-9");
  EXPECT_EQ(all->creation_timestamp, "2026-01-02T03:04:05Z");
  EXPECT_EQ(all->annotations.size(), 2u);
  EXPECT_TRUE(all->immutable);
  EXPECT_EQ(all->data.at("topology.xml"), "<topology/>");
  auto some = ParseObject(j.dump(), {{"absent"}, {"b"}, false});
  ASSERT_TRUE(some.ok());
  EXPECT_TRUE(some->labels.empty());
  EXPECT_EQ(some->annotations, (std::map<std::string, std::string>{{"b", "2"}}));
  EXPECT_TRUE(some->data.empty());
  EXPECT_FALSE(some->immutable);
}

TEST(ObjectTest, ParsesLabelsDataAndDecodesBinaryData) {
  json j = ConfigMapJson("topo", "node-a-topology", "42", "node-a");
  j["binaryData"] = {{"topology.xml.gz", "AAEC/w=="}, {"empty", ""}};
  auto cm = ParseObject(j.dump());
  ASSERT_TRUE(cm.ok()) << cm.status().ToString();
  EXPECT_EQ(cm->namespace_name, "topo");
  EXPECT_EQ(cm->name, "node-a-topology");
  EXPECT_EQ(cm->resource_version, "42");
  EXPECT_EQ(cm->labels.at("draguard.io/node"), "node-a");
  EXPECT_EQ(cm->binary_data.at("topology.xml.gz"), std::string("\x00\x01\x02\xff", 4));
  EXPECT_EQ(cm->binary_data.at("empty"), "");

  j["binaryData"]["bad"] = "!!!";
  EXPECT_EQ(ParseObject(j.dump()).status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(ParseObject("not json").ok());
  EXPECT_FALSE(ParseObject(R"({"metadata":{}})").ok());
}

}  // namespace
}  // namespace draguard::kube
