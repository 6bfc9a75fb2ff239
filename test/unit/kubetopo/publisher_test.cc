// Publisher against the fake API server's generic object store: first publish, nothing written
// when nothing changed, changed export updates, ownerReference and label-patch shapes, large
// exports compressed (and read back by ConfigMapSource's key selection), 409/410/5xx handling.
#include "draguard/kubetopo/publisher.h"

#include <gtest/gtest.h>

#include "../kube/fake_apiserver.h"
#include "draguard/base64.h"
#include "draguard/kubetopo/configmap_source.h"

namespace draguard::kubetopo {
namespace {

using kubetest::json;
using kubetest::Reply;

constexpr const char* kNs = "draguard-system";
constexpr const char* kNode = "gpu-node-1";
const std::string kNodePath = "/api/v1/nodes/gpu-node-1";
const std::string kCmPath = "/api/v1/namespaces/draguard-system/configmaps/draguard-topology-gpu-node-1";
const std::string kCms = "/api/v1/namespaces/draguard-system/configmaps";

class PublisherTest : public kubetest::FakeApiServerTest {
 protected:
  void SetUp() override {
    FakeApiServerTest::SetUp();
    node_ = server_->PutObject(kNodePath, {{"apiVersion", "v1"},
                                           {"kind", "Node"},
                                           {"metadata", {{"name", kNode}, {"labels", {{"zone", "a"}}}}},
                                           {"spec", {{"podCIDR", "10.0.0.0/24"}}}});
    PublisherOptions o;
    o.node = kNode;
    o.namespace_name = kNs;
    publisher_ = std::make_unique<Publisher>(*client_, o);
  }
  int Writes() const {
    return server_->Count("POST", kCms) + server_->Count("PUT", kCms) + server_->Count("PATCH", "/api/v1/nodes");
  }

  json node_;
  std::unique_ptr<Publisher> publisher_;
};

TEST_F(PublisherTest, FirstPublishCreatesTheConfigMapAndLabelsTheNode) {
  Result<PublishResult> r = publisher_->Publish("<xml/>", "0123456789abcdef");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->created);
  EXPECT_FALSE(r->updated);
  EXPECT_TRUE(r->label_patched);
  const json cm = server_->GetObject(kCmPath);
  ASSERT_TRUE(cm.is_object());
  EXPECT_EQ(cm["data"]["topology.xml"], "<xml/>");
  EXPECT_EQ(cm["metadata"]["labels"]["draguard.io/topology"], "hwloc");
  EXPECT_EQ(cm["metadata"]["labels"]["draguard.io/node"], kNode);
  ASSERT_EQ(cm["metadata"]["ownerReferences"].size(), 1u);
  const json& owner = cm["metadata"]["ownerReferences"][0];
  EXPECT_EQ(owner["apiVersion"], "v1");
  EXPECT_EQ(owner["kind"], "Node");
  EXPECT_EQ(owner["name"], kNode);
  EXPECT_EQ(owner["uid"], node_["metadata"]["uid"]);
  // The label patch: a merge patch of that one label; nothing else on the Node changed.
  bool saw_patch = false;
  for (const kubetest::Seen& s : server_->seen()) {
    if (s.method != "PATCH") continue;
    saw_patch = true;
    EXPECT_EQ(s.path, kNodePath);
    EXPECT_EQ(json::parse(s.body),
              json({{"metadata", {{"labels", {{"draguard.io/topology-shape", "0123456789abcdef"}}}}}}));
  }
  EXPECT_TRUE(saw_patch);
  const json node = server_->GetObject(kNodePath);
  EXPECT_EQ(node["metadata"]["labels"]["draguard.io/topology-shape"], "0123456789abcdef");
  EXPECT_EQ(node["metadata"]["labels"]["zone"], "a");
  EXPECT_EQ(node["spec"], node_["spec"]);
}

TEST_F(PublisherTest, AnUnchangedExportWritesNothing) {
  ASSERT_TRUE(publisher_->Publish("<xml/>", "0123456789abcdef").ok());
  const int writes = Writes();
  EXPECT_EQ(writes, 2);  // POST + PATCH
  for (int i = 0; i < 3; ++i) {
    Result<PublishResult> r = publisher_->Publish("<xml/>", "0123456789abcdef");
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_FALSE(r->created || r->updated || r->label_patched);
  }
  EXPECT_EQ(Writes(), writes);
}

TEST_F(PublisherTest, AChangedExportUpdatesKeepingForeignMetadata) {
  ASSERT_TRUE(publisher_->Publish("<a/>", "aaaaaaaaaaaaaaaa").ok());
  json cm = server_->GetObject(kCmPath);
  cm["metadata"]["labels"]["team"] = "ml";
  cm["metadata"]["annotations"] = {{"note", "kept"}};
  server_->PutObject(kCmPath, cm);
  Result<PublishResult> r = publisher_->Publish("<b/>", "bbbbbbbbbbbbbbbb");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->updated);
  EXPECT_TRUE(r->label_patched);
  EXPECT_EQ(server_->Count("PUT", kCmPath), 1);
  const json now = server_->GetObject(kCmPath);
  EXPECT_EQ(now["data"]["topology.xml"], "<b/>");
  EXPECT_EQ(now["metadata"]["labels"]["team"], "ml");
  EXPECT_EQ(now["metadata"]["annotations"]["note"], "kept");
  EXPECT_EQ(now["metadata"]["ownerReferences"].size(), 1u);
  EXPECT_EQ(server_->GetObject(kNodePath)["metadata"]["labels"]["draguard.io/topology-shape"], "bbbbbbbbbbbbbbbb");
}

