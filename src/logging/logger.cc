#include "draguard/logging/logger.h"

#include <chrono>
#include <ctime>

#include <nlohmann/json.hpp>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

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
    nlohmann::ordered_json j;
    j["ts"] = Timestamp();
    j["level"] = LevelName(level);
    j["msg"] = std::string(msg);
    for (const auto& field : fields) {
      const std::string& key = field.first;
      std::visit([&](const auto& x) { j[key] = x; }, field.second);
    }
    logger_->log(ToSpd(level), "{}", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
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
