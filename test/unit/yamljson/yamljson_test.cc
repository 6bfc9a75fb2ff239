#include "draguard/yamljson/yamljson.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

namespace draguard::yamljson {
namespace {

TEST(ParseDocuments, KubernetesScalarTyping) {
  auto r = ParseDocuments(R"(---
a: 1
b: "2"
c: '8'
d: 1000m
e: true
f: ~
g: 1.5
h: "true"
---
---
kind: Second
)");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 2u);
  const auto& d = (*r)[0];
  EXPECT_EQ(d["a"], 1);
  EXPECT_EQ(d["b"], "2");
  EXPECT_EQ(d["c"], "8");
  EXPECT_EQ(d["d"], "1000m");
  EXPECT_EQ(d["e"], true);
  EXPECT_TRUE(d["f"].is_null());
  EXPECT_DOUBLE_EQ(d["g"].get<double>(), 1.5);
  EXPECT_EQ(d["h"], "true");
  EXPECT_EQ((*r)[1]["kind"], "Second");
}

TEST(ParseDocuments, JsonPassesThrough) {
  auto r = ParseDocuments(R"({"a": [1, "x"]})");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0]["a"][1], "x");
}

TEST(ParseDocuments, HostileInputIsRefused) {
  EXPECT_FALSE(ParseDocuments(std::string(100000, '[')).ok());
  EXPECT_FALSE(ParseDocuments("a: [1, 2\n").ok());
  auto r = ParseDocuments("a: b: c\n");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("line 1"), std::string::npos) << r.status().message();
}

// A ',' after a document's root node outside a flow collection: an error, never an endless stream
// of empty documents (yaml-cpp 0.7 alone loops on these).
TEST(ParseDocuments, StrayFlowEntryIsAnErrorNotAHang) {
  for (const char* text : {",", ",,", " ,", "\"x\" ,", "&a ,", "[a] ,", "---\n,", "a: 1\n---\n[a] ,\n"}) {
    auto r = ParseDocuments(text);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_NE(r.status().message().find("unexpected ','"), std::string::npos) << r.status().message();
  }
  auto two = ParseDocuments("a: 1\n---\nb: [1, 2]\n---\n---\n");
  ASSERT_TRUE(two.ok()) << two.status().message();
  EXPECT_EQ(two->size(), 2u);
}


// ToYaml: ParseDocuments(ToYaml(v)) == v.
// A leading comment line keeps a text off the block-style fast path: both readings must agree
// (errors always come from yaml-cpp; with the extra line their line numbers differ by one).
void ExpectSameAsGeneralParser(const std::string& yaml, const std::string& what) {
  auto fast = ParseDocuments(yaml);
  auto general = ParseDocuments("# general parser\n" + yaml);
  ASSERT_EQ(fast.ok(), general.ok()) << what << "\n" << yaml;
  if (fast.ok()) {
    EXPECT_EQ(*fast, *general) << what << "\n" << yaml;
  }
}

void ExpectRoundTrip(const nlohmann::json& v, const std::string& what) {
  std::string yaml = ToYaml(v);
  ExpectSameAsGeneralParser(yaml, what);
  auto back = ParseDocuments(yaml);
  ASSERT_TRUE(back.ok()) << what << ": " << back.status().message() << "\n" << yaml;
  ASSERT_EQ(back->size(), 1u) << what << "\n" << yaml;
  EXPECT_EQ((*back)[0], v) << what << "\n" << yaml;
}

TEST(ParseDocuments, BlockStyleFastPathMatchesGeneralParser) {
  const char* cases[] = {
      "a: 1\nb: x\n",
      "a: |\n  no final line break",
      "a: |-\n  x",
      "  apiVersion: v1\n  kind: Pod\n  metadata:\n    name: p\n    labels:\n      app.kubernetes.io/name: x\n",
      "spec:\n  containers:\n  - name: a\n    args:\n    - --flag=1\n    - -v\n    - \"2\"\n  - name: b\n",
      "spec:\n  containers:\n    - name: a\n      ports:\n        - containerPort: 80\n          protocol: TCP\n",
      "x:\n- 1\n- 1.5\n- -2\n- true\n- yes\n- 0x1F\n- null\n- ~\n- a,b\n- it's\n- a\"b\n- 12:30\n- 1e3\n",
      "q: \"a\\\\b\\\"c\\nd\\te\"\ns: 'it''s'\ne: \"\"\nf: ''\n",
      "empty:\nnext: {}\nlist: []\nafter:\n",
      "a: |\n  line one\n    indented\n\n  last\n\n\nb: |-\n  stripped\nc: |\n\n  after blank\nd: 1\n",
      "annotations:\n  kubectl.kubernetes.io/last-applied-configuration: |\n    {\"apiVersion\":\"v1\",\"kind\":\"Pod\"}\n",
      "- a: 1\n  b:\n  - x\n- c\n- d: {}\n",
      "a:    spaced\nb: two  words\n8080: port\ntrue: key\n",
      // Outside the fast path's subset: the general parser answers.
      "a: b\n  continued\n",
      "a: &x 1\nb: *x\n",
      "a: !!str 1\n",
      "a: b\na: c\n",
      "null: 1\n",
      "a: [1, 2]\n",
      "a: >\n  folded\n  text\n",
      "a: b #c\n",
      "a: \"multi\n  line\"\n",
      "a:\tb\n",
      "a: caf\xc3\xa9\n",
      "- - x\n",
      "a: 1\n b: 2\n",
      "a: 1\n- b\n",
      "a: b: c\n",
      "a: |\n  x\n b: 1\n",
      "- x\n  y\n",
      "? a\n: b\n",
      "a:b\n",
  };
  for (const char* c : cases) ExpectSameAsGeneralParser(c, c);
}

