#include "draguard/yamljson/yamljson.h"

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

}  // namespace
}  // namespace draguard::yamljson