TEST_F(PublisherTest, ARemovedLabelOrOwnerIsRestored) {
  ASSERT_TRUE(publisher_->Publish("<a/>", "aaaaaaaaaaaaaaaa").ok());
  json cm = server_->GetObject(kCmPath);
  cm["metadata"].erase("ownerReferences");
  server_->PutObject(kCmPath, cm);
  Result<PublishResult> r = publisher_->Publish("<a/>", "aaaaaaaaaaaaaaaa");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->updated);
  EXPECT_FALSE(r->label_patched);
  EXPECT_EQ(server_->GetObject(kCmPath)["metadata"]["ownerReferences"][0]["kind"], "Node");
}

TEST_F(PublisherTest, LargeExportsAreCompressedAndReadBack) {
  PublisherOptions o;
  o.node = kNode;
  o.namespace_name = kNs;
  o.compress_over = 1000;
  Publisher small(*client_, o);
  std::string xml = "<topology>";
  while (xml.size() < 5000) xml += "<object type=\"PU\"/>";
  xml += "</topology>";
  Result<PublishResult> r = small.Publish(xml, "cccccccccccccccc");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->compressed);
  const json cm = server_->GetObject(kCmPath);
  EXPECT_FALSE(cm.contains("data"));
  Result<std::string> gz = Base64Decode(cm["binaryData"]["topology.xml.gz"].get<std::string>());
  ASSERT_TRUE(gz.ok());
  EXPECT_LT(gz->size(), xml.size());
  Result<std::string> back = Gunzip(*gz, 1 << 20);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, xml);
  // ConfigMapSource selects the compressed key.
  kube::ConfigMap parsed;
  parsed.namespace_name = kNs;
  parsed.name = "draguard-topology-gpu-node-1";
  parsed.binary_data[kCompressedTopologyKey] = *gz;
  Result<std::pair<std::string, std::string>> sel = SelectExport(parsed);
  ASSERT_TRUE(sel.ok());
  EXPECT_EQ(sel->first, "topology.xml.gz");
  // Unchanged: deterministic compression writes nothing the second time.
  const int writes = Writes();
  ASSERT_TRUE(small.Publish(xml, "cccccccccccccccc").ok());
  EXPECT_EQ(Writes(), writes);
}

