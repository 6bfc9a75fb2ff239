#include "draguard/logging/logger.h"

#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <type_traits>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <ctime>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

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

// An RFC 3339 UTC time with microseconds, held without allocation.
struct TimeText {
  char text[40];
  std::size_t size = 0;
  std::string_view view() const { return {text, size}; }
};

// Now as RFC 3339 UTC with microseconds. The date and time of day are formatted once per second
// per thread; only the microseconds are written for every line.
TimeText Timestamp() {
  struct Second {
    std::time_t at = -1;
    char text[24] = {};
    std::size_t size = 0;
  };
  thread_local Second cached;
  auto now = std::chrono::system_clock::now();
  auto micros = std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count();
  const std::time_t secs = static_cast<std::time_t>(micros / 1000000);
  if (secs != cached.at) {
    std::tm tm{};
    gmtime_r(&secs, &tm);
    cached.size = std::strftime(cached.text, sizeof cached.text, "%Y-%m-%dT%H:%M:%S", &tm);
    cached.at = secs;
  }
  TimeText out;
  std::memcpy(out.text, cached.text, cached.size);
  char* p = out.text + cached.size;
  *p++ = '.';
  long frac = static_cast<long>(micros % 1000000);
  for (int k = 5; k >= 0; --k, frac /= 10) p[k] = static_cast<char>('0' + frac % 10);
  p += 6;
  *p++ = 'Z';
  out.size = static_cast<std::size_t>(p - out.text);
  return out;
}

// True when `fields` repeat no key and use none of the line's own ("ts", "level", "msg"): the line
// is then the fields in order after those three.
bool PlainFields(std::span<const FieldView> fields) {
  for (std::size_t i = 0; i < fields.size(); ++i) {
    const std::string_view key = fields[i].first;
    if (key == "ts" || key == "level" || key == "msg") return false;
    for (std::size_t j = 0; j < i; ++j) {
      if (fields[j].first == key) return false;
    }
  }
  return true;
}

void AppendValue(std::string& out, const ValueView& v) {
  if (const auto* s = std::get_if<std::string_view>(&v)) {
    AppendJsonString(out, *s);
  } else if (const auto* i = std::get_if<int64_t>(&v)) {
    char buf[24];
    const auto r = std::to_chars(buf, buf + sizeof buf, *i);
    out.append(buf, r.ptr);
  } else if (const auto* b = std::get_if<bool>(&v)) {
    out += *b ? "true" : "false";
  } else if (const auto* d = std::get_if<double>(&v)) {
    out += nlohmann::json(*d).dump();
  } else if (const auto* list = std::get_if<std::span<const std::string>>(&v)) {
    out.push_back('[');
    for (std::size_t k = 0; k < list->size(); ++k) {
      if (k) out.push_back(',');
      AppendJsonString(out, (*list)[k]);
    }
    out.push_back(']');
  }
}

// The view of a field value.
ValueView ViewOf(const Value& v) {
  return std::visit(
      [](const auto& x) -> ValueView {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::string>) {
          return std::string_view(x);
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          return std::span<const std::string>(x);
        } else {
          return x;
        }
      },
      v);
}

std::vector<FieldView> ViewsOf(const Fields& fields) {
  std::vector<FieldView> views;
  views.reserve(fields.size());
  for (const auto& [key, value] : fields) views.emplace_back(key, ViewOf(value));
  return views;
}

}  // namespace

void AppendLine(std::string& out, std::string_view ts, Level level, std::string_view msg,
                std::span<const FieldView> fields) {
  if (PlainFields(fields)) {
    std::size_t size = out.size() + 40 + ts.size() + msg.size();
    for (const auto& [key, value] : fields) {
      const auto* s = std::get_if<std::string_view>(&value);
      size += key.size() + 8 + (s != nullptr ? s->size() : 24);
    }
    out.reserve(size);
    out += R"({"ts":)";
    AppendJsonString(out, ts);
    out += R"(,"level":")";
    out += LevelName(level);
    out += R"(","msg":)";
    AppendJsonString(out, msg);
    for (const auto& [key, value] : fields) {
      out.push_back(',');
      AppendJsonString(out, key);
      out.push_back(':');
      AppendValue(out, value);
    }
    out.push_back('}');
    return;
  }
  // The members in order; a repeated key keeps its first place and takes its last value (as
  // assigning into an ordered JSON object would).
  std::vector<std::pair<std::string_view, const ValueView*>> members;
  members.reserve(fields.size() + 3);
  const ValueView ts_value{ts};
  const ValueView level_value{std::string_view(LevelName(level))};
  const ValueView msg_value{msg};
  auto put = [&](std::string_view key, const ValueView* v) {
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
  out.push_back('{');
  for (std::size_t k = 0; k < members.size(); ++k) {
    if (k) out.push_back(',');
    AppendJsonString(out, members[k].first);
    out.push_back(':');
    AppendValue(out, *members[k].second);
  }
  out.push_back('}');
}

