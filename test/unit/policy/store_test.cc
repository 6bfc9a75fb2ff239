// PolicyStore's file watcher: a changed file is reloaded, a broken one keeps the last good policy.
// Checks are explicit (PollNow) or wait for the reload callback; no sleeps.
#include "draguard/policy/store.h"

#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>

#include <gtest/gtest.h>

namespace draguard::policy {
namespace {

namespace fs = std::filesystem;
using std::chrono::hours;
using std::chrono::milliseconds;

constexpr const char* kAudit = "apiVersion: draguard.io/v1alpha1\nkind: Policy\nmode: audit\n";
constexpr const char* kEnforce = "apiVersion: draguard.io/v1alpha1\nkind: Policy\nmode: enforce\n";
constexpr const char* kBroken = "apiVersion: draguard.io/v1alpha1\nkind: Policy\nmode: nope\n";

class PolicyStoreWatch : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("draguard-policy-watch-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    file_ = (dir_ / "policy.yaml").string();
    Write(kAudit);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Replaces the file by a rename, as a ConfigMap update does: a new inode every time.
  void Write(const char* text) {
    const std::string tmp = file_ + ".tmp";
    std::ofstream(tmp, std::ios::trunc) << text;
    fs::rename(tmp, file_);
  }

  fs::path dir_;
  std::string file_;
  int ok_ = 0, bad_ = 0;
  PolicyStore store_{{"draguard"}, [this](const Status& s) { (s.ok() ? ok_ : bad_)++; }};
};

TEST_F(PolicyStoreWatch, ChangedFileIsReloaded) {
  ASSERT_TRUE(store_.LoadFile(file_).ok());
  store_.Watch(hours(1));  // the background thread stays idle: only PollNow checks
  EXPECT_FALSE(store_.PollNow());
  EXPECT_EQ(store_.Current()->mode, Mode::kAudit);
  Write(kEnforce);
  EXPECT_TRUE(store_.PollNow());
  EXPECT_EQ(store_.Current()->mode, Mode::kEnforce);
  EXPECT_FALSE(store_.PollNow());  // no change since the last check
  EXPECT_EQ(ok_, 2);
  EXPECT_EQ(bad_, 0);
}

TEST_F(PolicyStoreWatch, BrokenFileKeepsTheLastGoodPolicy) {
  ASSERT_TRUE(store_.LoadFile(file_).ok());
  store_.Watch(hours(1));
  auto good = store_.Current();
  Write(kBroken);
  EXPECT_TRUE(store_.PollNow());
  EXPECT_EQ(store_.Current(), good);  // the same snapshot keeps serving
  EXPECT_EQ(bad_, 1);
  // A fixed file is picked up again.
  Write(kEnforce);
  EXPECT_TRUE(store_.PollNow());
  EXPECT_EQ(store_.Current()->mode, Mode::kEnforce);
  EXPECT_EQ(ok_, 2);
  EXPECT_EQ(bad_, 1);
}

TEST_F(PolicyStoreWatch, NothingIsWatchedBeforeWatchAfterStopOrForTheDefault) {
  ASSERT_TRUE(store_.LoadFile(file_).ok());
  Write(kEnforce);
  EXPECT_FALSE(store_.PollNow());  // not watching yet
  store_.Watch(hours(1));
  store_.StopWatching();
  store_.StopWatching();  // idempotent
  Write(kAudit);
  EXPECT_FALSE(store_.PollNow());
  EXPECT_EQ(store_.Current()->mode, Mode::kAudit);  // loaded before Write(kEnforce), never reloaded

  PolicyStore embedded;
  ASSERT_TRUE(embedded.LoadDefault().ok());
  embedded.Watch(hours(1));
  EXPECT_FALSE(embedded.PollNow());
}

TEST_F(PolicyStoreWatch, BackgroundThreadReloadsAChangedFile) {
  std::mutex mu;
  std::condition_variable cv;
  int reloads = 0;
  PolicyStore store({}, [&](const Status& s) {
    std::lock_guard<std::mutex> lock(mu);
    if (s.ok()) ++reloads;
    cv.notify_all();
  });
  ASSERT_TRUE(store.LoadFile(file_).ok());
  store.Watch(milliseconds(5));
  Write(kEnforce);
  std::unique_lock<std::mutex> lock(mu);
  // Woken by the reload callback; the timeout only bounds a failing run.
  ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(30), [&] { return reloads >= 2; }));
  EXPECT_EQ(store.Current()->mode, Mode::kEnforce);
}

}  // namespace
}  // namespace draguard::policy
