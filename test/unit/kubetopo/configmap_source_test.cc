// ConfigMapSource feeding a topology::Store, with ConfigMaps served by the kube tests' fake API
// server (test/unit/kube/fake_apiserver.h, included by path): initial list, ADDED / MODIFIED /
// DELETED events, a bad export keeping the last good model, key selection.
#include "draguard/kubetopo/configmap_source.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>

#include "../kube/fake_apiserver.h"

namespace draguard::kubetopo {
namespace {

using kubetest::Event;
using kubetest::json;
using kubetest::ListBody;
using kubetest::Reply;
using std::chrono::milliseconds;

std::string Xml(size_t i) { return topology::BundledExamples().at(i).bytes; }

json Cm(const std::string& name, const std::string& rv, const std::string& node, const std::string& xml,
        const std::string& key = "topology.xml") {
  json cm = kubetest::ConfigMapJson("gpu-topology", name, rv, node);
  cm["data"] = {{key, xml}};
  return cm;
}

class ConfigMapSourceTest : public kubetest::FakeApiServerTest {
 protected:
  // The store's hwloc import worker is forked here, before SetUp() starts the fake API server's
  // threads: forking a process whose other threads may hold allocator locks can hang the child
  // under the sanitizers.
  ConfigMapSourceTest() : FakeApiServerTest("token\n") {
    store_ = std::make_unique<topology::Store>(topology::StoreOptions{.parse_threads = 1});
    (void)store_->Start(topology::MakeBundledExampleSource(), /*watch=*/false);
  }
  void TearDown() override {
    store_.reset();
    FakeApiServerTest::TearDown();
  }

  // Starts the store on a ConfigMapSource once the scripts are in place.
  void StartStore() {
    ConfigMapSourceOptions o;
    o.watch.namespace_name = "gpu-topology";
    o.watch.sleep = [](milliseconds) {};  // backoff never sleeps for real
    o.settle = milliseconds(0);
    auto source = std::make_unique<ConfigMapSource>(*client_, o);
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
    ASSERT_TRUE(store_->Start(std::move(source), /*watch=*/true).ok());
  }

  // Waits (on reload notifications, not on wall-clock sleeps) until `pred` holds.
  bool WaitFor(const std::function<bool()>& pred) {
    std::unique_lock<std::mutex> l(mu_);
    return cv_.wait_for(l, std::chrono::seconds(30), [&] { return pred(); });
  }