std::string FormatLine(std::string_view ts, Level level, std::string_view msg, const Fields& fields) {
  std::string out;
  const std::vector<FieldView> views = ViewsOf(fields);
  AppendLine(out, ts, level, msg, views);
  return out;
}

void Logger::Log(Level level, std::string_view msg, const Fields& fields) {
  if (!Enabled(level)) return;
  const std::vector<FieldView> views = ViewsOf(fields);
  Write(level, msg, views);
}

namespace {

// Writes whole lines to a file descriptor from its own thread, so a caller never waits for the
// descriptor (a slow or full stdout pipe stalls only the writer). Lines are gathered for up to
// kFlushInterval and written in one call; a warning or error, or kBatchBytes waiting, wakes the
// writer at once. At most kMaxPending bytes wait: beyond that, lines are dropped and counted, and
// the count is written as a line of its own when the writer catches up. Destruction writes
// everything still waiting.
class LineWriter {
 public:
  static constexpr std::chrono::milliseconds kFlushInterval{10};
  static constexpr std::size_t kBatchBytes = 64 * 1024;
  static constexpr std::size_t kMaxPending = 8 * 1024 * 1024;

  explicit LineWriter(int fd) : fd_(fd), thread_([this] { Loop(); }) {}
  ~LineWriter() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }
  LineWriter(const LineWriter&) = delete;
  LineWriter& operator=(const LineWriter&) = delete;

  // Queues `line` (which ends in a newline); `urgent` asks for it to be written without delay.
  void Add(std::string_view line, bool urgent) {
    bool wake;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (pending_.size() + line.size() > kMaxPending) {
        ++dropped_;
        return;
      }
      const bool was_empty = pending_.empty();
      pending_.append(line);
      urgent_ = urgent_ || urgent;
      wake = was_empty || urgent || pending_.size() >= kBatchBytes;
    }
    if (wake) cv_.notify_one();
  }

 private:
  void Loop() {
    std::string batch;
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      cv_.wait(lock, [&] { return stop_ || !pending_.empty() || dropped_ > 0; });
      if (stop_ && pending_.empty() && dropped_ == 0) return;
      // Gather what arrives within the interval, unless something asks to go now.
      cv_.wait_for(lock, kFlushInterval, [&] { return stop_ || urgent_ || pending_.size() >= kBatchBytes; });
      batch.swap(pending_);  // `batch` was empty: `pending_` is now empty too
      // After a burst (up to kMaxPending), neither buffer keeps its size.
      if (pending_.capacity() > kBatchBytes * 4) std::string().swap(pending_);
      const std::uint64_t dropped = dropped_;
      dropped_ = 0;
      urgent_ = false;
      lock.unlock();
      if (dropped > 0) {
        const FieldView count[] = {{"dropped", static_cast<int64_t>(dropped)}};
        AppendLine(batch, Timestamp().view(), Level::kWarn, "log lines dropped: the output did not keep up", count);
        batch.push_back('\n');
      }
      WriteAll(batch);
      batch.clear();
      if (batch.capacity() > kBatchBytes * 4) std::string().swap(batch);
      lock.lock();
    }
  }

  // Writes all of `data`; gives up on an error other than an interruption (a closed stdout must not
  // stop the server, and there is nowhere left to report it).
  void WriteAll(std::string_view data) const {
    while (!data.empty()) {
      ssize_t n = ::write(fd_, data.data(), data.size());
      if (n < 0) {
        if (errno == EINTR) continue;
        return;
      }
      data.remove_prefix(static_cast<std::size_t>(n));
    }
  }

  const int fd_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::string pending_;
  std::uint64_t dropped_ = 0;
  bool urgent_ = false;
  bool stop_ = false;
  std::thread thread_;  // last: starts after the members it uses
};

class StreamLogger final : public Logger {
  // A thread's line buffer is freed after a line longer than this.
  static constexpr std::size_t kMaxKeptLineBytes = 16 * 1024;

 public:
  StreamLogger(int fd, Level level) : writer_(fd), level_(level) {}

  bool Enabled(Level level) const override {
    return level_ != Level::kOff && level >= level_ && level != Level::kOff;
  }

  void Write(Level level, std::string_view msg, std::span<const FieldView> fields) override {
    if (!Enabled(level)) return;
    // Each thread formats into a buffer of its own that keeps its capacity between lines.
    thread_local std::string line;
    line.clear();
    AppendLine(line, Timestamp().view(), level, msg, fields);
    line.push_back('\n');
    writer_.Add(line, level >= Level::kWarn);
    if (line.capacity() > kMaxKeptLineBytes) std::string().swap(line);
  }

 private:
  LineWriter writer_;
  Level level_;
};

class NullLogger final : public Logger {
 public:
  bool Enabled(Level) const override { return false; }
  void Write(Level, std::string_view, std::span<const FieldView>) override {}
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
  return Fd(STDOUT_FILENO, level);
}

std::shared_ptr<Logger> Logger::Fd(int fd, Level level) { return std::make_shared<StreamLogger>(fd, level); }

std::shared_ptr<Logger> Logger::Null() { return std::make_shared<NullLogger>(); }

}  // namespace draguard::logging
