// The JSON-lines logger: one parseable object per line with ts, level, msg and the fields;
// levels below the threshold are not written; bad level names are refused.
#include "draguard/logging/logger.h"

#include <unistd.h>

#include <cmath>
#include <ctime>
#include <fstream>
#include <regex>
#include <thread>
#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace draguard::logging {
namespace {

std::vector<nlohmann::json> Lines(const std::string& text) {
  std::vector<nlohmann::json> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

TEST(Logger, WritesOneJsonObjectPerLineWithItsFields) {
  ::testing::internal::CaptureStdout();
  {
    auto log = Logger::Stdout(Level::kInfo);
    log->Info("listening", {{"address", std::string("127.0.0.1:8443")}, {"port", int64_t{8443}},
                            {"ready", true}, {"ratio", 0.5}, {"rules", std::vector<std::string>{"DG001", "DG003"}}});
    log->Error("quote \" and newline \n stay inside one line");
  }
  auto lines = Lines(::testing::internal::GetCapturedStdout());
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["level"], "info");
  EXPECT_EQ(lines[0]["msg"], "listening");
  EXPECT_EQ(lines[0]["address"], "127.0.0.1:8443");
  EXPECT_EQ(lines[0]["port"], 8443);
  EXPECT_EQ(lines[0]["ready"], true);
  EXPECT_EQ(lines[0]["ratio"], 0.5);
  EXPECT_EQ(lines[0]["rules"], nlohmann::json::array({"DG001", "DG003"}));
  // RFC 3339 UTC with microseconds, of about now.
  const std::string ts = lines[0]["ts"].get<std::string>();
  EXPECT_TRUE(std::regex_match(ts, std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z)"))) << ts;
  std::tm tm{};
  ASSERT_NE(strptime(ts.c_str(), "%Y-%m-%dT%H:%M:%S", &tm), nullptr) << ts;
  EXPECT_LT(std::abs(static_cast<double>(timegm(&tm) - std::time(nullptr))), 120.0) << ts;
  EXPECT_EQ(lines[1]["level"], "error");
  EXPECT_EQ(lines[1]["msg"], "quote \" and newline \n stay inside one line");
}

TEST(Logger, WriteOfViewsWritesWhatLogOfFieldsWrites) {
  const std::vector<std::string> rules = {"DG001", "quote \" rule"};
  const std::string uid = "705ab4f5-6393-11e8-b7cc-42010a800002";
  const Fields fields = {{"uid", uid}, {"dryRun", false}, {"rules", rules}, {"latency_us", int64_t{42}},
                         {"ratio", 0.25}};
  const FieldView views[] = {{"uid", std::string_view(uid)}, {"dryRun", false},
                             {"rules", std::span<const std::string>(rules)}, {"latency_us", int64_t{42}},
                             {"ratio", 0.25}};
  ::testing::internal::CaptureStdout();
  {
    auto log = Logger::Stdout(Level::kInfo);
    log->Info("admission", fields);
    log->Write(Level::kInfo, "admission", views);
    log->Write(Level::kDebug, "below the threshold", views);
    // A line longer than the kept buffer, then a short one: both whole.
    const std::string long_value(40000, 'x');
    const FieldView big[] = {{"v", std::string_view(long_value)}};
    log->Write(Level::kWarn, "long", big);
    log->Write(Level::kInfo, "short", views);
  }
  std::string text = ::testing::internal::GetCapturedStdout();
  auto lines = Lines(text);
  ASSERT_EQ(lines.size(), 4u) << text;
  lines[0].erase("ts");
  lines[1].erase("ts");
  EXPECT_EQ(lines[0], lines[1]);
  EXPECT_EQ(lines[1]["rules"], nlohmann::json(rules));
  EXPECT_EQ(lines[2]["v"].get<std::string>().size(), 40000u);
  EXPECT_EQ(lines[3]["msg"], "short");
  // The formatter of views is the formatter of fields.
  std::string appended = "prefix";
  AppendLine(appended, "t", Level::kInfo, "m", views);
  EXPECT_EQ(appended, "prefix" + FormatLine("t", Level::kInfo, "m", fields));
}

TEST(Logger, LevelsBelowTheThresholdAreNotWritten) {
  ::testing::internal::CaptureStdout();
  {
    auto log = Logger::Stdout(Level::kWarn);
    EXPECT_FALSE(log->Enabled(Level::kInfo));
    EXPECT_TRUE(log->Enabled(Level::kError));
    log->Debug("no");
    log->Info("no");
    log->Warn("yes");
  }
  auto lines = Lines(::testing::internal::GetCapturedStdout());
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0]["msg"], "yes");
}

