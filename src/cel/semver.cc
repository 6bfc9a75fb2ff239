// Semantic versions. See include/draguard/cel/semver.h; rules from blang/semver/v4 Parse/Compare
// and semverlib.go normalizeVersion.
#include "draguard/cel/semver.h"

#include <algorithm>

namespace draguard::cel {
namespace {

bool AllDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}
bool IdentChars(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-';
  });
}
std::vector<std::string> Split(std::string_view s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t p = s.find(sep, start);
    out.emplace_back(s.substr(start, p == std::string_view::npos ? std::string_view::npos : p - start));
    if (p == std::string_view::npos) break;
    start = p + 1;
  }
  return out;
}
bool ParseU64(std::string_view s, uint64_t& out) {
  if (!AllDigits(s)) return false;
  uint64_t v = 0;
  for (char c : s) {
    uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  out = v;
  return true;
}

}  // namespace

Result<Semver> Semver::Parse(std::string_view in, bool normalize) {
  std::string s(in);
  if (normalize) {
    // semverlib normalizeVersion: "v" prefix, missing components, leading zeros.
    if (!s.empty() && s[0] == 'v') s.erase(0, 1);
    size_t cut = s.find_first_of("-+");
    std::string core = s.substr(0, cut);
    std::string rest = cut == std::string::npos ? "" : s.substr(cut);
    std::vector<std::string> parts = Split(core, '.');
    if (parts.size() > 3) return Status::InvalidArgument("Invalid semver: " + std::string(in));
    while (parts.size() < 3) parts.push_back("0");
    for (auto& p : parts) {
      size_t nz = p.find_first_not_of('0');
      if (!p.empty() && nz == std::string::npos) p = "0";
      else if (nz != std::string::npos) p = p.substr(nz);
    }
    s = parts[0] + "." + parts[1] + "." + parts[2] + rest;
  }
  if (s.empty()) return Status::InvalidArgument("Version string empty");
  Semver v;
  std::string_view rest = s;
  size_t plus = rest.find('+');
  if (plus != std::string_view::npos) {
    std::string_view b = rest.substr(plus + 1);
    for (auto& id : Split(b, '.')) {
      if (!IdentChars(id)) return Status::InvalidArgument("Invalid character(s) found in build meta data \"" + id + "\"");
      v.build.push_back(id);
    }
    rest = rest.substr(0, plus);
  }
  size_t dash = rest.find('-');
  if (dash != std::string_view::npos) {
    std::string_view pr = rest.substr(dash + 1);
    for (auto& id : Split(pr, '.')) {
      if (!IdentChars(id)) return Status::InvalidArgument("Invalid character(s) found in prerelease \"" + id + "\"");
      if (AllDigits(id) && id.size() > 1 && id[0] == '0') {
        return Status::InvalidArgument("Numeric PreRelease version must not contain leading zeroes \"" + id + "\"");
      }
      v.pre.push_back(id);
    }
    rest = rest.substr(0, dash);
  }
  std::vector<std::string> parts = Split(rest, '.');
  if (parts.size() != 3) return Status::InvalidArgument("No Major.Minor.Patch elements found");
  uint64_t* dst[3] = {&v.major, &v.minor, &v.patch};
  static constexpr const char* kNames[3] = {"Major", "Minor", "Patch"};
  for (int i = 0; i < 3; ++i) {
    if (!AllDigits(parts[i])) {
      return Status::InvalidArgument(std::string("Invalid character(s) found in ") + kNames[i] + " number \"" +
                                     parts[i] + "\"");
    }
    if (parts[i].size() > 1 && parts[i][0] == '0') {
      return Status::InvalidArgument(std::string(kNames[i]) + " number must not contain leading zeroes \"" +
                                     parts[i] + "\"");
    }
    if (!ParseU64(parts[i], *dst[i])) return Status::InvalidArgument("Invalid " + std::string(kNames[i]) + " number");
  }
  return v;
}

int Semver::Compare(const Semver& o) const {
  auto cmp = [](uint64_t a, uint64_t b) { return a < b ? -1 : a > b ? 1 : 0; };
  if (int c = cmp(major, o.major)) return c;
  if (int c = cmp(minor, o.minor)) return c;
  if (int c = cmp(patch, o.patch)) return c;
  if (pre.empty() && o.pre.empty()) return 0;
  if (pre.empty()) return 1;
  if (o.pre.empty()) return -1;
  size_t n = std::min(pre.size(), o.pre.size());
  for (size_t i = 0; i < n; ++i) {
    const std::string& a = pre[i];
    const std::string& b = o.pre[i];
    bool na = AllDigits(a), nb = AllDigits(b);
    if (na && nb) {
      uint64_t x = 0, y = 0;
      ParseU64(a, x);
      ParseU64(b, y);
      if (int c = cmp(x, y)) return c;
    } else if (na != nb) {
      return na ? -1 : 1;
    } else if (a != b) {
      return a < b ? -1 : 1;
    }
  }
  return pre.size() < o.pre.size() ? -1 : pre.size() > o.pre.size() ? 1 : 0;
}

std::string Semver::ToString() const {
  std::string s = std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
  for (size_t i = 0; i < pre.size(); ++i) s += (i == 0 ? "-" : ".") + pre[i];
  for (size_t i = 0; i < build.size(); ++i) s += (i == 0 ? "+" : ".") + build[i];
  return s;
}

}  // namespace draguard::cel
