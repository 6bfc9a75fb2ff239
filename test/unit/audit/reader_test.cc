// The streaming reader: YAML streams, block and flow Lists, JSON values and Lists, malformed
// documents with their index, the size cap, files and directories.
#include "draguard/audit/reader.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

namespace draguard::audit {
namespace {

std::vector<Document> ReadAll(const std::string& text, ReadLimits limits = {}) {
  std::istringstream in(text);
  std::vector<Document> out;
  ReadStream(in, "in.yaml", [&](Document&& d) {
    out.push_back(std::move(d));
    return true;
  }, limits);
  return out;
}

std::string Name(const Document& d) { return d.object["metadata"]["name"].get<std::string>(); }

TEST(Reader, MultiDocumentYamlWithHelmComments) {
  auto docs = ReadAll(
      "# Source: chart/templates/a.yaml\n"
      "apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n"
      "---\n# Source: chart/templates/empty.yaml\n"
      "---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: b\n"
      "--- \napiVersion: v1\nkind: Pod\nmetadata: {name: c}\n...\n");
  ASSERT_EQ(docs.size(), 3u);
  EXPECT_EQ(Name(docs[0]), "a");
  EXPECT_EQ(docs[0].index, 0u);
  EXPECT_EQ(Name(docs[1]), "b");
  EXPECT_EQ(docs[1].index, 1u);  // a document of comments only is not counted
  EXPECT_EQ(Name(docs[2]), "c");
  EXPECT_EQ(docs[2].index, 2u);
  for (const auto& d : docs) EXPECT_FALSE(d.item.has_value());
}

TEST(Reader, BlockListItemsOneAtATime) {
  // What `kubectl get pods,deployments -A -o yaml` writes: the items before kind and metadata.
  auto docs = ReadAll(
      "apiVersion: v1\nitems:\n"
      "- apiVersion: v1\n  kind: Pod\n  metadata:\n    name: p0\n    namespace: ml\n  spec:\n    containers:\n"
      "    - name: c\n      image: x\n"
      "\n"
      "- apiVersion: apps/v1\n  kind: Deployment\n  metadata:\n    name: d1\n"
      "kind: List\nmetadata:\n  resourceVersion: \"\"\n"
      "---\napiVersion: v1\nkind: List\nitems:\n  - kind: Pod\n    apiVersion: v1\n    metadata:\n      name: q0\n");
  ASSERT_EQ(docs.size(), 3u);
  EXPECT_EQ(Name(docs[0]), "p0");
  EXPECT_EQ(docs[0].object["spec"]["containers"][0]["name"], "c");
  EXPECT_EQ(docs[0].item, 0u);
  EXPECT_EQ(Name(docs[1]), "d1");
  EXPECT_EQ(docs[1].item, 1u);
  EXPECT_EQ(docs[1].index, 0u);
  EXPECT_EQ(Name(docs[2]), "q0");
  EXPECT_EQ(docs[2].index, 1u);
  EXPECT_EQ(docs[2].item, 0u);
  EXPECT_EQ(docs[2].Where(), "in.yaml: document 1 item 0");
}

TEST(Reader, FlowListAndItemsThatAreNotASequence) {
  auto docs = ReadAll(
      "kind: List\napiVersion: v1\nitems: [{kind: Pod, apiVersion: v1, metadata: {name: f0}}]\n"
      "---\nkind: Thing\napiVersion: x/v1\nmetadata: {name: t}\nitems:\n  a: 1\n");
  ASSERT_EQ(docs.size(), 2u);
  EXPECT_EQ(Name(docs[0]), "f0");
  EXPECT_EQ(docs[0].item, 0u);
  EXPECT_EQ(Name(docs[1]), "t");
  EXPECT_EQ(docs[1].object["items"]["a"], 1);
  EXPECT_FALSE(docs[1].item.has_value());
}

TEST(Reader, MalformedYamlDocumentIsReportedAndTheRestRead) {
  auto docs = ReadAll(
      "kind: Pod\napiVersion: v1\nmetadata: {name: ok0}\n"
      "---\nkind: Pod\nmetadata: [unclosed\n"
      "---\nkind: Pod\napiVersion: v1\nmetadata: {name: ok2}\n"
      "---\napiVersion: v1\nkind: List\nitems:\n- kind: Pod\n  metadata: {name: [x\n- kind: Pod\n  apiVersion: v1\n"
      "  metadata: {name: i1}\n");
  ASSERT_EQ(docs.size(), 5u);
  EXPECT_EQ(Name(docs[0]), "ok0");
  EXPECT_FALSE(docs[1].error.empty());
  EXPECT_EQ(docs[1].index, 1u);
  EXPECT_TRUE(docs[1].object.is_null());
  EXPECT_EQ(Name(docs[2]), "ok2");
  EXPECT_FALSE(docs[3].error.empty());
  EXPECT_EQ(docs[3].Where(), "in.yaml: document 3 item 0");
  EXPECT_EQ(Name(docs[4]), "i1");
}

// Found by the audit fuzzer: a stray ',' used to hang the reader (yaml-cpp looped).
TEST(Reader, StrayFlowEntryIsReportedAndTheRestRead) {
  auto docs = ReadAll(",\n---\nkind: Pod\napiVersion: v1\nmetadata: {name: ok1}\n");
  ASSERT_EQ(docs.size(), 2u);
  EXPECT_NE(docs[0].error.find("unexpected ','"), std::string::npos) << docs[0].error;
  EXPECT_EQ(Name(docs[1]), "ok1");
}

TEST(Reader, DocumentOverTheCapIsAnErrorNotAnAllocation) {
  std::string big = "kind: ConfigMap\napiVersion: v1\ndata:\n";
  for (int i = 0; i < 2000; ++i) big += "  k" + std::to_string(i) + ": " + std::string(100, 'x') + "\n";
  ReadLimits limits;
  limits.max_document_bytes = 64 << 10;
  auto docs = ReadAll(big + "---\nkind: Pod\napiVersion: v1\nmetadata: {name: after}\n", limits);
  ASSERT_EQ(docs.size(), 2u);
  EXPECT_NE(docs[0].error.find("larger than"), std::string::npos);
  EXPECT_EQ(Name(docs[1]), "after");
}

TEST(Reader, JsonValuesAndListsStreamItems) {
  auto docs = ReadAll(
      "{\"apiVersion\":\"v1\",\"kind\":\"List\",\"items\":[{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":"
      "{\"name\":\"j0\",\"labels\":{\"a\":\"b\"}},\"spec\":{\"containers\":[{\"name\":\"c\",\"args\":[1,2.5,true,null]}]}},"
      "{\"kind\":\"Deployment\",\"apiVersion\":\"apps/v1\",\"metadata\":{\"name\":\"j1\"}}],\"metadata\":{}}\n"
      "{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"j2\"},\"items\":3}"
      "[{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"j3\"}}]");
  ASSERT_EQ(docs.size(), 4u);
  EXPECT_EQ(Name(docs[0]), "j0");
  EXPECT_EQ(docs[0].object["spec"]["containers"][0]["args"], nlohmann::json::parse("[1,2.5,true,null]"));
  EXPECT_EQ(docs[0].object["metadata"]["labels"]["a"], "b");
  EXPECT_EQ(docs[0].item, 0u);
  EXPECT_EQ(Name(docs[1]), "j1");
  EXPECT_EQ(docs[1].item, 1u);
  EXPECT_EQ(Name(docs[2]), "j2");
  EXPECT_EQ(docs[2].index, 1u);
  EXPECT_EQ(docs[2].object["items"], 3);  // "items" that is not an array stays a field
  EXPECT_FALSE(docs[2].item.has_value());
  EXPECT_EQ(Name(docs[3]), "j3");
  EXPECT_EQ(docs[3].index, 2u);
  EXPECT_EQ(docs[3].item, 0u);
}

TEST(Reader, MalformedJsonEndsTheSourceWithAnError) {
  auto docs = ReadAll("{\"kind\":\"List\",\"items\":[{\"kind\":\"Pod\",\"metadata\":{\"name\":\"a\"}},{\"kind\": }]}");
  ASSERT_EQ(docs.size(), 2u);
  EXPECT_EQ(Name(docs[0]), "a");
  EXPECT_FALSE(docs[1].error.empty());
  EXPECT_EQ(docs[1].Where(), "in.yaml: document 0 item 1");
}

TEST(Reader, DeepJsonIsRefused) {
  std::string deep = "{\"kind\":\"List\",\"items\":[" + std::string(300, '[') + std::string(300, ']') + "]}";
  auto docs = ReadAll(deep);
  ASSERT_EQ(docs.size(), 1u);
  EXPECT_NE(docs[0].error.find("nesting"), std::string::npos);
}

TEST(Reader, StopsWhenTheSinkSaysSo) {
  std::istringstream in("kind: A\n---\nkind: B\n---\nkind: C\n");
  int n = 0;
  ReadStream(in, "-", [&](Document&&) { return ++n < 2; });
  EXPECT_EQ(n, 2);
}

TEST(Reader, DirectoriesRecursivelyInPathOrder) {
  namespace fs = std::filesystem;
  fs::path dir = fs::path(::testing::TempDir()) / ("audit-reader-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "sub");
  std::ofstream(dir / "b.yaml") << "kind: Pod\napiVersion: v1\nmetadata: {name: b}\n";
  std::ofstream(dir / "sub" / "c.json") << "{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"c\"}}";
  std::ofstream(dir / "a.yml") << "kind: Pod\napiVersion: v1\nmetadata: {name: a}\n";
  std::ofstream(dir / "README.md") << "# not a manifest\n";
  std::vector<std::string> names;
  ASSERT_TRUE(ReadPath(dir.string(), [&](Document&& d) {
                names.push_back(Name(d));
                return true;
              }).ok());
  EXPECT_EQ(names, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(ReadPath((dir / "missing").string(), [](Document&&) { return true; }).code(), StatusCode::kNotFound);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace draguard::audit