TEST(Logger, NullAndOffWriteNothing) {
  ::testing::internal::CaptureStdout();
  {
    Logger::Null()->Error("dropped");
    Logger::Stdout(Level::kOff)->Error("dropped");
  }
  EXPECT_EQ(::testing::internal::GetCapturedStdout(), "");
}

TEST(Logger, ParseLevel) {
  EXPECT_EQ(*ParseLevel("debug"), Level::kDebug);
  EXPECT_EQ(*ParseLevel("error"), Level::kError);
  EXPECT_EQ(*ParseLevel("off"), Level::kOff);
  auto bad = ParseLevel("verbose");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("verbose"), std::string::npos);
}

TEST(Logger, LevelNamesAreWhatParseLevelAccepts) {
  std::vector<std::string> names = LevelNames();
  EXPECT_EQ(names, (std::vector<std::string>{"debug", "info", "warn", "error", "off"}));
  for (std::size_t i = 0; i < names.size(); ++i) {
    auto level = ParseLevel(names[i]);
    ASSERT_TRUE(level.ok()) << names[i];
    EXPECT_EQ(static_cast<std::size_t>(*level), i) << names[i];
  }
  EXPECT_EQ(*ParseLevel("warning"), Level::kWarn);
  for (const char* bad : {"trace", "critical", "fatal", "INFO", ""}) {
    EXPECT_FALSE(ParseLevel(bad).ok()) << bad;
  }
}

// Reads `fd` until `needle` has arrived (a blocking read: the writer's flush is what ends it) or
// the peer closes; returns all that was read.
std::string ReadUntil(int fd, std::string_view needle) {
  std::string got;
  char buf[65536];
  while (got.find(needle) == std::string::npos) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) break;
    got.append(buf, static_cast<std::size_t>(n));
  }
  return got;
}

// Lines are written while the logger lives (within its flush interval), not only at destruction.
TEST(Logger, LinesArriveWhileTheLoggerLives) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  auto log = Logger::Fd(fds[1], Level::kInfo);
  log->Info("first", {{"n", int64_t{1}}});
  std::string got = ReadUntil(fds[0], "\n");
  ASSERT_EQ(Lines(got).size(), 1u) << got;
  EXPECT_EQ(Lines(got)[0]["msg"], "first");
  log->Error("second");
  got = ReadUntil(fds[0], "\n");
  ASSERT_EQ(Lines(got).size(), 1u) << got;
  EXPECT_EQ(Lines(got)[0]["level"], "error");
  log.reset();
  ::close(fds[1]);
  ::close(fds[0]);
}

// Lines from many threads arrive whole, each once, each thread's in its own order.
TEST(Logger, ConcurrentLinesArriveWholeAndInOrderPerThread) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  std::string got;
  std::thread reader([&] { got = ReadUntil(fds[0], std::string_view("\0", 1)); });
  constexpr int kThreads = 4, kLines = 2000;
  {
    auto log = Logger::Fd(fds[1], Level::kInfo);
    std::vector<std::thread> writers;
    for (int t = 0; t < kThreads; ++t) {
      writers.emplace_back([&, t] {
        for (int i = 0; i < kLines; ++i) {
          log->Info("line", {{"thread", int64_t{t}}, {"i", int64_t{i}}, {"pad", std::string(100 + i % 300, 'x')}});
        }
      });
    }
    for (auto& w : writers) w.join();
  }
  ::close(fds[1]);
  reader.join();
  ::close(fds[0]);
  auto lines = Lines(got);
  ASSERT_EQ(lines.size(), static_cast<std::size_t>(kThreads * kLines));
  std::vector<int64_t> next(kThreads, 0);
  for (const auto& l : lines) {
    int64_t t = l["thread"].get<int64_t>();
    ASSERT_EQ(l["i"].get<int64_t>(), next[t]) << "thread " << t;
    ++next[t];
  }
}

