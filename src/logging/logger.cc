#include "draguard/logging/logger.h"

#include <chrono>
#include <ctime>

#include <nlohmann/json.hpp>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "draguard/json_string.h"

namespace draguard::logging {
namespace {

constexpr Level kLevels[] = {Level::kDebug, Level::kInfo, Level::kWarn, Level::kError, Level::kOff};

const char* LevelName(Level l) {
  switch (l) {
    case Level::kDebug: return "debug";
    case Level::kInfo: return "info";
    case Level::kWarn: return "warn";
    case Level::kError: return "error";
    case Level::kOff: return "off";
  }
  return "info";
}

spdlog::level::level_enum ToSpd(Level l) {
  switch (l) {
    case Level::kDebug: return spdlog::level::debug;
    case Level::kInfo: return spdlog::level::info;
    case Level::kWarn: return spdlog::level::warn;
    case Level::kError: return spdlog::level::err;
    case Level::kOff: return spdlog::level::off;
  }
  return spdlog::level::info;
}

std::string Timestamp() {
  auto now = std::chrono::system_clock::now();
  auto secs = std::chrono::system_clock::to_time_t(now);
  auto micros = std::chrono::duration_cast<std::chrono::microseconds>(
                    now.time_since_epoch()).count() % 1000000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[40];
  std::size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(buf + n, sizeof buf - n, ".%06ldZ", static_cast<long>(micros));
  return buf;
}

void AppendValue(std::string& out, const Value& v) {
  if (const auto* s = std::get_if<std::string>(&v)) {
    AppendJsonString(out, *s);
  } else if (const auto* i = std::get_if<int64_t>(&v)) {
    out += std::to_string(*i);
  } else if (const auto* b = std::get_if<bool>(&v)) {
    out += *b ? "true" : "false";
  } else if (const auto* d = std::get_if<double>(&v)) {
    out += nlohmann::json(*d).dump();
  } else if (const auto* list = std::get_if<std::vector<std::string>>(&v)) {
    out.push_back('[');
    for (std::size_t k = 0; k < list->size(); ++k) {
      if (k) out.push_back(',');
      AppendJsonString(out, (*list)[k]);
    }
    out.push_back(']');
  }
}

}  // namespace

std::string FormatLine(std::string_view ts, Level level, std::string_view msg, const Fields& fields) {
  // The members in order; a repeated key keeps its first place and takes its last value (as
  // assigning into an ordered JSON object would).
  std::vector<std::pair<std::string_view, const Value*>> members;
  members.reserve(fields.size());
  const Value ts_value{std::string(ts)};
  const Value level_value{std::string(LevelName(level))};
  const Value msg_value{std::string(msg)};
  auto put = [&](std::string_view key, const Value* v) {
    for (auto& m : members) {
      if (m.first == key) {
        m.second = v;
        return;
      }
    }
    members.emplace_back(key, v);
  };
  put("ts", &ts_value);
  put("level", &level_value);
  put("msg", &msg_value);
  for (const auto& [key, value] : fields) put(key, &value);
  std::string out;
  out.reserve(256);
  out.push_back('{');
  for (std::size_t k = 0; k < members.size(); ++k) {
    if (k) out.push_back(',');
    AppendJsonString(out, members[k].first);
    out.push_back(':');
    AppendValue(out, *members[k].second);
  }
  out.push_back('}');
  return out;
}

namespace {

class SpdLogger final : public Logger {
 public:
  SpdLogger(std::shared_ptr<spdlog::sinks::sink> sink, Level level)
      : logger_(std::make_shared<spdlog::logger>("draguard", std::move(sink))), level_(level) {
    logger_->set_pattern("%v");
    logger_->set_level(ToSpd(level));
    logger_->flush_on(spdlog::level::trace);
  }

  bool Enabled(Level level) const override {
    return level_ != Level::kOff && level >= level_ && level != Level::kOff;
  }

  void Log(Level level, std::string_view msg, const Fields& fields) override {
    if (!Enabled(level)) return;
    logger_->log(ToSpd(level), "{}", FormatLine(Timestamp(), level, msg, fields));
  }

 private:
  std::shared_ptr<spdlog::logger> logger_;
  Level level_;
};

class NullLogger final : public Logger {
 public:
  bool Enabled(Level) const override { return false; }
  void Log(Level, std::string_view, const Fields&) override {}
};

}  // namespace

Result<Level> ParseLevel(std::string_view text) {
  if (text == "warning") return Level::kWarn;
  for (Level l : kLevels) {
    if (text == LevelName(l)) return l;
  }
  std::string names;
  for (const std::string& n : LevelNames()) names += (names.empty() ? "" : ", ") + n;
  return Status::InvalidArgument("log level \"" + std::string(text) + "\" is not one of " + names);
}

std::vector<std::string> LevelNames() {
  std::vector<std::string> out;
  for (Level l : kLevels) out.emplace_back(LevelName(l));
  return out;
}

std::shared_ptr<Logger> Logger::Stdout(Level level) {
  return std::make_shared<SpdLogger>(std::make_shared<spdlog::sinks::stdout_sink_mt>(), level);
}

std::shared_ptr<Logger> Logger::Null() { return std::make_shared<NullLogger>(); }

}  // namespace draguard::logging
