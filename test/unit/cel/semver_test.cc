// Semver vectors: Semantic Versioning 2.0.0 §11 (precedence) and blang/semver's rules.
#include "draguard/cel/semver.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace draguard::cel {
namespace {

TEST(CelSemver, ParseAndPrecedence) {
  // SemVer 2.0.0 §11: 1.0.0-alpha < 1.0.0-alpha.1 < 1.0.0-alpha.beta < 1.0.0-beta < 1.0.0-beta.2
  //   < 1.0.0-beta.11 < 1.0.0-rc.1 < 1.0.0
  const char* order[] = {"1.0.0-alpha",  "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta",
                         "1.0.0-beta.2", "1.0.0-beta.11", "1.0.0-rc.1",       "1.0.0"};
  for (size_t i = 0; i + 1 < std::size(order); ++i) {
    auto a = Semver::Parse(order[i]);
    auto b = Semver::Parse(order[i + 1]);
    ASSERT_TRUE(a.ok() && b.ok()) << order[i];
    EXPECT_EQ(a->Compare(*b), -1) << order[i] << " < " << order[i + 1];
    EXPECT_EQ(b->Compare(*a), 1);
  }
  EXPECT_EQ(Semver::Parse("1.2.3+build.5")->Compare(*Semver::Parse("1.2.3")), 0);
  EXPECT_EQ(Semver::Parse("550.54.15")->Compare(*Semver::Parse("550.0.0")), 1);
  EXPECT_EQ(Semver::Parse("1.10.0")->Compare(*Semver::Parse("1.9.0")), 1);
  for (const char* bad : {"", "1", "1.2", "v1.2.3", "01.2.3", "1.02.3", "1.2.3-01", "1.2.3-", "1.2.3+", "1.2.3-a..b",
                          "1.2.3.4", "a.b.c", "1.2.3-a_b"}) {
    EXPECT_FALSE(Semver::Parse(bad).ok()) << bad;
  }
  // semver(s, true) normalisation.
  EXPECT_EQ(Semver::Parse("v1.2", true)->ToString(), "1.2.0");
  EXPECT_EQ(Semver::Parse("01.02.03", true)->ToString(), "1.2.3");
  EXPECT_EQ(Semver::Parse("v1.0.0-rc.1", true)->ToString(), "1.0.0-rc.1");
}

}  // namespace
}  // namespace draguard::cel
