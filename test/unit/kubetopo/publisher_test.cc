// Publisher against the fake API server's generic object store: the first publish creates the
// shape object, then patches label and annotation in one write; nothing is written when nothing
// changed; nodes of one record share one object; a failed write leaves label and annotation as
// they were (they never disagree); an object of the same name with other content is refused; the
// per-node ConfigMap of an earlier release is deleted once; API errors map to statuses.
#include "draguard/kubetopo/publisher.h"

#include <gtest/gtest.h>

#include "../kube/fake_apiserver.h"
#include "draguard/base64.h"
#include "draguard/kubetopo/shape_object.h"
#include "draguard/topology/loader.h"
#include "draguard/topology/store.h"

namespace draguard::kubetopo {
namespace {

using kubetest::json;
using kubetest::Reply;

constexpr const char* kNs = "draguard-system";
constexpr const char* kNode = "gpu-node-1";
const std::string kNodePath = "/api/v1/nodes/gpu-node-1";
const std::string kLegacyPath = "/api/v1/namespaces/draguard-system/configmaps/draguard-topology-gpu-node-1";
const std::string kCms = "/api/v1/namespaces/draguard-system/configmaps";
const std::string kG4dn = "aws_g4dn-metal_2s-8259CL_8xT4_cuda-nvml-opencl_efa.xml";
const std::string kLassen = "llnl_lassen_ibm-ac922_2s-power9_4xV100-SXM2_cuda-nvml_4xmlx5.xml";

// Parsed once per process, before any fake API server thread runs (the import forks a worker).
const topology::ParsedExport& Export(const std::string& file) {
  static auto* cache = new std::map<std::string, topology::ParsedExport>();
  auto it = cache->find(file);
  if (it == cache->end()) {
    auto p = topology::ParseHwlocFile(std::string(DRAGUARD_TEST_DATA) + "/hwloc/" + file);
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    it = cache->emplace(file, p.ok() ? std::move(p).value() : topology::ParsedExport{}).first;
  }
  return it->second;
}

class PublisherTest : public kubetest::FakeApiServerTest {
 protected:
  PublisherTest() {
    Export(kG4dn);
    Export(kLassen);
  }
  void SetUp() override {
    FakeApiServerTest::SetUp();
    node_ = PutNode(kNode);
    publisher_ = MakePublisher(kNode);
  }
  json PutNode(const std::string& name) {
    return server_->PutObject("/api/v1/nodes/" + name, {{"apiVersion", "v1"},
                                                         {"kind", "Node"},
                                                         {"metadata", {{"name", name}, {"labels", {{"zone", "a"}}}}},
                                                         {"spec", {{"podCIDR", "10.0.0.0/24"}}}});
  }
  std::unique_ptr<Publisher> MakePublisher(const std::string& node) {
    PublisherOptions o;
    o.node = node;
    o.namespace_name = kNs;
    return std::make_unique<Publisher>(*client_, o);
  }
  int Writes() const {
    return server_->Count("POST", kCms) + server_->Count("PUT", kCms) + server_->Count("PATCH", "/api/v1/nodes") +
           server_->Count("DELETE", kCms);
  }
  // The stored object at `name` as the watcher would deliver it.
  kube::Object Stored(const std::string& path) {
    auto o = kube::ParseObject(server_->GetObject(path).dump());
    EXPECT_TRUE(o.ok()) << path;
    return o.ok() ? *o : kube::Object{};
  }
  // The node's label and annotation name a stored shape object whose shape is the label's.
  void ExpectConsistent(const std::string& node, const std::string& fingerprint) {
    Result<NodePublication> pub = ReadNodePublication(Stored("/api/v1/nodes/" + node));
    ASSERT_TRUE(pub.ok()) << pub.status().ToString();
    EXPECT_EQ(pub->fingerprint, fingerprint);
    topology::ShapeInterner interner;
    auto record = VerifyShapeObject(Stored(kCms + "/" + kShapeObjectPrefix + pub->shape_object), interner);
    ASSERT_TRUE(record.ok()) << record.status().ToString();
    EXPECT_EQ(record->shape->fingerprint, pub->fingerprint);
  }

