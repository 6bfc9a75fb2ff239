// The JSON-lines logger: one parseable object per line with ts, level, msg and the fields;
// levels below the threshold are not written; bad level names are refused.
#include "draguard/logging/logger.h"

#include <fstream>
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
  EXPECT_TRUE(lines[0].contains("ts"));
  EXPECT_EQ(lines[1]["level"], "error");
  EXPECT_EQ(lines[1]["msg"], "quote \" and newline \n stay inside one line");
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
}

}  // namespace
}  // namespace draguard::logging