TEST_F(PublisherTest, ConflictOnUpdateFailsAndTheRetrySucceeds) {
  ASSERT_TRUE(publisher_->Publish("<a/>", "aaaaaaaaaaaaaaaa").ok());
  server_->InjectFault("PUT", kCmPath, Reply(409, R"({"kind":"Status","code":409,"reason":"Conflict","message":"the object has been modified"})"));
  Result<PublishResult> r = publisher_->Publish("<b/>", "bbbbbbbbbbbbbbbb");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("409"), std::string::npos) << r.status().message();
  r = publisher_->Publish("<b/>", "bbbbbbbbbbbbbbbb");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(server_->GetObject(kCmPath)["data"]["topology.xml"], "<b/>");
}

TEST_F(PublisherTest, AlreadyExistsOnCreateIsRetriedAsAnUpdate) {
  server_->InjectFault("POST", kCms, Reply(409, R"({"kind":"Status","code":409,"reason":"AlreadyExists","message":"exists"})"));
  ASSERT_FALSE(publisher_->Publish("<a/>", "aaaaaaaaaaaaaaaa").ok());
  Result<PublishResult> r = publisher_->Publish("<a/>", "aaaaaaaaaaaaaaaa");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->created);
}

TEST_F(PublisherTest, ServerErrorsAndGoneAreUnavailableOrFailed) {
  server_->InjectFault("GET", kNodePath, Reply(503, R"({"kind":"Status","code":503,"reason":"ServiceUnavailable","message":"etcd"})"));
  Result<PublishResult> r = publisher_->Publish("<a/>", "aaaaaaaaaaaaaaaa");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  server_->InjectFault("PATCH", kNodePath, Reply(500, R"({"kind":"Status","code":500,"reason":"InternalError","message":"x"})"));
  r = publisher_->Publish("<a/>", "aaaaaaaaaaaaaaaa");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(server_->GetObject(kCmPath).is_object());  // the ConfigMap part went through
  server_->InjectFault("GET", kCmPath, Reply(410, R"({"kind":"Status","code":410,"reason":"Gone","message":"gone"})"));
  r = publisher_->Publish("<a/>", "aaaaaaaaaaaaaaaa");
  ASSERT_FALSE(r.ok());
  r = publisher_->Publish("<a/>", "aaaaaaaaaaaaaaaa");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->label_patched);
}

TEST_F(PublisherTest, AMissingNodeIsNotFound) {
  server_->RemoveObject(kNodePath);
  Result<PublishResult> r = publisher_->Publish("<a/>", "aaaaaaaaaaaaaaaa");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(server_->Count("POST", kCms), 0);
}

TEST(PublishBackoff, DoublesUpToTheCapWithJitter) {
  using std::chrono::milliseconds;
  EXPECT_EQ(PublishBackoff(0, 0), milliseconds(0));
  EXPECT_EQ(PublishBackoff(1, 0), milliseconds(500));  // jitter factor 0.5
  EXPECT_EQ(PublishBackoff(2, 0), milliseconds(1000));
  EXPECT_LT(PublishBackoff(2, ~uint64_t{0}), milliseconds(2000));
  EXPECT_GT(PublishBackoff(2, ~uint64_t{0}), milliseconds(1900));
  EXPECT_EQ(PublishBackoff(30, 0), milliseconds(150000));  // 5 min cap x 0.5
  EXPECT_EQ(PublishBackoff(1000, 0), milliseconds(150000));
}

TEST(Gzip, RoundTripsAndRefusesBadOrOversizedInput) {
  const std::string text(100000, 'x');
  Result<std::string> gz = Gzip(text);
  ASSERT_TRUE(gz.ok());
  EXPECT_EQ(*Gzip(text), *gz);  // deterministic
  EXPECT_EQ(*Gunzip(*gz, text.size()), text);
  EXPECT_EQ(Gunzip(*gz, text.size() - 1).status().code(), StatusCode::kResourceExhausted);
  EXPECT_FALSE(Gunzip("not gzip", 100).ok());
  EXPECT_FALSE(Gunzip(gz->substr(0, gz->size() / 2), text.size()).ok());
}

}  // namespace
}  // namespace draguard::kubetopo