  json node_;
  std::unique_ptr<Publisher> publisher_;
};

TEST_F(PublisherTest, FirstPublishCreatesTheShapeObjectThenWritesLabelAndAnnotationOnce) {
  const topology::ParsedExport& g4dn = Export(kG4dn);
  Result<PublishResult> r = publisher_->Publish(g4dn);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->created);
  EXPECT_TRUE(r->node_patched);
  EXPECT_FALSE(r->legacy_deleted);  // there was none
  Result<ShapeObject> want = MakeShapeObject(g4dn);
  ASSERT_TRUE(want.ok());
  EXPECT_EQ(r->shape_object, want->name);
  EXPECT_EQ(want->name, "draguard-shape-" + want->digest);

  const json cm = server_->GetObject(kCms + "/" + want->name);
  ASSERT_TRUE(cm.is_object());
  EXPECT_EQ(cm["immutable"], true);
  EXPECT_EQ(cm["metadata"]["labels"], json({{"draguard.io/topology", "shape"}, {"draguard.io/topology-shape", g4dn.shape.fingerprint}}));
  EXPECT_FALSE(cm["metadata"].contains("ownerReferences"));  // shared by nodes: owned by none
  Result<std::string> gz = Base64Decode(cm["binaryData"]["shape.gz"].get<std::string>());
  ASSERT_TRUE(gz.ok());
  EXPECT_EQ(*Gunzip(*gz, 1 << 20), topology::EncodeShapeRecord(g4dn));
  EXPECT_LT(gz->size(), 8000u) << "a compact record";

  // Requests in order: GET node, GET object (404), POST object, PATCH node, DELETE old ConfigMap.
  std::vector<std::string> calls;
  for (const kubetest::Seen& s : server_->seen()) calls.push_back(s.method + " " + s.path);
  EXPECT_EQ(calls, (std::vector<std::string>{"GET " + kNodePath, "GET " + kCms + "/" + want->name, "POST " + kCms,
                                             "PATCH " + kNodePath, "DELETE " + kLegacyPath}));
  // The one patch sets the label and the annotation and nothing else.
  for (const kubetest::Seen& s : server_->seen()) {
    if (s.method != "PATCH") continue;
    const json patch = json::parse(s.body);
    EXPECT_EQ(patch["metadata"].size(), 2u);
    EXPECT_EQ(patch["metadata"]["labels"], json({{"draguard.io/topology-shape", g4dn.shape.fingerprint}}));
    ASSERT_EQ(patch["metadata"]["annotations"].size(), 1u);
    const json facts = json::parse(patch["metadata"]["annotations"]["draguard.io/topology"].get<std::string>());
    EXPECT_EQ(facts["shapeObject"], want->digest);
    EXPECT_EQ(facts["gpuUUIDs"].size(), 8u);
    EXPECT_EQ(facts["xmlFormat"], "2.0");
  }
  const json node = server_->GetObject(kNodePath);
  EXPECT_EQ(node["metadata"]["labels"]["zone"], "a");
  EXPECT_EQ(node["spec"], node_["spec"]);
  ExpectConsistent(kNode, g4dn.shape.fingerprint);
  const std::string annotation = node["metadata"]["annotations"]["draguard.io/topology"];
  EXPECT_LT(annotation.size(), 512u) << annotation;
}

// A node with an NVLink clique: the annotation carries it and the label nvidia.com/gpu.clique is
// set where nothing else set it, moved with the node's clique, removed when the node has none, and
// never touched when another component (GPU Feature Discovery) owns it.
TEST_F(PublisherTest, TheCliqueLabelIsSetWhereNothingElseSetsIt) {
  topology::ParsedExport tray = Export(kG4dn);
  tray.nvlink_clique = "3183419e-9edc-4f0e-86e8-d895a9fb06be.17044";
  auto clique_label = [&]() -> json {
    const json labels = server_->GetObject(kNodePath)["metadata"]["labels"];
    return labels.contains("nvidia.com/gpu.clique") ? labels["nvidia.com/gpu.clique"] : json();
  };
  ASSERT_TRUE(publisher_->Publish(tray).ok());
  EXPECT_EQ(clique_label(), tray.nvlink_clique);
  Result<NodePublication> pub = ReadNodePublication(Stored(kNodePath));
  ASSERT_TRUE(pub.ok());
  EXPECT_EQ(pub->facts.nvlink_clique, tray.nvlink_clique);
  const int writes = Writes();
  Result<PublishResult> again = publisher_->Publish(tray);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->node_patched);
  EXPECT_EQ(Writes(), writes);
  tray.nvlink_clique = "bbc2edac-6ffb-43a0-9053-cae96152c90a.17044";  // another rack
  ASSERT_TRUE(publisher_->Publish(tray).ok());
  EXPECT_EQ(clique_label(), tray.nvlink_clique);
  tray.nvlink_clique.clear();
  ASSERT_TRUE(publisher_->Publish(tray).ok());
  EXPECT_TRUE(clique_label().is_null());
  EXPECT_EQ(server_->GetObject(kNodePath)["metadata"]["labels"]["zone"], "a");

