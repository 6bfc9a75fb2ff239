// Shape objects and node publications (shape_object.h): what the exporter writes verifies; every
// way an object can disagree with its name, its label or the rules is refused with the reason;
// node annotations round-trip, ignore keys of later releases and refuse malformed values.
#include "draguard/kubetopo/shape_object.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "draguard/base64.h"
#include "draguard/kubetopo/publisher.h"
#include "draguard/topology/loader.h"

namespace draguard::kubetopo {
namespace {

using nlohmann::json;

const topology::ParsedExport& G4dn() {
  static const auto* p = [] {
    auto r = topology::ParseHwlocFile(std::string(DRAGUARD_TEST_DATA) +
                                      "/hwloc/aws_g4dn-metal_2s-8259CL_8xT4_cuda-nvml-opencl_efa.xml");
    EXPECT_TRUE(r.ok());
    return new topology::ParsedExport(r.ok() ? std::move(r).value() : topology::ParsedExport{});
  }();
  return *p;
}

// The object as the API server would store it and a watcher deliver it.
kube::Object Stored(const std::string& config_map_json) {
  json j = json::parse(config_map_json);
  j["metadata"]["uid"] = "u-1";
  j["metadata"]["resourceVersion"] = "5";
  auto o = kube::ParseObject(j.dump());
  EXPECT_TRUE(o.ok());
  return *o;
}

TEST(ShapeObjectTest, WhatTheExporterWritesVerifies) {
  Result<ShapeObject> object = MakeShapeObject(G4dn());
  ASSERT_TRUE(object.ok());
  EXPECT_EQ(object->digest.size(), 32u);
  EXPECT_EQ(object->digest, RecordDigest(object->record));
  EXPECT_EQ(object->fingerprint, G4dn().shape.fingerprint);
  topology::ShapeInterner interner;
  auto record = VerifyShapeObject(Stored(ShapeObjectJson(*object, "ns")), interner);
  ASSERT_TRUE(record.ok()) << record.status().ToString();
  EXPECT_EQ(record->shape->fingerprint, G4dn().shape.fingerprint);
  EXPECT_EQ(*record->cpus, G4dn().cpus);
  EXPECT_EQ(RecordDigest("abc"), "ba7816bf8f01cfea414140de5dae2223");  // SHA-256("abc"), first 16 bytes
}

TEST(ShapeObjectTest, EveryDisagreementIsRefusedWithItsReason) {
  Result<ShapeObject> object = MakeShapeObject(G4dn());
  ASSERT_TRUE(object.ok());
  const json good = json::parse(ShapeObjectJson(*object, "ns"));
  topology::ShapeInterner interner;
  auto refused = [&](json j, const std::string& reason) {
    auto r = VerifyShapeObject(Stored(j.dump()), interner);
    ASSERT_FALSE(r.ok()) << reason;
    EXPECT_NE(r.status().message().find(reason), std::string::npos) << r.status().ToString();
  };
  json j = good;
  j["metadata"]["name"] = "draguard-shape-" + std::string(32, '0');
  refused(j, "does not match the name");
  j = good;
  j["metadata"]["name"] = "something-else";
  refused(j, "the name must be draguard-shape-");
  j = good;
  j["metadata"]["labels"]["draguard.io/topology-shape"] = "0123456789abcdef";
  refused(j, "labelled shape 0123456789abcdef but holds shape " + G4dn().shape.fingerprint);
  j = good;
  j["metadata"]["labels"].erase("draguard.io/topology");
  refused(j, "not labelled draguard.io/topology=shape");
  j = good;
  j.erase("immutable");
  refused(j, "not immutable");
  j = good;
  j["data"] = {{"extra", "x"}};
  refused(j, "exactly binaryData.shape.gz");
  j = good;
  j["binaryData"]["shape.gz"] = "bm90IGd6aXA=";  // "not gzip"
  refused(j, "not valid gzip");
  // A gzip bomb: a tiny object that inflates past the record limit.
  Result<std::string> bomb = Gzip(std::string(8u << 20, '\0'));
  ASSERT_TRUE(bomb.ok());
  j = good;
  j["binaryData"]["shape.gz"] = Base64Encode(*bomb);
  refused(j, "over the");
  // A record whose digest names it but which does not decode.
  const std::string junk = "GDRGSR01 and then nothing valid";
  Result<std::string> junk_gz = Gzip(junk);
  j = good;
  j["metadata"]["name"] = "draguard-shape-" + RecordDigest(junk);
  j["binaryData"]["shape.gz"] = Base64Encode(*junk_gz);
  refused(j, "shape record");
}

TEST(NodePublicationTest, RoundTripsAndIgnoresKeysOfLaterReleases) {
  NodePublication p;
  p.fingerprint = G4dn().shape.fingerprint;
  p.shape_object = std::string(32, 'a');
  p.facts = topology::FactsOf(G4dn());
  kube::Object node;
  node.name = "n1";
  node.labels[std::string(topology::kShapeLabel)] = p.fingerprint;
  node.annotations[kNodeAnnotation] = NodeAnnotation(p);
  Result<NodePublication> back = ReadNodePublication(node);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, p);
  // A later release adds a per-node fact: still read, the key ignored.
  json a = json::parse(node.annotations[kNodeAnnotation]);
  a["clique"] = "7f1c2d7e-0000-0000-0000-000000000000.3";
  node.annotations[kNodeAnnotation] = a.dump();
  back = ReadNodePublication(node);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, p);
  // The patch carries both halves.
  const json patch = json::parse(NodePublicationPatch(p));
  EXPECT_EQ(patch["metadata"]["labels"]["draguard.io/topology-shape"], p.fingerprint);
  EXPECT_EQ(patch["metadata"]["annotations"]["draguard.io/topology"], NodeAnnotation(p));
}

