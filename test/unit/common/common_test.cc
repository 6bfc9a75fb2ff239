#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "draguard/base64.h"
#include "draguard/glob.h"
#include "draguard/json_string.h"
#include "draguard/read_file.h"
#include "draguard/write_file.h"

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

TEST(AppendJsonString, WritesWhatNlohmannDumpWrites) {
  std::vector<std::string> texts = {
      "", "plain", "quote \" backslash \\ slash /", "\b\f\n\r\t", std::string("nul\0x", 5), "\x01\x1f\x7f",
      "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "bad \xff byte", "cut \xe2\x82", "\xe2", "overlong \xc0\xaf",
      "surrogate \xed\xa0\x80", "above U+10FFFF \xf4\x90\x80\x80", "\xf0\x8f\xbf\xbf", "lone \x80 continuation"};
  // Every single byte, alone and between letters.
  for (int b = 0; b < 256; ++b) {
    texts.push_back(std::string(1, static_cast<char>(b)));
    texts.push_back("a" + std::string(1, static_cast<char>(b)) + "z");
  }
  // Each byte that needs care at every offset of a longer text (the sixteen- and eight-byte fast
  // paths, and the bytes after them).
  for (const std::string& special : std::vector<std::string>{"\"", "\\", "\n", std::string(1, '\0'), "\x1f", "\x20", "\x7f", "\x80", "\xc3\xa9", "\xff", "\xe2\x82"}) {
    for (std::size_t at = 0; at <= 40; ++at) {
      texts.push_back(std::string(at, 'a') + special + std::string(40 - at, 'z'));
      texts.push_back(std::string(at, 'a') + special + std::string(40 - at, 'z') + special);
    }
  }
  for (const std::string& t : texts) {
    std::string out = "prefix";
    AppendJsonString(out, t);
    EXPECT_EQ(out, "prefix" + nlohmann::json(t).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)) << t;
  }
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

std::string Contents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

TEST(WriteFileAtomic, NeverWritesThroughAPlantedSymlink) {
  namespace fs = std::filesystem;
  const std::string dir = (fs::temp_directory_path() / ("draguard-write-" + std::to_string(::getpid()))).string();
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string victim = dir + "/victim";
  std::ofstream(victim) << "original";
  const std::string key = dir + "/ca.key";
  // The temporary names writers used to open with O_CREAT|O_TRUNC: PATH.tmp.PID and PATH.tmp.
  fs::create_symlink(victim, key + ".tmp." + std::to_string(::getpid()));
  fs::create_symlink(victim, key + ".tmp");
  ASSERT_TRUE(WriteFileAtomic(key, "-----BEGIN PRIVATE KEY-----").ok());
  EXPECT_EQ(Contents(victim), "original");
  EXPECT_EQ(Contents(key), "-----BEGIN PRIVATE KEY-----");
  struct stat st {};
  ASSERT_EQ(::lstat(key.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // A symlink at the destination itself is replaced, not followed.
  const std::string crt = dir + "/tls.crt";
  fs::create_symlink(victim, crt);
  ASSERT_TRUE(WriteFileAtomic(crt, "cert", 0644).ok());
  EXPECT_EQ(Contents(victim), "original");
  ASSERT_EQ(::lstat(crt.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  // No temporary file is left behind.
  std::size_t entries = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    (void)e;
    ++entries;
  }
  EXPECT_EQ(entries, 5u);  // victim, two planted symlinks, ca.key, tls.crt
  // A missing folder is a clear error.
  auto missing = WriteFileAtomic(dir + "/no/such/file", "x");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find(dir + "/no/such"), std::string::npos);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace draguard
