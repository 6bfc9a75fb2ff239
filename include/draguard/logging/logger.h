// Structured logging: one JSON object per line on stdout, written by a thread of its own in batches.
//
// A Logger is created in main() and passed to whoever logs; there is no global logger.
// Never log certificate material, keys or tokens.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "draguard/status.h"

namespace draguard::logging {

/// Severity, lowest first.
enum class Level { kDebug, kInfo, kWarn, kError, kOff };

/// Parses "debug" | "info" | "warn" (or "warning") | "error" | "off".
Result<Level> ParseLevel(std::string_view text);

/// The level names ParseLevel accepts, lowest first, without aliases: the values of --log-level
/// (the chart's logLevel enum in values.schema.json is tested against this list).
std::vector<std::string> LevelNames();

/// A field value.
using Value = std::variant<std::string, int64_t, double, bool, std::vector<std::string>>;
/// Ordered key/value fields of one log line.
using Fields = std::vector<std::pair<std::string, Value>>;
/// A field value that refers to the caller's data, for the duration of one call.
using ValueView = std::variant<std::string_view, int64_t, double, bool, std::span<const std::string>>;
/// A key/value field that refers to the caller's data: what a hot path logs without copies.
using FieldView = std::pair<std::string_view, ValueView>;

/// The line Log writes for `level`, `msg` and `fields` at timestamp `ts` (no newline): one JSON
/// object {"ts","level","msg",fields...}, written directly (no document is built).
std::string FormatLine(std::string_view ts, Level level, std::string_view msg, const Fields& fields);
/// FormatLine of fields that are views, appended to `out`.
void AppendLine(std::string& out, std::string_view ts, Level level, std::string_view msg,
                std::span<const FieldView> fields);

/// A thread-safe JSON-lines logger.
class Logger {
 public:
  /// Logs to stdout at `level`. Lines reach stdout within 10 ms, warnings and errors at once, from
  /// a writer thread, so a slow stdout never stalls the caller; destruction writes what waits.
  static std::shared_ptr<Logger> Stdout(Level level);
  /// Logs to the file descriptor `fd` (kept open by the caller) as Stdout does.
  static std::shared_ptr<Logger> Fd(int fd, Level level);
  /// Discards everything.
  static std::shared_ptr<Logger> Null();

  virtual ~Logger() = default;
  /// Writes one line {"ts","level","msg",fields...} if `level` is enabled.
  void Log(Level level, std::string_view msg, const Fields& fields = {});
  /// Log of fields that are views: no field is copied before the line is formatted.
  virtual void Write(Level level, std::string_view msg, std::span<const FieldView> fields) = 0;
  /// True when lines of `level` are written.
  virtual bool Enabled(Level level) const = 0;

  void Debug(std::string_view m, const Fields& f = {}) { Log(Level::kDebug, m, f); }
  void Info(std::string_view m, const Fields& f = {}) { Log(Level::kInfo, m, f); }
  void Warn(std::string_view m, const Fields& f = {}) { Log(Level::kWarn, m, f); }
  void Error(std::string_view m, const Fields& f = {}) { Log(Level::kError, m, f); }
};

}  // namespace draguard::logging