  // Another node, labelled by GPU Feature Discovery with another value: left alone.
  PutNode("gpu-node-2");
  json n2 = server_->GetObject("/api/v1/nodes/gpu-node-2");
  n2["metadata"]["labels"]["nvidia.com/gpu.clique"] = "bbc2edac-6ffb-43a0-9053-cae96152c90a.2";
  server_->PutObject("/api/v1/nodes/gpu-node-2", n2);
  tray.nvlink_clique = "3183419e-9edc-4f0e-86e8-d895a9fb06be.17044";
  ASSERT_TRUE(MakePublisher("gpu-node-2")->Publish(tray).ok());
  EXPECT_EQ(server_->GetObject("/api/v1/nodes/gpu-node-2")["metadata"]["labels"]["nvidia.com/gpu.clique"],
            "bbc2edac-6ffb-43a0-9053-cae96152c90a.2");
}

TEST_F(PublisherTest, AnUnchangedExportWritesNothing) {
  ASSERT_TRUE(publisher_->Publish(Export(kG4dn)).ok());
  const int writes = Writes();
  EXPECT_EQ(writes, 3);  // POST, PATCH, DELETE (answered 404)
  const size_t requests = server_->seen().size();
  for (int i = 0; i < 3; ++i) {
    Result<PublishResult> r = publisher_->Publish(Export(kG4dn));
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_FALSE(r->created || r->node_patched || r->legacy_deleted);
  }
  EXPECT_EQ(Writes(), writes);
  EXPECT_EQ(server_->seen().size(), requests + 3 * 2) << "two GETs per unchanged publish";
}

TEST_F(PublisherTest, NodesOfOneRecordShareOneObject) {
  ASSERT_TRUE(publisher_->Publish(Export(kG4dn)).ok());
  PutNode("gpu-node-2");
  topology::ParsedExport other = Export(kG4dn);
  other.host_name = "gpu-node-2";
  for (size_t i = 0; i < other.gpu_uuids.size(); ++i) other.gpu_uuids[i] = "GPU-2-" + std::to_string(i);
  Result<PublishResult> r = MakePublisher("gpu-node-2")->Publish(other);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_FALSE(r->created);
  EXPECT_TRUE(r->node_patched);
  EXPECT_EQ(server_->Count("POST", kCms), 1);
  EXPECT_EQ(server_->ObjectPaths(kCms + "/draguard-shape-").size(), 1u);
  Result<NodePublication> pub = ReadNodePublication(Stored("/api/v1/nodes/gpu-node-2"));
  ASSERT_TRUE(pub.ok());
  EXPECT_EQ(pub->facts.gpu_uuids[3], "GPU-2-3");
  EXPECT_EQ(pub->facts.host_name, "gpu-node-2");
}

TEST_F(PublisherTest, AChangedExportPointsTheNodeAtItsOwnObject) {
  ASSERT_TRUE(publisher_->Publish(Export(kG4dn)).ok());
  Result<PublishResult> r = publisher_->Publish(Export(kLassen));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->created);
  EXPECT_TRUE(r->node_patched);
  EXPECT_EQ(server_->ObjectPaths(kCms + "/draguard-shape-").size(), 2u);  // the old one is collected later
  ExpectConsistent(kNode, Export(kLassen).shape.fingerprint);
}