// The NVLink clique is a node fact: published in the annotation, read back, and refused when it is
// not "<cluster UUID>.<clique id>".
TEST(NodePublicationTest, TheNvlinkCliqueIsANodeFact) {
  NodePublication p;
  p.fingerprint = G4dn().shape.fingerprint;
  p.shape_object = std::string(32, 'a');
  p.facts.nvlink_clique = "3183419e-9edc-4f0e-86e8-d895a9fb06be.17044";
  kube::Object node;
  node.name = "n1";
  node.labels[std::string(topology::kShapeLabel)] = p.fingerprint;
  node.annotations[kNodeAnnotation] = NodeAnnotation(p);
  EXPECT_EQ(json::parse(node.annotations[kNodeAnnotation])["nvlinkClique"], p.facts.nvlink_clique);
  Result<NodePublication> back = ReadNodePublication(node);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, p);
  for (const std::string bad : {"3183419E-9EDC-4F0E-86E8-D895A9FB06BE.1", "3183419e-9edc-4f0e-86e8-d895a9fb06be",
                                "3183419e-9edc-4f0e-86e8-d895a9fb06be.", "3183419e-9edc-4f0e-86e8-d895a9fb06be.x1",
                                "3183419e9edc4f0e86e8d895a9fb06be.1", "3183419e-9edc-4f0e-86e8-d895a9fb06be.12345678901"}) {
    json a = json::parse(NodeAnnotation(p));
    a["nvlinkClique"] = bad;
    node.annotations[kNodeAnnotation] = a.dump();
    EXPECT_EQ(ReadNodePublication(node).status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_FALSE(topology::IsNvlinkClique(bad)) << bad;
  }
  // The patch sets the clique label only when asked to, and removes it with a null.
  const json leave = json::parse(NodePublicationPatch(p));
  EXPECT_FALSE(leave["metadata"]["labels"].contains("nvidia.com/gpu.clique"));
  const json set = json::parse(NodePublicationPatch(p, CliqueLabelAction::kSet));
  EXPECT_EQ(set["metadata"]["labels"]["nvidia.com/gpu.clique"], p.facts.nvlink_clique);
  const json remove = json::parse(NodePublicationPatch(p, CliqueLabelAction::kRemove));
  EXPECT_TRUE(remove["metadata"]["labels"]["nvidia.com/gpu.clique"].is_null());
}

// The exporter labels the clique only where nothing else does.
TEST(CliqueLabelTest, SetWhereAbsentOrOwnLeftWhereSomeoneElseSetIt) {
  const std::string a = "3183419e-9edc-4f0e-86e8-d895a9fb06be.17044";
  const std::string b = "bbc2edac-6ffb-43a0-9053-cae96152c90a.17044";
  using A = CliqueLabelAction;
  EXPECT_EQ(DecideCliqueLabel(nullptr, "", a), A::kSet);          // no label yet
  EXPECT_EQ(DecideCliqueLabel(nullptr, "", ""), A::kLeave);       // no clique, no label
  EXPECT_EQ(DecideCliqueLabel(&a, a, a), A::kLeave);              // ours, current
  EXPECT_EQ(DecideCliqueLabel(&a, "", a), A::kLeave);             // GPU Feature Discovery's, same value
  EXPECT_EQ(DecideCliqueLabel(&a, a, b), A::kSet);                // ours, the tray moved to another rack
  EXPECT_EQ(DecideCliqueLabel(&a, a, ""), A::kRemove);            // ours, no clique any more
  EXPECT_EQ(DecideCliqueLabel(&b, "", a), A::kLeave);             // someone else's, even when it differs
  EXPECT_EQ(DecideCliqueLabel(&b, a, a), A::kLeave);
  EXPECT_EQ(DecideCliqueLabel(&b, a, ""), A::kLeave);
}

TEST(NodePublicationTest, MalformedPublicationsAreRefused) {
  kube::Object node;
  node.name = "n1";
  EXPECT_EQ(ReadNodePublication(node).status().code(), StatusCode::kNotFound);
  node.labels[std::string(topology::kShapeLabel)] = "0123456789abcdef";
  for (const std::string bad : {"not json", "[]", R"({"shapeObject":"short"})", R"({"shapeObject":7})",
                                R"({"shapeObject":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","gpuUUIDs":"x"})",
                                R"({"shapeObject":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","gpuUUIDs":[1]})",
                                R"({"shapeObject":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","hostName":["x"]})"}) {
    node.annotations[kNodeAnnotation] = bad;
    EXPECT_EQ(ReadNodePublication(node).status().code(), StatusCode::kInvalidArgument) << bad;
  }
  node.annotations[kNodeAnnotation] = R"({"shapeObject":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"})";
  EXPECT_TRUE(ReadNodePublication(node).ok());
  node.labels[std::string(topology::kShapeLabel)] = "not-a-fingerprint";
  EXPECT_EQ(ReadNodePublication(node).status().code(), StatusCode::kInvalidArgument);
  node.labels[std::string(topology::kShapeLabel)] = "0123456789abcdef";
  node.annotations[kNodeAnnotation] = R"({"shapeObject":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","hostName":")" +
                                      std::string(70000, 'x') + "\"}";
  EXPECT_EQ(ReadNodePublication(node).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace draguard::kubetopo
