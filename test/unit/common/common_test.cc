#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "draguard/base64.h"
#include "draguard/glob.h"
#include "draguard/read_file.h"

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

TEST(ReadFile, ReadsRegularFilesWithinTheCap) {
  const std::string dir = ::testing::TempDir() + "/read-file-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const std::string file = dir + "/f";
  std::ofstream(file, std::ios::binary) << std::string("a\0b", 3);
  auto ok = ReadFile(file);
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(*ok, std::string("a\0b", 3));

  auto big = ReadFile(file, 2);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(big.status().message().find("larger than 2 bytes"), std::string::npos);

  auto missing = ReadFile(dir + "/missing");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find(dir + "/missing"), std::string::npos);

  // A directory and a FIFO without a writer are refused at once, never read or waited on.
  EXPECT_EQ(ReadFile(dir).status().code(), StatusCode::kInvalidArgument);
  const std::string fifo = dir + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto f = ReadFile(fifo);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("not a regular file"), std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace draguard