TEST(ToYaml, RetypableStringsAreQuoted) {
  const char* tricky[] = {"true", "false", "True", "FALSE", "1", "-1", "+1", "0x1F", "0o17", "017", "1_000",
                          "12:30", "1e3", "1E-3", ".5", "-.5", "1.5", ".inf", "-.Inf", ".NaN", "null",
                          "Null", "~", "yes", "No", "on", "OFF", "y", "n", "", " ", "a: b", "a:", "a #b",
                          "#x", "- x", "-", "?", ":", "[x]", "{x}", "&a", "*a", "!tag", "|", ">", "'q'",
                          "\"q\"", "%x", "@x", "`x", "lead ", " trail", "tab\there", "line\nbreak",
                          "two\n\n", "\nlead", "  indented\n", "script\n  more\n", "nul\x01", "é ü",
                          "1000m", "80Gi", "nvidia.com/gpu", "a,b", "x: ", "http://host:80/path", "<<",
                          "100", "1.0", "1.2.3", "deadbeef", "0", "-0", "1e", "e1"};
  nlohmann::json obj = nlohmann::json::object();
  nlohmann::json arr = nlohmann::json::array();
  for (const char* t : tricky) {
    obj[t] = t;  // as a key and as a value
    arr.push_back(t);
    ExpectRoundTrip(nlohmann::json(t), std::string("scalar ") + t);
  }
  ExpectRoundTrip(obj, "map");
  ExpectRoundTrip(arr, "sequence");
  EXPECT_EQ(ToYaml(nlohmann::json("true")), "\"true\"\n");
  EXPECT_EQ(ToYaml(nlohmann::json("80Gi")), "80Gi\n");
}

TEST(ToYaml, NumbersBoolsNullsAndEmptyCollections) {
  auto v = nlohmann::json::parse(
      R"({"i": 42, "n": -7, "f": 1.5, "g": 1e100, "h": 2.0, "t": true, "b": false, "z": null,
          "e": {}, "a": [], "nested": [[1, [2]], {"k": []}, [{}]]})");
  ExpectRoundTrip(v, "mixed");
  std::string yaml = ToYaml(v);
  EXPECT_NE(yaml.find("i: 42\n"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("t: true\n"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("z: null\n"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("e: {}\n"), std::string::npos) << yaml;
}

TEST(ToYaml, RoundTripsEveryTestManifest) {
  namespace fs = std::filesystem;
  int documents = 0;
  for (const auto& entry : fs::recursive_directory_iterator(fs::path(DRAGUARD_TEST_DATA) / "manifests")) {
    if (!entry.is_regular_file() || entry.path().extension() != ".yaml") continue;
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    auto docs = ParseDocuments(ss.str());
    ASSERT_TRUE(docs.ok()) << entry.path() << ": " << docs.status().message();
    // Each document on its own is plain block style, as a dump's List items are.
    std::istringstream lines(ss.str());
    std::string line, doc;
    while (std::getline(lines, line)) {
      if (line.rfind("---", 0) == 0) {
        ExpectSameAsGeneralParser(doc, entry.path().filename().string());
        doc.clear();
        continue;
      }
      doc += line + "\n";
    }
    ExpectSameAsGeneralParser(doc, entry.path().filename().string());
    for (std::size_t i = 0; i < docs->size(); ++i) {
      ExpectRoundTrip((*docs)[i], entry.path().filename().string() + "#" + std::to_string(i));
      ++documents;
    }
  }
  EXPECT_GT(documents, 150);
}

}  // namespace
}  // namespace draguard::yamljson