// An output that takes nothing (a full pipe) never blocks the caller: past the cap, lines are
// dropped and counted, and the count is written once the output drains.
TEST(Logger, AStalledOutputDropsAndCountsInsteadOfBlocking) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  constexpr int kLines = 40000;  // about 20 MB: well past what may wait
  auto log = Logger::Fd(fds[1], Level::kInfo);
  for (int i = 0; i < kLines; ++i) log->Info("line", {{"i", int64_t{i}}, {"pad", std::string(480, 'y')}});
  std::string got;
  std::thread reader([&] { got = ReadUntil(fds[0], std::string_view("\0", 1)); });
  log.reset();
  ::close(fds[1]);
  reader.join();
  ::close(fds[0]);
  auto lines = Lines(got);
  ASSERT_FALSE(lines.empty());
  int64_t dropped = 0, kept = 0, last = -1;
  for (const auto& l : lines) {
    if (l["msg"] == "log lines dropped: the output did not keep up") {
      EXPECT_EQ(l["level"], "warn");
      dropped += l["dropped"].get<int64_t>();
    } else {
      ++kept;
      EXPECT_GT(l["i"].get<int64_t>(), last);
      last = l["i"].get<int64_t>();
    }
  }
  EXPECT_GT(dropped, 0);
  // What was kept: at most the 8 MiB that may wait, plus the batch the writer had taken when the
  // pipe filled (at most 8 MiB more, depending on how far it got before the burst ended).
  EXPECT_LT(static_cast<int64_t>(got.size()), int64_t{17} * 1024 * 1024);
  EXPECT_EQ(kept + dropped, kLines);
}

// The chart passes logLevel as --log-level: its schema must allow exactly the binary's levels
// (a value the binary refuses would crash-loop the pods).
TEST(Logger, ChartSchemaLogLevelEnumIsLevelNames) {
  std::ifstream in(std::string(DRAGUARD_SOURCE_DIR) + "/charts/draguard/values.schema.json");
  ASSERT_TRUE(in) << "charts/draguard/values.schema.json";
  nlohmann::json schema = nlohmann::json::parse(in);
  const nlohmann::json& level = schema.at("properties").at("logLevel");
  EXPECT_EQ(level.at("enum").get<std::vector<std::string>>(), LevelNames());
}

// The line as the logger wrote it before it formatted lines itself: an ordered nlohmann document.
std::string ReferenceLine(std::string_view ts, Level level, std::string_view msg, const Fields& fields) {
  nlohmann::ordered_json j;
  j["ts"] = std::string(ts);
  j["level"] = level == Level::kInfo ? "info" : level == Level::kWarn ? "warn" : level == Level::kError ? "error" : "debug";
  j["msg"] = std::string(msg);
  for (const auto& [key, value] : fields) std::visit([&](const auto& x) { j[key] = x; }, value);
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

TEST(FormatLine, WritesWhatTheOrderedDocumentWrote) {
  const std::vector<std::string> strings = {
      "", "plain", "quote \" backslash \\ slash /", "ctl \b\f\n\r\t \x01\x1f \x7f", "utf-8 é ✓ 😀",
      std::string("nul \0 inside", 12), "bad \xff byte", "truncated \xe2\x9c", "overlong \xc0\xaf",
      "surrogate \xed\xa0\x80", "past U+10FFFF \xf4\x90\x80\x80", "lone continuation \x80 x"};
  for (const auto& s : strings) {
    for (Level level : {Level::kDebug, Level::kInfo, Level::kWarn, Level::kError}) {
      Fields fields = {{"uid", s}, {"n", int64_t{-42}}, {"big", int64_t{9007199254740993}}, {"ok", false},
                       {"ratio", 0.1}, {"huge", 1e300}, {"rules", std::vector<std::string>{s, "DG001"}},
                       {"empty", std::vector<std::string>{}}, {s.empty() ? "k" : s, s}};
      EXPECT_EQ(FormatLine("2026-01-01T00:00:00.000000Z", level, s, fields),
                ReferenceLine("2026-01-01T00:00:00.000000Z", level, s, fields)) << s;
    }
  }
  // A repeated key keeps its first place and its last value; so does a field named like a header.
  Fields dup = {{"a", int64_t{1}}, {"msg", std::string("override")}, {"a", int64_t{2}}};
  EXPECT_EQ(FormatLine("t", Level::kInfo, "m", dup), ReferenceLine("t", Level::kInfo, "m", dup));
  EXPECT_EQ(FormatLine("t", Level::kInfo, "m", dup), R"({"ts":"t","level":"info","msg":"override","a":2})");
  // Fields that name a header once each, and fields that repeat no key, answer as the document does.
  for (const Fields& fields : {Fields{{"ts", std::string("x")}}, Fields{{"level", int64_t{3}}, {"b", true}},
                               Fields{{"b", true}, {"msg", std::string("y")}},
                               Fields{{"a", int64_t{1}}, {"b", std::string("2")}}, Fields{}}) {
    EXPECT_EQ(FormatLine("t", Level::kWarn, "m", fields), ReferenceLine("t", Level::kWarn, "m", fields));
  }
}

}  // namespace
}  // namespace draguard::logging