  std::unique_ptr<topology::Store> store_;
  ConfigMapSource* source_ = nullptr;
  std::mutex mu_;
  std::condition_variable cv_;
  int reloads_ = 0;
};

TEST_F(ConfigMapSourceTest, InitialListFillsTheStore) {
  server_->ScriptList(Reply(200, ListBody({Cm("node-a", "10", "node-a", Xml(0)),
                                           Cm("node-b", "11", "node-b", Xml(1), "pcie.xml")},
                                          "11")));
  StartStore();
  auto snap = store_->Current();
  EXPECT_EQ(snap->node_count(), 2u);
  EXPECT_NE(snap->Find("node-a"), nullptr);
  EXPECT_NE(snap->Find("node-b"), nullptr);
  auto entries = source_->List();
  ASSERT_TRUE(entries.ok());
  ASSERT_EQ(entries->size(), 2u);
  EXPECT_EQ((*entries)[0].origin, "configmap gpu-topology/node-a");
  EXPECT_EQ((*entries)[0].version, "10");
  EXPECT_EQ((*entries)[0].modified_ns, 10);
  EXPECT_EQ(source_->Describe(), "configmaps in gpu-topology labelled draguard.io/topology=hwloc");
  auto seen = server_->seen();
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen[0].path, "/api/v1/namespaces/gpu-topology/configmaps");
  EXPECT_EQ(seen[0].param("labelSelector"), "draguard.io/topology=hwloc");
}

TEST_F(ConfigMapSourceTest, AddedAndModifiedEventsReload) {
  server_->ScriptList(Reply(200, ListBody({Cm("node-a", "10", "node-a", Xml(0))}, "10")));
  // ADDED node-b, then MODIFIED node-a (now the other machine); the stream then stays open.
  Reply events(200, "",
               {Event("ADDED", Cm("node-b", "12", "node-b", Xml(1))),
                Event("MODIFIED", Cm("node-a", "13", "node-a", Xml(1)))},
               /*hold=*/true);
  events.gated = true;  // the events follow the store's first load, however slow the build
  server_->ScriptWatch(std::move(events));
  StartStore();
  ASSERT_TRUE(WaitFor([&] { return store_->Current()->node_count() == 1; }));
  server_->ReleaseSlow();
  ASSERT_TRUE(WaitFor([&] {
    auto e = source_->List();
    return store_->Current()->node_count() == 2 && e.ok() && e->size() == 2 && (*e)[0].version == "13" &&
           store_->Metrics().exports_parsed_total >= 3;
  })) << store_->Current()->node_count();
  EXPECT_NE(store_->Current()->Find("node-b"), nullptr);
}

TEST_F(ConfigMapSourceTest, DeletedEventRemovesTheNode) {
  server_->ScriptList(Reply(200, ListBody({Cm("node-a", "10", "node-a", Xml(0)),
                                           Cm("node-b", "11", "node-b", Xml(1))},
                                          "11")));
  server_->ScriptWatch(Reply(200, "", {Event("DELETED", Cm("node-b", "14", "node-b", Xml(1)))}, true));
  StartStore();
  ASSERT_TRUE(WaitFor([&] { return store_->Current()->node_count() == 1; }));
  EXPECT_NE(store_->Current()->Find("node-a"), nullptr);
  EXPECT_EQ(store_->Current()->Find("node-b"), nullptr);
}

TEST_F(ConfigMapSourceTest, BadXmlKeepsTheLastGoodModel) {
  server_->ScriptList(Reply(200, ListBody({Cm("node-a", "10", "node-a", Xml(0))}, "10")));
  Reply bad(200, "", {Event("MODIFIED", Cm("node-a", "15", "node-a", "<topology><broken"))}, true);
  bad.gated = true;  // the bad version follows the first, good load
  server_->ScriptWatch(std::move(bad));
  StartStore();
  ASSERT_TRUE(WaitFor([&] { return store_->Current()->node_count() == 1; }));
  server_->ReleaseSlow();
  auto errors = [&] {
    uint64_t n = 0;
    for (uint64_t v : store_->Metrics().load_errors_total) n += v;
    return n;
  };
  ASSERT_TRUE(WaitFor([&] { return errors() >= 1; }));
  EXPECT_EQ(store_->Current()->node_count(), 1u);
  EXPECT_NE(store_->Current()->Find("node-a"), nullptr);
}

TEST_F(ConfigMapSourceTest, ConfigMapWithoutXmlKeyIsRefusedNotFatal) {
  json no_xml = Cm("node-c", "16", "node-c", "x", "notes.txt");
  server_->ScriptList(Reply(200, ListBody({Cm("node-a", "10", "node-a", Xml(0)), no_xml}, "16")));
  StartStore();
  EXPECT_EQ(store_->Current()->node_count(), 1u);
  auto problems = store_->problems();
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].origin, "configmap gpu-topology/node-c");
}

TEST(SelectExportTest, KeyOrder) {
  kube::ConfigMap cm;
  cm.namespace_name = "ns";
  cm.name = "n";
  cm.data = {{"a.xml", "A"}, {"b.xml", "B"}};
  EXPECT_EQ(SelectExport(cm)->first, "a.xml");
  cm.binary_data = {{"topology.xml", "BIN"}};
  EXPECT_EQ(SelectExport(cm)->second, "BIN");  // topology.xml wins wherever it is
  cm.data["topology.xml"] = "DATA";
  EXPECT_EQ(SelectExport(cm)->second, "DATA");  // data before binaryData
  kube::ConfigMap only_bin;
  only_bin.binary_data = {{"x.xml", "X"}};
  EXPECT_EQ(SelectExport(only_bin)->second, "X");
  kube::ConfigMap none;
  none.data = {{"readme", "r"}};
  EXPECT_EQ(SelectExport(none).status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace draguard::kubetopo
