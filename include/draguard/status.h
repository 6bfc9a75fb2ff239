// Status and Result<T>: how draguard's core modules report failure.
//
// Core modules (admission, policy, topology, engine, cel) never throw across their public
// interfaces; they return a Status or a Result<T>. Exceptions thrown by third-party parsers are
// caught inside the module that owns the parser and turned into a Status there.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace draguard {

/// Broad class of a failure; decides HTTP codes and exit codes at the edges.
enum class StatusCode {
  kOk = 0,
  kInvalidArgument,    ///< the input is malformed or violates a limit
  kNotFound,           ///< a named file, key or object does not exist
  kFailedPrecondition, ///< the input is well formed but cannot be used (e.g. wrong version)
  kResourceExhausted,  ///< a size, depth or budget limit was exceeded
  kUnavailable,        ///< a dependency (file system, API server) could not be reached
  kInternal,           ///< a bug or an unexpected library failure
};

/// Human-readable name of a StatusCode ("InvalidArgument", ...).
const char* StatusCodeName(StatusCode code);

/// Outcome of an operation: OK, or a code plus a message meant for people.
class [[nodiscard]] Status {
 public:
  /// An OK status.
  Status() = default;
  /// A status with the given code and message.
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  /// Returns an OK status.
  static Status Ok() { return Status(); }
  /// Shorthands for the common failure kinds.
  static Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
  static Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
  static Status FailedPrecondition(std::string m) { return {StatusCode::kFailedPrecondition, std::move(m)}; }
  static Status ResourceExhausted(std::string m) { return {StatusCode::kResourceExhausted, std::move(m)}; }
  static Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
  static Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

  /// True when the operation succeeded.
  bool ok() const { return code_ == StatusCode::kOk; }
  /// The failure class.
  StatusCode code() const { return code_; }
  /// The message; empty for OK.
  const std::string& message() const { return message_; }
  /// "Code: message" or "OK".
  std::string ToString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

/// Either a value of type T or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  /// A successful result holding a copy of `value`.
  Result(const T& value) : v_(value) {}  // NOLINT(google-explicit-constructor)
  /// A successful result holding `value`, moved in (one move, where a by-value parameter costs two).
  Result(T&& value) : v_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  /// A failed result; `status` must not be OK.
  Result(Status status) : v_(std::move(status)) {}  // NOLINT(google-explicit-constructor)

  /// True when a value is held.
  bool ok() const { return std::holds_alternative<T>(v_); }
  /// The status: OK when a value is held.
  Status status() const { return ok() ? Status::Ok() : std::get<Status>(v_); }
  /// The value; only valid when ok().
  const T& value() const& { return std::get<T>(v_); }
  /// The value; only valid when ok().
  T& value() & { return std::get<T>(v_); }
  /// Moves the value out; only valid when ok().
  T&& value() && { return std::get<T>(std::move(v_)); }
  /// Pointer-like access to the value.
  const T* operator->() const { return &std::get<T>(v_); }
  /// Pointer-like access to the value.
  T* operator->() { return &std::get<T>(v_); }
  /// Reference access to the value.
  const T& operator*() const& { return std::get<T>(v_); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace draguard

/// Returns the Status of `expr` from the enclosing function when it is not OK.
#define DRAGUARD_RETURN_IF_ERROR(expr)        \
  do {                                        \
    ::draguard::Status draguard_st_ = (expr); \
    if (!draguard_st_.ok()) return draguard_st_; \
  } while (0)
