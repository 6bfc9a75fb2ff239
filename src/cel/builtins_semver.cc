// Kubernetes Semver library: semver(), isSemver() and the methods of a Semver. See builtins.h.
#include "builtins.h"

namespace draguard::cel::internal {
namespace {

using Result = std::optional<Value>;

// semver(s[, normalize]) / isSemver(s[, normalize]).
Result Parse(std::string_view fn, const CallArgs& a, CallContext&) {
  size_t n = a.size();
  if (n != 1 && n != 2) return std::nullopt;
  if (a[0].kind() != ValueKind::kString || (n == 2 && a[1].kind() != ValueKind::kBool)) return NoOverload(fn, a);
  auto s = Semver::Parse(a[0].string_value(), n == 2 && a[1].bool_value());
  if (fn == "isSemver") return Value::Bool(s.ok());
  if (!s.ok()) return Value::Error(s.status().message());
  return Value::Sem(*s);
}

Result Compare(std::string_view fn, const CallArgs& a, CallContext&) {
  if (a.size() != 2 || a[1].kind() != ValueKind::kSemver) return std::nullopt;
  return ComparisonResult(fn, a[0].semver_value().Compare(a[1].semver_value()));
}

// major() / minor() / patch().
Result Component(std::string_view fn, const CallArgs& a, CallContext&) {
  if (a.size() != 1) return std::nullopt;
  const Semver& s = a[0].semver_value();
  uint64_t v = fn == "major" ? s.major : fn == "minor" ? s.minor : s.patch;
  return Value::Int(static_cast<int64_t>(v));
}

constexpr ValueKind kSemver = ValueKind::kSemver;
const Overload kSemverLibrary[] = {
    Global("semver", &Parse),
    Global("isSemver", &Parse),
    Member("compareTo", kSemver, &Compare),
    Member("isGreaterThan", kSemver, &Compare),
    Member("isLessThan", kSemver, &Compare),
    Member("major", kSemver, &Component),
    Member("minor", kSemver, &Component),
    Member("patch", kSemver, &Component),
};

}  // namespace

std::span<const Overload> SemverOverloads() { return kSemverLibrary; }

}  // namespace draguard::cel::internal