// Issue 42: the label and the published topology never disagree, whichever write fails.
TEST_F(PublisherTest, AFailedWriteLeavesLabelAndAnnotationAsTheyWere) {
  const std::string g4dn = Export(kG4dn).shape.fingerprint;
  const std::string lassen = Export(kLassen).shape.fingerprint;
  ASSERT_TRUE(publisher_->Publish(Export(kG4dn)).ok());
  // The object cannot be created: the Node is not touched.
  server_->InjectFault("POST", kCms, Reply(500, R"({"kind":"Status","code":500,"reason":"InternalError","message":"x"})"));
  const int patches = server_->Count("PATCH", kNodePath);
  Result<PublishResult> r = publisher_->Publish(Export(kLassen));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(server_->Count("PATCH", kNodePath), patches);
  ExpectConsistent(kNode, g4dn);
  // The object is created, the Node's patch fails: label and annotation are both the old ones.
  server_->InjectFault("PATCH", kNodePath, Reply(500, R"({"kind":"Status","code":500,"reason":"InternalError","message":"x"})"));
  r = publisher_->Publish(Export(kLassen));
  ASSERT_FALSE(r.ok());
  ExpectConsistent(kNode, g4dn);
  // The retry completes the change in one write.
  r = publisher_->Publish(Export(kLassen));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_FALSE(r->created);
  EXPECT_TRUE(r->node_patched);
  ExpectConsistent(kNode, lassen);
}

TEST_F(PublisherTest, AlreadyExistsOnCreateReadsTheObject) {
  Result<ShapeObject> object = MakeShapeObject(Export(kG4dn));
  ASSERT_TRUE(object.ok());
  // Another node's exporter creates it between this one's GET and POST.
  server_->InjectFault("GET", kCms + "/" + object->name, Reply(404, R"({"kind":"Status","code":404,"reason":"NotFound","message":"nf"})"));
  server_->PutObject(kCms + "/" + object->name, json::parse(ShapeObjectJson(*object, kNs)));
  Result<PublishResult> r = publisher_->Publish(Export(kG4dn));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_FALSE(r->created);
  EXPECT_TRUE(r->node_patched);
}

TEST_F(PublisherTest, AnObjectOfTheSameNameWithOtherContentIsRefused) {
  Result<ShapeObject> object = MakeShapeObject(Export(kG4dn));
  Result<ShapeObject> other = MakeShapeObject(Export(kLassen));
  ASSERT_TRUE(object.ok() && other.ok());
  json squat = json::parse(ShapeObjectJson(*other, kNs));
  squat["metadata"]["name"] = object->name;
  server_->PutObject(kCms + "/" + object->name, squat);
  Result<PublishResult> r = publisher_->Publish(Export(kG4dn));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("exists with other content"), std::string::npos) << r.status().message();
  EXPECT_EQ(server_->Count("PATCH", kNodePath), 0);
}

TEST_F(PublisherTest, TheEarlierReleasesConfigMapIsDeletedOnce) {
  server_->PutObject(kLegacyPath, {{"metadata", {{"name", "draguard-topology-gpu-node-1"},
                                                 {"labels", {{"draguard.io/topology", "hwloc"}, {"draguard.io/node", kNode}}}}},
                                   {"data", {{"topology.xml", "<topology/>"}}}});
  server_->InjectFault("DELETE", kLegacyPath, Reply(403, R"({"kind":"Status","code":403,"reason":"Forbidden","message":"no"})"));
  Result<PublishResult> r = publisher_->Publish(Export(kG4dn));
  ASSERT_TRUE(r.ok()) << "a refused delete does not fail the publication: " << r.status().message();
  EXPECT_FALSE(r->legacy_deleted);
  EXPECT_NE(r->legacy_error.find("403"), std::string::npos) << r->legacy_error;
  r = publisher_->Publish(Export(kG4dn));  // tried again
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->legacy_deleted);
  EXPECT_TRUE(r->legacy_error.empty());
  EXPECT_FALSE(server_->GetObject(kLegacyPath).is_object());
  r = publisher_->Publish(Export(kG4dn));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(server_->Count("DELETE", kLegacyPath), 2) << "not asked again once gone";
}

TEST_F(PublisherTest, ServerErrorsAreUnavailableAndAMissingNodeIsNotFound) {
  server_->InjectFault("GET", kNodePath, Reply(503, R"({"kind":"Status","code":503,"reason":"ServiceUnavailable","message":"etcd"})"));
  Result<PublishResult> r = publisher_->Publish(Export(kG4dn));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  server_->RemoveObject(kNodePath);
  r = publisher_->Publish(Export(kG4dn));
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
