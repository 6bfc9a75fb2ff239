#include <gtest/gtest.h>

#include "draguard/base64.h"
#include "draguard/glob.h"

namespace draguard {
namespace {

TEST(Base64, Rfc4648Vectors) {
  const char* vectors[][2] = {{"", ""},         {"f", "Zg=="},         {"fo", "Zm8="},
                              {"foo", "Zm9v"},  {"foob", "Zm9vYg=="},  {"fooba", "Zm9vYmE="},
                              {"foobar", "Zm9vYmFy"}};
  for (const auto& v : vectors) {
    EXPECT_EQ(Base64Encode(v[0]), v[1]);
    auto d = Base64Decode(v[1]);
    ASSERT_TRUE(d.ok()) << v[1];
    EXPECT_EQ(*d, v[0]);
  }
  std::string all;
  for (int i = 0; i < 256; ++i) all.push_back(static_cast<char>(i));
  EXPECT_EQ(*Base64Decode(Base64Encode(all)), all);
}

TEST(Base64, PaddingRules) {
  EXPECT_FALSE(Base64Decode("Zm8").ok());
  auto unpadded = Base64Decode("Zm8", /*require_padding=*/false);
  ASSERT_TRUE(unpadded.ok());
  EXPECT_EQ(*unpadded, "fo");
  EXPECT_FALSE(Base64Decode("Z", false).ok());
  EXPECT_FALSE(Base64Decode("Zm=8").ok());
  EXPECT_FALSE(Base64Decode("Zm8*").ok());
  EXPECT_FALSE(Base64Decode("Zg===").ok());
}

TEST(Glob, Patterns) {
  EXPECT_TRUE(GlobMatch("nvidia.com/mig-*", "nvidia.com/mig-1g.10gb"));
  EXPECT_FALSE(GlobMatch("nvidia.com/mig-*", "nvidia.com/gpu"));
  EXPECT_TRUE(GlobMatch("kube-*", "kube-system"));
  EXPECT_TRUE(GlobMatch("*", ""));
  EXPECT_TRUE(GlobMatch("a?c", "abc"));
  EXPECT_FALSE(GlobMatch("a?c", "ac"));
  EXPECT_TRUE(GlobMatch("*a*b*", "xxaxxbxx"));
  EXPECT_FALSE(GlobMatch("*a*b", "xxaxxbxxc"));
  EXPECT_TRUE(GlobMatch("exact", "exact"));
  EXPECT_FALSE(GlobMatch("exact", "exactly"));
}

}  // namespace
}  // namespace draguard
