// NodeSource feeding a topology::Store, against the kube tests' fake API server with its
// store-backed lists and watches (test/unit/kube/fake_apiserver.h): nodes published by the
// Publisher come built (no export parsed) with one decoded record per shape object; changes reach
// the store; a node waits for its shape object; per-node ConfigMaps of earlier releases serve until
// the node publishes the current way (the upgrade), and their XML is not kept; refused publications
// and objects are reported; Node updates that leave the publication alone cost no reload; unused
// and invalid shape objects are collected.
#include "draguard/kubetopo/node_source.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>

#include "../kube/fake_apiserver.h"
#include "draguard/kubetopo/publisher.h"
#include "draguard/kubetopo/shape_object.h"
#include "draguard/topology/loader.h"

namespace draguard::kubetopo {
namespace {

using kubetest::json;
using std::chrono::milliseconds;

constexpr const char* kNs = "gpu-topology";
const std::string kCms = "/api/v1/namespaces/gpu-topology/configmaps";
const std::string kG4dn = "aws_g4dn-metal_2s-8259CL_8xT4_cuda-nvml-opencl_efa.xml";
const std::string kLassen = "llnl_lassen_ibm-ac922_2s-power9_4xV100-SXM2_cuda-nvml_4xmlx5.xml";

std::string ReadData(const std::string& file) {
  std::ifstream in(std::string(DRAGUARD_TEST_DATA) + "/hwloc/" + file, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class NodeSourceTest : public kubetest::FakeApiServerTest {
 protected:
  // Parsing and the store's import worker fork here, before SetUp() starts the fake API server's
  // threads (forking while other threads may hold allocator locks can hang the child).
  NodeSourceTest() : FakeApiServerTest("token\n") {
    for (const std::string& f : {kG4dn, kLassen}) {
      auto p = topology::ParseHwlocFile(std::string(DRAGUARD_TEST_DATA) + "/hwloc/" + f);
      EXPECT_TRUE(p.ok());
      exports_[f] = std::move(p).value();
    }
    topology::StoreOptions options;
    options.parse_threads = 1;
    store_ = std::make_unique<topology::Store>(options);
    (void)store_->Start(topology::MakeBundledExampleSource(), /*watch=*/false);
  }
  void SetUp() override {
    FakeApiServerTest::SetUp();
    server_->ConfigMapsFromStore();
  }
  void TearDown() override {
    store_.reset();
    FakeApiServerTest::TearDown();
  }

  void PutNode(const std::string& name) {
    server_->PutObject("/api/v1/nodes/" + name,
                       {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", name}}}, {"status", {{"phase", "Running"}}}});
  }
  // What the exporter of `node` does with `file`'s export (the node is created first).
  void Publish(const std::string& node, const std::string& file, const std::string& uuid_prefix = "") {
    if (!server_->GetObject("/api/v1/nodes/" + node).is_object()) PutNode(node);
    PublisherOptions o;
    o.node = node;
    o.namespace_name = kNs;
    topology::ParsedExport p = exports_.at(file);
    if (!uuid_prefix.empty()) {
      for (size_t i = 0; i < p.gpu_uuids.size(); ++i) p.gpu_uuids[i] = uuid_prefix + std::to_string(i);
    }
    Result<PublishResult> r = Publisher(*client_, o).Publish(p);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  // A per-node ConfigMap of an earlier release.
  void PutLegacy(const std::string& node, const std::string& file) {
    server_->PutObject(kCms + "/draguard-topology-" + node,
                       {{"apiVersion", "v1"},
                        {"kind", "ConfigMap"},
                        {"metadata", {{"name", "draguard-topology-" + node}, {"namespace", kNs},
                                      {"labels", {{"draguard.io/topology", "hwloc"}, {"draguard.io/node", node}}}}},
                        {"data", {{"topology.xml", ReadData(file)}}}});
  }

  void StartStore(NodeSourceOptions o = {}) {
    o.namespace_name = kNs;
    o.watch.sleep = [](milliseconds) {};  // backoff never sleeps for real
    o.settle = milliseconds(0);
    o.on_error = [this](const Status& s) {
      std::lock_guard<std::mutex> l(mu_);
      errors_.push_back(s.ToString());
    };
    auto source = std::make_unique<NodeSource>(*client_, o);
    source_ = source.get();
    source->Start();
    ASSERT_TRUE(source->WaitForSync(std::chrono::seconds(30)));
    store_->SetOnReloadForTest([this](uint64_t) {
      {
        std::lock_guard<std::mutex> l(mu_);
        ++reloads_;
      }
      cv_.notify_all();
    });
    parsed_before_ = store_->Metrics().exports_parsed_total;
    ASSERT_TRUE(store_->Start(std::move(source), /*watch=*/true).ok());
    // The start's load, then the notifier's first call for the changes of the first lists.
    ASSERT_TRUE(WaitFor([&] { return Reloads() >= 2; }));
  }
  // Exports parsed since StartStore (the fixture's store loaded the bundled examples first).
  uint64_t Parsed() { return store_->Metrics().exports_parsed_total - parsed_before_; }

  // Waits (on reload notifications, never a fixed sleep) until `pred` holds.
  bool WaitFor(const std::function<bool()>& pred) {
    std::unique_lock<std::mutex> l(mu_);
    return cv_.wait_for(l, std::chrono::seconds(30), [&] {
      l.unlock();
      const bool ok = pred();
      l.lock();
      return ok;
    });
  }
  int Reloads() {
    std::lock_guard<std::mutex> l(mu_);
    return reloads_;
  }
  std::vector<std::string> Errors() {
    std::lock_guard<std::mutex> l(mu_);
    return errors_;
  }
  const topology::NodeTopology* Find(const std::string& name) { return store_->Current()->Find(name); }

  std::map<std::string, topology::ParsedExport> exports_;
  std::unique_ptr<topology::Store> store_;
  NodeSource* source_ = nullptr;
  std::mutex mu_;
  std::condition_variable cv_;
  int reloads_ = 0;
  uint64_t parsed_before_ = 0;
  std::vector<std::string> errors_;
};

TEST_F(NodeSourceTest, PublishedNodesComeBuiltWithOneRecordPerShapeObject) {
  Publish("gpu-1", kG4dn, "GPU-a-");
  Publish("gpu-2", kG4dn, "GPU-b-");
  Publish("power-1", kLassen);
  PutNode("cpu-only");  // no label: not even listed
  StartStore();
  auto snap = store_->Current();
  EXPECT_EQ(snap->node_count(), 3u);
  EXPECT_EQ(snap->shape_count(), 2u);
  EXPECT_EQ(Parsed(), 0u) << "no export parsed";
  const topology::NodeTopology* a = snap->Find("gpu-1");
  const topology::NodeTopology* b = snap->Find("gpu-2");
  ASSERT_TRUE(a != nullptr && b != nullptr);
  EXPECT_EQ(a->shape, b->shape) << "one Shape for both";
  EXPECT_EQ(a->cpus, b->cpus) << "one CPU list for both";
  EXPECT_EQ(a->shape->fingerprint, exports_[kG4dn].shape.fingerprint);
  EXPECT_EQ(a->GpuUuid(2), "GPU-a-2");
  EXPECT_EQ(b->GpuUuid(2), "GPU-b-2");
  EXPECT_EQ(a->source, "node gpu-1");
  EXPECT_EQ(snap->Find("power-1")->shape->fingerprint, exports_[kLassen].shape.fingerprint);
  const NodeSourceCounts c = source_->counts();
  EXPECT_EQ(c.nodes_built, 3u);
  EXPECT_EQ(c.shape_objects, 2u);
  EXPECT_EQ(c.nodes_waiting + c.nodes_refused + c.shape_objects_refused, 0u);
  // The Node list asked for metadata only, selected by the shape label.
  bool listed_nodes = false;
  for (const auto& s : server_->seen()) {
    if (s.path != "/api/v1/nodes" || s.param("watch") == "true") continue;
    listed_nodes = true;
    EXPECT_EQ(s.param("labelSelector"), "draguard.io/topology-shape");
    EXPECT_NE(s.accept.find("as=PartialObjectMetadataList"), std::string::npos);
  }
  EXPECT_TRUE(listed_nodes);
}

TEST_F(NodeSourceTest, AChangeReachesTheStoreAndHeartbeatsCostNothing) {
  Publish("gpu-1", kG4dn);
  Publish("gpu-2", kG4dn);
  StartStore();
  ASSERT_EQ(store_->Current()->shape_count(), 1u);
  const topology::NodeTopology* gpu2 = Find("gpu-2");
  const int before = Reloads();
  // A status update of gpu-2 (what kubelet sends), then gpu-1 changes hardware.
  json node = server_->GetObject("/api/v1/nodes/gpu-2");
  node["status"]["phase"] = "Heartbeat";
  server_->PutObject("/api/v1/nodes/gpu-2", node);
  Publish("gpu-1", kLassen);
  ASSERT_TRUE(WaitFor([&] { return store_->Current()->shape_count() == 2; }));
  EXPECT_EQ(Find("gpu-1")->shape->fingerprint, exports_[kLassen].shape.fingerprint);
  EXPECT_EQ(Find("gpu-2"), gpu2) << "gpu-2 was not rebuilt";
  // The publish wrote an object and patched a Node: at most two reloads, none for the heartbeat.
  EXPECT_LE(Reloads() - before, 2);
  // A node deleted: gone.
  server_->RemoveObject("/api/v1/nodes/gpu-2");
  ASSERT_TRUE(WaitFor([&] { return Find("gpu-2") == nullptr; }));
}

TEST_F(NodeSourceTest, ANodeWaitsForItsShapeObject) {
  Publish("gpu-1", kG4dn);
  Result<ShapeObject> object = MakeShapeObject(exports_[kG4dn]);
  ASSERT_TRUE(object.ok());
  const json stored = server_->GetObject(kCms + "/" + object->name);
  server_->RemoveObject(kCms + "/" + object->name);
  StartStore();
  EXPECT_EQ(Find("gpu-1"), nullptr);
  EXPECT_EQ(source_->counts().nodes_waiting, 1u);
  server_->PutObject(kCms + "/" + object->name, stored);
  ASSERT_TRUE(WaitFor([&] { return Find("gpu-1") != nullptr; }));
  EXPECT_EQ(source_->counts().nodes_built, 1u);
  // Deleting the object later does not take the node away: its record is immutable.
  server_->RemoveObject(kCms + "/" + object->name);
  Publish("gpu-2", kLassen);  // a barrier: the deletion was seen before this
  ASSERT_TRUE(WaitFor([&] { return Find("gpu-2") != nullptr; }));
  EXPECT_NE(Find("gpu-1"), nullptr);
}

// A node that moves to a shape whose object the source has not seen yet (two watches, no order
// between them), or whose publication is then refused, keeps its last good model.
TEST_F(NodeSourceTest, ANodeKeepsItsLastGoodModelWhileItsNewPublicationWaitsOrIsRefused) {
  Publish("gpu-1", kG4dn);
  Publish("gpu-2", kG4dn);
  StartStore();
  Result<ShapeObject> lassen = MakeShapeObject(exports_[kLassen]);
  ASSERT_TRUE(lassen.ok());
  NodePublication pub;
  pub.fingerprint = lassen->fingerprint;
  pub.shape_object = lassen->digest;
  pub.facts = topology::FactsOf(exports_[kLassen]);
  json node = server_->GetObject("/api/v1/nodes/gpu-1");
  node.merge_patch(json::parse(NodePublicationPatch(pub)));
  server_->PutObject("/api/v1/nodes/gpu-1", node);
  ASSERT_TRUE(WaitFor([&] { return source_->counts().nodes_waiting == 1; }));
  ASSERT_NE(Find("gpu-1"), nullptr);
  EXPECT_EQ(Find("gpu-1")->shape->fingerprint, exports_[kG4dn].shape.fingerprint) << "the last good model";
  server_->PutObject(kCms + "/" + lassen->name, json::parse(ShapeObjectJson(*lassen, kNs)));
  ASSERT_TRUE(WaitFor([&] {
    const topology::NodeTopology* n = Find("gpu-1");
    return n != nullptr && n->shape->fingerprint == exports_[kLassen].shape.fingerprint;
  }));
  EXPECT_EQ(source_->counts().nodes_built, 2u);
  // A label changed by hand: refused, reported, and the node keeps its model.
  node = server_->GetObject("/api/v1/nodes/gpu-1");
  node["metadata"]["labels"]["draguard.io/topology-shape"] = "0123456789abcdef";
  server_->PutObject("/api/v1/nodes/gpu-1", node);
  ASSERT_TRUE(WaitFor([&] { return source_->counts().nodes_refused == 1; }));
  ASSERT_NE(Find("gpu-1"), nullptr);
  EXPECT_EQ(Find("gpu-1")->shape->fingerprint, exports_[kLassen].shape.fingerprint);
  bool reported = false;
  for (const auto& e : Errors()) reported = reported || e.find("keeps its last good model") != std::string::npos ||
                                             e.find("disagrees with its shape object") != std::string::npos;
  EXPECT_TRUE(reported);
}

// The upgrade: exporters of the earlier release publish per-node ConfigMaps; the webhook reads
// both, and a node that publishes the current way takes that over its old ConfigMap at once.
TEST_F(NodeSourceTest, PerNodeConfigMapsServeUntilTheNodePublishesTheCurrentWay) {
  PutLegacy("old-1", kG4dn);
  PutLegacy("old-2", kLassen);
  // What the earlier exporter also wrote: the shape label, without the annotation.
  PutNode("old-1");
  json n = server_->GetObject("/api/v1/nodes/old-1");
  n["metadata"]["labels"]["draguard.io/topology-shape"] = exports_[kG4dn].shape.fingerprint;
  server_->PutObject("/api/v1/nodes/old-1", n);
  StartStore();
  EXPECT_EQ(store_->Current()->node_count(), 2u);
  EXPECT_EQ(Find("old-1")->source, "configmap gpu-topology/draguard-topology-old-1");
  EXPECT_EQ(Parsed(), 2u);
  EXPECT_EQ(source_->counts().legacy_configmaps, 2u);
  // The node's exporter is upgraded: it publishes, then deletes its old ConfigMap.
  Publish("old-1", kG4dn);
  ASSERT_TRUE(WaitFor([&] {
    const topology::NodeTopology* n1 = Find("old-1");
    return n1 != nullptr && n1->source == "node old-1" && source_->counts().legacy_configmaps == 1;
  }));
  EXPECT_EQ(store_->Current()->node_count(), 2u) << "no gap";
  EXPECT_FALSE(server_->GetObject(kCms + "/draguard-topology-old-1").is_object());
  // The old ConfigMap's XML was handed over once: reading it again fetches it from the API.
  topology::SourceEntry e;
  e.origin = "configmap gpu-topology/draguard-topology-old-2";
  e.version = server_->GetObject(kCms + "/draguard-topology-old-2")["metadata"]["resourceVersion"];
  const int gets = server_->Count("GET", kCms + "/draguard-topology-old-2");
  Result<std::string> xml = source_->Read(e, 16u << 20);
  ASSERT_TRUE(xml.ok()) << xml.status().ToString();
  EXPECT_EQ(*xml, ReadData(kLassen));
  EXPECT_EQ(server_->Count("GET", kCms + "/draguard-topology-old-2"), gets + 1);
}

TEST_F(NodeSourceTest, RefusedPublicationsAndObjectsAreReportedAndLeftOut) {
  Publish("gpu-1", kG4dn);
  Publish("gpu-2", kG4dn);
  // gpu-2's label is changed by hand: it disagrees with the object its annotation names.
  json n = server_->GetObject("/api/v1/nodes/gpu-2");
  n["metadata"]["labels"]["draguard.io/topology-shape"] = "0123456789abcdef";
  server_->PutObject("/api/v1/nodes/gpu-2", n);
  // An object whose content does not match its name.
  Result<ShapeObject> lassen = MakeShapeObject(exports_[kLassen]);
  json bad = json::parse(ShapeObjectJson(*lassen, kNs));
  bad["metadata"]["name"] = "draguard-shape-" + std::string(32, 'b');
  server_->PutObject(kCms + "/draguard-shape-" + std::string(32, 'b'), bad);
  StartStore();
  EXPECT_NE(Find("gpu-1"), nullptr);
  EXPECT_EQ(Find("gpu-2"), nullptr);
  const NodeSourceCounts c = source_->counts();
  EXPECT_EQ(c.nodes_refused, 1u);
  EXPECT_EQ(c.shape_objects_refused, 1u);
  const auto errors = Errors();
  auto has = [&](const std::string& what) {
    for (const auto& e : errors) {
      if (e.find(what) != std::string::npos) return true;
    }
    return false;
  };
  EXPECT_TRUE(has("label draguard.io/topology-shape=0123456789abcdef disagrees with its shape object")) << errors.size();
  EXPECT_TRUE(has("the content does not match the name"));
}

TEST_F(NodeSourceTest, UnusedAndInvalidShapeObjectsAreCollected) {
  Publish("gpu-1", kG4dn);
  Publish("gpu-1", kLassen);  // the g4dn object is now unused
  Result<ShapeObject> g4dn = MakeShapeObject(exports_[kG4dn]);
  Result<ShapeObject> lassen = MakeShapeObject(exports_[kLassen]);
  json bad = json::parse(ShapeObjectJson(*lassen, kNs));
  bad["metadata"]["name"] = "draguard-shape-" + std::string(32, 'c');
  bad["metadata"]["creationTimestamp"] = "2020-01-01T00:00:00Z";
  server_->PutObject(kCms + "/draguard-shape-" + std::string(32, 'c'), bad);
  for (const std::string& name : {g4dn->name, lassen->name}) {
    json o = server_->GetObject(kCms + "/" + name);
    o["metadata"]["creationTimestamp"] = "2020-01-01T00:00:00Z";
    server_->PutObject(kCms + "/" + name, o);
  }
  NodeSourceOptions o;
  o.collect_after = milliseconds(1);
  o.collect_interval = std::chrono::hours(1);  // only CollectNow below
  StartStore(o);
  source_->CollectNow();  // first look: unused since now
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (source_->counts().collected_total < 2 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(5));  // past collect_after
    source_->CollectNow();
  }
  ASSERT_EQ(source_->counts().collected_total, 2u);
  EXPECT_FALSE(server_->GetObject(kCms + "/" + g4dn->name).is_object());
  EXPECT_FALSE(server_->GetObject(kCms + "/draguard-shape-" + std::string(32, 'c')).is_object());
  EXPECT_TRUE(server_->GetObject(kCms + "/" + lassen->name).is_object()) << "in use";
  // The delete names the uid it saw, and the confirmation listed the Nodes of that shape afresh.
  bool precondition = false, confirmed = false;
  for (const auto& s : server_->seen()) {
    if (s.method == "DELETE" && s.path == kCms + "/" + g4dn->name) {
      precondition = json::parse(s.body)["preconditions"].contains("uid");
    }
    if (s.method == "GET" && s.path == "/api/v1/nodes" && s.param("watch") != "true" &&
        s.param("labelSelector") == "draguard.io/topology-shape=" + exports_[kG4dn].shape.fingerprint) {
      confirmed = true;
    }
  }
  EXPECT_TRUE(precondition);
  EXPECT_TRUE(confirmed);
  EXPECT_NE(Find("gpu-1"), nullptr);
}

TEST_F(NodeSourceTest, RecentObjectsAreNotCollected) {
  Publish("gpu-1", kG4dn);
  Publish("gpu-1", kLassen);
  NodeSourceOptions o;
  o.collect_after = std::chrono::minutes(10);
  o.collect_interval = std::chrono::hours(1);
  StartStore(o);
  source_->CollectNow();
  source_->CollectNow();
  EXPECT_EQ(source_->counts().collected_total, 0u);
  EXPECT_EQ(server_->Count("DELETE", kCms + "/draguard-shape-"), 0);
}

TEST(SelectExportTest, KeyOrder) {
  kube::Object cm;
  cm.namespace_name = "ns";
  cm.name = "n";
  cm.data = {{"a.xml", "A"}, {"b.xml", "B"}};
  EXPECT_EQ(SelectExport(cm)->first, "a.xml");
  cm.binary_data = {{"topology.xml", "BIN"}};
  EXPECT_EQ(SelectExport(cm)->second, "BIN");  // topology.xml wins wherever it is
  cm.data["topology.xml"] = "DATA";
  EXPECT_EQ(SelectExport(cm)->second, "DATA");  // data before binaryData
  kube::Object only_bin;
  only_bin.binary_data = {{"x.xml", "X"}};
  EXPECT_EQ(SelectExport(only_bin)->second, "X");
  kube::Object gz;
  gz.binary_data = {{"topology.xml.gz", "Z"}, {"z.xml", "X"}};
  EXPECT_EQ(SelectExport(gz)->first, "topology.xml.gz");
  kube::Object none;
  none.data = {{"readme", "r"}};
  EXPECT_EQ(SelectExport(none).status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace draguard::kubetopo
